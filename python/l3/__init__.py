"""L3 lossless images: decode to numpy, batch decode to DLPack tensors (CPU or CUDA).

The functions and types are implemented in the C extension ``l3._l3``; this
package re-exports them and is the place for pure-Python helpers.
"""
from ._l3 import (  # noqa: F401
    Batch,
    Error,
    __version__,
    built_with_cuda,
    cuda_available,
    decode,
    decode_batch,
    encode,
    info,
)

__all__ = [
    "Batch",
    "Error",
    "built_with_cuda",
    "cuda_available",
    "decode",
    "decode_batch",
    "encode",
    "info",
]
