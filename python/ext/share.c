/* share.c — handing a CPU l3.Batch to other code and processes: the buffer
 * protocol (memoryview(batch), numpy, pickle protocol 5 out of band) and
 * pickling (__reduce_ex__, and _batch_rebuild on the other side, which checks
 * what it is given). A GPU batch does neither and says so. */
#include "l3py.h"

#include <string.h>

/* ---- buffer protocol (CPU batches): memoryview(batch), pickle protocol 5 ---- */

static const char *buffer_format(int dtype)
{
    switch (dtype) {
    case L3GPU_U16: return "H";
    case L3GPU_F32: return "f";
    case L3GPU_F16: return "e";
    default: return "B";
    }
}

static int Batch_getbuffer(BatchObject *self, Py_buffer *view, int flags)
{
    if (self->device >= 0) {
        PyErr_SetString(PyExc_BufferError,
                        "l3.Batch: a batch in GPU memory has no host buffer (use DLPack)");
        return -1;
    }
    size_t item = l3gpu_dtype_size(self->dtype);
    view->buf = self->data;
    view->obj = (PyObject *)self;
    Py_INCREF(self);
    view->len = (Py_ssize_t)self->nbytes;
    view->readonly = 0;
    view->itemsize = (Py_ssize_t)item;
    view->format = (flags & PyBUF_FORMAT) ? (char *)buffer_format(self->dtype) : NULL;
    view->ndim = self->ndim;
    view->shape = (flags & PyBUF_ND) ? (Py_ssize_t *)self->py_shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) ? (Py_ssize_t *)self->py_strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

PyBufferProcs l3py_batch_as_buffer = {
    .bf_getbuffer = (getbufferproc)Batch_getbuffer,
};

/* ---- pickling: CPU batches only ---- */

PyObject *l3py_batch_reduce_ex(PyObject *obj, PyObject *arg)
{
    BatchObject *self = (BatchObject *)obj;
    int protocol = (int)PyLong_AsLong(arg);
    if (protocol == -1 && PyErr_Occurred())
        return NULL;
    if (self->device >= 0) {
        PyErr_Format(PyExc_TypeError,
                     "l3.Batch on cuda:%d cannot be pickled: hand torch.from_dlpack(batch) "
                     "to torch's own sharing, or decode on the CPU where it is pickled",
                     self->device);
        return NULL;
    }
    PyObject *data = NULL;
    if (protocol >= 5) { /* out of band when the pickler takes buffers, else one copy */
        PyObject *pb = PyImport_ImportModule("pickle");
        if (pb) {
            data = PyObject_CallMethod(pb, "PickleBuffer", "O", (PyObject *)self);
            Py_DECREF(pb);
        }
    } else {
        data = PyBytes_FromStringAndSize(self->data, (Py_ssize_t)self->nbytes);
    }
    if (!data)
        return NULL;
    PyObject *mod = PyImport_ImportModule("l3._l3");
    PyObject *fn = mod ? PyObject_GetAttrString(mod, "_batch_rebuild") : NULL;
    Py_XDECREF(mod);
    if (!fn) {
        Py_DECREF(data);
        return NULL;
    }
    return Py_BuildValue("(N(NNsOO))", fn, data, l3py_batch_shape_tuple(self),
                         l3py_dtype_name(self->dtype), self->status, self->errors);
}

static int dtype_from_name(const char *n)
{
    for (int t = L3GPU_U8; t <= L3GPU_F16; t++)
        if (!strcmp(n, l3py_dtype_name(t)))
            return t;
    return -1;
}

/* Checks and copies a list of N statuses (int) or errors (str or None). */
static PyObject *copy_list(PyObject *o, Py_ssize_t n, int ints)
{
    if (!PyList_Check(o) || PyList_GET_SIZE(o) != n) {
        PyErr_SetString(PyExc_ValueError, "l3.Batch: bad pickled status/errors");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(o, i);
        if (ints ? !PyLong_CheckExact(v) : (v != Py_None && !PyUnicode_CheckExact(v))) {
            PyErr_SetString(PyExc_ValueError, "l3.Batch: bad pickled status/errors");
            return NULL;
        }
    }
    return PyList_GetSlice(o, 0, n);
}

PyObject *l3py_batch_rebuild(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *data, *shape, *status, *errors;
    const char *dtname;
    if (!PyArg_ParseTuple(args, "OO!sOO:_batch_rebuild", &data, &PyTuple_Type, &shape, &dtname,
                          &status, &errors))
        return NULL;
    int dtype = dtype_from_name(dtname);
    uint32_t dims[3];
    long long n = 0;
    size_t nbytes = dtype < 0 ? 0 : l3gpu_dtype_size(dtype);
    int bad = dtype < 0 || PyTuple_GET_SIZE(shape) != 4;
    for (Py_ssize_t i = 0; !bad && i < 4; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        if (v < 0 || v > (i ? (long long)UINT32_MAX : PY_SSIZE_T_MAX) ||
            (v && nbytes > SIZE_MAX / (size_t)v)) {
            bad = 1;
            break;
        }
        nbytes *= (size_t)v;
        if (i)
            dims[i - 1] = (uint32_t)v;
        else
            n = v;
    }
    if (bad) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "l3.Batch: bad pickled shape or dtype");
        return NULL;
    }
    Py_buffer b;
    if (PyObject_GetBuffer(data, &b, PyBUF_SIMPLE))
        return NULL;
    BatchObject *batch = NULL;
    if ((size_t)b.len != nbytes) {
        PyErr_SetString(PyExc_ValueError, "l3.Batch: pickled data does not match its shape");
        goto fail;
    }
    if (!(batch = l3py_batch_new(-1, dtype, (Py_ssize_t)n, dims, nbytes)) ||
        l3py_batch_alloc_host(batch))
        goto fail;
    memcpy(batch->data, b.buf, nbytes);
    PyBuffer_Release(&b);
    if (!(batch->status = copy_list(status, (Py_ssize_t)n, 1)) ||
        !(batch->errors = copy_list(errors, (Py_ssize_t)n, 0))) {
        Py_DECREF(batch);
        return NULL;
    }
    return (PyObject *)batch;
fail:
    PyBuffer_Release(&b);
    Py_XDECREF(batch);
    return NULL;
}
