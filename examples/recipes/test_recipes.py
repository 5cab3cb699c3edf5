#!/usr/bin/python3
"""Runs one plug-in recipe of examples/recipes against the sample images and
checks what it produces against Pillow's decode of the source PNGs:

    test_recipes.py webdataset | getitems | dali

webdataset  a tar shard of .l3 + .cls + .json members read as WebDataset does
            (webdataset_l3.samples), the .l3 members decoded by
            l3.torch.webdataset_handler(); with webdataset installed, also
            through wds.WebDataset(...).decode(...)
getitems    getitems_dataset.loader(): a DataLoader with 2 workers whose
            dataset's __getitems__ decodes each batch into one shared tensor
dali        dali_source.L3Source on the extension built against the
            CPU-executed CUDA runtime (L3_FAKECUDA_EXT): the batch DALI would
            receive, its DLPack capsule and CUDA array interface, and its bytes
            (copied back by the runtime) against the CPU decode; and
            decode_batch(out=) into GPU memory received through DLPack

Reports in TAP (one case per check; a part that cannot run here is a
skipped case with its reason), so scripts/test.sh counts every case.

Environment (meson): L3_SOURCE_ROOT, PYTHONPATH with the build's python/;
for dali L3_FAKECUDA_EXT (the fake-runtime extension) and L3_PYTHON_SRC.
"""
import ctypes
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.environ.get("L3_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
SAMPLE = os.path.join(TOP, "data", "sample", "leftImg8bit")
sys.path.insert(0, HERE)
failures = []
cases = 0  # TAP result lines so far


def check(cond, what):
    """One TAP case: "ok N - what" or "not ok N - what"."""
    global cases
    cases += 1
    print(f"{'ok' if cond else 'not ok'} {cases} - {what}", flush=True)
    if not cond:
        failures.append(what)


def skip(what, reason):
    """A case that did not run, counted as skipped with its reason."""
    global cases
    cases += 1
    print(f"ok {cases} - {what} # SKIP {reason}", flush=True)


def sample_pngs():
    out = []
    for dp, _, fs in sorted(os.walk(SAMPLE)):
        out += [os.path.join(dp, f) for f in sorted(fs) if f.endswith(".png")]
    return out


def pil(path):
    import numpy as np
    from PIL import Image
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def encode_all(tmp, pngs):
    import l3
    out = []
    for i, p in enumerate(pngs):
        q = os.path.join(tmp, f"{i:04d}.l3")
        with open(p, "rb") as f, open(q, "wb") as g:
            g.write(l3.encode(f.read()))
        out.append(q)
    return out


def test_webdataset(tmp):
    import numpy as np
    import l3.torch
    import webdataset_l3
    pngs = sample_pngs()
    l3s = encode_all(tmp, pngs)
    shard = os.path.join(tmp, "shard-0000.tar")
    with tarfile.open(shard, "w") as tar:
        for i, q in enumerate(l3s):
            tar.add(q, arcname=f"sample{i:04d}.l3")
            for ext, data in (("cls", str(i % 2).encode()), ("json", b'{"i": %d}' % i)):
                ti = tarfile.TarInfo(f"sample{i:04d}.{ext}")
                ti.size = len(data)
                tar.addfile(ti, io.BytesIO(data))
    handlers = [l3.torch.webdataset_handler(), webdataset_l3.cls_handler]
    got = list(webdataset_l3.samples(shard, handlers))
    check(len(got) == len(pngs), f"{len(got)} samples from the shard of {len(pngs)}")
    for i, (s, p) in enumerate(zip(got, pngs)):
        x = s["l3"]
        check(x.dtype.is_floating_point is False and tuple(x.shape)[0] == 3 and
              np.array_equal(x.permute(1, 2, 0).numpy(), pil(p)),
              f"sample {i}: the .l3 member decodes to Pillow's pixels of {os.path.basename(p)}")
        check(s["cls"] == i % 2 and s["json"] == b'{"i": %d}' % i,
              f"sample {i}: other members go to the other handlers (cls {s['cls']})")
    hwc = l3.torch.webdataset_handler(layout="HWC", dtype="float32")
    with open(l3s[0], "rb") as f:
        y = hwc(".l3", f.read())
    check(tuple(y.shape) == pil(pngs[0]).shape and
          np.array_equal(y.numpy(), pil(pngs[0]).astype(np.float32) / np.float32(255)),
          "HWC float32 handler: x / 255")
    check(hwc("jpg", b"\xff\xd8") is None and hwc(".png", b"") is None,
          "other keys are declined (None)")
    try:
        import webdataset as wds
    except ImportError:
        skip("webdataset pipeline: wds.WebDataset(shard).decode(l3.torch.webdataset_handler())",
             "webdataset is not installed (not a Debian package); the shard was read by "
             "webdataset_l3.samples only")
        return
    ds = wds.WebDataset(shard).decode(l3.torch.webdataset_handler()).to_tuple("l3", "cls")
    for i, (x, c) in enumerate(ds):
        check(np.array_equal(x.permute(1, 2, 0).numpy(), pil(pngs[i])),
              f"webdataset pipeline sample {i}")


def test_getitems(tmp):
    import numpy as np
    import getitems_dataset
    pngs = sample_pngs()
    l3s = encode_all(tmp, pngs)
    items = [(q, i) for i, q in enumerate(l3s)][:2] * 3  # 6 items of the same size
    n = 0
    for x, y in getitems_dataset.loader(items, batch_size=2, workers=2):
        check(tuple(x.shape)[:2] == (2, 3) and x.is_shared(),
              f"batch {n}: one {tuple(x.shape)} tensor in shared memory from the worker")
        for k in range(2):
            idx = y[k].item()
            check(np.array_equal(x[k].permute(1, 2, 0).numpy(), pil(pngs[idx])),
                  f"batch {n} image {k} equals Pillow's decode of {os.path.basename(pngs[idx])}")
        n += 1
    check(n == 3, f"3 batches of 2 ({n})")


DALI_CHILD = r'''
import ctypes, os, sys
sys.path.insert(0, sys.argv[1])
import l3
import dali_source
files = sys.argv[2:]
ok = lambda c, w: print(("ok   " if c else "FAIL ") + w, flush=True)
ok(l3.built_with_cuda and l3.cuda_available(), "the extension on the fake CUDA runtime sees a GPU")
src = dali_source.L3Source(files, batch_size=2)
bufs = [open(f, "rb").read() for f in files]
want = l3.decode_batch(bufs, layout="NHWC", dtype="uint8", channels=3).numpy()
batches = []
while True:
    try:
        batches.append(src())
    except StopIteration:
        break
ok(len(batches) == (len(files) + 1) // 2, f"{len(batches)} batches, then StopIteration")
pos = 0
for b in batches:
    n = b.shape[0]
    ok(b.device == "cuda:0" and b.__dlpack_device__() == (2, 0), f"batch on {b.device}")
    cai = b.__cuda_array_interface__
    ok(cai["shape"] == (n,) + want.shape[1:] and cai["typestr"] == "|u1" and cai["strides"] is None,
       f"CUDA array interface {cai['shape']} {cai['typestr']}")
    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                    ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                    ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                    ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.c_void_p),
                    ("byte_offset", ctypes.c_uint64)]
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    cap = b.__dlpack__()
    t = DLTensor.from_address(get(cap, b"dltensor"))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    ok(t.device_type == 2 and t.device_id == 0 and t.data == cai["data"][0] and
       shape == cai["shape"] and (t.code, t.bits, t.lanes) == (1, 8, 1) and not t.strides,
       f"DLPack capsule: CUDA device 0, uint8 {shape}, the same memory")
    del cap
    host = l3._l3._copy_to_host(b)
    ok(host == want[pos:pos + n].tobytes(), f"batch bytes equal the CPU decode (images {pos}..{pos + n - 1})")
    pos += n
again = src()
ok(again.shape[0] == 2, "the next epoch starts again at the first file")
# decode_batch(out=) with GPU memory from DLPack (here another GPU batch): the
# decode runs on that device, into that memory
dst = l3.decode_batch([bufs[2], bufs[2]], device="cuda", layout="NHWC", channels=3)
r = l3.decode_batch(bufs[:2], layout="NHWC", channels=3, out=dst)
ok(r.device == "cuda:0" and l3._l3._copy_to_host(dst) == want[:2].tobytes(),
   "decode_batch(out=a CUDA tensor through DLPack) decodes on the GPU into its memory")
'''


def test_dali(tmp):
    ext = os.environ.get("L3_FAKECUDA_EXT")
    src = os.environ.get("L3_PYTHON_SRC")
    if not ext or not os.path.exists(ext) or not src:
        check(False, f"L3_FAKECUDA_EXT names the fake-runtime extension ({ext!r})")
        return
    pkg = os.path.join(tmp, "pkg", "l3")
    os.makedirs(pkg)
    for f in os.listdir(src):
        if f.endswith((".py", ".pyi")):
            shutil.copy(os.path.join(src, f), pkg)
    shutil.copy(ext, os.path.join(pkg, os.path.basename(ext)))
    pngs = sample_pngs()
    l3s = encode_all(tmp, pngs)
    same = l3s[:2] + l3s[:1]  # 3 images of one size: batches of 2, then 1
    env = dict(os.environ)
    env["PYTHONPATH"] = HERE
    env["FAKECUDA_DEVICES"] = "1"
    r = subprocess.run([sys.executable, "-c", DALI_CHILD, os.path.join(tmp, "pkg")] + same,
                       capture_output=True, text=True, env=env)
    print(r.stderr[-3000:], end="", file=sys.stderr)
    lines = r.stdout.splitlines()
    for x in lines:  # each of the child's checks is a case here
        if x.startswith(("ok   ", "FAIL ")):
            check(x.startswith("ok"), "DALI source process: " + x[5:])
        else:
            print("# " + x)
    check(r.returncode == 0, "the DALI source process exits 0")
    check(len(lines) >= 12 and not any(x.startswith("FAIL") for x in lines),
          f"{sum(x.startswith('ok') for x in lines)} checks passed in the DALI source process")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    tests = {"webdataset": test_webdataset, "getitems": test_getitems, "dali": test_dali}
    if what not in tests:
        print(f"usage: {sys.argv[0]} {'|'.join(tests)}", file=sys.stderr)
        return 2
    print("TAP version 13", flush=True)
    with tempfile.TemporaryDirectory(prefix=f"l3-recipe-{what}.") as tmp:
        tests[what](tmp)
    print(f"1..{cases}")
    if failures:
        print(f"# {len(failures)} check(s) failed")
        return 1
    print("# all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
