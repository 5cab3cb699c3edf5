"""The `l3` module's device="cuda" path, run on the CPU-executed CUDA runtime
(tests/gpu/fakecuda; meson test python-fakecuda, FAKECUDA_DEVICES=4): bytes
equal the CPU path, PyTorch's current device and stream are used, explicit
devices and streams, DLPack / CUDA array interface stream semantics, no
per-batch cudaMalloc/cudaFree or device synchronisation, the host pack of a
batch overlapping the previous decode, threads, and CUDA after fork().

The fake runtime is reached through ctypes in the extension itself (its
symbols are exported in this test build); a stand-in `torch` module plays
PyTorch's part (the real one here has no CUDA), with the attributes the
module uses: torch.cuda.is_initialized/current_device/current_stream/
_is_in_bad_fork.
"""
import ctypes
import os
import subprocess
import sys
import textwrap
import threading
import types
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_l3py as base  # noqa: E402  (make_set, expected_batch, KINDS)

import l3  # noqa: E402

LIB = ctypes.CDLL(l3._l3.__file__)


class Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in (
        "device_syncs", "host_waits", "mallocs", "frees", "async_allocs", "async_frees",
        "host_allocs", "host_frees", "launches", "ops_enqueued", "ops_executed", "races",
        "faults", "contexts_created")]


LIB.fakecuda_last_launch_stream.restype = ctypes.c_void_p
LIB.fakecuda_last_message.restype = ctypes.c_char_p
LIB.fakecuda_pending_ops.restype = ctypes.c_size_t


def stats():
    s = Stats()
    LIB.fakecuda_get_stats(ctypes.byref(s))
    return s


def cuda(call, *args):
    r = getattr(LIB, call)(*args)
    assert r == 0, f"{call}: cudaError {r}"


def set_device(d):
    cuda("cudaSetDevice", ctypes.c_int(d))


def new_stream(device, nonblocking=True):
    cur = ctypes.c_int()
    cuda("cudaGetDevice", ctypes.byref(cur))
    set_device(device)
    h = ctypes.c_void_p()
    cuda("cudaStreamCreateWithFlags", ctypes.byref(h), ctypes.c_uint(1 if nonblocking else 0))
    set_device(cur.value)
    return h.value


def download(b):
    """What a consumer does: sync on the CAI stream, copy to the host."""
    cai = b.__cuda_array_interface__
    s = cai["stream"]
    if s is not None:
        cuda("cudaStreamSynchronize", ctypes.c_void_p(0 if s == 1 else s))
    dtype = np.dtype(cai["typestr"])
    out = np.empty(cai["shape"], dtype)
    cuda("cudaMemcpy", ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(b.data_ptr),
         ctypes.c_size_t(out.nbytes), ctypes.c_int(2))
    return out


class FakeTorchStream:
    def __init__(self, h):
        self.cuda_stream = h


def stand_in_torch(device, stream):
    t = types.ModuleType("torch")
    t.cuda = types.SimpleNamespace(
        is_initialized=lambda: True, current_device=lambda: device,
        current_stream=lambda dev=None: FakeTorchStream(stream),
        _is_in_bad_fork=lambda: False)
    return t


class StandInTorch:
    """sys.modules['torch'] replaced for the duration of a with block."""

    def __init__(self, device, stream):
        self.mod = stand_in_torch(device, stream)

    def __enter__(self):
        self.saved = sys.modules.get("torch")
        sys.modules["torch"] = self.mod

    def __exit__(self, *a):
        if self.saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = self.saved


def no_races(test):
    s = stats()
    test.assertEqual(s.races, test.start.races, LIB.fakecuda_last_message().decode())
    test.assertEqual(s.faults, test.start.faults, LIB.fakecuda_last_message().decode())


class CudaPath(unittest.TestCase):
    def setUp(self):
        self.start = stats()

    def test_cuda_matches_cpu_every_format(self):
        self.assertTrue(l3.cuda_available())
        for kind in base.KINDS:
            bufs = base.make_set(kind)
            for layout in ("NCHW", "NHWC"):
                for dtype in ("uint8", "uint16", "float32", "float16"):
                    for channels in (None, 1, 3, 4):
                        kw = dict(layout=layout, dtype=dtype, channels=channels)
                        if dtype.startswith("float"):
                            kw.update(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
                        g = l3.decode_batch(bufs, device="cuda:0", **kw)
                        c = l3.decode_batch(bufs, device="cpu", **kw)
                        self.assertEqual(g.device, "cuda:0")
                        self.assertEqual(g.__dlpack_device__(), (2, 0))
                        self.assertTrue(g.ok, g.errors)
                        self.assertTrue(np.array_equal(download(g), np.from_dlpack(c)),
                                        f"{kind} {kw}")
        no_races(self)

    def test_statuses_wait_for_the_batch_and_strict(self):
        bufs = base.make_set("rgb8", n=4)
        bad = bytearray(bufs[1])
        bad[-5] ^= 0xFF
        bad[-60] ^= 0x3C
        batch = [bufs[0], bytes(bad), bufs[2][:-50], b"junk" * 20, bufs[3]]
        g = l3.decode_batch(batch, device="cuda", dtype="float32")
        self.assertEqual(g.status, [0, 9, 3, 4, 0])
        self.assertIn("corrupt", g.errors[1].lower())
        a = download(g)
        self.assertTrue(not a[1].any() and not a[2].any() and not a[3].any())
        with self.assertRaises(l3.Error) as cm:
            l3.decode_batch(batch, device="cuda", strict=True)
        self.assertIn("3 of 5", str(cm.exception))
        no_races(self)

    # ---- R5: devices and streams as a PyTorch user means them ----

    def test_cuda_means_the_current_device(self):
        bufs = base.make_set("rgb8", n=2)
        want = np.from_dlpack(l3.decode_batch(bufs))
        result = {}

        def run(dev):
            if dev is not None:
                set_device(dev)
            b = l3.decode_batch(bufs, device="cuda")
            result[dev] = (b.device, download(b))

        for dev in (2, None):
            t = threading.Thread(target=run, args=(dev,))
            t.start()
            t.join()
        self.assertEqual(result[2][0], "cuda:2", "a thread on GPU 2 decoded elsewhere")
        self.assertEqual(result[None][0], "cuda:0")
        for dev in result:
            self.assertTrue(np.array_equal(result[dev][1], want))
        b = l3.decode_batch(bufs, device="cuda:3")
        self.assertEqual(b.device, "cuda:3")
        self.assertEqual(l3.decode_batch(bufs, device=1).device, "cuda:1")
        no_races(self)

    def test_torch_current_device_and_stream(self):
        bufs = base.make_set("rgba8", n=3)
        want = np.from_dlpack(l3.decode_batch(bufs))
        s = new_stream(1)
        with StandInTorch(device=1, stream=s):
            b = l3.decode_batch(bufs, device="cuda")
            self.assertEqual(b.device, "cuda:1", "torch.cuda.current_device() ignored")
            self.assertEqual(LIB.fakecuda_last_launch_stream(), s,
                             "torch.cuda.current_stream() ignored")
            self.assertEqual(b.__cuda_array_interface__["stream"], s)
            self.assertTrue(np.array_equal(download(b), want))
        no_races(self)

    def test_explicit_stream(self):
        bufs = base.make_set("gray16", n=2)
        want = np.from_dlpack(l3.decode_batch(bufs))
        s0, s2 = new_stream(0), new_stream(2)
        for arg in (s0, FakeTorchStream(s0), types.SimpleNamespace(ptr=s0)):
            b = l3.decode_batch(bufs, device="cuda:0", stream=arg)
            self.assertEqual(LIB.fakecuda_last_launch_stream(), s0)
            self.assertTrue(np.array_equal(download(b), want))
        b = l3.decode_batch(bufs, device="cuda:2", stream=s2)
        self.assertEqual(b.device, "cuda:2")
        self.assertTrue(np.array_equal(download(b), want))
        with self.assertRaises(ValueError):  # a stream of GPU 2 for GPU 0
            l3.decode_batch(bufs, device="cuda:0", stream=s2)
        with self.assertRaises(TypeError):
            l3.decode_batch(bufs, device="cuda:0", stream="fast")
        no_races(self)

    def test_dlpack_stream_semantics(self):
        bufs = base.make_set("rgb8", n=3)
        want = np.from_dlpack(l3.decode_batch(bufs))
        prod, cons = new_stream(0), new_stream(0)
        host = np.empty(want.shape, want.dtype)

        def consume(b, stream):  # the consumer's own work on its stream
            cuda("cudaMemcpyAsync", ctypes.c_void_p(host.ctypes.data), ctypes.c_void_p(b.data_ptr),
                 ctypes.c_size_t(host.nbytes), ctypes.c_int(2), ctypes.c_void_p(stream))
            cuda("cudaStreamSynchronize", ctypes.c_void_p(stream))

        before = stats().races
        b = l3.decode_batch(bufs, device="cuda:0", stream=prod)
        self.assertEqual(b.__cuda_array_interface__["stream"], prod)
        cap = b.__dlpack__(stream=cons)  # the consumer's stream waits on the decode
        consume(b, cons)
        self.assertEqual(stats().races, before, LIB.fakecuda_last_message().decode())
        self.assertTrue(np.array_equal(host, want))
        del cap
        # control: without the export the same consumer races the decode
        b2 = l3.decode_batch(bufs, device="cuda:0", stream=prod)
        consume(b2, cons)
        self.assertEqual(stats().races, before + 1, "the race check did not see the race")
        _ = b2.status
        # None means the legacy default stream: a blocking copy then waits
        b3 = l3.decode_batch(bufs, device="cuda:0", stream=prod)
        b3.__dlpack__()
        cuda("cudaMemcpy", ctypes.c_void_p(host.ctypes.data), ctypes.c_void_p(b3.data_ptr),
             ctypes.c_size_t(host.nbytes), ctypes.c_int(2))
        self.assertEqual(stats().races, before + 1, LIB.fakecuda_last_message().decode())
        self.assertTrue(np.array_equal(host, want))
        with self.assertRaises(BufferError):
            b3.__dlpack__(stream=0)
        b3.__dlpack__(stream=-1)  # "no synchronisation": accepted
        _ = b3.status
        self.assertIsNone(b3.__cuda_array_interface__["stream"], "finished: nothing to wait for")
        del b, b2, b3

    def test_out_on_the_gpu(self):
        """decode_batch(out=<CUDA memory>): decodes into it on its GPU, on the
        given stream, after the producer's pending work on it; allocates
        nothing; the returned batch keeps out alive; mismatches are
        ValueErrors."""
        bufs = base.make_set("rgb8", n=3)
        other = bufs[::-1]  # the same shape, other bytes in every slot
        want = np.from_dlpack(l3.decode_batch(other))
        s1, s1b = new_stream(1), new_stream(1)
        a = l3.decode_batch(bufs, device="cuda:1", stream=s1)  # queued, not yet run
        pending = LIB.fakecuda_pending_ops()
        self.assertGreater(pending, 0, "the first decode ran eagerly: no ordering to check")
        b = l3.decode_batch(other, out=a, stream=s1b)  # device follows out: cuda:1
        self.assertEqual(b.device, "cuda:1")
        self.assertEqual(b.data_ptr, a.data_ptr)
        self.assertEqual(LIB.fakecuda_last_launch_stream(), s1b)
        ptr = a.data_ptr
        del a  # b views a's memory and keeps it referenced
        self.assertTrue(np.array_equal(download(b), want))
        self.assertEqual(b.data_ptr, ptr)
        self.assertEqual(list(b.status), [0, 0, 0])
        no_races(self)  # s1b waited for the first decode before writing over it
        # warm (the context's scratch exists): out= allocates nothing
        allocs = stats().async_allocs + stats().mallocs
        b = l3.decode_batch(bufs, out=b, stream=s1b)
        self.assertEqual(stats().async_allocs + stats().mallocs, allocs, "out= allocated")
        self.assertTrue(np.array_equal(download(b), np.from_dlpack(l3.decode_batch(bufs))))

        c = l3.decode_batch(bufs, device="cuda:1", stream=s1b)  # download() waits for s1b
        with self.assertRaisesRegex(ValueError, "out is on cuda:1 but device is cpu"):
            l3.decode_batch(bufs, out=c, device="cpu")
        with self.assertRaisesRegex(ValueError, "another GPU"):
            l3.decode_batch(bufs, out=c, device="cuda:0")
        with self.assertRaises(ValueError):  # another shape
            l3.decode_batch(bufs[:2], out=c)
        with self.assertRaises(ValueError):  # another dtype
            l3.decode_batch(bufs, out=c, dtype="float32")
        self.assertTrue(np.array_equal(download(c), np.from_dlpack(l3.decode_batch(bufs))),
                        "a refused out= changed out's bytes")
        del b, c
        no_races(self)

    def test_no_per_batch_allocation_or_device_sync(self):
        bufs = base.make_set("rgb8", n=4)
        cons = new_stream(0)
        for _ in range(3):  # warm up: context, staging, scratch
            b = l3.decode_batch(bufs, device="cuda:0")
            _ = b.status
            del b
        s0 = stats()
        for _ in range(10):
            b = l3.decode_batch(bufs, device="cuda:0")
            b.__dlpack__(stream=cons)
            _ = b.status
            del b
        cuda("cudaStreamSynchronize", ctypes.c_void_p(cons))
        s1 = stats()
        for f in ("mallocs", "frees", "device_syncs", "host_allocs", "host_frees"):
            self.assertEqual(getattr(s1, f), getattr(s0, f), f"{f} per batch")
        self.assertEqual(s1.async_allocs - s0.async_allocs, 10)
        self.assertEqual(s1.async_frees - s0.async_frees, 10)
        no_races(self)

    def test_host_pack_overlaps_the_previous_decode(self):
        a = base.make_set("rgb8", n=3)
        c = base.make_set("rgba8", n=3)
        s = new_stream(0)
        ba = l3.decode_batch(a, device="cuda:0", stream=s)
        self.assertGreater(LIB.fakecuda_pending_ops(), 0, "the call waited for its decode")
        e0 = stats().ops_executed
        bc = l3.decode_batch(c, device="cuda:0", stream=s)
        self.assertEqual(stats().ops_executed, e0, "batch 2 waited for batch 1")
        bd = l3.decode_batch(a, device="cuda:0", stream=s)  # a third: the first is finished
        for b, bufs in ((ba, a), (bc, c), (bd, a)):
            self.assertTrue(b.ok)
            self.assertTrue(np.array_equal(download(b), np.from_dlpack(l3.decode_batch(bufs))))
        no_races(self)

    def test_threads_share_a_context(self):
        sets = [base.make_set(k, n=3) for k in ("rgb8", "rgba8", "gray8", "rgb16")]
        want = [np.from_dlpack(l3.decode_batch(s)) for s in sets]
        got, errors = {}, []

        def run(k):
            try:
                for _ in range(5):
                    b = l3.decode_batch(sets[k], device="cuda:0")
                    got[k] = (b.status, download(b))
            except Exception as ex:  # pragma: no cover
                errors.append(ex)

        ts = [threading.Thread(target=run, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=300)
            self.assertFalse(t.is_alive())
        self.assertEqual(errors, [])
        for k in range(4):
            self.assertEqual(got[k][0], [0, 0, 0])
            self.assertTrue(np.array_equal(got[k][1], want[k]))
        no_races(self)


def run_script(body, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], env=e,
                          capture_output=True, text=True, timeout=300)


PRELUDE = """
import ctypes, os, sys
sys.path.insert(0, %r)
import test_l3py as base
import l3
LIB = ctypes.CDLL(l3._l3.__file__)
bufs = base.make_set("rgb8", n=2)
""" % os.path.dirname(os.path.abspath(__file__))


class Processes(unittest.TestCase):
    def test_fork_after_cuda_says_decode_in_the_main_process(self):
        # R8: the parent initialised CUDA (as torch does), not through l3
        r = run_script(PRELUDE + """
assert LIB.cudaFree(None) == 0
pid = os.fork()
if pid == 0:
    try:
        l3.decode_batch(bufs, device="cuda")
        os._exit(2)
    except RuntimeError as e:
        print(e, flush=True)
        os._exit(0 if "main process" in str(e) and "fork" in str(e) else 1)
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
""")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        print(f"\n  forked worker: {r.stdout.strip()}", file=sys.stderr)
        # the parent had an l3 context itself
        r = run_script(PRELUDE + """
assert l3.decode_batch(bufs, device="cuda").ok
pid = os.fork()
if pid == 0:
    try:
        l3.decode_batch(bufs, device="cuda")
        os._exit(2)
    except RuntimeError as e:
        os._exit(0 if "main process" in str(e) else 1)
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
""")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_no_driver_and_no_device(self):
        for n, word in (("-1", "driver"), ("0", "device")):
            r = run_script(PRELUDE + """
assert not l3.cuda_available()
try:
    l3.decode_batch(bufs, device="cuda")
    sys.exit(2)
except RuntimeError as e:
    print(e)
    sys.exit(0 if "not usable" in str(e) else 1)
""", env={"FAKECUDA_DEVICES": n})
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(word, r.stdout.lower())


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    import tap  # noqa: E402 - each case in TAP, skips with their reasons

    tap.main()
