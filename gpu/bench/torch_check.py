"""Python step of gpu/bench/device_check.sh (GPU machines only): the l3
module's CUDA path with torch.

  torch_check.py DEVCHECK_DIR TIMING_OUT

1. correctness: decode_batch(device="cuda") handed to torch.from_dlpack equals
   the CPU path for layouts x dtypes x channels, on photos and generated
   images of several colour models;
2. PyTorch conventions: the current device and the current stream are used
   (device="cuda" and no stream given), device="cuda:N", an explicit stream,
   DLPack's stream argument (the consumer's stream waits on the decode),
   __cuda_array_interface__'s stream, a corrupt image's status and zeroed slot;
3. timing: batch 1, 8, 64, 256 of photos from Python bytes (decode_batch +
   a synchronisation of the stream), written to TIMING_OUT.
Prints "STEP python: PASS" or "... FAIL"; exit 0 only when everything ran.
"""
import os
import sys
import time

import numpy as np
import torch

import l3

root = sys.argv[1] if len(sys.argv) > 1 else ".devcheck"
timing_out = sys.argv[2] if len(sys.argv) > 2 else None
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print(f"FAIL: {what}")


def photos():
    d = os.path.join(root, "l3", "photos")
    files = sorted(os.listdir(d)) if os.path.isdir(d) else []
    if files:
        return [open(os.path.join(d, f), "rb").read() for f in files], "real photos"
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:1024, 0:2048]
    out = []
    for i in range(8):
        base = np.stack([(x * (3 + c + i) // 16 + y * (5 - c) // 8) for c in range(3)], -1)
        noise = rng.integers(0, 16, size=(1024, 2048, 1))
        out.append(l3.encode(((base + noise) & 255).astype(np.uint8)))
    return out, "generated photo-like images"


def generated():
    rng = np.random.default_rng(11)
    sets = []
    for shape, dt in (((45, 70, 3), np.uint8), ((45, 70, 4), np.uint8), ((45, 70), np.uint8),
                      ((45, 70, 2), np.uint16), ((45, 70, 3), np.uint16)):
        hi = np.iinfo(dt).max + 1
        sets.append([l3.encode(rng.integers(0, hi, size=shape).astype(dt), tile=32)
                     for _ in range(3)])
    return sets


assert l3.cuda_available(), "l3.cuda_available() is False on a GPU machine"
bufs, kind = photos()
print(f"torch {torch.__version__}, {torch.cuda.device_count()} GPU(s), {len(bufs)} {kind}")

# 1. correctness
for batch in [bufs[:4]] + generated():
    for layout in ("NCHW", "NHWC"):
        for dtype in ("uint8", "uint16", "float32", "float16"):
            for channels in (None, 1, 3, 4):
                kw = dict(layout=layout, dtype=dtype, channels=channels)
                if dtype.startswith("float"):
                    kw.update(mean=(0.485, 0.456, 0.406, 0.5), std=(0.229, 0.224, 0.225, 0.25))
                g = l3.decode_batch(batch, device="cuda", **kw)
                c = l3.decode_batch(batch, device="cpu", **kw)
                t = torch.from_dlpack(g)
                check(t.is_cuda and t.data_ptr() == g.data_ptr, f"zero-copy DLPack {kw}")
                check(np.array_equal(t.cpu().numpy(), np.from_dlpack(c)), f"CUDA != CPU {kw}")

# 2. conventions
ref = np.from_dlpack(l3.decode_batch(bufs[:4], device="cpu"))
n = torch.cuda.device_count()
dev = n - 1
with torch.cuda.device(dev):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        g = l3.decode_batch(bufs[:4], device="cuda")  # torch's current device and stream
    check(g.device == f"cuda:{dev}", f"device='cuda' under torch.cuda.device({dev}): {g.device}")
    cai = g.__cuda_array_interface__
    check(cai["stream"] == s.cuda_stream, f"__cuda_array_interface__ stream {cai['stream']}")
    t = torch.from_dlpack(g)  # consumer: torch's current (default) stream waits on the decode
    check(np.array_equal(t.cpu().numpy(), ref), "DLPack on another stream than the decode")
    other = torch.cuda.Stream()
    g2 = l3.decode_batch(bufs[:4], device=f"cuda:{dev}", stream=other)
    with torch.cuda.stream(other):
        check(np.array_equal(torch.from_dlpack(g2).cpu().numpy(), ref), "explicit stream")
bad = bytearray(bufs[1])
bad[len(bad) // 2] ^= 0xFF
bad[-100] ^= 0x0F
g = l3.decode_batch([bufs[0], bytes(bad), bufs[2]], device="cuda")
check(g.status[0] == 0 and g.status[2] == 0 and g.status[1] != 0, f"statuses {g.status}")
check(int(torch.from_dlpack(g)[1].abs().sum()) == 0, "zeroed slot of the corrupt image")

# 3. timing from Python bytes
rows = []
stream = torch.cuda.current_stream()
for B in (1, 8, 64, 256):
    batch = [bufs[i % len(bufs)] for i in range(B)]
    for _ in range(3):
        l3.decode_batch(batch, device="cuda")
    stream.synchronize()
    times = []
    for _ in range(10 if B >= 64 else 30):
        t0 = time.perf_counter()
        b = l3.decode_batch(batch, device="cuda", layout="NHWC")
        stream.synchronize()
        times.append(time.perf_counter() - t0)
        del b
    ms = sorted(times)[len(times) // 2] * 1e3
    nbytes = B * 1024 * 2048 * 3
    rows.append(f"{'python':<9} {B:5d} {ms:10.3f} {'':>10} {'':>10} {'':>10} {nbytes / ms / 1e6:9.1f}")
    print(f"TIMING python {B} host_ms {ms:.4f}")
if timing_out:
    with open(timing_out, "w") as f:
        f.write("python inputs: l3.decode_batch(bytes, device='cuda') + stream synchronize, "
                "HWC uint8, median\n")
        f.write("\n".join(rows) + "\n")
print(f"STEP python: {'FAIL' if fails else 'PASS'} ({len(fails)} failures)")
sys.exit(1 if fails else 0)
