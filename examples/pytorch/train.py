#!/usr/bin/python3
"""A few training steps of a small conv net, fed from an l3fs mount.

    train.py ROOT [--layout cityscapes|imagefolder] [--split train] [--ext .l3|.png]
             [--steps N] [--batch-size B] [--workers W] [--device auto|cpu|cuda]
             [--dtype float32|uint8] [--loader-only] [--json]

ROOT is an l3fs mount (images as .l3) or, with --ext .png, the plain PNG tree
(decoded with PIL, the usual PyTorch way) — the rest of the script is the same.

  cityscapes   ROOT/leftImg8bit/SPLIT/CITY/*_leftImg8bit.l3 + gtFine label maps:
               per-pixel classification (34 Cityscapes label ids)
  imagefolder  ROOT/CLASS/*.l3: whole-image classification

The datasets and the loader are l3.torch's (installed with the l3 package).
Decoding runs on the GPU when torch and the l3 module both see one, else on the
CPU in the DataLoader workers, each batch decoded into one shared-memory
tensor; batches are uint8 and normalised here, on the device, before the model
(--dtype float32 moves float32 batches normalised by the decoder instead).
--loader-only iterates the loader without the model and reports images/s
(used by bench/run.sh).

From the build tree:
  PYTHONPATH=build/python /usr/bin/python3 examples/pytorch/train.py MNT
"""

import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import l3
import l3.torch

CITYSCAPES_CLASSES = 34
IGNORE_INDEX = 255


class TinyNet(nn.Module):
    """Strided conv encoder; a 1x1 head per pixel (segmentation) or pooled (classes)."""

    def __init__(self, num_classes, dense):
        super().__init__()
        self.dense = dense
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=4, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        )
        self.head = nn.Conv2d(32, num_classes, 1)

    def forward(self, x):
        h, w = x.shape[-2:]
        y = self.head(self.body(x))
        if self.dense:
            return F.interpolate(y, size=(h, w), mode="bilinear", align_corners=False)
        return y.mean(dim=(2, 3))


def build_dataset(args):
    fmt = dict(extensions=(args.ext,), dtype=args.dtype)
    if args.dtype == "float32":
        fmt.update(mean=l3.torch.IMAGENET_MEAN, std=l3.torch.IMAGENET_STD)
    if args.layout == "cityscapes":
        ds = l3.torch.Cityscapes(args.root, split=args.split, **fmt)
        return ds, CITYSCAPES_CLASSES
    ds = l3.torch.ImageFolder(args.root, **fmt)
    return ds, len(ds.classes)


def default_device():
    """'cuda' when this l3 build and torch both see a GPU, else 'cpu'."""
    return "cuda" if torch.cuda.is_available() and l3.cuda_available() else "cpu"


def prepare(x, y, num_classes, dtype):
    """A batch as the model takes it: float32 images (normalised here when the
    loader handed over uint8), int64 targets (label ids past the classes
    ignored)."""
    if dtype == "uint8":
        x = l3.torch.normalize(x)
    y = y.long()
    if y.dim() == 3:
        y = torch.where(y < num_classes, y, torch.full_like(y, IGNORE_INDEX))
    return x, y


def batches(loader, steps):
    """`steps` batches, cycling over the loader as often as needed."""
    n = 0
    while n < steps:
        got = False
        for batch in loader:
            got = True
            yield batch
            n += 1
            if n >= steps:
                return
        if not got:
            raise RuntimeError("the loader gives no batch (dataset smaller than the batch size?)")


def run(args):
    device = args.device if args.device != "auto" else default_device()
    torch.manual_seed(0)
    ds, num_classes = build_dataset(args)
    if len(ds) < args.batch_size:
        raise SystemExit(f"{args.root}: {len(ds)} samples, fewer than one batch of "
                         f"{args.batch_size} (try --batch-size {len(ds)})")
    loader = l3.torch.loader(ds, args.batch_size, device=device, num_workers=args.workers,
                             shuffle=not args.loader_only)
    model = None
    if not args.loader_only:
        model = TinyNet(num_classes, dense=args.layout == "cityscapes").to(device)
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    losses = []
    images = 0
    t0 = None
    for step, (x, y) in enumerate(batches(loader, args.steps + args.warmup)):
        if step == args.warmup:  # after warm-up: workers started, caches filled
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        if step >= args.warmup:
            images += x.shape[0]
        if model is None:
            continue
        x, y = prepare(x, y, num_classes, args.dtype)
        out = model(x)
        loss = F.cross_entropy(out, y, ignore_index=IGNORE_INDEX)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if not args.json:
            print(f"step {step}: batch {tuple(x.shape)} {x.dtype} on {x.device}, "
                  f"loss {losses[-1]:.4f}", flush=True)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0 if t0 is not None else float("nan")
    result = {
        "device": device, "ext": args.ext, "layout": args.layout, "samples": len(ds),
        "batch_size": args.batch_size, "workers": args.workers, "steps": args.steps,
        "dtype": args.dtype,
        "images": images, "seconds": dt, "images_per_s": images / dt if dt > 0 else None,
        "losses": losses,
    }
    if any(not math.isfinite(v) for v in losses):
        raise RuntimeError(f"non-finite loss: {losses}")
    return result, model


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root")
    p.add_argument("--layout", choices=["cityscapes", "imagefolder"], default="cityscapes")
    p.add_argument("--split", default="train")
    p.add_argument("--ext", default=".l3", help=".l3 (an l3fs mount) or .png (PIL decode)")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--warmup", type=int, default=1, help="untimed first steps")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--dtype", choices=["uint8", "float32"], default="uint8",
                   help="loader output: uint8, normalised on the device before the model "
                        "(the default: 4x fewer bytes from the workers), or float32 "
                        "normalised by the decoder")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--loader-only", action="store_true",
                   help="iterate the loader without training; report images/s")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    result, _ = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['images']} images in {result['seconds']:.3f} s "
              f"({result['images_per_s'] or 0:.1f} images/s) on {result['device']}, "
              f"{result['samples']} samples in the dataset")
    return 0


if __name__ == "__main__":
    sys.exit(main())
