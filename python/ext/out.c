/* out.c — a caller's output buffer for decode(out=) and decode_batch(out=):
 * anything with the buffer protocol (numpy arrays, bytearray, memoryview,
 * mmap, array.array) or with DLPack (__dlpack__: torch tensors on the CPU or
 * a GPU, and the other array libraries). Its memory, device, element type and
 * shape are read here; the decoders check them against what the image(s)
 * need (l3py_out_check) and write in place: no allocation, no copy.
 *
 * The DLPack structures are written from the DLPack specification (ABI 0.x,
 * capsule "dltensor"; the consumer renames a capsule it takes to
 * "used_dltensor" and calls the deleter when done). */
#include "l3py.h"

#include <string.h>

enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3 };
enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2 };

typedef struct {
    void *data;
    struct { int32_t device_type, device_id; } device;
    int32_t ndim;
    struct { uint8_t code, bits; uint16_t lanes; } dtype;
    int64_t *shape;
    int64_t *strides; /* NULL: compact row-major */
    uint64_t byte_offset;
} out_dltensor;

typedef struct out_managed {
    out_dltensor tensor;
    void *manager_ctx;
    void (*deleter)(struct out_managed *self);
} out_managed;

/* enum l3gpu_dtype of a buffer-protocol format ("B", "<f", ...), or -1. */
static int format_dtype(const char *f, Py_ssize_t itemsize)
{
    if (!f)
        return itemsize == 1 ? L3GPU_U8 : -1; /* untyped bytes */
    if (*f == '@' || *f == '=' || *f == '<')
        f++; /* native or little-endian: this is a little-endian build */
    if (f[0] && f[1])
        return -1;
    switch (f[0]) {
    case 'B': return L3GPU_U8;
    case 'H': return L3GPU_U16;
    case 'f': return L3GPU_F32;
    case 'e': return L3GPU_F16;
    default: return -1;
    }
}

static int from_buffer(PyObject *obj, struct l3py_out *o, const char *what)
{
    if (PyObject_GetBuffer(obj, &o->view, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_STRIDES)) {
        /* BufferError (bytes), ValueError (a read-only numpy array) */
        if (!PyErr_ExceptionMatches(PyExc_BufferError) &&
            !PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        PyErr_Format(PyExc_ValueError, "%s: out must be a writable buffer (%S)", what, v);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
        return -1;
    }
    o->have_view = 1;
    if (!PyBuffer_IsContiguous(&o->view, 'C')) {
        PyErr_Format(PyExc_ValueError, "%s: out must be C-contiguous (a strided view cannot "
                                       "be written in place; pass a contiguous array)", what);
        return -1;
    }
    o->data = o->view.buf;
    o->nbytes = (size_t)o->view.len;
    o->device = -1;
    o->dtype = format_dtype(o->view.format, o->view.itemsize);
    o->untyped = o->view.ndim <= 1 && o->view.itemsize == 1 &&
                 (!o->view.format || !strcmp(o->view.format, "B") ||
                  !strcmp(o->view.format, "c"));
    if (o->view.ndim > L3PY_OUT_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: out has %d dimensions", what, o->view.ndim);
        return -1;
    }
    o->ndim = o->view.ndim;
    for (int k = 0; k < o->ndim; k++) o->shape[k] = o->view.shape ? o->view.shape[k] : 0;
    if (o->ndim == 0) {
        o->ndim = 1;
        o->shape[0] = (int64_t)o->nbytes;
    }
    return 0;
}

static int from_dlpack(PyObject *obj, uintptr_t stream, struct l3py_out *o, const char *what)
{
    /* a CUDA producer is told the stream the decode runs on, so that its
     * pending work on the memory is ordered before it (the DLPack protocol:
     * 1 is the legacy default stream) */
    int cuda = 0;
    PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    if (dev) {
        cuda = PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2 &&
               PyLong_AsLong(PyTuple_GET_ITEM(dev, 0)) == DL_CUDA;
        Py_DECREF(dev);
    }
    PyErr_Clear(); /* no __dlpack_device__: ask without a stream */
    PyObject *cap;
    if (cuda) {
        PyObject *args = PyTuple_New(0);
        PyObject *kw = Py_BuildValue("{s:K}", "stream",
                                     (unsigned long long)(stream ? stream : 1));
        PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__");
        cap = args && kw && meth ? PyObject_Call(meth, args, kw) : NULL;
        Py_XDECREF(args);
        Py_XDECREF(kw);
        Py_XDECREF(meth);
    } else {
        cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
    }
    if (!cap)
        return -1;
    out_managed *m = PyCapsule_IsValid(cap, "dltensor") ? PyCapsule_GetPointer(cap, "dltensor")
                                                         : NULL;
    if (!m) {
        Py_DECREF(cap);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: out.__dlpack__() did not give a DLPack "
                                           "capsule", what);
        return -1;
    }
    /* ours now: the deleter runs in l3py_out_release */
    if (PyCapsule_SetName(cap, "used_dltensor")) {
        Py_DECREF(cap);
        return -1;
    }
    o->capsule = cap;
    o->managed = m;
    const out_dltensor *t = &m->tensor;
    if (t->device.device_type == DL_CPU || t->device.device_type == DL_CUDA_HOST) {
        o->device = -1;
    } else if (t->device.device_type == DL_CUDA) {
        o->device = t->device.device_id;
    } else {
        PyErr_Format(PyExc_ValueError, "%s: out lives on DLPack device type %d (only CPU and "
                                       "CUDA memory can be written)", what,
                     (int)t->device.device_type);
        return -1;
    }
    if (t->ndim < 1 || t->ndim > L3PY_OUT_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: out has %d dimensions", what, (int)t->ndim);
        return -1;
    }
    o->ndim = t->ndim;
    o->dtype = -1;
    if (t->dtype.lanes == 1) {
        if (t->dtype.code == DL_UINT && t->dtype.bits == 8) o->dtype = L3GPU_U8;
        else if (t->dtype.code == DL_UINT && t->dtype.bits == 16) o->dtype = L3GPU_U16;
        else if (t->dtype.code == DL_FLOAT && t->dtype.bits == 32) o->dtype = L3GPU_F32;
        else if (t->dtype.code == DL_FLOAT && t->dtype.bits == 16) o->dtype = L3GPU_F16;
    }
    size_t item = (size_t)(t->dtype.bits / 8) * t->dtype.lanes;
    size_t count = 1;
    int64_t want = 1; /* compact row-major stride of dimension k */
    int compact = 1;
    for (int k = o->ndim - 1; k >= 0; k--) {
        if (t->shape[k] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: out has a negative extent", what);
            return -1;
        }
        o->shape[k] = t->shape[k];
        /* a stride is irrelevant on an extent of 1 (torch reports anything there) */
        if (t->strides && t->shape[k] > 1 && t->strides[k] != want)
            compact = 0;
        want *= t->shape[k];
        count *= (size_t)t->shape[k];
    }
    if (!compact && count) {
        PyErr_Format(PyExc_ValueError, "%s: out must be C-contiguous (a strided view cannot "
                                       "be written in place; call .contiguous() first)", what);
        return -1;
    }
    o->data = (uint8_t *)t->data + t->byte_offset;
    o->nbytes = count * item;
    o->untyped = 0;
    return 0;
}

int l3py_out_device(PyObject *obj)
{
    int id = -1;
    PyObject *dev = PyObject_HasAttrString(obj, "__dlpack__")
                        ? PyObject_CallMethod(obj, "__dlpack_device__", NULL) : NULL;
    if (dev && PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2 &&
        PyLong_AsLong(PyTuple_GET_ITEM(dev, 0)) == DL_CUDA) {
        long d = PyLong_AsLong(PyTuple_GET_ITEM(dev, 1));
        id = d >= 0 && d < L3PY_MAX_DEVICES ? (int)d : L3PY_MAX_DEVICES;
    }
    Py_XDECREF(dev);
    PyErr_Clear();
    return id;
}

int l3py_out_get(PyObject *obj, uintptr_t stream, struct l3py_out *o, const char *what)
{
    memset(o, 0, sizeof *o);
    o->device = -1;
    /* memory that says it is on a device goes by DLPack, whatever else it
     * offers (an l3.Batch on the GPU has a buffer slot that refuses) */
    int on_device = l3py_out_device(obj) >= 0;
    if (!on_device && PyObject_CheckBuffer(obj))
        return from_buffer(obj, o, what);
    if (PyObject_HasAttrString(obj, "__dlpack__"))
        return from_dlpack(obj, stream, o, what);
    PyErr_Format(PyExc_TypeError, "%s: out must support the buffer protocol (numpy, "
                                  "bytearray, memoryview) or DLPack (torch.Tensor), not %s",
                 what, Py_TYPE(obj)->tp_name);
    return -1;
}

void l3py_out_release(struct l3py_out *o)
{
    if (o->have_view)
        PyBuffer_Release(&o->view);
    if (o->capsule) {
        out_managed *m = o->managed;
        if (m && m->deleter)
            m->deleter(m);
        Py_DECREF(o->capsule);
    }
    memset(o, 0, sizeof *o);
}

static void shape_text(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, len - k, "(");
    for (int d = 0; d < ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < len)
        snprintf(buf + k, len - k, ndim == 1 ? ",)" : ")");
}

int l3py_out_check(const struct l3py_out *o, int dtype, int ndim, const int64_t *shape,
                   const char *what)
{
    size_t need = l3gpu_dtype_size(dtype);
    for (int d = 0; d < ndim; d++) need *= (size_t)shape[d];
    char want[160], got[160];
    shape_text(want, sizeof want, ndim, shape);
    if (o->untyped) { /* plain bytes: only the size and alignment can be checked */
        if (o->nbytes != need) {
            PyErr_Format(PyExc_ValueError, "%s: out has %zu bytes, the output %s %s needs %zu",
                         what, o->nbytes, want, l3py_dtype_name(dtype), need);
            return -1;
        }
    } else {
        if (o->dtype != dtype) {
            PyErr_Format(PyExc_ValueError, "%s: out has element type %s, the output is %s",
                         what, o->dtype < 0 ? "(not uint8/uint16/float32/float16)"
                                            : l3py_dtype_name(o->dtype),
                         l3py_dtype_name(dtype));
            return -1;
        }
        int same = o->ndim == ndim;
        for (int d = 0; same && d < ndim; d++) same = o->shape[d] == shape[d];
        if (!same) {
            shape_text(got, sizeof got, o->ndim, o->shape);
            PyErr_Format(PyExc_ValueError, "%s: out has shape %s, the output needs %s", what,
                         got, want);
            return -1;
        }
    }
    if ((uintptr_t)o->data % l3gpu_dtype_size(dtype)) {
        PyErr_Format(PyExc_ValueError, "%s: out is not aligned to its %zu-byte elements",
                     what, l3gpu_dtype_size(dtype));
        return -1;
    }
    return 0;
}
