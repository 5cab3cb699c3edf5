"""Tests of the `l3` Python module (run by `meson test` with PYTHONPATH set to
the build tree's python/ folder, under Debian's /usr/bin/python3)."""
import io
import multiprocessing
import os
import sys
import threading
import time
import unittest

import numpy as np
from PIL import Image

import l3

CORPUS = os.environ.get("L3_CORPUS", "/var/cache/l3fs-corpus/png")
RNG = np.random.default_rng(20261130)


def png_bytes(img, **kw):
    f = io.BytesIO()
    img.save(f, format="PNG", **kw)
    return f.getvalue()


def textured(h, w, c, maxv, seed):
    """Gradient + noise blocks, values 0..maxv."""
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = ((x * 3 + y * 2)[..., None] + np.arange(c) * 40) * maxv // (3 * w + 2 * h + 160)
    noise = r.integers(0, maxv + 1, size=(h, w, c))
    blocks = ((x // 8 + y // 8) % 3 == 0)[..., None]
    return np.where(blocks, noise, base).astype(np.uint16 if maxv > 255 else np.uint8)


def pil_equivalent(img, dec):
    """What l3.decode must give, in PIL's terms: PIL scales sub-byte gray to
    0..255 and reduces 16-bit colour to 8 bits (most significant byte)."""
    a = np.asarray(img)
    if a.ndim == 2:
        a = a[..., None]
    d = dec
    if img.mode == "RGBA" and d.shape[-1] == 2:
        a = a[..., [0, 3]]  # PIL opens 16-bit gray+alpha as RGBA
    if img.mode == "1":
        return d.astype(np.uint16) * 255, a.astype(np.uint16) * 255
    if img.mode == "L" and d.dtype == np.uint8 and int(d.max(initial=0)) < 16 and a.max(initial=0) > 15:
        # sub-byte gray: PIL spreads the values over 0..255
        m = max(int(d.max(initial=0)), 1)
        for mx in (1, 3, 15):
            if m <= mx:
                return d.astype(np.uint16) * (255 // mx), a.astype(np.uint16)
    if d.dtype == np.uint16 and a.dtype == np.uint8:
        return (d >> 8).astype(np.uint8), a
    return d.astype(np.int64), a.astype(np.int64)


# --------------------------------------------------------------- reference

LUMA = (19595, 38470, 7471)


def expected_batch(bufs, layout, dtype, channels, mean, std, scale):
    """The documented conversion, computed with numpy from l3.decode."""
    out = []
    for b in bufs:
        info = l3.info(b)
        d = l3.decode(b).astype(np.int64)
        color = info["color"]
        smax = 65535 if info["bit_depth"] == 16 else (1 << info["bit_depth"]) - 1
        if color == "palette":
            if channels is None:
                smax = 255
                px = d
            else:
                pal = np.array(info["palette"] + [(0, 0, 0, 0)] * (256 - len(info["palette"])))
                px = pal[d[..., 0]]
                smax = 255
                color = "rgba"
        else:
            px = d
        if channels is not None:
            gray = color in ("gray", "gray_alpha")
            if color in ("gray_alpha", "rgba"):
                alpha = px[..., -1]
            else:
                alpha = np.full(px.shape[:2], smax)
                key = info["trns_key"]
                if key is not None:
                    match = np.all(px[..., : len(key)] == np.array(key), axis=-1)
                    alpha = np.where(match, 0, smax)
            if channels == 1:
                if gray:
                    px = px[..., :1]
                else:
                    px = ((px[..., 0] * LUMA[0] + px[..., 1] * LUMA[1] + px[..., 2] * LUMA[2] + 32768) >> 16)[..., None]
            else:
                rgb = np.repeat(px[..., :1], 3, axis=-1) if gray else px[..., :3]
                px = rgb if channels == 3 else np.concatenate([rgb, alpha[..., None]], axis=-1)
        C = px.shape[-1]
        if dtype in ("uint8", "uint16"):
            omax = 255 if dtype == "uint8" else 65535
            v = (px * omax + smax // 2) // smax
            v = v.astype(np.uint8 if dtype == "uint8" else np.uint16)
        else:
            t = px.astype(np.float32) / np.float32(smax)  # IEEE float32 division
            if mean is not None:
                sc = np.array((list(scale) * 4)[:C], dtype=np.float32)
                mn = np.array((list(mean) * 4)[:C], dtype=np.float32)
                sd = np.array((list(std) * 4)[:C], dtype=np.float32)
                t = np.where(sc != 1, t * sc, t)
                t = np.where(mn != 0, t - mn, t)
                t = np.where(sd != 1, t / sd, t).astype(np.float32)
            v = t.astype(np.float16) if dtype == "float16" else t
        if layout == "NCHW":
            v = np.transpose(v, (2, 0, 1))
        out.append(v)
    return np.stack(out)


def make_set(kind, n=3, h=45, w=70):
    """n encoded images of one kind (same size)."""
    bufs = []
    for k in range(n):
        if kind == "rgb8":
            a = textured(h, w, 3, 255, k)
        elif kind == "rgba8":
            a = textured(h, w, 4, 255, k)
        elif kind == "gray16":
            a = textured(h, w, 1, 65535, k)
        elif kind == "rgb16":
            a = textured(h, w, 3, 65535, k)
        elif kind == "ga8":
            a = textured(h, w, 2, 255, k)
        elif kind == "gray8":
            a = textured(h, w, 1, 255, k)[..., 0]
        elif kind == "palette":
            idx = textured(h, w, 1, 99, k)[..., 0]
            img = Image.fromarray(idx, mode="P")
            pal = RNG.integers(0, 256, size=300).astype(np.uint8).tolist()
            img.putpalette(pal)
            bufs.append(l3.encode(png_bytes(img, transparency=bytes(range(0, 250, 5)))))
            continue
        elif kind == "rgb_trns":
            a = textured(h, w, 3, 255, k)
            key = tuple(int(v) for v in a[1, 1])
            bufs.append(l3.encode(png_bytes(Image.fromarray(a, "RGB"), transparency=key)))
            continue
        bufs.append(l3.encode(a, tile=32))
    return bufs


KINDS = ["rgb8", "rgba8", "gray8", "ga8", "gray16", "rgb16", "palette", "rgb_trns"]


class Decode(unittest.TestCase):
    def test_generated_pngs_equal_pil(self):
        cases = {
            "L": textured(33, 65, 1, 255, 1)[..., 0],
            "LA": textured(33, 65, 2, 255, 2),
            "RGB": textured(33, 65, 3, 255, 3),
            "RGBA": textured(33, 65, 4, 255, 4),
            "I;16": textured(33, 65, 1, 65535, 5)[..., 0],
        }
        for mode, arr in cases.items():
            img = Image.fromarray(arr, mode=mode)
            for interlace in (False, True):
                data = png_bytes(img, optimize=False) if not interlace else png_bytes(img)
                enc = l3.encode(data)
                dec = l3.decode(enc)
                ref = Image.open(io.BytesIO(data))
                got, want = pil_equivalent(ref, dec)
                self.assertEqual(got.shape, want.shape, mode)
                self.assertTrue(np.array_equal(got, want), f"{mode}: l3.decode != PIL")
        # palette with transparency, 1-bit, sub-byte gray
        idx = textured(20, 31, 1, 15, 6)[..., 0]
        p = Image.fromarray(idx, mode="P")
        p.putpalette(list(range(48)))
        for img in (p, Image.fromarray(idx * 17, "L").convert("1"),
                    Image.fromarray((idx // 4).astype(np.uint8), "L")):
            data = png_bytes(img, bits=2) if img.mode == "L" else png_bytes(img)
            ref = Image.open(io.BytesIO(data))
            dec = l3.decode(l3.encode(data))
            got, want = pil_equivalent(ref, dec)
            self.assertTrue(np.array_equal(got, want), f"{img.mode}: l3.decode != PIL")

    def test_array_round_trip_and_info(self):
        for shape, dt in [((5, 7), np.uint8), ((9, 4, 2), np.uint8), ((64, 65, 3), np.uint16),
                          ((1, 1, 4), np.uint8), ((70, 3, 3), np.uint8)]:
            a = RNG.integers(0, np.iinfo(dt).max + 1, size=shape).astype(dt)
            e = l3.encode(a)
            info = l3.info(e)
            self.assertEqual((info["height"], info["width"]), shape[:2])
            self.assertEqual(info["bit_depth"], 16 if dt == np.uint16 else 8)
            d = l3.decode(e)
            self.assertTrue(np.array_equal(d.reshape(a.shape), a))
            self.assertEqual(d.dtype, dt)

    def test_errors(self):
        with self.assertRaises(l3.Error) as cm:
            l3.decode(b"not an l3 file at all, clearly")
        self.assertEqual(cm.exception.status, 4)  # L3_ERR_BAD_MAGIC
        e = l3.encode(textured(40, 40, 3, 255, 9))
        with self.assertRaises(l3.Error):
            l3.decode(e[: len(e) // 2])
        with self.assertRaises(ValueError):
            l3.encode(np.zeros((4, 4, 5), np.uint8))
        with self.assertRaises(ValueError):
            l3.encode(b"plain bytes that are not a PNG")

    def test_corpus_equals_pil(self):
        if not os.path.isdir(CORPUS):
            self.skipTest(f"real-image corpus not present at {CORPUS} (scripts/fetch-corpus.sh)")
        files = []
        for sub in ("pngsuite", "wallpapers", "photos-2048"):
            d = os.path.join(CORPUS, sub)
            if os.path.isdir(d):
                files += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".png"))
        checked = 0
        deadline = time.monotonic() + 30
        for path in files:
            if time.monotonic() > deadline:
                break
            with open(path, "rb") as fh:
                data = fh.read()
            try:
                ref = Image.open(io.BytesIO(data))
                ref.load()
            except Exception:
                continue  # PIL cannot read it (PngSuite has deliberately broken files)
            if ref.width * ref.height > 12_000_000:
                continue
            enc = l3.encode(data)
            dec = l3.decode(enc)
            got, want = pil_equivalent(ref, dec)
            self.assertEqual(got.shape, want.shape, path)
            self.assertTrue(np.array_equal(got, want), f"{path}: l3.decode != PIL ({ref.mode})")
            checked += 1
        self.assertGreater(checked, 0)
        print(f"\n  corpus: {checked} real PNG files decode like PIL", file=sys.stderr)


class Batch(unittest.TestCase):
    def test_all_layouts_dtypes_channels(self):
        for kind in KINDS:
            bufs = make_set(kind)
            for layout in ("NCHW", "NHWC"):
                for dtype in ("uint8", "uint16", "float32", "float16"):
                    for channels in (None, 1, 3, 4):
                        b = l3.decode_batch(bufs, device="cpu", layout=layout, dtype=dtype,
                                            channels=channels, threads=2)
                        self.assertTrue(b.ok, b.errors)
                        got = np.from_dlpack(b)
                        want = expected_batch(bufs, layout, dtype, channels, None, None, None)
                        self.assertEqual(got.shape, want.shape, (kind, layout, dtype, channels))
                        self.assertEqual(got.dtype, want.dtype)
                        self.assertTrue(np.array_equal(got, want),
                                        f"{kind} {layout} {dtype} channels={channels}")

    def test_mean_std_scale(self):
        mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
        for kind in ("rgb8", "rgb16", "gray8", "palette"):
            bufs = make_set(kind, n=2)
            for dtype in ("float32", "float16"):
                for scale in ((1.0,), (1.0, 2.0, 255.0)):
                    b = l3.decode_batch(bufs, layout="NCHW", dtype=dtype, channels=3, mean=mean,
                                        std=std, scale=scale)
                    got = np.from_dlpack(b)
                    want = expected_batch(bufs, "NCHW", dtype, 3, mean, std, scale)
                    self.assertTrue(np.array_equal(got, want), f"{kind} {dtype} scale {scale}")
        # torchvision's ToTensor + Normalize, written in numpy float32
        bufs = make_set("rgb8", n=1)
        b = np.from_dlpack(l3.decode_batch(bufs, dtype="float32", mean=mean, std=std))
        x = np.transpose(l3.decode(bufs[0]), (2, 0, 1)).astype(np.float32) / np.float32(255)
        x = (x - np.array(mean, np.float32)[:, None, None]) / np.array(std, np.float32)[:, None, None]
        self.assertTrue(np.array_equal(b[0], x))
        with self.assertRaises(ValueError):
            l3.decode_batch(bufs, dtype="uint8", mean=mean)
        with self.assertRaises(ValueError):
            l3.decode_batch(bufs, dtype="float32", std=(1.0, 0.0, 1.0))
        with self.assertRaises(ValueError):
            l3.decode_batch(bufs, dtype="int8")
        with self.assertRaises(ValueError):
            l3.decode_batch(bufs, layout="HCWN")

    def test_dlpack_zero_copy_and_lifetime(self):
        bufs = make_set("rgb8", n=4)
        b = l3.decode_batch(bufs, layout="NHWC")
        self.assertEqual(b.__dlpack_device__(), (1, 0))
        self.assertEqual(b.device, "cpu")
        a = np.from_dlpack(b)
        self.assertEqual(a.ctypes.data, b.data_ptr)  # same memory, no copy
        self.assertEqual(np.asarray(b).ctypes.data, b.data_ptr)  # __array_interface__
        self.assertEqual(b.numpy().ctypes.data, b.data_ptr)
        ref = a.copy()
        del b
        import gc
        gc.collect()
        self.assertTrue(np.array_equal(a, ref))  # the array keeps the memory alive
        cap = l3.decode_batch(bufs).__dlpack__()  # unconsumed capsule: freed cleanly
        del cap
        self.assertFalse(hasattr(l3.decode_batch(bufs), "__cuda_array_interface__"))

    def test_torch(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed here: torch.from_dlpack not tested")
        bufs = make_set("rgb8", n=3)
        b = l3.decode_batch(bufs, dtype=torch.float32, mean=0.5, std=0.5)
        t = torch.from_dlpack(b)
        self.assertEqual(tuple(t.shape), b.shape)
        self.assertEqual(t.data_ptr(), b.data_ptr)
        self.assertTrue(np.array_equal(t.numpy(), np.from_dlpack(b)))

    def test_corrupt_image_in_batch(self):
        bufs = make_set("rgb8", n=4)
        bad = bytearray(bufs[1])
        bad[-5] ^= 0xFF
        bad[-60] ^= 0x3C
        bufs2 = [bufs[0], bytes(bad), bufs[2][: len(bufs[2]) - 50], b"junk" * 20, bufs[3]]
        b = l3.decode_batch(bufs2, dtype="float32")
        self.assertFalse(b.ok)
        self.assertEqual(b.status[0], 0)
        self.assertEqual(b.status[4], 0)
        self.assertEqual(b.status[1], 9)  # L3_ERR_CORRUPT
        self.assertEqual(b.status[2], 3)  # L3_ERR_TRUNCATED
        self.assertEqual(b.status[3], 4)  # L3_ERR_BAD_MAGIC
        self.assertIsNone(b.errors[0])
        self.assertIn("corrupt", b.errors[1].lower())
        a = np.from_dlpack(b)
        want = expected_batch([bufs[0], bufs[3]], "NCHW", "float32", None, None, None, None)
        self.assertTrue(np.array_equal(a[0], want[0]))
        self.assertTrue(np.array_equal(a[4], want[1]))
        self.assertTrue(not a[1].any() and not a[2].any() and not a[3].any())
        with self.assertRaises(l3.Error) as cm:
            l3.decode_batch(bufs2, strict=True)
        self.assertIn("3 of 5", str(cm.exception))
        with self.assertRaises(l3.Error):
            l3.decode_batch([b"junk"])
        # different sizes in one batch: that image fails with a shape status
        other = l3.encode(textured(20, 20, 3, 255, 1))
        b = l3.decode_batch([bufs[0], other])
        self.assertEqual(b.status, [0, 100])

    def test_threads_release_the_gil(self):
        bufs = make_set("rgb8", n=8, h=200, w=300)
        want = np.from_dlpack(l3.decode_batch(bufs, threads=1))
        results, errors = {}, []

        def run(k):
            try:
                for _ in range(3):
                    results[k] = np.from_dlpack(l3.decode_batch(bufs, threads=1)).copy()
            except Exception as ex:  # pragma: no cover
                errors.append(ex)

        ts = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=120)
            self.assertFalse(t.is_alive(), "decode thread hung")
        self.assertEqual(errors, [])
        for k in range(4):
            self.assertTrue(np.array_equal(results[k], want))
        # multi-threaded decode gives the same bits
        self.assertTrue(np.array_equal(np.from_dlpack(l3.decode_batch(bufs, threads=4)), want))

    def test_multiprocessing_workers(self):
        bufs = make_set("rgba8", n=6)
        want = np.from_dlpack(l3.decode_batch(bufs, layout="NCHW", dtype="float16"))
        for method in ("fork", "spawn"):
            ctx = multiprocessing.get_context(method)
            with ctx.Pool(2) as pool:
                parts = pool.map(_worker_decode, [bufs[:3], bufs[3:]])
            got = np.concatenate(parts)
            self.assertTrue(np.array_equal(got, want), method)

    def test_cuda_without_gpu(self):
        if l3.cuda_available():
            self.skipTest("a GPU is present: the GPU path is checked by gpu/bench/device_check.sh")
        with self.assertRaises(RuntimeError) as cm:
            l3.decode_batch(make_set("rgb8", n=1), device="cuda")
        msg = str(cm.exception)
        self.assertTrue("CUDA" in msg, msg)
        print(f"\n  device='cuda' here: {msg}", file=sys.stderr)


def _worker_decode(bufs):
    return np.from_dlpack(l3.decode_batch(bufs, layout="NCHW", dtype="float16", threads=1)).copy()


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    import tap  # noqa: E402 - each case in TAP, skips with their reasons

    tap.main()
