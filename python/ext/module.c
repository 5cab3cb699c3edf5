/* module.c — the `l3._l3` extension's method table, l3.Error and module init.
 * The package python/l3/__init__.py re-exports everything here as `l3`. */
#define L3PY_IMPORT_NUMPY
#include "l3py.h"

PyObject *l3py_error;

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

static PyMethodDef methods[] = {
    {"info", l3py_info, METH_O,
     "info(buf) -> dict: header of an L3 image (size, channels, depth, colour, palette)."},
    {"decode", (PyCFunction)(void (*)(void))l3py_decode, METH_VARARGS | METH_KEYWORDS,
     "decode(buf, threads=None, verify=False) -> numpy.ndarray of shape (H, W, C),\n"
     "uint8 (bit depth <= 8, sub-byte values kept) or uint16; palette images give indices."},
    {"encode", (PyCFunction)(void (*)(void))l3py_encode, METH_VARARGS | METH_KEYWORDS,
     "encode(data, threads=None, tile=0) -> bytes: from PNG bytes or a uint8/uint16\n"
     "array (H, W) or (H, W, C)."},
    {"decode_batch", (PyCFunction)(void (*)(void))l3py_decode_batch,
     METH_VARARGS | METH_KEYWORDS,
     "decode_batch(bufs, *, device='cpu', layout='NCHW', dtype='uint8', channels=None,\n"
     "             mean=None, std=None, scale=None, threads=None, strict=False, stream=0)\n"
     "-> l3.Batch. All images must give the same output shape. A failed image has its\n"
     "status set and its slot zeroed (strict=True raises l3.Error instead)."},
    {"cuda_available", l3py_cuda_available, METH_NOARGS,
     "True when this build has CUDA support and a usable GPU is present."},
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
    l3py_error = PyErr_NewExceptionWithDoc("l3.Error", "Invalid or corrupt L3 data.",
                                           PyExc_ValueError, NULL);
    if (!l3py_error || PyModule_AddObject(m, "Error", l3py_error)) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(l3py_error); /* the module holds one reference, the C code another */
    Py_INCREF(&l3py_batch_type);
    if (PyModule_AddObject(m, "Batch", (PyObject *)&l3py_batch_type) ||
        PyModule_AddStringConstant(m, "__version__", L3_VERSION_STRING) ||
        PyModule_AddIntConstant(m, "built_with_cuda", l3py_built_with_cuda)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
