/* module.c — the `l3._l3` extension's method table, l3.Error and module init.
 * The package python/l3/__init__.py re-exports everything here as `l3`. */
#define L3PY_IMPORT_NUMPY
#include "l3py.h"

PyObject *l3py_error;
PyObject *l3py_decode_warning;

PyObject *l3py_raise_status(int st, const char *what)
{
    PyObject *msg = PyUnicode_FromFormat("%s: %s", what, l3_strerror(st));
    if (!msg)
        return NULL;
    PyObject *exc = PyObject_CallFunctionObjArgs(l3py_error, msg, NULL);
    Py_DECREF(msg);
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong(st);
    if (code) {
        PyObject_SetAttrString(exc, "status", code);
        Py_DECREF(code);
    }
    PyErr_SetObject(l3py_error, exc);
    Py_DECREF(exc);
    return NULL;
}

/* Docstrings start with a text signature ("name($module, ...)\n--\n\n") so
 * that inspect.signature() and help() show the real arguments. */
static PyMethodDef methods[] = {
    {"info", l3py_info, METH_O,
     "info($module, buf, /)\n--\n\n"
     "The header of an L3 image, without decoding pixels.\n\n"
     "buf: bytes-like (bytes, bytearray, memoryview, mmap, numpy uint8 array) holding\n"
     "     the file, or at least its header and tile table.\n"
     "Returns a dict: width, height, channels (samples per decoded pixel: 1..4;\n"
     "palette 1), bit_depth (1, 2, 4, 8, 16, as in the source PNG), color ('gray',\n"
     "'gray_alpha', 'rgb', 'rgba', 'palette'), palette (list of (r, g, b, a), or\n"
     "None), palette_alpha_len (entries of the source's tRNS chunk), trns_key (the PNG tRNS colour of a gray/RGB image, or None),\n"
     "tile_width, tile_height, tiles_x, tiles_y.\n"
     "Raises l3.Error (.status: the l3 status code) on a bad or truncated header."},
    {"decode", (PyCFunction)(void (*)(void))l3py_decode, METH_VARARGS | METH_KEYWORDS,
     "decode($module, buf, threads=None, verify=False, channels=None, squeeze=False,\n"
     "       out=None)\n--\n\n"
     "Decodes one L3 image on the CPU (multi-threaded, the GIL released).\n\n"
     "buf:      bytes-like holding the whole file.\n"
     "threads:  worker threads; None or 0: all CPUs.\n"
     "verify:   also check the payload checksum first.\n"
     "channels: None keeps the image's own samples; 1, 3 or 4 converts as\n"
     "          decode_batch does: gray -> RGB(A), RGB(A) -> luma, palette ->\n"
     "          its colours (RGB / RGBA with the tRNS alpha), values scaled to the\n"
     "          full range (1/2/4-bit gray x255/x85/x17).\n"
     "squeeze:  give (H, W) instead of (H, W, 1) for one channel, as PIL does.\n"
     "out:      decode into this array instead of a new one, and return it: host\n"
     "          memory with the buffer protocol (numpy, bytearray, memoryview) or\n"
     "          DLPack (a CPU torch.Tensor), C-contiguous, shape (H, W, C) or, for one\n"
     "          channel, (H, W), the dtype below (uint8 / uint16); a flat byte buffer\n"
     "          of the exact size also works. Anything else raises ValueError.\n\n"
     "Returns a numpy array of shape (H, W, C): uint8 for bit depth <= 8, uint16 for\n"
     "16-bit. Without channels the samples are the file's own: sub-byte gray keeps\n"
     "its values (a 2-bit image gives 0..3, PIL gives 0..255) and a PALETTE IMAGE\n"
     "GIVES INDICES, (H, W, 1) - like PIL's mode 'P', not RGB: pass channels=3 (or\n"
     "open it through the Pillow plugin and .convert('RGB')) for colours.\n"
     "Raises l3.Error (.status) on corrupt, truncated or non-L3 data."},
    {"encode", (PyCFunction)(void (*)(void))l3py_encode, METH_VARARGS | METH_KEYWORDS,
     "encode($module, data, threads=None, tile=0)\n--\n\n"
     "Encodes an image to L3 bytes, losslessly.\n\n"
     "data:    PNG file bytes (any colour type and bit depth: palette, tRNS and\n"
     "         sub-byte depths are kept), or a uint8/uint16 numpy array of shape\n"
     "         (H, W) or (H, W, C), C = 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA.\n"
     "threads: encoder threads; None or 0: all CPUs.\n"
     "tile:    tile size (tile x tile pixels); 0: the default (64).\n"
     "Returns bytes. Raises l3.Error on a corrupt PNG, ValueError on a bad array."},
    {"decode_batch", (PyCFunction)(void (*)(void))l3py_decode_batch,
     METH_VARARGS | METH_KEYWORDS,
     "decode_batch($module, bufs, *, device='cpu', layout='NCHW', dtype=None,\n"
     "             channels=None, mean=None, std=None, scale=None, threads=None,\n"
     "             strict=None, stream=None, out=None)\n--\n\n"
     "Decodes N images of one output shape into one tensor, an l3.Batch.\n\n"
     "bufs:     a sequence of bytes-like objects, one L3 file each.\n"
     "device:   'cpu' (threads over images and tiles, the GIL released), 'cuda'\n"
     "          (PyTorch's current device when torch uses CUDA, else the thread's\n"
     "          current CUDA device), 'cuda:N', an int N or a torch.device; CUDA\n"
     "          needs a build with nvcc.\n"
     "layout:   'NCHW' (also 'CHW') or 'NHWC' (also 'HWC').\n"
     "dtype:    'uint8', 'uint16', 'float32' or 'float16' (also numpy or torch\n"
     "          dtypes); None: uint8, or out's type. Integers are scaled to the\n"
     "          type's full range (8-bit -> uint16 is v*257); floats are v / max,\n"
     "          like torchvision's ToTensor.\n"
     "channels: None keeps the images' own count; 1, 3 or 4 converts (gray -> RGB,\n"
     "          RGB -> luma, palette -> colours, alpha added or dropped).\n"
     "mean, std, scale: per-channel (a number or 1..4 values), float dtypes only:\n"
     "          (v / max * scale - mean) / std, as torchvision's Normalize.\n"
     "threads:  CPU threads; None or 0: all CPUs.\n"
     "strict:   what to do when images fail: None (default) warns with\n"
     "          l3.DecodeWarning, True raises l3.Error naming them, False is silent.\n"
     "stream:   CUDA: None = PyTorch's current stream of the device (else the legacy\n"
     "          default stream), an int cudaStream_t, a torch.cuda.Stream or an object\n"
     "          with .ptr. A CUDA batch is returned once its work is queued:\n"
     "          torch.from_dlpack() (DLPack's stream argument) makes the consumer's\n"
     "          stream wait for it; .status/.errors/.ok wait for that batch; a strict=None\n"
     "          warning comes when its statuses are known.\n"
     "out:      decode into this tensor instead of new memory (no allocation, no\n"
     "          copy): the buffer protocol (numpy, bytearray) or DLPack (torch CPU or\n"
     "          CUDA tensors); C-contiguous, the batch's shape and dtype, aligned to\n"
     "          its elements, else ValueError saying what differs. device follows\n"
     "          out (CUDA tensors decode on the GPU, on the stream above, after the\n"
     "          tensor's own pending work). The Batch returned views out's\n"
     "          memory and keeps it referenced.\n\n"
     "Shape: (N, C, H, W) for NCHW, (N, H, W, C) for NHWC, taken from the first image\n"
     "whose header reads; every image must give that shape (mixed sizes: use\n"
     "l3.decode_list). Statuses: Batch.status[i] is 0 when image i decoded, else an\n"
     "l3 status (3 truncated, 4 not L3, 9 corrupt, ...) or 100 (another output shape);\n"
     "a failed image's slot is zero-filled and Batch.errors[i] says why."},
    {"decode_list", (PyCFunction)(void (*)(void))l3py_decode_list,
     METH_VARARGS | METH_KEYWORDS,
     "decode_list($module, bufs, *, layout='HWC', dtype=None, channels=None,\n"
     "            mean=None, std=None, scale=None, threads=None, strict=None,\n"
     "            squeeze=False)\n--\n\n"
     "Decodes N images of any sizes on the CPU into a list of N numpy arrays.\n\n"
     "The images are decoded together (threads over images and tiles, the GIL\n"
     "released) and each one gets its own array: (H, W, C) for layout 'HWC', (C, H,\n"
     "W) for 'CHW'; squeeze=True drops a single channel: (H, W).\n"
     "dtype None keeps each image's sample type (uint8, or uint16 for 16-bit; sub-\n"
     "byte and palette samples as l3.decode gives them); a dtype, channels, mean,\n"
     "std, scale convert as in decode_batch.\n"
     "A failed image is None in the list; strict as in decode_batch (None warns,\n"
     "True raises l3.Error, False is silent)."},
    {"batch_memory", (PyCFunction)(void (*)(void))l3py_batch_memory,
     METH_VARARGS | METH_KEYWORDS,
     "batch_memory($module, limit=None)\n--\n\n"
     "The host memory kept for the next CPU batches, and its limit.\n\n"
     "A CPU l3.Batch's memory (1 MiB or more) is not given back to the system\n"
     "when the batch is freed: up to 16 such blocks, the least recently freed\n"
     "dropped first, are kept for the next decode_batch calls, which then take no\n"
     "page faults on first touch. A call takes the smallest kept block that holds\n"
     "its batch and is no more than twice its size.\n"
     "limit: None leaves it; else the most bytes kept (0 keeps nothing and frees\n"
     "       what is kept now; the default is 512 MiB per process).\n"
     "Returns a dict: held (bytes kept now), blocks, limit, max_blocks, hits\n"
     "(batches that took a kept block) and misses (batches of 1 MiB or more that\n"
     "found none).\n"
     "A forked child (a DataLoader worker) starts with nothing kept."},
    {"cuda_available", l3py_cuda_available, METH_NOARGS,
     "cuda_available($module, /)\n--\n\n"
     "True when this build has CUDA support (l3.built_with_cuda) and a usable GPU\n"
     "and driver are present; never raises."},
    {"_copy_to_host", l3py_copy_to_host, METH_O,
     "_copy_to_host($module, batch, /)\n--\n\n"
     "A batch's bytes (copied from the GPU for a GPU batch); for tests."},
    {"_batch_rebuild", l3py_batch_rebuild, METH_VARARGS,
     "_batch_rebuild($module, data, shape, dtype, status, errors, /)\n--\n\n"
     "Rebuilds a pickled CPU l3.Batch (used by pickle; not for direct use)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "l3._l3",
    "L3 lossless images: decode to numpy, batch decode to DLPack tensors (CPU or CUDA).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__l3(void);
PyMODINIT_FUNC PyInit__l3(void)
{
    import_array();
    if (PyType_Ready(&l3py_batch_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m)
        return NULL;
    l3py_error = PyErr_NewExceptionWithDoc(
        "l3.Error",
        "Invalid, corrupt or truncated L3 data (a ValueError). .status is the l3 status\n"
        "code when one applies (3 truncated, 4 not an L3 file, 9 corrupt, ...).",
        PyExc_ValueError, NULL);
    if (!l3py_error || PyModule_AddObject(m, "Error", l3py_error)) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(l3py_error); /* the module holds one reference, the C code another */
    l3py_decode_warning = PyErr_NewExceptionWithDoc(
        "l3.DecodeWarning",
        "Some images of a batch failed (strict=None); the batch still returned.",
        PyExc_UserWarning, NULL);
    if (!l3py_decode_warning || PyModule_AddObject(m, "DecodeWarning", l3py_decode_warning)) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(l3py_decode_warning);
    Py_INCREF(&l3py_batch_type);
    if (PyModule_AddObject(m, "Batch", (PyObject *)&l3py_batch_type) ||
        PyModule_AddStringConstant(m, "__version__", L3_VERSION_STRING) ||
        PyModule_AddIntConstant(m, "built_with_cuda", l3py_built_with_cuda)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
