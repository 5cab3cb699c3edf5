#!/usr/bin/python3
"""Every decode_batch output format against plain HWC uint8 decode, one thread,
one process, the same images in the same run.

    formats.py [--build BUILD] [--rounds R] [--only NAME,...] [--json FILE] PNG_DIR_OR_FILES...

The PNGs are encoded to L3 in memory (l3.encode) first. Then each round times,
image by image, `l3.decode(buf, threads=1)` (the reference: HWC, native dtype)
and `l3.decode_batch([buf], threads=1, ...)` for each format below, in turn, so
slow phases of a shared machine hit every row alike. A row's time is the sum
over images of the best round per image, in thread CPU time (time.thread_time:
what this thread spent, not what the other processes took); wall time is
reported next to it. With --out, each format also runs into a preallocated
array (out=): no allocation, no page faults.

The ratio column is HWC uint8 time / row time (1.00 = as fast as plain decode;
the target is >= 0.87, i.e. within 15%).
"""

import argparse
import glob
import json
import os
import sys
import time

FORMATS = [
    # name, decode_batch keyword arguments
    ("NHWC u8", dict(layout="NHWC", dtype="uint8")),
    ("NCHW u8", dict(layout="NCHW", dtype="uint8")),
    ("NHWC u8 channels=3", dict(layout="NHWC", dtype="uint8", channels=3)),
    ("NCHW u8 channels=3", dict(layout="NCHW", dtype="uint8", channels=3)),
    ("NHWC u8 channels=1", dict(layout="NHWC", dtype="uint8", channels=1)),
    ("NCHW u8 channels=1", dict(layout="NCHW", dtype="uint8", channels=1)),
    ("NHWC u8 channels=4", dict(layout="NHWC", dtype="uint8", channels=4)),
    ("NCHW u8 channels=4", dict(layout="NCHW", dtype="uint8", channels=4)),
    ("NHWC u16", dict(layout="NHWC", dtype="uint16")),
    ("NCHW u16", dict(layout="NCHW", dtype="uint16")),
    ("NHWC f32", dict(layout="NHWC", dtype="float32")),
    ("NCHW f32", dict(layout="NCHW", dtype="float32")),
    ("NHWC f32 mean/std", dict(layout="NHWC", dtype="float32", norm=True)),
    ("NCHW f32 mean/std", dict(layout="NCHW", dtype="float32", norm=True)),
    ("NCHW f32 mean/std channels=3", dict(layout="NCHW", dtype="float32", norm=True,
                                          channels=3)),
    ("NHWC f16", dict(layout="NHWC", dtype="float16")),
    ("NCHW f16", dict(layout="NCHW", dtype="float16")),
    ("NHWC f16 mean/std", dict(layout="NHWC", dtype="float16", norm=True)),
    ("NCHW f16 mean/std", dict(layout="NCHW", dtype="float16", norm=True)),
]

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def kwargs(spec):
    kw = dict(spec)
    if kw.pop("norm", False):
        kw.update(mean=MEAN, std=STD)
    return kw


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+")
    p.add_argument("--build", default=None, help="build dir whose python/ holds l3")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", action="store_true", help="also time decode_batch(out=...)")
    p.add_argument("--only", default=None,
                   help="comma-separated format names (as in the table): time just those "
                        "(and HWC u8, the reference)")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    if args.build:
        sys.path.insert(0, os.path.join(args.build, "python"))
    import numpy as np
    import l3

    files = []
    for x in args.paths:
        files += sorted(glob.glob(os.path.join(x, "*.png"))) if os.path.isdir(x) else [x]
    bufs = [l3.encode(open(f, "rb").read()) for f in files]
    px = sum(l3.info(b)["width"] * l3.info(b)["height"] for b in bufs)
    have_out = args.out

    rows = [("HWC u8 (l3.decode)", None, False)]
    only = set(x.strip() for x in args.only.split(",")) if args.only else None
    if only and only - set(n for n, _ in FORMATS):
        p.error("--only: unknown format(s) " + ", ".join(sorted(only - set(n for n, _ in FORMATS))))
    for name, spec in FORMATS:
        if only and name not in only:
            continue
        rows.append((name, kwargs(spec), False))
        if have_out:
            rows.append((name + " out=", kwargs(spec), True))
    outs = {}
    if have_out:
        for name, kw, use_out in rows:
            if use_out:
                b = l3.decode_batch([bufs[0]], threads=1, **kw)
                outs[name] = [np.empty(l3.decode_batch([x], threads=1, **kw).shape,
                                       dtype=b.dtype) for x in bufs]
    best_cpu = {r[0]: [float("inf")] * len(bufs) for r in rows}
    best_wall = {r[0]: [float("inf")] * len(bufs) for r in rows}
    load = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for i, b in enumerate(bufs):
            for name, kw, use_out in rows:
                w0, c0 = time.perf_counter(), time.thread_time()
                if kw is None:
                    r = l3.decode(b, threads=1)
                elif use_out:
                    r = l3.decode_batch([b], threads=1, out=outs[name][i], **kw)
                else:
                    r = l3.decode_batch([b], threads=1, **kw)
                c1, w1 = time.thread_time(), time.perf_counter()
                del r
                best_cpu[name][i] = min(best_cpu[name][i], c1 - c0)
                best_wall[name][i] = min(best_wall[name][i], w1 - w0)
    load.append(os.getloadavg()[0])
    ref = sum(best_cpu[rows[0][0]])
    res = {"files": len(bufs), "names": [os.path.basename(f) for f in files],
           "loadavg": load, "rows": []}
    print(f"{len(bufs)} images, {px / 1e6:.1f} Mpixel, best of {args.rounds} rounds per "
          f"image, one thread; load average {load[0]:.2f} -> {load[1]:.2f}")
    print("| format | images/s (CPU time) | images/s (wall) | vs HWC u8 |")
    print("| --- | ---: | ---: | ---: |")
    for name, _, _ in rows:
        c, w = sum(best_cpu[name]), sum(best_wall[name])
        print(f"| {name} | {len(bufs) / c:.1f} | {len(bufs) / w:.1f} | {ref / c:.2f} |")
        res["rows"].append({"format": name, "cpu_s": c, "wall_s": w, "vs_hwc": ref / c,
                            "cpu_s_per_image": best_cpu[name]})
    worst = min(r["vs_hwc"] for r in res["rows"][1:])
    print(f"worst format: {worst:.2f} of HWC u8 (target >= 0.87)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
