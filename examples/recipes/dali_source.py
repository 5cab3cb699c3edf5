#!/usr/bin/python3
"""Recipe: NVIDIA DALI fed by l3.decode_batch on the GPU.

DALI's ``fn.external_source`` takes a callable that returns one batch; with
``device="gpu"`` and ``batch=True`` a dense GPU tensor (anything with
``__cuda_array_interface__`` or DLPack) is taken as it is. L3Source reads the
next batch of .l3 files and decodes it on the GPU in one call; the l3.Batch
exports its memory by DLPack, so DALI receives the decoded tensor without a
copy:

    from nvidia.dali import pipeline_def, fn
    src = L3Source(files, batch_size=32)

    @pipeline_def(batch_size=32, num_threads=2, device_id=0)
    def pipe():
        images = fn.external_source(source=src, device="gpu", batch=True, layout="HWC")
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                        mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                        std=[0.229 * 255, 0.224 * 255, 0.225 * 255])

DALI is not a Debian package and cannot be installed here, and this machine
has no GPU: the test of this recipe (test_recipes.py) runs L3Source's code path
against the extension built on the CPU-executed CUDA runtime of tests/gpu
(python-fakecuda) and checks the batch DALI would get through its DLPack and
CUDA array interfaces, byte for byte against the CPU decode. With a GPU and
DALI installed, ``dali_source.py FILE.l3...`` runs the pipeline above.
"""
import sys

import l3


class L3Source:
    """external_source callable: the files in order, `batch_size` at a time,
    decoded on the GPU in DALI's HWC uint8 layout (or another decode_batch
    format), returned as an l3.Batch (DLPack / __cuda_array_interface__).
    Raises StopIteration at the end of the list, which ends DALI's epoch."""

    def __init__(self, files, batch_size, device="cuda", layout="NHWC", dtype="uint8",
                 channels=3, stream=None):
        self.files, self.batch_size = list(files), batch_size
        self.kw = dict(device=device, layout=layout, dtype=dtype, channels=channels,
                       strict=True)
        if stream is not None:
            self.kw["stream"] = stream
        self.pos = 0

    def __call__(self, info=None):
        if self.pos >= len(self.files):
            self.pos = 0
            raise StopIteration
        names = self.files[self.pos:self.pos + self.batch_size]
        self.pos += len(names)
        bufs = []
        for p in names:
            with open(p, "rb") as f:
                bufs.append(f.read())
        return l3.decode_batch(bufs, **self.kw)


def main(files):
    from nvidia.dali import fn, pipeline_def, types  # needs DALI and a GPU
    src = L3Source(files, batch_size=min(4, len(files)))

    @pipeline_def(batch_size=min(4, len(files)), num_threads=2, device_id=0)
    def pipe():
        images = fn.external_source(source=src, device="gpu", batch=True, layout="HWC")
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW")

    p = pipe()
    p.build()
    out, = p.run()
    print(len(out), "images,", out.as_tensor().shape())


if __name__ == "__main__":
    main(sys.argv[1:])
