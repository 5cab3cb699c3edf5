#!/usr/bin/python3
"""Test of examples/c/decode_batch: encodes every PNG of data/sample with
`l3 encode`, decodes them as one batch with the example (CPU path, and the
default path, which falls back to the CPU without a GPU), and compares every
decoded image (written as PAM) with PIL's decode of the source PNG. A truncated
.l3 in the batch must be reported for that file only (exit status 1, the other
images still decoded).

Environment (set by meson): L3_SOURCE_ROOT, L3 (the l3 CLI), DECODE_BATCH.
"""

import os
import re
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.environ.get("L3_SOURCE_ROOT", os.path.join(HERE, "..", "..")),
                   "data", "sample")
L3 = os.environ["L3"]
EXE = os.environ["DECODE_BATCH"]

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def read_pam(path):
    with open(path, "rb") as f:
        data = f.read()
    end = data.index(b"ENDHDR\n") + len(b"ENDHDR\n")
    hdr = dict(line.split(" ", 1) for line in data[:end].decode().splitlines()[1:-1])
    w, h, d, maxval = (int(hdr[k]) for k in ("WIDTH", "HEIGHT", "DEPTH", "MAXVAL"))
    dtype = np.dtype(">u2") if maxval > 255 else np.uint8
    a = np.frombuffer(data, dtype=dtype, offset=end).reshape(h, w, d)
    return a, maxval


def pil_samples(path):
    """The PNG's samples as libpng gives them (palette as indices), HWC."""
    with Image.open(path) as im:
        a = np.asarray(im)
    if a.ndim == 2:
        a = a[:, :, None]
    return a


def run(args):
    r = subprocess.run([EXE] + args, capture_output=True, text=True)
    print(f"$ decode_batch {' '.join(os.path.basename(a) for a in args)}  -> {r.returncode}")
    print("  " + (r.stdout + r.stderr).strip().replace("\n", "\n  "))
    return r


def main():
    pngs = sorted(os.path.join(d, f) for d, _, fs in os.walk(SRC) for f in fs
                  if f.endswith(".png"))
    check(len(pngs) == 7, f"{len(pngs)} PNGs in data/sample")
    with tempfile.TemporaryDirectory(prefix="l3-c-example.") as tmp:
        l3s = []
        for p in pngs:
            out = os.path.join(tmp, os.path.basename(p)[:-4] + ".l3")
            subprocess.run([L3, "encode", p, out], check=True)
            l3s.append(out)

        for mode, args in (("cpu", ["--cpu", "-j", "2"]), ("default", [])):
            outdir = os.path.join(tmp, "out-" + mode)
            os.mkdir(outdir)
            r = run(args + ["-o", outdir] + l3s)
            check(r.returncode == 0, f"[{mode}] exit status 0 for {len(l3s)} valid files")
            check(re.search(rf"^{len(l3s)} of {len(l3s)} images decoded on the (CPU|GPU)",
                            r.stdout, re.M) is not None, f"[{mode}] summary line")
            for png, l3f in zip(pngs, l3s):
                name = os.path.basename(l3f)[:-3]
                got, maxval = read_pam(os.path.join(outdir, name + ".pam"))
                want = pil_samples(png)
                same = got.shape == want.shape and np.array_equal(got.astype(np.int64),
                                                                  want.astype(np.int64))
                check(same, f"[{mode}] {name}: {got.shape} maxval {maxval} equals PIL's "
                            f"{want.shape} {want.dtype}")

        # A truncated file in the middle of the batch.
        bad = os.path.join(tmp, "truncated.l3")
        with open(l3s[0], "rb") as f:
            data = f.read()
        with open(bad, "wb") as f:
            f.write(data[: len(data) // 2])
        r = run(["--cpu", l3s[1], bad, l3s[2]])
        check(r.returncode == 1, "exit status 1 with a truncated file in the batch")
        check(re.search(r"truncated\.l3: error \d+", r.stdout) is not None,
              "the truncated file is reported with an error")
        check(re.search(r"^2 of 3 images decoded", r.stdout, re.M) is not None,
              "the other two images are decoded")
        r = run([os.path.join(tmp, "missing.l3")])
        check(r.returncode == 1 and "missing.l3: error" in r.stdout, "a missing file is reported")
        r = run([])
        check(r.returncode == 2 and "usage" in r.stderr, "no arguments: usage, status 2")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
