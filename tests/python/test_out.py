"""decode(out=) and decode_batch(out=): decoding into the caller's memory
(numpy arrays, torch tensors through DLPack, plain byte buffers), the checks
of shape, dtype, contiguity, alignment and writability, the Batch that views
out, and the reuse of freed batch memory. Run by meson test with the build
tree's package and by test_installed.sh against a pip-installed one; reports
in TAP (tests/common/tap.py)."""
import gc
import os
import sys
import unittest

import numpy as np

import l3

RNG = np.random.default_rng(20261202)


def image(h, w, c, dtype=np.uint8):
    hi = 65536 if dtype == np.uint16 else 256
    shape = (h, w) if c == 0 else (h, w, c)
    return RNG.integers(0, hi, size=shape, dtype=np.int64).astype(dtype)


RGB = image(45, 70, 3)
RGB_L3 = l3.encode(RGB, tile=32)
GRAY16 = image(33, 40, 1, np.uint16)
GRAY16_L3 = l3.encode(GRAY16)

try:
    import torch
except ImportError:  # torch is optional for the package; its cases say so
    torch = None


class DecodeOut(unittest.TestCase):
    def test_numpy_out_is_filled_and_returned(self):
        out = np.full(RGB.shape, 7, np.uint8)
        r = l3.decode(RGB_L3, out=out)
        self.assertIs(r, out)
        self.assertTrue(np.array_equal(out, RGB))
        g = np.zeros(GRAY16.shape[:2], np.uint16)  # (H, W) for one channel
        l3.decode(GRAY16_L3, out=g)
        self.assertTrue(np.array_equal(g, GRAY16[:, :, 0]))

    def test_channels_into_out_equal_the_converting_decode(self):
        for ch in (1, 3, 4):
            want = l3.decode(RGB_L3, channels=ch)
            out = np.empty(RGB.shape[:2] + (ch,), np.uint8)
            l3.decode(RGB_L3, channels=ch, out=out)
            self.assertTrue(np.array_equal(out, want), ch)
            batch = l3.decode_batch([RGB_L3], layout="NHWC", channels=ch).numpy()[0]
            self.assertTrue(np.array_equal(want, batch), f"decode vs decode_batch, {ch}")

    def test_byte_buffer_of_the_exact_size(self):
        buf = bytearray(RGB.nbytes)
        l3.decode(RGB_L3, out=buf)
        self.assertEqual(bytes(buf), RGB.tobytes())
        with self.assertRaisesRegex(ValueError, "needs"):
            l3.decode(RGB_L3, out=bytearray(RGB.nbytes - 1))

    def test_bad_outs_are_refused_with_the_reason(self):
        cases = [
            (np.zeros((45, 70, 4), np.uint8), "shape \\(45, 70, 4\\).*\\(45, 70, 3\\)"),
            (np.zeros((45, 70, 3), np.uint16), "element type uint16"),
            (np.zeros((45, 140, 3), np.uint8)[:, ::2], "C-contiguous"),
            (np.zeros((45, 70, 3), np.float64), "not uint8/uint16"),
            (bytes(RGB.nbytes), "writable"),
            (3.5, "buffer protocol"),
        ]
        ro = np.zeros(RGB.shape, np.uint8)
        ro.setflags(write=False)
        cases.append((ro, "writable"))
        for out, msg in cases:
            with self.assertRaisesRegex((ValueError, TypeError), msg):
                l3.decode(RGB_L3, out=out)

    def test_corrupt_input_raises_and_leaves_out_untouched_header(self):
        out = np.zeros(RGB.shape, np.uint8)
        with self.assertRaises(l3.Error):
            l3.decode(RGB_L3[:-10], out=out)
        with self.assertRaises(l3.Error):  # trailing bytes, as without out
            l3.decode(RGB_L3 + b"x", channels=3, out=out)

    @unittest.skipIf(torch is None, "torch is not importable (Debian python3-torch)")
    def test_torch_tensor_out_through_dlpack(self):
        t = torch.zeros(RGB.shape, dtype=torch.uint8)
        self.assertIs(l3.decode(RGB_L3, out=t), t)
        self.assertTrue(np.array_equal(t.numpy(), RGB))
        with self.assertRaisesRegex(ValueError, "C-contiguous"):
            l3.decode(RGB_L3, out=torch.zeros(70, 45, 3, dtype=torch.uint8).transpose(0, 1))


FORMATS = [dict(layout=lay, dtype=dt, channels=ch, **norm)
           for lay in ("NCHW", "NHWC") for dt in ("uint8", "uint16", "float32", "float16")
           for ch in (None, 1, 3, 4)
           for norm in ([{}, dict(mean=(0.4, 0.5, 0.6), std=(0.2, 0.25, 0.3))]
                        if dt.startswith("float") else [{}])]
NP = {"uint8": np.uint8, "uint16": np.uint16, "float32": np.float32, "float16": np.float16}


class DecodeBatchOut(unittest.TestCase):
    def test_every_format_into_out_equals_a_new_batch(self):
        bufs = [RGB_L3, l3.encode(image(45, 70, 3), tile=16)]
        for fmt in FORMATS:
            want = l3.decode_batch(bufs, **fmt).numpy()
            out = np.full(want.shape, 0xA5, NP[fmt["dtype"]]) if fmt["dtype"] in ("uint8", "uint16") \
                else np.full(want.shape, np.nan, NP[fmt["dtype"]])
            b = l3.decode_batch(bufs, out=out, **fmt)
            self.assertTrue(np.array_equal(out, want), fmt)
            self.assertEqual(b.shape, want.shape)
            self.assertTrue(np.shares_memory(b.numpy(), out), "the batch views out")

    def test_dtype_comes_from_out(self):
        out = np.empty((1, 3, 45, 70), np.float32)
        b = l3.decode_batch([RGB_L3], out=out)
        self.assertEqual(b.dtype, "float32")
        self.assertTrue(np.array_equal(out, RGB.transpose(2, 0, 1)[None] / np.float32(255)))
        with self.assertRaisesRegex(ValueError, "element type float32, the output is uint8"):
            l3.decode_batch([RGB_L3], out=out, dtype="uint8")

    def test_bad_outs_are_refused_with_the_reason(self):
        with self.assertRaisesRegex(ValueError, "shape \\(2, 3, 45, 70\\).*\\(1, 3, 45, 70\\)"):
            l3.decode_batch([RGB_L3], out=np.zeros((2, 3, 45, 70), np.uint8))
        raw = np.zeros(1 * 3 * 45 * 70 * 4 + 1, np.uint8)
        unaligned = raw[1:].view(np.float32).reshape(1, 3, 45, 70)
        with self.assertRaisesRegex(ValueError, "aligned"):
            l3.decode_batch([RGB_L3], out=unaligned)
        with self.assertRaisesRegex(ValueError, "host memory but device is cuda"):
            l3.decode_batch([RGB_L3], out=np.zeros((1, 3, 45, 70), np.uint8), device="cuda")
        # out is another l3.Batch (read through the buffer protocol on the CPU;
        # the CUDA one, through DLPack, in tests/gpu test_out_on_the_gpu)
        two = l3.decode_batch([RGB_L3, RGB_L3])
        with self.assertRaisesRegex(ValueError, "shape \\(2, 3, 45, 70\\).*\\(1, 3, 45, 70\\)"):
            l3.decode_batch([RGB_L3], out=two)

    def test_batch_keeps_out_alive_and_locked(self):
        want = l3.decode_batch([RGB_L3]).numpy()
        out = np.zeros(want.shape, np.uint8)
        b = l3.decode_batch([RGB_L3], out=out)
        del out
        gc.collect()
        self.assertTrue(np.array_equal(b.numpy(), want))
        raw = bytearray(want.nbytes)
        b2 = l3.decode_batch([RGB_L3], out=raw)
        with self.assertRaises(BufferError):  # the batch holds a view: no resize under it
            raw.extend(b"x")
        del b2
        raw.extend(b"x")  # released with the batch

    def test_failed_image_in_out_is_zeroed_with_a_status(self):
        out = np.full((2, 45, 70, 3), 9, np.uint8)
        b = l3.decode_batch([RGB_L3, RGB_L3[:200]], layout="NHWC", out=out, strict=False)
        self.assertEqual(b.status[0], 0)
        self.assertNotEqual(b.status[1], 0)
        self.assertTrue(np.array_equal(out[0], RGB) and not out[1].any())

    @unittest.skipIf(torch is None, "torch is not importable (Debian python3-torch)")
    def test_torch_out_shared_memory(self):
        t = torch.empty((2, 3, 45, 70), dtype=torch.float16).share_memory_()
        l3.decode_batch([RGB_L3, RGB_L3], out=t, mean=0.5, std=0.25)
        want = torch.from_dlpack(l3.decode_batch([RGB_L3, RGB_L3], dtype="float16", mean=0.5,
                                                 std=0.25))
        self.assertTrue(torch.equal(t, want))
        with self.assertRaisesRegex(ValueError, "C-contiguous"):
            l3.decode_batch([RGB_L3], out=torch.empty((1, 70, 45, 3)).transpose(1, 2))

    def test_reused_batch_memory_gives_the_right_pixels(self):
        """Freed batch memory is reused for the next batch that fits: the
        contents must be the new batch's, failed slots zero."""
        big = [l3.encode(image(300, 400, 3)) for _ in range(3)]
        for _ in range(3):
            a = l3.decode_batch(big, dtype="float32")
            del a
            b = l3.decode_batch(big[:2] + [b"broken"], dtype="float32", strict=False)
            want = np.stack([l3.decode(x).transpose(2, 0, 1) for x in big[:2]]) / np.float32(255)
            self.assertTrue(np.array_equal(b.numpy()[:2], want))
            self.assertFalse(b.numpy()[2].any())
            del b


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    import tap  # noqa: E402 - each case in TAP, skips with their reasons

    tap.main()
