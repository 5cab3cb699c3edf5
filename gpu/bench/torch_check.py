"""GPU part of the device check through the Python module: decode_batch on
CUDA into torch via DLPack, compared with the CPU path bit for bit, plus the
end-to-end time of a batch of 64 photos as a Python caller sees it."""
import os
import sys
import time

import numpy as np
import torch

import l3

root = sys.argv[1] if len(sys.argv) > 1 else ".devcheck"
photos = sorted(os.path.join(root, "l3", "photos", f) for f in os.listdir(os.path.join(root, "l3", "photos")))
bufs = [open(p, "rb").read() for p in photos]
assert l3.cuda_available(), "l3.cuda_available() is False on a GPU machine"
fails = 0
for layout in ("NCHW", "NHWC"):
    for dtype in ("uint8", "float32", "float16"):
        for channels in (None, 1, 4):
            kw = dict(layout=layout, dtype=dtype, channels=channels)
            if dtype != "uint8":
                kw.update(mean=(0.485, 0.456, 0.406, 0.5), std=(0.229, 0.224, 0.225, 0.25))
            g = l3.decode_batch(bufs[:4], device="cuda", **kw)
            c = l3.decode_batch(bufs[:4], device="cpu", **kw)
            t = torch.from_dlpack(g)
            assert t.is_cuda and t.data_ptr() == g.data_ptr
            assert g.__cuda_array_interface__["data"][0] == g.data_ptr
            same = np.array_equal(t.cpu().numpy(), np.from_dlpack(c))
            if not same:
                fails += 1
                print(f"FAIL torch/CUDA != CPU for {kw}")
# corrupt image: status and zeroed slot on CUDA too
bad = bytearray(bufs[1]); bad[len(bad) // 2] ^= 0xFF; bad[-100] ^= 0x0F
g = l3.decode_batch([bufs[0], bytes(bad), bufs[2]], device="cuda")
assert g.status[0] == 0 and g.status[2] == 0 and g.status[1] != 0, g.status
assert int(torch.from_dlpack(g)[1].abs().sum()) == 0
# end to end from Python: batch of 64, on torch's current stream
batch = [bufs[i % len(bufs)] for i in range(64)]
stream = torch.cuda.current_stream().cuda_stream
for _ in range(3):
    l3.decode_batch(batch, device="cuda", stream=stream)
times = []
for _ in range(10):
    t0 = time.perf_counter()
    b = l3.decode_batch(batch, device="cuda", stream=stream, dtype="uint8", layout="NCHW")
    times.append(time.perf_counter() - t0)
ms = sorted(times)[len(times) // 2] * 1e3
nbytes = int(np.prod(b.shape))
print(f"python l3.decode_batch(device='cuda'), batch 64 NCHW u8: {ms:.2f} ms, {nbytes / ms / 1e6:.1f} GB/s end to end (host inputs)")
print(f"torch check: {'FAILURES' if fails else 'torch.from_dlpack on CUDA matches the CPU path'}")
sys.exit(1 if fails else 0)
