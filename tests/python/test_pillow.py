"""The Pillow plugin (l3.pillow): for every PngSuite file, the sample tree and
the corpora named in L3_PILLOW_CORPORA (colon-separated directories; the real
corpus under /var/cache/l3fs-corpus/png when scripts/fetch-corpus.sh ran),
Image.open of the .l3 file gives the mode, size, pixels, palette and
transparency Pillow gives for the PNG - under the names x.l3, x.png (L3 bytes)
and x (no extension), and from a file object. Also: torchvision's ImageFolder
with is_valid_file=l3.pillow.is_l3_file, and broken L3 files.
Skipped (with the reason) when PngSuite is absent (scripts/fetch-pngsuite.sh)."""
import glob
import io
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np
from PIL import Image, UnidentifiedImageError

import l3

SRC = os.environ.get("L3_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
PNGSUITE = os.environ.get("L3_PNGSUITE", "/var/cache/l3fs-corpus/png/pngsuite")


def slurp(p):
    with open(p, "rb") as f:
        return f.read()


def pngs(d):
    return sorted(glob.glob(os.path.join(d, "**", "*.png"), recursive=True))


def corpora():
    sets = [("pngsuite", pngs(PNGSUITE)), ("sample", pngs(os.path.join(SRC, "data", "sample")))]
    for d in filter(None, os.environ.get("L3_PILLOW_CORPORA", "").split(":")):
        sets.append((os.path.basename(d.rstrip("/")), pngs(d)))
    return sets


def described(im):
    """Everything that must match: mode, size, pixels, palette, transparency."""
    return (im.mode, im.size, im.getpalette() if im.mode == "P" else None,
            im.info.get("transparency"))


class Plugin(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="l3pil.")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def check_one(self, png_path, k):
        with Image.open(png_path) as ref:
            ref.load()
            want, pixels = described(ref), np.asarray(ref)
            rgba = np.asarray(ref.convert("RGBA"))
        blob = l3.encode(slurp(png_path))
        paths = [os.path.join(self.tmp, f"{k}.l3"), os.path.join(self.tmp, f"{k}.png"),
                 os.path.join(self.tmp, f"{k}")]
        for p in paths:
            with open(p, "wb") as f:
                f.write(blob)
        for src in paths + [io.BytesIO(blob)]:
            with Image.open(src) as im:
                self.assertEqual(im.format, "L3", src)
                self.assertEqual(described(im), want, f"{png_path} as {src}")
                got = np.asarray(im)
                self.assertEqual(got.dtype, pixels.dtype, png_path)
                self.assertTrue(np.array_equal(got, pixels), f"{png_path} as {src}")
        with Image.open(paths[0]) as im:  # what a loader does next
            self.assertTrue(np.array_equal(np.asarray(im.convert("RGBA")), rgba), png_path)
        for p in paths:
            os.unlink(p)
        return want[0]

    def test_every_file_opens_as_pillow_opens_its_png(self):
        sets = corpora()
        if not sets[0][1]:
            self.skipTest(f"PngSuite not found in {PNGSUITE} (scripts/fetch-pngsuite.sh)")
        modes = {}
        counts = []  # (corpus, files equal, files)
        for name, files in sets:
            self.assertTrue(files, f"{name}: no PNG files")
            equal = 0
            for i, p in enumerate(files):
                with self.subTest(png=p):
                    m = self.check_one(p, f"{name}{i}")
                    modes[m] = modes.get(m, 0) + 1
                    equal += 1  # not reached when check_one failed
            counts.append((name, equal, len(files)))
        print("# pillow: files equal under the names x.l3, x.png, x and from a file object: "
              + ", ".join(f"{n} {e}/{t}" for n, e, t in counts)
              + f"; total {sum(c[1] for c in counts)}/{sum(c[2] for c in counts)}; modes "
              + ", ".join(f"{m} {c}" for m, c in sorted(modes.items())))
        # every mode Pillow gives PNGs is covered by PngSuite + the sample
        for m in ("1", "L", "LA", "I", "P", "RGB", "RGBA"):
            self.assertIn(m, modes)

    def test_broken_l3_files_do_not_crash(self):
        blob = l3.encode(slurp(pngs(os.path.join(SRC, "data", "sample"))[0]))
        with self.assertRaises(UnidentifiedImageError):
            Image.open(io.BytesIO(b"L3IM" + b"\0" * 60))
        for cut in (8, 47, len(blob) // 2, len(blob) - 1):
            try:
                with Image.open(io.BytesIO(blob[:cut])) as im:
                    im.load()
            except (UnidentifiedImageError, OSError, ValueError):
                pass  # l3.Error is a ValueError
            else:
                self.fail(f"a file cut at {cut} of {len(blob)} bytes loaded")
        bad = bytearray(blob)
        bad[len(bad) * 3 // 4] ^= 0xFF
        try:
            with Image.open(io.BytesIO(bytes(bad))) as im:
                im.load()
        except (OSError, ValueError):
            pass

    def test_image_folder_reads_l3_files(self):
        from torchvision.datasets import ImageFolder

        sample = pngs(os.path.join(SRC, "data", "sample", "leftImg8bit"))
        self.assertGreaterEqual(len(sample), 2)
        for i, p in enumerate(sample):
            d = os.path.join(self.tmp, "root", f"class{i % 2}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"img{i}.l3"), "wb") as f:
                f.write(l3.encode(slurp(p)))
        ds = ImageFolder(os.path.join(self.tmp, "root"), is_valid_file=l3.pillow.is_l3_file)
        self.assertEqual(len(ds), len(sample))
        for path, _ in ds.samples:
            i = int(os.path.basename(path)[3:-3])
            img, label = ds[ds.samples.index((path, _))]
            self.assertEqual(label, i % 2)
            with Image.open(sample[i]) as ref:
                self.assertTrue(np.array_equal(np.asarray(img), np.asarray(ref.convert("RGB"))))

    def test_register_is_idempotent(self):
        l3.register_pillow()
        l3.register_pillow()
        self.assertEqual(Image.ID.count("L3"), 1)


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    import tap  # noqa: E402 - each case in TAP, skips with their reasons

    tap.main()
