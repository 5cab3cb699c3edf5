/* batch.c — the l3.Batch object: one contiguous tensor (host or device
 * memory) with per-image statuses, its numpy and CUDA array interfaces, and
 * its repr. DLPack export is in dlpack.c, the buffer protocol and pickling
 * in share.c, the decoders that fill it in decode_batch.c and cuda.c. */
#include "l3py.h"

#include <string.h>

BatchObject *l3py_batch_new(int device, int dtype, Py_ssize_t n, const uint32_t shape[3],
                            size_t nbytes)
{
    BatchObject *b = PyObject_New(BatchObject, &l3py_batch_type);
    if (!b)
        return NULL;
    b->data = NULL;
    b->status = b->errors = NULL;
    b->device = device;
    b->dtype = dtype;
    b->ndim = 4;
    b->exported = 0;
    b->out = NULL;
    b->stream = NULL;
    b->pending = NULL;
    b->finishing = 0;
    b->strict_mode = 0;
    b->nconsumers = 0;
    b->nbytes = nbytes;
    b->nbytes_held = 0;
    b->shape[0] = n;
    for (int k = 0; k < 3; k++) b->shape[k + 1] = shape[k];
    /* the buffer protocol's view of the same: compact row-major */
    Py_ssize_t stride = (Py_ssize_t)l3gpu_dtype_size(dtype);
    for (int k = 3; k >= 0; k--) {
        b->py_shape[k] = (Py_ssize_t)b->shape[k];
        b->py_strides[k] = stride;
        stride *= (Py_ssize_t)b->shape[k];
    }
    return b;
}

int l3py_batch_alloc_host(BatchObject *b)
{
    b->data = l3py_hostmem_get(b->nbytes, &b->nbytes_held);
    if (!b->data) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

int l3py_batch_resolve(BatchObject *b)
{
    if (b->status)
        return 0;
    if (b->device >= 0 && b->pending)
        return l3py_cuda_finish(b);
    PyErr_SetString(PyExc_RuntimeError, "l3.Batch: no statuses (the decode failed)");
    return -1;
}

int l3py_batch_set_status(BatchObject *b, const int *status)
{
    Py_ssize_t n = (Py_ssize_t)b->shape[0];
    b->status = PyList_New(n);
    b->errors = PyList_New(n);
    if (!b->status || !b->errors)
        return -1;
    int failed = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *code = PyLong_FromLong(status[i]);
        PyObject *err = status[i] ? PyUnicode_FromString(l3gpu_image_strerror(status[i]))
                                  : (Py_INCREF(Py_None), Py_None);
        if (!code || !err) {
            Py_XDECREF(code);
            Py_XDECREF(err);
            return -1;
        }
        PyList_SET_ITEM(b->status, i, code);
        PyList_SET_ITEM(b->errors, i, err);
        failed += status[i] != 0;
    }
    return failed;
}

static void Batch_dealloc(BatchObject *self)
{
    if (self->device >= 0)
        l3py_cuda_release(self); /* finishes it, frees pool memory in stream order */
    else if (self->data && !self->out)
        l3py_hostmem_put(self->data, self->nbytes_held);
    if (self->out) { /* the caller's memory: give it back */
        l3py_out_release(self->out);
        PyMem_Free(self->out);
    }
    Py_XDECREF(self->status);
    Py_XDECREF(self->errors);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

const char *l3py_dtype_typestr(int dtype)
{
    switch (dtype) {
    case L3GPU_U16: return "<u2";
    case L3GPU_F32: return "<f4";
    case L3GPU_F16: return "<f2";
    default: return "|u1";
    }
}

const char *l3py_dtype_name(int dtype)
{
    switch (dtype) {
    case L3GPU_U16: return "uint16";
    case L3GPU_F32: return "float32";
    case L3GPU_F16: return "float16";
    default: return "uint8";
    }
}

PyObject *l3py_batch_shape_tuple(const BatchObject *self)
{
    PyObject *t = PyTuple_New(self->ndim);
    if (!t)
        return NULL;
    for (int i = 0; i < self->ndim; i++) {
        PyObject *v = PyLong_FromLongLong(self->shape[i]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyObject *array_interface(BatchObject *self)
{
    return Py_BuildValue("{s:N,s:s,s:(Ni),s:O,s:i}", "shape", l3py_batch_shape_tuple(self),
                         "typestr", l3py_dtype_typestr(self->dtype), "data",
                         PyLong_FromVoidPtr(self->data), 0, "strides", Py_None, "version", 3);
}

static PyObject *Batch_get_cai(BatchObject *self, void *closure)
{
    (void)closure;
    if (self->device < 0) {
        PyErr_SetString(PyExc_AttributeError,
                        "__cuda_array_interface__: this batch is in host memory");
        return NULL;
    }
    /* v3: the stream the consumer must synchronise with (None: no need,
     * the batch is finished) */
    PyObject *d = array_interface(self);
    PyObject *s = self->pending ? l3py_cai_stream(self->stream) : (Py_INCREF(Py_None), Py_None);
    if (!d || !s || PyDict_SetItemString(d, "stream", s)) {
        Py_XDECREF(d);
        Py_XDECREF(s);
        return NULL;
    }
    Py_DECREF(s);
    return d;
}

static PyObject *Batch_get_ai(BatchObject *self, void *closure)
{
    (void)closure;
    if (self->device >= 0) {
        PyErr_SetString(PyExc_AttributeError,
                        "__array_interface__: this batch is in device memory");
        return NULL;
    }
    return array_interface(self);
}

static PyObject *Batch_get_shape(BatchObject *self, void *c)
{
    (void)c;
    return l3py_batch_shape_tuple(self);
}

static PyObject *Batch_get_dtype(BatchObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(l3py_dtype_name(self->dtype));
}

static PyObject *Batch_get_device(BatchObject *self, void *c)
{
    (void)c;
    if (self->device < 0)
        return PyUnicode_FromString("cpu");
    return PyUnicode_FromFormat("cuda:%d", self->device);
}

static PyObject *Batch_get_status(BatchObject *self, void *c)
{
    (void)c;
    if (l3py_batch_resolve(self))
        return NULL;
    Py_INCREF(self->status);
    return self->status;
}

static PyObject *Batch_get_errors(BatchObject *self, void *c)
{
    (void)c;
    if (l3py_batch_resolve(self))
        return NULL;
    Py_INCREF(self->errors);
    return self->errors;
}

static PyObject *Batch_get_ok(BatchObject *self, void *c)
{
    (void)c;
    if (l3py_batch_resolve(self))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(self->status);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyLong_AsLong(PyList_GET_ITEM(self->status, i)) != 0)
            Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

static PyObject *Batch_get_ptr(BatchObject *self, void *c)
{
    (void)c;
    return PyLong_FromVoidPtr(self->data);
}

static PyObject *Batch_numpy(BatchObject *self, PyObject *unused)
{
    (void)unused;
    if (self->device >= 0) {
        PyErr_SetString(PyExc_TypeError,
                        "numpy(): the batch is in GPU memory (use torch.from_dlpack)");
        return NULL;
    }
    npy_intp dims[4];
    for (int i = 0; i < self->ndim; i++) dims[i] = (npy_intp)self->shape[i];
    int t = self->dtype == L3GPU_U16 ? NPY_UINT16 : self->dtype == L3GPU_F32 ? NPY_FLOAT32
          : self->dtype == L3GPU_F16 ? NPY_FLOAT16 : NPY_UINT8;
    PyObject *arr = PyArray_SimpleNewFromData(self->ndim, dims, t, self->data);
    if (!arr)
        return NULL;
    Py_INCREF(self);
    if (PyArray_SetBaseObject((PyArrayObject *)arr, (PyObject *)self)) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

static PyObject *Batch_repr(BatchObject *self)
{
    PyObject *shape = l3py_batch_shape_tuple(self);
    if (!shape)
        return NULL;
    PyObject *ok = Batch_get_ok(self, NULL);
    if (!ok) {
        Py_DECREF(shape);
        return NULL;
    }
    PyObject *r = PyUnicode_FromFormat("<l3.Batch shape=%R dtype=%s device=%s%s>", shape,
                                       l3py_dtype_name(self->dtype),
                                       self->device < 0 ? "cpu" : "cuda",
                                       ok == Py_True ? "" : " (failures)");
    Py_DECREF(ok);
    Py_DECREF(shape);
    return r;
}

static PyMethodDef Batch_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))l3py_batch_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "A DLPack capsule of the batch tensor (zero copy; the capsule keeps the batch\n"
     "alive). The batch is complete when it exists, so `stream` needs no wait.\n"
     "copy=True and dl_device other than the batch's own raise BufferError."},
    {"__dlpack_device__", l3py_batch_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n"
     "(device_type, device_id) as DLPack defines them: (1, 0) for the CPU,\n"
     "(2, N) for cuda:N."},
    {"numpy", (PyCFunction)Batch_numpy, METH_NOARGS,
     "numpy($self, /)\n--\n\n"
     "A numpy array sharing the batch's memory (CPU batches only; TypeError for a\n"
     "GPU batch). The array keeps the batch alive."},
    {"__reduce_ex__", l3py_batch_reduce_ex, METH_O,
     "__reduce_ex__($self, protocol, /)\n--\n\n"
     "Pickling: a CPU batch pickles with its tensor, statuses and errors (protocol 5\n"
     "hands the tensor out of band); a GPU batch raises TypeError."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Batch_getset[] = {
    {"__cuda_array_interface__", (getter)Batch_get_cai, NULL,
     "CUDA array interface v3 (GPU batches; AttributeError for a CPU batch)", NULL},
    {"__array_interface__", (getter)Batch_get_ai, NULL,
     "numpy array interface v3 (CPU batches; AttributeError for a GPU batch)", NULL},
    {"shape", (getter)Batch_get_shape, NULL,
     "tensor shape: (N, C, H, W) for layout NCHW, (N, H, W, C) for NHWC", NULL},
    {"dtype", (getter)Batch_get_dtype, NULL,
     "element type name: 'uint8', 'uint16', 'float32' or 'float16'", NULL},
    {"device", (getter)Batch_get_device, NULL, "'cpu' or 'cuda:N'", NULL},
    {"status", (getter)Batch_get_status, NULL,
     "per-image status codes: 0 decoded; an l3 status (3 truncated, 4 not L3, 9 corrupt,\n"
     "...); 100 other output shape than the batch; 101 aborted. A failed slot is zeros.\n"
     "For a CUDA batch it waits for that batch (not the device).",
     NULL},
    {"errors", (getter)Batch_get_errors, NULL, "per-image error text, None where decoded",
     NULL},
    {"ok", (getter)Batch_get_ok, NULL, "True when every image decoded", NULL},
    {"data_ptr", (getter)Batch_get_ptr, NULL, "address of the first element", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject l3py_batch_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "l3.Batch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_dealloc = (destructor)Batch_dealloc,
    .tp_repr = (reprfunc)Batch_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_as_buffer = &l3py_batch_as_buffer,
    .tp_doc = "A decoded batch, made by l3.decode_batch(): one contiguous tensor of N\n"
              "images (shape (N, C, H, W) or (N, H, W, C)) plus per-image statuses.\n\n"
              "Hand it on without a copy: torch.from_dlpack(b), numpy.from_dlpack(b),\n"
              "b.numpy() or memoryview(b) (CPU), b.__cuda_array_interface__ (GPU).\n"
              "b.status / b.errors / b.ok say which images decoded; a failed image's\n"
              "slot is zeros. A CPU batch pickles (returned from a DataLoader worker,\n"
              "protocol 5 out of band); a GPU batch does not.",
    .tp_methods = Batch_methods,
    .tp_getset = Batch_getset,
};
