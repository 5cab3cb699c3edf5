"""l3.torch without a mount: datasets over a tree of .l3 files written with
l3.encode (and PNGs next to them), __getitems__ batches against Pillow's
pixels, the shared-memory batch from a DataLoader worker, collate,
worker_init, normalize, the WebDataset handler, and the errors a user meets
(mixed sizes, an empty tree). The mount, Cityscapes and training are in
examples/pytorch/test_pytorch_example.py. Reports in TAP (tests/common/tap.py);
without torch, one skipped plan with the reason."""
import io
import os
import sys
import tempfile
import unittest

try:
    import torch
except ImportError as e:
    print(f"1..0 # SKIP torch is not importable ({e}); install python3-torch")
    sys.exit(0)

import numpy as np
from PIL import Image

import l3
import l3.torch

RNG = np.random.default_rng(7)


def smooth(h, w, c):
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([(x * (k + 1) + y * 3 + k * 40) % 256 for k in range(c)], axis=2)
    return (a + RNG.integers(0, 4, a.shape)).clip(0, 255).astype(np.uint8)


def png_bytes(a):
    f = io.BytesIO()
    Image.fromarray(a[:, :, 0] if a.shape[2] == 1 else a).save(f, format="PNG")
    return f.getvalue()


class Tree:
    """ROOT/cat/*.l3, ROOT/dog/*.l3 + one .png each (RGB, one gray, one RGBA),
    and an odd-sized image in ROOT/odd."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="l3-torch-test.")
        self.root = self.tmp.name
        self.arrays = {}
        specs = [("cat", "a", 3), ("cat", "b", 1), ("cat", "c", 4), ("dog", "d", 3),
                 ("dog", "e", 3)]
        for cls, name, c in specs:
            os.makedirs(os.path.join(self.root, cls), exist_ok=True)
            a = smooth(48, 80, c)
            png = png_bytes(a)
            path = os.path.join(self.root, cls, name + (".png" if name == "e" else ".l3"))
            with open(path, "wb") as f:
                f.write(png if name == "e" else l3.encode(png))
            self.arrays[path] = a

    def rgb(self, path):
        a = self.arrays[path]
        if a.shape[2] == 1:
            return np.repeat(a, 3, axis=2)
        return a[:, :, :3]


class Datasets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.t = Tree()

    def test_imagefolder_classes_and_batch_pixels(self):
        ds = l3.torch.ImageFolder(self.t.root, extensions=(".l3", ".png"))
        self.assertEqual(ds.classes, ["cat", "dog"])
        self.assertEqual([os.path.basename(p) for p, _ in ds.samples],
                         ["a.l3", "b.l3", "c.l3", "d.l3", "e.png"])
        batch = ds.__getitems__(range(len(ds)))
        self.assertIsInstance(batch, l3.torch.Batched)
        x, y = l3.torch.collate(batch)
        self.assertEqual((tuple(x.shape), x.dtype), ((5, 3, 48, 80), torch.uint8))
        self.assertEqual(y.tolist(), [0, 0, 0, 1, 1])
        for k, (p, _) in enumerate(ds.samples):  # gray expanded, alpha dropped, PNG by Pillow
            self.assertTrue(np.array_equal(x[k].permute(1, 2, 0).numpy(), self.t.rgb(p)), p)
        xi, yi = ds[3]
        self.assertTrue(torch.equal(xi, x[3]) and yi == 1)

    def test_formats_and_consumer_normalize(self):
        u8 = l3.torch.ImageFolder(self.t.root)
        f32 = l3.torch.ImageFolder(self.t.root, dtype="float32", mean=l3.torch.IMAGENET_MEAN,
                                   std=l3.torch.IMAGENET_STD)
        x, _ = u8.__getitems__([0, 1, 2, 3])
        xf, _ = f32.__getitems__([0, 1, 2, 3])
        self.assertTrue(torch.equal(l3.torch.normalize(x), xf),
                        "consumer-side normalize gives the decoder's float32 values")
        nhwc = l3.torch.ImageFolder(self.t.root, layout="NHWC", dtype="float16", channels=None)
        with self.assertRaises(l3.Error):  # gray and RGB give different shapes natively
            nhwc.__getitems__([0, 1])
        h, _ = nhwc.__getitems__([0, 3])
        self.assertEqual((tuple(h.shape), h.dtype), ((2, 48, 80, 3), torch.float16))

    def test_dataloader_worker_hands_over_shared_memory(self):
        ds = l3.torch.ImageFolder(self.t.root)
        loader = l3.torch.loader(ds, 2, num_workers=2, shuffle=False)
        got = list(loader)
        self.assertEqual(len(got), 2)  # 4 images, drop_last
        x0, _ = ds.__getitems__([0, 1])
        self.assertTrue(torch.equal(got[0][0], x0))
        for x, y in got:
            self.assertTrue(x.is_shared(), "batch decoded in the worker into shared memory")

    def test_bytes_mode_and_collate(self):
        ds = l3.torch.ImageFolder(self.t.root, decode=False)
        items = ds.__getitems__([0, 3])
        imgs, tgts = l3.torch.collate(items)
        self.assertTrue(all(isinstance(b, bytes) and b[:4] == b"L3IM" for b in imgs))
        self.assertEqual(tgts, [0, 1])

    def test_mixed_sizes_and_empty_trees_say_so(self):
        odd = os.path.join(self.t.root, "odd")
        os.makedirs(odd, exist_ok=True)
        with open(os.path.join(odd, "z.l3"), "wb") as f:
            f.write(l3.encode(smooth(20, 30, 3)))
        try:
            ds = l3.torch.ImageFolder(self.t.root)
            with self.assertRaisesRegex(l3.Error, "another output shape|shape"):
                ds.__getitems__([0, len(ds) - 1])
        finally:
            os.remove(os.path.join(odd, "z.l3"))
            os.rmdir(odd)
        with tempfile.TemporaryDirectory() as empty:
            with self.assertRaises(FileNotFoundError):
                l3.torch.ImageFolder(empty)

    def test_worker_init_seeds_numpy_per_worker(self):
        class Draw(torch.utils.data.Dataset):
            def __len__(self):
                return 2

            def __getitem__(self, i):
                return float(np.random.random())

        dl = torch.utils.data.DataLoader(Draw(), batch_size=1, num_workers=2,
                                         worker_init_fn=l3.torch.worker_init)
        vals = [float(v) for v in dl]
        self.assertNotEqual(vals[0], vals[1], "each worker draws its own numbers")

    def test_webdataset_handler(self):
        p = os.path.join(self.t.root, "dog", "d.l3")
        h = l3.torch.webdataset_handler()
        with open(p, "rb") as f:
            x = h(".l3", f.read())
        self.assertTrue(np.array_equal(x.permute(1, 2, 0).numpy(), self.t.rgb(p)))
        self.assertIsNone(h(".jpg", b""))


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    import tap  # noqa: E402 - each case in TAP, skips with their reasons

    tap.main()
