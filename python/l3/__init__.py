"""L3 lossless images: decode to numpy, batch decode to DLPack tensors (CPU or CUDA).

Functions (the C extension ``l3._l3``, re-exported here):

- ``info(buf)``: the header (size, channels, bit depth, colour model, palette).
- ``decode(buf, threads=None, verify=False, channels=None, squeeze=False)``: one
  image as a numpy array (H, W, C); palette images give indices unless
  ``channels=3``/``4``; ``squeeze=True`` gives gray as (H, W) like PIL.
- ``encode(data, threads=None, tile=0)``: PNG bytes or a numpy array to L3 bytes.
- ``decode_batch(bufs, *, device='cpu', layout='NCHW', dtype='uint8', ...)``: N
  images of one shape into one tensor, an ``l3.Batch`` (DLPack, zero copy).
- ``decode_list(bufs, *, layout='HWC', dtype=None, ...)``: N images of any sizes
  into a list of arrays.
- ``batch_memory(limit=None)``: the host memory kept for the next CPU batches
  (freed batches' blocks, reused without page faults) and its limit.
- ``cuda_available()``; ``built_with_cuda``; ``__version__``.
- ``register_pillow()``: the Pillow plugin (``l3.pillow``), registered by
  ``import l3`` already when Pillow is importable: ``PIL.Image.open`` then reads
  L3 files, recognised by their magic bytes whatever their extension.

Errors: ``l3.Error`` (a ValueError, ``.status`` = the l3 status code). Batch
calls with failed images warn with ``l3.DecodeWarning`` (``strict=True``
raises, ``strict=False`` is silent).
"""
from ._l3 import (  # noqa: F401
    Batch,
    DecodeWarning,
    Error,
    __version__,
    batch_memory,
    built_with_cuda,
    cuda_available,
    decode,
    decode_batch,
    decode_list,
    encode,
    info,
)

__all__ = [
    "Batch",
    "DecodeWarning",
    "Error",
    "batch_memory",
    "built_with_cuda",
    "cuda_available",
    "decode",
    "decode_batch",
    "decode_list",
    "encode",
    "info",
    "register_pillow",
]


def register_pillow():
    """Registers the L3 image plugin with Pillow (``PIL.Image.open`` reads L3).

    Files are recognised by their magic bytes (``L3IM``), not their name: an
    L3 file called ``x.png`` opens too. The image has the mode and pixels Pillow
    gives for the source PNG (see ``l3.pillow``). Idempotent. Raises
    ImportError when Pillow is not installed.
    """
    from . import pillow

    pillow.register()


try:  # Pillow is optional: the plugin is there when Pillow is
    import PIL.Image as _pil_image  # noqa: F401
except ImportError:
    pass
else:
    register_pillow()
