/* dlpack.c — DLPack export of an l3.Batch (__dlpack__, __dlpack_device__):
 * zero copy; the capsule keeps the batch alive until its consumer calls the
 * deleter; __dlpack__(stream=S) makes S wait for a CUDA batch's decode
 * (cuda.c), and the memory is freed after S's work.
 *
 * The structures below are written from the DLPack specification (ABI
 * version 0.x, capsule name "dltensor"): they are a small fixed ABI. */
#include "l3py.h"

#include <string.h>

enum { DL_CPU = 1, DL_CUDA = 2 };             /* DLDeviceType */
enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2 }; /* DLDataTypeCode */

typedef struct {
    int32_t device_type;
    int32_t device_id;
} dl_device;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} dl_dtype;

typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* NULL: compact row-major */
    uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed {
    dl_tensor tensor;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *self);
} dl_managed;

static dl_dtype batch_dl_dtype(int dtype)
{
    dl_dtype t = {DL_UINT, 8, 1};
    switch (dtype) {
    case L3GPU_U16: t.bits = 16; break;
    case L3GPU_F32: t.code = DL_FLOAT; t.bits = 32; break;
    case L3GPU_F16: t.code = DL_FLOAT; t.bits = 16; break;
    default: break;
    }
    return t;
}

static void dl_deleter(dl_managed *m)
{
    PyGILState_STATE g = PyGILState_Ensure();
    BatchObject *b = (BatchObject *)m->manager_ctx;
    b->exported--;
    Py_DECREF(b);
    PyMem_RawFree(m);
    PyGILState_Release(g);
}

static void dl_capsule_destructor(PyObject *cap)
{
    /* Still named "dltensor": nobody consumed it, so we own it. A consumer
     * renamed it and calls the deleter itself. (PyCapsule_IsValid sets no
     * error; an error already set -- a consumer that failed and is
     * releasing it -- must survive this destructor.) */
    if (PyCapsule_IsValid(cap, "dltensor")) {
        dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m && m->deleter)
            m->deleter(m);
    }
}

PyObject *l3py_batch_dlpack(PyObject *obj, PyObject *args, PyObject *kw)
{
    BatchObject *self = (BatchObject *)obj;
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_dev = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream,
                                     &max_version, &dl_dev, &copy))
        return NULL;
    (void)max_version;
    if (copy != Py_None && PyObject_IsTrue(copy) == 1) {
        PyErr_SetString(PyExc_BufferError, "l3.Batch: copy=True is not supported");
        return NULL;
    }
    if (dl_dev != Py_None) {
        int t = 0, id = 0;
        if (!PyArg_ParseTuple(dl_dev, "ii", &t, &id))
            return NULL;
        int want_t = self->device < 0 ? DL_CPU : DL_CUDA;
        int want_id = self->device < 0 ? 0 : self->device;
        if (t != want_t || id != want_id) {
            PyErr_SetString(PyExc_BufferError, "l3.Batch: cannot export to another device");
            return NULL;
        }
    }
    /* CUDA: the consumer's stream waits (on the device) for the decode, as
     * the DLPack protocol says (CPU batches are complete already) */
    if (self->device >= 0 && l3py_cuda_export(self, stream))
        return NULL;
    dl_managed *m = PyMem_RawCalloc(1, sizeof *m + sizeof(int64_t) * 4);
    if (!m)
        return PyErr_NoMemory();
    int64_t *shape = (int64_t *)(m + 1);
    memcpy(shape, self->shape, sizeof(int64_t) * (size_t)self->ndim);
    m->tensor.data = self->data;
    m->tensor.device.device_type = self->device < 0 ? DL_CPU : DL_CUDA;
    m->tensor.device.device_id = self->device < 0 ? 0 : self->device;
    m->tensor.ndim = self->ndim;
    m->tensor.dtype = batch_dl_dtype(self->dtype);
    m->tensor.shape = shape;
    m->tensor.strides = NULL;
    m->tensor.byte_offset = 0;
    m->manager_ctx = self;
    m->deleter = dl_deleter;
    Py_INCREF(self);
    self->exported++;
    PyObject *cap = PyCapsule_New(m, "dltensor", dl_capsule_destructor);
    if (!cap) {
        self->exported--;
        Py_DECREF(self);
        PyMem_RawFree(m);
        return NULL;
    }
    return cap;
}

PyObject *l3py_batch_dlpack_device(PyObject *obj, PyObject *unused)
{
    BatchObject *self = (BatchObject *)obj;
    (void)unused;
    if (self->device < 0)
        return Py_BuildValue("(ii)", DL_CPU, 0);
    return Py_BuildValue("(ii)", DL_CUDA, self->device);
}
