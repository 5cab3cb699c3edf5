/* cuda_stream.c — which CUDA device and stream a call means, as a PyTorch
 * user expects: the current device and the current stream of torch when
 * torch is imported and its CUDA is initialised (nothing here initialises
 * it), "cuda:N", explicit streams (an int handle, a torch.cuda.Stream, a CuPy
 * stream); the stream values of DLPack's __dlpack__(stream=...) and of the
 * CUDA array interface. Plain Python calls, no torch headers. */
#include "l3py.h"

#include <stdint.h>

#define LEGACY ((void *)(uintptr_t)1) /* cudaStreamLegacy */
#define PER_THREAD ((void *)(uintptr_t)2) /* cudaStreamPerThread */

/* torch.cuda if torch is imported and its CUDA initialised, else NULL (a new
 * reference; no exception left). */
static PyObject *torch_cuda(void)
{
    PyObject *mods = PyImport_GetModuleDict(); /* borrowed */
    PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL;
    if (!torch)
        return NULL;
    PyObject *cuda = PyObject_GetAttrString(torch, "cuda");
    if (!cuda) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *r = PyObject_CallMethod(cuda, "is_initialized", NULL);
    int init = r && PyObject_IsTrue(r) == 1;
    Py_XDECREF(r);
    PyErr_Clear();
    if (!init) {
        Py_DECREF(cuda);
        return NULL;
    }
    return cuda;
}

int l3py_torch_current_device(void)
{
    PyObject *cuda = torch_cuda();
    if (!cuda)
        return -1;
    PyObject *r = PyObject_CallMethod(cuda, "current_device", NULL);
    Py_DECREF(cuda);
    long d = r ? PyLong_AsLong(r) : -1;
    Py_XDECREF(r);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return d >= 0 && d < L3PY_MAX_DEVICES ? (int)d : -1;
}

int l3py_torch_in_bad_fork(void)
{
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *torch = mods ? PyDict_GetItemString(mods, "torch") : NULL;
    if (!torch)
        return 0;
    PyObject *cuda = PyObject_GetAttrString(torch, "cuda");
    PyObject *r = cuda ? PyObject_CallMethod(cuda, "_is_in_bad_fork", NULL) : NULL;
    int bad = r && PyObject_IsTrue(r) == 1;
    Py_XDECREF(r);
    Py_XDECREF(cuda);
    PyErr_Clear();
    return bad;
}

/* An int handle from an int or a stream object; 0 or -1 (TypeError). */
static int stream_handle(PyObject *obj, unsigned long long *h)
{
    PyObject *v = NULL;
    if (PyLong_Check(obj)) {
        v = obj;
        Py_INCREF(v);
    } else if (PyObject_HasAttrString(obj, "cuda_stream")) {
        v = PyObject_GetAttrString(obj, "cuda_stream"); /* torch.cuda.Stream */
    } else if (PyObject_HasAttrString(obj, "ptr")) {
        v = PyObject_GetAttrString(obj, "ptr"); /* cupy.cuda.Stream */
    } else {
        PyErr_SetString(PyExc_TypeError,
                        "stream must be an int (a cudaStream_t), a torch.cuda.Stream or an "
                        "object with .ptr");
        return -1;
    }
    if (!v)
        return -1;
    *h = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    return PyErr_Occurred() ? -1 : 0;
}

int l3py_parse_stream(PyObject *obj, int dev, void **stream)
{
    *stream = NULL;
    if (!obj || obj == Py_None) {
        PyObject *cuda = torch_cuda();
        if (!cuda)
            return 0; /* the legacy default stream */
        PyObject *s = PyObject_CallMethod(cuda, "current_stream", "i", dev);
        Py_DECREF(cuda);
        if (!s)
            return -1;
        unsigned long long h = 0;
        int r = stream_handle(s, &h);
        Py_DECREF(s);
        *stream = (void *)(uintptr_t)h;
        return r;
    }
    unsigned long long h = 0;
    if (stream_handle(obj, &h))
        return -1;
    *stream = h == 1 ? NULL : (void *)(uintptr_t)h;
    return 0;
}

int l3py_parse_dlpack_stream(PyObject *obj, void **stream, int *none)
{
    *none = 0;
    *stream = LEGACY; /* None: "the producer must assume the legacy default stream" */
    if (!obj || obj == Py_None)
        return 0;
    if (!PyLong_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "__dlpack__: stream must be None or an int");
        return -1;
    }
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v == -1) { /* the consumer asks for no synchronisation */
        *none = 1;
        return 0;
    }
    if (v == 0 || v < -1) {
        PyErr_SetString(PyExc_BufferError,
                        "__dlpack__: stream 0 is ambiguous (use 1 for the legacy default stream, "
                        "2 for the per-thread one)");
        return -1;
    }
    *stream = v == 1 ? LEGACY : v == 2 ? PER_THREAD : (void *)(uintptr_t)v;
    return 0;
}

PyObject *l3py_cai_stream(void *stream)
{
    if (!stream || stream == LEGACY)
        return PyLong_FromLong(1);
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)stream);
}
