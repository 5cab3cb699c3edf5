#!/usr/bin/python3
"""Test of the PyTorch example and of l3.torch, which it uses: mounts data/sample
with l3fs (labels as .l3, then as PNG via --exclude), checks that l3.torch's
datasets, batches (decoded in a worker into one shared-memory tensor) and
collate give exactly PIL's pixels and label ids, then trains a few CPU steps
from the mount and from the PNG tree and checks both runs see the same data
(same losses).

Environment (set by meson): L3_SOURCE_ROOT, L3FS (the l3fs binary), PYTHONPATH
with the build's python/ folder. Exit status 77 (meson: skipped) when torch is
not importable or /dev/fuse is absent.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

SKIP = 77


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means "no torch here"
    skip(f"torch is not importable ({e.__class__.__name__}: {e}); install python3-torch")
if not os.path.exists("/dev/fuse"):
    skip("/dev/fuse is absent: cannot mount l3fs here")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

import l3  # noqa: E402

import l3.torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train  # noqa: E402

SRC = os.path.join(os.environ.get("L3_SOURCE_ROOT", os.path.join(HERE, "..", "..")),
                   "data", "sample")
L3FS = os.environ.get("L3FS")
if not L3FS or not os.access(L3FS, os.X_OK):
    print(f"FAIL: L3FS does not name the built l3fs binary ({L3FS!r})")
    sys.exit(1)

STEM = "meadow_000000_000019"
IMG_REL = f"leftImg8bit/train/meadow/{STEM}_leftImg8bit"
LBL_REL = f"gtFine/train/meadow/{STEM}_gtFine_labelIds"

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def pil(path):
    with Image.open(path) as im:
        return np.asarray(im)


class Mount:
    def __init__(self, tmp, name, *opts):
        self.mnt = os.path.join(tmp, name)
        os.mkdir(self.mnt)
        cache = os.path.join(tmp, name + "-cache")
        subprocess.run([L3FS, SRC, self.mnt, "--cache-dir", cache, *opts], check=True)
        for _ in range(100):
            if os.path.exists(os.path.join(self.mnt, ".l3fs", "stats.json")):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"l3fs did not come up at {self.mnt}")

    def close(self):
        r = subprocess.run(["fusermount3", "-u", self.mnt])
        if r.returncode != 0:
            subprocess.run(["umount", "-l", self.mnt])


def check_mount(m, label_ext):
    tag = f"[labels {label_ext}]"
    ds = l3.torch.Cityscapes(m.mnt, split="train")
    check(len(ds) == 1 and ds.unlabelled == 1,
          f"{tag} Cityscapes train split: 1 labelled image, 1 without labels "
          f"(got {len(ds)}, {ds.unlabelled})")
    img_path, lbl_path = ds.samples[0]
    check(img_path.endswith(IMG_REL + ".l3") and lbl_path.endswith(LBL_REL + label_ext),
          f"{tag} sample paths {img_path}, {lbl_path}")

    ref_img = pil(os.path.join(SRC, IMG_REL + ".png"))        # H,W,3 uint8
    ref_lbl = pil(os.path.join(SRC, LBL_REL + ".png"))        # H,W uint8 label ids

    # A batch from __getitems__ (what a DataLoader worker calls): uint8 NCHW,
    # exactly PIL's samples; labels exactly PIL's ids, (N, H, W) uint8.
    batch = ds.__getitems__([0])
    check(isinstance(batch, l3.torch.Batched), f"{tag} __getitems__ returns a collated batch")
    x, y = l3.torch.collate(batch)
    check(x is batch[0] and y is batch[1], f"{tag} collate passes the batch through (no copy)")
    check(tuple(x.shape) == (1, 3) + ref_img.shape[:2] and x.dtype == torch.uint8,
          f"{tag} uint8 batch shape {tuple(x.shape)}")
    check(np.array_equal(x[0].permute(1, 2, 0).numpy(), ref_img),
          f"{tag} decoded image equals PIL's decode of the source PNG")
    check(tuple(y.shape) == (1,) + ref_lbl.shape and y.dtype == torch.uint8,
          f"{tag} label batch shape {tuple(y.shape)} {y.dtype}")
    check(np.array_equal(y[0].numpy(), ref_lbl), f"{tag} label ids equal PIL's decode")
    xi, yi = ds[0]
    check(torch.equal(xi, x[0]) and torch.equal(yi, y[0]), f"{tag} ds[0] equals the batch's item")

    # float32 normalised by the decoder: ToTensor() + Normalize() of PIL's pixels.
    dsf = l3.torch.Cityscapes(m.mnt, split="train", dtype="float32",
                              mean=l3.torch.IMAGENET_MEAN, std=l3.torch.IMAGENET_STD)
    xf, _ = dsf.__getitems__([0])
    mean = np.array(l3.torch.IMAGENET_MEAN, np.float32)[:, None, None]
    std = np.array(l3.torch.IMAGENET_STD, np.float32)[:, None, None]
    want = (ref_img.transpose(2, 0, 1).astype(np.float32) / np.float32(255) - mean) / std
    check(xf.dtype == torch.float32 and np.allclose(xf[0].numpy(), want, rtol=0, atol=2e-6),
          f"{tag} float32 batch equals (PIL/255 - mean)/std "
          f"(max diff {np.abs(xf[0].numpy() - want).max():.2e})")
    check(torch.equal(l3.torch.normalize(x), xf),
          f"{tag} uint8 batch normalised by the consumer equals the float32 batch, bit for bit")

    # Through a DataLoader with a worker process: decoded there into one
    # shared-memory tensor, handed over as it is.
    loader = l3.torch.loader(ds, 1, device="cpu", num_workers=1, shuffle=False)
    xb, yb = next(iter(loader))
    check(torch.equal(xb, x) and torch.equal(yb, y),
          f"{tag} DataLoader worker batch equals the direct decode")
    check(xb.is_shared() and yb.is_shared(), f"{tag} the worker's batch is in shared memory")

    # With a GPU: bytes from the workers, decode in the main process.
    if torch.cuda.is_available() and l3.cuda_available():
        dsg = l3.torch.Cityscapes(m.mnt, split="train")
        gloader = l3.torch.loader(dsg, 1, device="cuda", num_workers=1, shuffle=False)
        xg, yg = next(iter(gloader))
        check(xg.is_cuda and torch.equal(xg.cpu(), x) and torch.equal(yg.cpu(), y),
              f"{tag} GPU batch decode equals the CPU decode")
    else:
        print(f"     {tag} GPU path not exercised: no GPU usable by torch and l3 here")


def main():
    print(f"torch {torch.__version__}, l3 cuda_available={l3.cuda_available()}")
    with tempfile.TemporaryDirectory(prefix="l3-pytorch-test.") as tmp:
        mounts = []
        try:
            a = Mount(tmp, "mnt-l3")
            mounts.append(a)
            b = Mount(tmp, "mnt-png-labels", "--exclude", "*_labelIds.png")
            mounts.append(b)
            check_mount(a, ".l3")
            check_mount(b, ".png")

            # ImageFolder over leftImg8bit: classes train/val, 3 images.
            folder = l3.torch.ImageFolder(os.path.join(a.mnt, "leftImg8bit"))
            check(folder.classes == ["train", "val"] and len(folder) == 3,
                  f"ImageFolder classes {folder.classes}, {len(folder)} samples")
            # RGBA source, forced to 3 channels: alpha dropped.
            art = l3.torch.ImageFolder(os.path.join(a.mnt, "art"))
            rgba = [s for s in art.samples if s[0].endswith("earth_rgba.l3")]
            x, t = art.__getitems__([art.samples.index(rgba[0])])
            ref = pil(os.path.join(SRC, "art", "earth_rgba.png"))[:, :, :3]
            check(np.array_equal(x[0].permute(1, 2, 0).numpy(), ref) and t.tolist() == [0],
                  "RGBA image forced to 3 channels equals PIL's RGB channels")
            # The PNG tree through the same dataset class (Pillow decode): the same batch.
            png = l3.torch.ImageFolder(os.path.join(SRC, "leftImg8bit"), extensions=(".png",))
            xl, _ = folder.__getitems__([0, 1])
            xp, _ = png.__getitems__([0, 1])
            check(torch.equal(xl, xp), "ImageFolder over the PNGs (Pillow) gives the same batch")

            # Training: a few CPU steps from the mount and from the PNG tree;
            # same seed, same data -> the same losses.
            common = ["--steps", "2", "--device", "cpu", "--json"]
            r_l3, model = train.run(train.parse_args(
                [a.mnt, "--batch-size", "1", "--workers", "1"] + common))
            r_png, _ = train.run(train.parse_args(
                [SRC, "--ext", ".png", "--batch-size", "1", "--workers", "1"] + common))
            print("losses from the mount:", r_l3["losses"])
            print("losses from the PNGs: ", r_png["losses"])
            check(len(r_l3["losses"]) == 3 and r_l3["losses"][-1] < r_l3["losses"][0],
                  "segmentation training from the mount: 3 steps, loss decreases")
            check(np.allclose(r_l3["losses"], r_png["losses"], rtol=1e-5, atol=0),
                  "same losses from the mount (l3 decode) and from the PNGs (PIL)")
            r_cls, _ = train.run(train.parse_args(
                [os.path.join(b.mnt, "leftImg8bit"), "--layout", "imagefolder",
                 "--batch-size", "2", "--workers", "2"] + common))
            check(r_cls["images"] == 4 and all(np.isfinite(r_cls["losses"])),
                  f"classification training over ImageFolder: {r_cls['images']} timed images")
            r_f32, _ = train.run(train.parse_args(
                [a.mnt, "--batch-size", "1", "--workers", "1", "--dtype", "float32"] + common))
            check(r_f32["losses"] == r_l3["losses"],
                  "float32 batches normalised by the decoder: the same losses as uint8 "
                  "batches normalised before the model")
            with open(os.path.join(a.mnt, ".l3fs", "stats.json")) as f:
                fs = json.load(f)["fs"]
            check(fs["encodes"] >= 3 and fs["encode_errors"] == 0 and fs["l3_open_hits"] >= 1,
                  f"mount statistics: {fs['encodes']} encodes, {fs['encode_errors']} errors, "
                  f"{fs['l3_open_hits']} open hits")
        finally:
            for m in mounts:
                m.close()
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
