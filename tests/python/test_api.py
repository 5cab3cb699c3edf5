"""The l3 package's Python API edges (run by meson test with the build tree's
package, and by test_installed.sh against a pip-installed one):
signatures and docstrings, the .pyi stub, Batch pickling and its buffer,
strict/DecodeWarning, decode_list for mixed sizes, decode(channels=, squeeze=)."""
import ast
import inspect
import os
import pickle
import sys
import unittest
import warnings

import numpy as np

import l3

HERE = os.path.dirname(os.path.abspath(__file__))
RNG = np.random.default_rng(20261201)


def image(h, w, c, dtype=np.uint8):
    hi = 65536 if dtype == np.uint16 else 256
    shape = (h, w) if c == 0 else (h, w, c)
    return RNG.integers(0, hi, size=shape, dtype=np.int64).astype(dtype)


def pyi_functions():
    """name -> list of parameter names, from the installed __init__.pyi."""
    path = os.path.join(os.path.dirname(l3.__file__), "__init__.pyi")
    tree = ast.parse(open(path).read())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            a = node.args
            out[node.name] = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
        if isinstance(node, ast.ClassDef):
            out[node.name] = None
    return out


class Introspection(unittest.TestCase):
    def test_signatures_match_the_stub_and_docstrings_explain(self):
        stub = pyi_functions()
        funcs = [n for n in l3.__all__ if callable(getattr(l3, n))
                 and not isinstance(getattr(l3, n), type)]
        self.assertGreaterEqual(len(funcs), 7)
        for name in funcs:
            f = getattr(l3, name)
            sig = inspect.signature(f)  # raises ValueError without __text_signature__
            self.assertIn(name, stub, f"{name} missing from __init__.pyi")
            self.assertEqual(list(sig.parameters), stub[name], name)
            self.assertGreater(len(inspect.getdoc(f) or ""), 80, f"{name}: docstring too short")
        for name in ("Batch", "Error", "DecodeWarning"):
            self.assertIn(name, stub)
            self.assertTrue(inspect.getdoc(getattr(l3, name)), name)
        for name in ("numpy", "__dlpack__", "__dlpack_device__", "__reduce_ex__"):
            m = getattr(l3.Batch, name)
            inspect.signature(m)
            self.assertTrue(m.__doc__, name)
        for name in ("shape", "dtype", "device", "status", "errors", "ok"):
            self.assertTrue(getattr(l3.Batch, name).__doc__, name)
        self.assertTrue(l3.pillow.__doc__ and l3.pillow.L3ImageFile.__doc__)

    def test_help_of_decode_batch_explains_arguments_shapes_statuses(self):
        doc = inspect.getdoc(l3.decode_batch)
        for word in ("bufs", "device", "layout", "dtype", "channels", "mean", "std",
                     "threads", "strict", "stream", "(N, C, H, W)", "(N, H, W, C)",
                     "status", "zero-filled", "decode_list"):
            self.assertIn(word, doc)
        self.assertIn("INDICES", inspect.getdoc(l3.decode))  # the palette trap, said plainly

    def test_version(self):
        self.assertRegex(l3.__version__, r"^\d+\.\d+\.\d+$")


class Batches(unittest.TestCase):
    def setUp(self):
        self.imgs = [image(24, 40, 3) for _ in range(3)]
        self.bufs = [l3.encode(a) for a in self.imgs]

    def test_cpu_batch_pickles_with_every_protocol(self):
        b = l3.decode_batch(self.bufs, layout="NHWC")
        want = np.stack(self.imgs)
        for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
            c = pickle.loads(pickle.dumps(b, protocol=proto))
            self.assertIsInstance(c, l3.Batch)
            self.assertEqual((c.shape, c.dtype, c.device, c.status, c.errors),
                             (b.shape, b.dtype, b.device, b.status, b.errors))
            self.assertTrue(np.array_equal(np.from_dlpack(c), want), proto)
        # protocol 5 with a buffer callback: the tensor goes out of band, not in the pickle
        bufs = []
        data = pickle.dumps(b, protocol=5, buffer_callback=bufs.append)
        self.assertEqual(len(bufs), 1)
        self.assertLess(len(data), 1000)
        c = pickle.loads(data, buffers=bufs)
        self.assertTrue(np.array_equal(c.numpy(), want))

    def test_failed_slots_survive_pickling(self):
        bufs = [self.bufs[0], b"junk", self.bufs[1]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", l3.DecodeWarning)
            b = l3.decode_batch(bufs, dtype="float32")
        c = pickle.loads(pickle.dumps(b))
        self.assertEqual(c.status, [0, 4, 0])
        self.assertEqual(c.errors, b.errors)
        self.assertFalse(c.ok)
        self.assertTrue(np.array_equal(c.numpy(), b.numpy()))

    def test_bad_pickles_are_refused(self):
        rebuild = l3._l3._batch_rebuild
        with self.assertRaises(ValueError):
            rebuild(b"\0" * 10, (1, 1, 1, 11), "uint8", [0], [None])  # size mismatch
        with self.assertRaises(ValueError):
            rebuild(b"\0" * 4, (1, 1, 1, 4), "int7", [0], [None])
        with self.assertRaises(ValueError):
            rebuild(b"\0" * 4, (1, 1, 1, 4), "uint8", [0, 0], [None])
        with self.assertRaises(ValueError):
            rebuild(b"\0" * 4, (-1, 1, 1, 4), "uint8", [0], [None])

    def test_buffer_protocol(self):
        b = l3.decode_batch(self.bufs, layout="NCHW", dtype="float16")
        m = memoryview(b)
        self.assertEqual(m.shape, b.shape)
        self.assertEqual(m.format, "e")
        self.assertTrue(np.array_equal(np.asarray(m), b.numpy()))

    def test_strict_none_warns_false_is_silent_true_raises(self):
        bufs = [self.bufs[0], self.bufs[1][:-40], b"junk"]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            b = l3.decode_batch(bufs)
        msgs = [str(x.message) for x in w if issubclass(x.category, l3.DecodeWarning)]
        self.assertEqual(len(msgs), 1)
        self.assertIn("2 of 3", msgs[0])
        self.assertIn("zero-filled", msgs[0])
        self.assertIn("[2]", msgs[0])
        self.assertEqual(b.status[0], 0)
        self.assertFalse(b.numpy()[2].any())
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            b = l3.decode_batch(bufs, strict=False)  # no warning
            self.assertFalse(b.ok)
            l3.decode_batch(self.bufs)  # nothing failed: no warning
        with self.assertRaises(l3.Error) as cm:
            l3.decode_batch(bufs, strict=True)
        self.assertIn("2 of 3", str(cm.exception))


class DecodeList(unittest.TestCase):
    def test_mixed_sizes_types_and_depths(self):
        imgs = [image(17, 30, 3), image(40, 9, 0), image(5, 6, 4, np.uint16), image(64, 65, 2)]
        bufs = [l3.encode(a) for a in imgs]
        out = l3.decode_list(bufs)
        self.assertEqual(len(out), 4)
        for a, o in zip(imgs, out):
            want = a if a.ndim == 3 else a[..., None]
            self.assertEqual(o.dtype, a.dtype)
            self.assertTrue(np.array_equal(o, want))
        sq = l3.decode_list(bufs, squeeze=True)
        self.assertEqual(sq[1].shape, (40, 9))
        chw = l3.decode_list(bufs, layout="CHW", dtype="float32", channels=3)
        self.assertEqual([o.shape for o in chw], [(3, 17, 30), (3, 40, 9), (3, 5, 6), (3, 64, 65)])
        # each equals decode_batch of that image alone
        for buf, o in zip(bufs, chw):
            one = l3.decode_batch([buf], layout="NCHW", dtype="float32", channels=3).numpy()[0]
            self.assertTrue(np.array_equal(o, one))

    def test_failed_images_are_none(self):
        good = l3.encode(image(8, 8, 1))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = l3.decode_list([good, b"junk", good[:-10]])
        self.assertIsNotNone(out[0])
        self.assertIsNone(out[1])
        self.assertIsNone(out[2])
        self.assertTrue(any("2 of 3" in str(x.message) for x in w))
        with self.assertRaises(l3.Error):
            l3.decode_list([good, b"junk"], strict=True)
        self.assertEqual(l3.decode_list([]), [])


class DecodeOptions(unittest.TestCase):
    def test_squeeze_gives_gray_like_pil(self):
        a = image(12, 13, 0)
        self.assertEqual(l3.decode(l3.encode(a), squeeze=True).shape, (12, 13))
        self.assertEqual(l3.decode(l3.encode(a)).shape, (12, 13, 1))
        rgb = image(12, 13, 3)
        self.assertEqual(l3.decode(l3.encode(rgb), squeeze=True).shape, (12, 13, 3))

    def test_channels_converts_like_decode_batch(self):
        for c in (0, 2, 3, 4):
            for dt in (np.uint8, np.uint16):
                buf = l3.encode(image(9, 11, c, dt))
                for ch in (1, 3, 4):
                    got = l3.decode(buf, channels=ch)
                    want = l3.decode_batch([buf], layout="NHWC", channels=ch,
                                           dtype="uint16" if dt == np.uint16 else "uint8").numpy()[0]
                    self.assertEqual(got.dtype, dt)
                    self.assertTrue(np.array_equal(got, want), (c, dt, ch))
        with self.assertRaises(ValueError):
            l3.decode(buf, channels=2)


class BatchMemory(unittest.TestCase):
    """Freed CPU batches' memory kept for the next batches: l3.batch_memory."""

    def setUp(self):
        self.default = l3.batch_memory()["limit"]
        l3.batch_memory(limit=0)  # nothing kept from earlier tests
        l3.batch_memory(limit=self.default)
        self.imgs = [image(256, 256, 3) for _ in range(2)]
        self.bufs = [l3.encode(a) for a in self.imgs]
        self.one = 256 * 256 * 3 * 4  # bytes of one image as float32

    def tearDown(self):
        l3.batch_memory(limit=self.default)

    def decode(self, bufs, n=1, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", l3.DecodeWarning)
            return l3.decode_batch(list(bufs) * n, layout="NHWC", **kw)

    def test_default_and_bad_limits(self):
        m = l3.batch_memory()
        self.assertEqual(set(m), {"held", "blocks", "limit", "max_blocks", "hits", "misses"})
        self.assertEqual(m["limit"], 512 << 20)
        self.assertEqual(m["max_blocks"], 16)
        with self.assertRaises(ValueError):
            l3.batch_memory(limit=-1)
        with self.assertRaises(TypeError):
            l3.batch_memory(limit="1G")
        with self.assertRaises(OverflowError):
            l3.batch_memory(limit=1 << 80)
        self.assertEqual(l3.batch_memory()["limit"], 512 << 20)

    def test_a_kept_block_is_reused_and_all_of_it_rewritten(self):
        l3.batch_memory(limit=0)
        want = self.decode(self.bufs, dtype="float32").numpy().copy()
        want16 = self.decode(self.bufs, dtype="float16").numpy().copy()
        l3.batch_memory(limit=self.default)
        b = self.decode(self.bufs, dtype="float32", mean=(9, 9, 9), std=(2, 2, 2))
        self.assertEqual(b.numpy().nbytes, 2 * self.one)
        ptr = b.data_ptr
        del b
        m = l3.batch_memory()
        self.assertEqual((m["blocks"], m["held"]), (1, 2 * self.one))
        # the same block for a batch whose second image fails: that slot is zeros,
        # not the floats left in the block
        c = self.decode([self.bufs[0], b"junk"], dtype="float32")
        self.assertEqual(c.data_ptr, ptr)
        self.assertEqual(l3.batch_memory()["hits"], m["hits"] + 1)
        self.assertEqual(c.status, [0, 4])
        self.assertTrue(np.array_equal(c.numpy()[0], want[0]))
        self.assertFalse(c.numpy()[1].any())
        del c
        # a batch half the block's size takes it too, and sees only its own bytes
        d = self.decode(self.bufs, dtype="float16")
        self.assertEqual(d.data_ptr, ptr)
        self.assertEqual(d.numpy().nbytes, self.one)
        self.assertEqual(memoryview(d).nbytes, self.one)
        self.assertTrue(np.array_equal(d.numpy(), want16))
        del d
        # a smaller one does not: it gets memory of its own
        m = l3.batch_memory()
        e = self.decode(self.bufs[:1], dtype="float16")  # a quarter of the block
        self.assertNotEqual(e.data_ptr, ptr)
        self.assertEqual(l3.batch_memory()["hits"], m["hits"])
        self.assertEqual(l3.batch_memory()["blocks"], 1)

    def test_blocks_and_bytes_are_bounded_least_recently_freed_first(self):
        l3.batch_memory(limit=0)
        l3.batch_memory(limit=self.default)
        batches = [self.decode(self.bufs[:1], n, dtype="float32") for n in range(3, 23)]
        sizes = [b.numpy().nbytes for b in batches]
        self.assertEqual(l3.batch_memory()["blocks"], 0)
        while batches:
            batches.pop(0)  # freed in order: n = 3 first
        m = l3.batch_memory()
        self.assertEqual(m["blocks"], 16)
        self.assertEqual(m["held"], sum(sizes[-16:]))
        m = l3.batch_memory(limit=sum(sizes[-3:]))
        self.assertEqual((m["blocks"], m["held"]), (3, sum(sizes[-3:])))
        # a batch larger than the limit is freed, not kept
        b = self.decode(self.bufs, 40, dtype="float32")  # 80 images, above the limit
        del b
        self.assertEqual(l3.batch_memory()["held"], sum(sizes[-3:]))
        # under 1 MiB nothing is kept
        l3.batch_memory(limit=self.default)
        b = self.decode(self.bufs[:1], dtype="uint8")
        del b
        self.assertEqual(l3.batch_memory()["held"], sum(sizes[-3:]))
        m = l3.batch_memory(limit=0)
        self.assertEqual((m["blocks"], m["held"]), (0, 0))
        b = self.decode(self.bufs, 4, dtype="float32")
        del b
        self.assertEqual(l3.batch_memory()["blocks"], 0)

    @unittest.skipUnless(hasattr(os, "fork"), "needs fork()")
    def test_a_forked_child_starts_with_nothing_kept(self):
        b = self.decode(self.bufs, 4, dtype="float32")
        del b
        self.assertEqual(l3.batch_memory()["blocks"], 1)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, then decode into memory of its own
            try:
                m0 = l3.batch_memory()
                b = self.decode(self.bufs, 4, dtype="float32")
                ok = np.array_equal(b.numpy()[4:6], self.decode(self.bufs, dtype="float32").numpy())
                del b
                m1 = l3.batch_memory()
                os.write(w, repr((m0["blocks"], m0["held"], m1["blocks"], ok)).encode())
            finally:
                os._exit(0)
        os.close(w)
        got = os.read(r, 200)
        os.close(r)
        os.waitpid(pid, 0)
        self.assertEqual(ast.literal_eval(got.decode()), (0, 0, 2, True))  # its own two
        self.assertEqual(l3.batch_memory()["blocks"], 1)  # the parent's are still kept


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    import tap  # noqa: E402 - each case in TAP, skips with their reasons

    tap.main()
