/* l3module.c — the `l3` Python module: L3 images to numpy arrays and to
 * DLPack tensors, decoded on the CPU (multi-threaded, GIL released) or on a
 * CUDA GPU (libl3gpu, when built with nvcc).
 *
 * The DLPack structures below are written from the DLPack specification
 * (ABI version 0.x, capsule name "dltensor"): they are a small fixed ABI.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "l3.h"
#include "l3gpu.h"

/* ---------------- DLPack ABI ---------------- */

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

/* ---------------- module state ---------------- */

static PyObject *L3Error; /* l3.Error(ValueError), with .status */

#define MAX_DEVICES 16
#ifdef L3_HAVE_CUDA
static l3gpu_ctx *g_ctx[MAX_DEVICES];
static pid_t g_ctx_pid[MAX_DEVICES];
#endif

static PyObject *raise_status(int st, const char *what)
{
    PyObject *msg = PyUnicode_FromFormat("%s: %s", what, l3_strerror(st));
    if (!msg)
        return NULL;
    PyObject *exc = PyObject_CallFunctionObjArgs(L3Error, msg, NULL);
    Py_DECREF(msg);
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong(st);
    if (code) {
        PyObject_SetAttrString(exc, "status", code);
        Py_DECREF(code);
    }
    PyErr_SetObject(L3Error, exc);
    Py_DECREF(exc);
    return NULL;
}

static unsigned default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)(n > 256 ? 256 : n) : 1;
}

static int parse_threads(PyObject *obj, unsigned *threads)
{
    if (!obj || obj == Py_None) {
        *threads = default_threads();
        return 0;
    }
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0 || v > 256) {
        PyErr_SetString(PyExc_ValueError, "threads must be 0..256 (0 or None: all CPUs)");
        return -1;
    }
    *threads = v == 0 ? default_threads() : (unsigned)v;
    return 0;
}

static const char *color_name(unsigned c)
{
    static const char *names[] = {"gray", "gray_alpha", "rgb", "rgba", "palette"};
    return c < 5 ? names[c] : "unknown";
}

/* ---------------- l3.info / l3.decode / l3.encode ---------------- */

static PyObject *py_info(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE))
        return NULL;
    struct l3_info info;
    size_t needed = 0;
    int st = l3_read_info(b.buf, (size_t)b.len, &info, &needed);
    PyBuffer_Release(&b);
    if (st)
        return raise_status(st, "l3.info");
    PyObject *pal = Py_None;
    Py_INCREF(pal);
    if (info.color == L3_COLOR_PALETTE) {
        Py_DECREF(pal);
        pal = PyList_New(info.palette_len);
        if (!pal)
            return NULL;
        for (unsigned i = 0; i < info.palette_len; i++) {
            PyObject *t = Py_BuildValue("(iiii)", info.palette[i][0], info.palette[i][1],
                                        info.palette[i][2], info.palette[i][3]);
            if (!t) {
                Py_DECREF(pal);
                return NULL;
            }
            PyList_SET_ITEM(pal, i, t);
        }
    }
    PyObject *key = Py_None;
    Py_INCREF(key);
    if (info.has_trns_key) {
        Py_DECREF(key);
        key = info.color == L3_COLOR_GRAY
                  ? Py_BuildValue("(i)", info.trns_key[0])
                  : Py_BuildValue("(iii)", info.trns_key[0], info.trns_key[1], info.trns_key[2]);
        if (!key) {
            Py_DECREF(pal);
            return NULL;
        }
    }
    return Py_BuildValue("{s:I,s:I,s:i,s:i,s:s,s:N,s:N,s:I,s:I,s:I,s:I}",
                         "width", info.width, "height", info.height,
                         "channels", info.channels, "bit_depth", info.bit_depth,
                         "color", color_name(info.color), "palette", pal, "trns_key", key,
                         "tile_width", info.tile_width, "tile_height", info.tile_height,
                         "tiles_x", info.tiles_x, "tiles_y", info.tiles_y);
}

static PyObject *py_decode(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"buf", "threads", "verify", NULL};
    PyObject *obj, *threads_obj = NULL;
    int verify = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Op:decode", kwlist, &obj, &threads_obj,
                                     &verify))
        return NULL;
    unsigned threads;
    if (parse_threads(threads_obj, &threads))
        return NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(obj, &b, PyBUF_SIMPLE))
        return NULL;
    struct l3_info info;
    int st = l3_read_info(b.buf, (size_t)b.len, &info, NULL);
    if (st) {
        PyBuffer_Release(&b);
        return raise_status(st, "l3.decode");
    }
    npy_intp dims[3] = {info.height, info.width, info.channels};
    PyObject *arr = PyArray_SimpleNew(3, dims, info.bit_depth == 16 ? NPY_UINT16 : NPY_UINT8);
    if (!arr) {
        PyBuffer_Release(&b);
        return NULL;
    }
    struct l3_decode_options opt;
    memset(&opt, 0, sizeof opt);
    opt.threads = threads;
    opt.flags = verify ? L3_DECODE_VERIFY : 0;
    size_t out_size = (size_t)PyArray_NBYTES((PyArrayObject *)arr);
    void *out = PyArray_DATA((PyArrayObject *)arr);
    Py_BEGIN_ALLOW_THREADS
    st = l3_decode(b.buf, (size_t)b.len, out, out_size, 0, &opt);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    if (st) {
        Py_DECREF(arr);
        return raise_status(st, "l3.decode");
    }
    return arr;
}

static PyObject *py_encode(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"data", "threads", "tile", NULL};
    PyObject *obj, *threads_obj = NULL;
    unsigned tile = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OI:encode", kwlist, &obj, &threads_obj,
                                     &tile))
        return NULL;
    unsigned threads;
    if (parse_threads(threads_obj, &threads))
        return NULL;
    struct l3_encode_options opt;
    memset(&opt, 0, sizeof opt);
    opt.threads = threads;
    opt.tile_width = opt.tile_height = tile;
    void *out = NULL;
    size_t out_size = 0;
    int st;
    if (PyBytes_Check(obj) || PyByteArray_Check(obj) || PyMemoryView_Check(obj)) {
        Py_buffer b;
        if (PyObject_GetBuffer(obj, &b, PyBUF_SIMPLE))
            return NULL;
        if (!l3_is_png(b.buf, (size_t)b.len)) {
            PyBuffer_Release(&b);
            PyErr_SetString(PyExc_ValueError,
                            "l3.encode: bytes must be a PNG file (or pass a numpy array)");
            return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        st = l3_transcode_png(b.buf, (size_t)b.len, &opt, &out, &out_size);
        Py_END_ALLOW_THREADS
        PyBuffer_Release(&b);
    } else {
        PyArrayObject *a = (PyArrayObject *)PyArray_FROM_OF(obj, NPY_ARRAY_C_CONTIGUOUS |
                                                                     NPY_ARRAY_ALIGNED);
        if (!a)
            return NULL;
        int nd = PyArray_NDIM(a);
        int type = PyArray_TYPE(a);
        if ((nd != 2 && nd != 3) || (type != NPY_UINT8 && type != NPY_UINT16)) {
            Py_DECREF(a);
            PyErr_SetString(PyExc_ValueError,
                            "l3.encode: expected a uint8 or uint16 array of shape (H, W) or "
                            "(H, W, C) with C in 1..4");
            return NULL;
        }
        npy_intp *d = PyArray_DIMS(a);
        npy_intp c = nd == 3 ? d[2] : 1;
        if (c < 1 || c > 4 || d[0] < 1 || d[1] < 1 || d[0] > L3_MAX_DIM || d[1] > L3_MAX_DIM) {
            Py_DECREF(a);
            PyErr_SetString(PyExc_ValueError, "l3.encode: bad array shape");
            return NULL;
        }
        struct l3_info info;
        memset(&info, 0, sizeof info);
        info.width = (uint32_t)d[1];
        info.height = (uint32_t)d[0];
        info.channels = (uint8_t)c;
        info.color = c == 1 ? L3_COLOR_GRAY : c == 2 ? L3_COLOR_GRAY_ALPHA
                   : c == 3 ? L3_COLOR_RGB : L3_COLOR_RGBA;
        info.bit_depth = type == NPY_UINT16 ? 16 : 8;
        const void *px = PyArray_DATA(a);
        Py_BEGIN_ALLOW_THREADS
        st = l3_encode(&info, px, 0, &opt, &out, &out_size);
        Py_END_ALLOW_THREADS
        Py_DECREF(a);
    }
    if (st)
        return raise_status(st, "l3.encode");
    PyObject *res = PyBytes_FromStringAndSize(out, (Py_ssize_t)out_size);
    l3_free(out);
    return res;
}

/* ---------------- l3.Batch ---------------- */

typedef struct {
    PyObject_HEAD
    void *data;       /* host (malloc) or device (l3gpu_malloc) */
    size_t nbytes;
    int device;       /* -1: CPU, else CUDA device index */
    int dtype;        /* enum l3gpu_dtype */
    int ndim;
    int64_t shape[4];
    PyObject *status; /* list of int */
    PyObject *errors; /* list of str or None */
    int exported;     /* number of live DLPack exports */
} BatchObject;

static void Batch_dealloc(BatchObject *self)
{
    if (self->data) {
        if (self->device < 0) {
            free(self->data);
        }
#ifdef L3_HAVE_CUDA
        else if (self->device < MAX_DEVICES && g_ctx[self->device] &&
                 g_ctx_pid[self->device] == getpid()) {
            l3gpu_free(g_ctx[self->device], self->data);
        }
#endif
    }
    Py_XDECREF(self->status);
    Py_XDECREF(self->errors);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

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

static const char *batch_typestr(int dtype)
{
    switch (dtype) {
    case L3GPU_U16: return "<u2";
    case L3GPU_F32: return "<f4";
    case L3GPU_F16: return "<f2";
    default: return "|u1";
    }
}

static const char *dtype_name(int dtype)
{
    switch (dtype) {
    case L3GPU_U16: return "uint16";
    case L3GPU_F32: return "float32";
    case L3GPU_F16: return "float16";
    default: return "uint8";
    }
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
    /* Still named "dltensor": nobody consumed it, so we own it. */
    if (PyCapsule_IsValid(cap, "dltensor")) {
        dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m && m->deleter)
            m->deleter(m);
    } else {
        PyErr_Clear();
    }
}

static PyObject *Batch_dlpack(BatchObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_dev = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream,
                                     &max_version, &dl_dev, &copy))
        return NULL;
    (void)max_version;
    (void)stream; /* the batch is complete when the object exists: no sync needed */
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

static PyObject *Batch_dlpack_device(BatchObject *self, PyObject *unused)
{
    (void)unused;
    if (self->device < 0)
        return Py_BuildValue("(ii)", DL_CPU, 0);
    return Py_BuildValue("(ii)", DL_CUDA, self->device);
}

static PyObject *shape_tuple(BatchObject *self)
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
    return Py_BuildValue("{s:N,s:s,s:(Ni),s:O,s:i}", "shape", shape_tuple(self), "typestr",
                         batch_typestr(self->dtype), "data",
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
    PyObject *d = array_interface(self);
    if (d && PyDict_SetItemString(d, "stream", Py_None)) {
        Py_DECREF(d);
        return NULL;
    }
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
    return shape_tuple(self);
}

static PyObject *Batch_get_dtype(BatchObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(dtype_name(self->dtype));
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
    Py_INCREF(self->status);
    return self->status;
}

static PyObject *Batch_get_errors(BatchObject *self, void *c)
{
    (void)c;
    Py_INCREF(self->errors);
    return self->errors;
}

static PyObject *Batch_get_ok(BatchObject *self, void *c)
{
    (void)c;
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
    PyObject *shape = shape_tuple(self);
    if (!shape)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("<l3.Batch shape=%R dtype=%s device=%s%s>", shape,
                                       dtype_name(self->dtype),
                                       self->device < 0 ? "cpu" : "cuda",
                                       Batch_get_ok(self, NULL) == Py_True ? "" : " (failures)");
    Py_DECREF(shape);
    return r;
}

static PyMethodDef Batch_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))Batch_dlpack, METH_VARARGS | METH_KEYWORDS,
     "DLPack capsule of the batch tensor (zero copy)."},
    {"__dlpack_device__", (PyCFunction)Batch_dlpack_device, METH_NOARGS,
     "(device_type, device_id) as DLPack defines them."},
    {"numpy", (PyCFunction)Batch_numpy, METH_NOARGS,
     "A numpy array sharing the batch's memory (CPU batches only)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Batch_getset[] = {
    {"__cuda_array_interface__", (getter)Batch_get_cai, NULL, "CUDA array interface v3", NULL},
    {"__array_interface__", (getter)Batch_get_ai, NULL, "numpy array interface v3", NULL},
    {"shape", (getter)Batch_get_shape, NULL, "tensor shape", NULL},
    {"dtype", (getter)Batch_get_dtype, NULL, "element type name", NULL},
    {"device", (getter)Batch_get_device, NULL, "'cpu' or 'cuda:N'", NULL},
    {"status", (getter)Batch_get_status, NULL, "per-image status codes (0 = decoded)", NULL},
    {"errors", (getter)Batch_get_errors, NULL, "per-image error text or None", NULL},
    {"ok", (getter)Batch_get_ok, NULL, "True when every image decoded", NULL},
    {"data_ptr", (getter)Batch_get_ptr, NULL, "address of the first element", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "l3.Batch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_dealloc = (destructor)Batch_dealloc,
    .tp_repr = (reprfunc)Batch_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A decoded batch: a contiguous tensor plus per-image statuses.\n"
              "Hand it to torch.from_dlpack() or numpy.from_dlpack() (no copy).",
    .tp_methods = Batch_methods,
    .tp_getset = Batch_getset,
};

/* ---------------- l3.decode_batch ---------------- */

static int parse_dtype(PyObject *o, int *dtype)
{
    if (!o || o == Py_None) {
        *dtype = L3GPU_U8;
        return 0;
    }
    PyObject *s = NULL;
    if (PyUnicode_Check(o)) {
        s = o;
        Py_INCREF(s);
    } else if (PyType_Check(o) && PyObject_HasAttrString(o, "__name__")) {
        s = PyObject_GetAttrString(o, "__name__"); /* numpy.float32 */
    } else {
        s = PyObject_Str(o); /* numpy.dtype('float32'), torch.float32 */
    }
    if (!s)
        return -1;
    const char *n = PyUnicode_AsUTF8(s);
    if (!n) {
        Py_DECREF(s);
        return -1;
    }
    if (!strncmp(n, "torch.", 6))
        n += 6;
    int r = 0;
    if (!strcmp(n, "uint8")) *dtype = L3GPU_U8;
    else if (!strcmp(n, "uint16")) *dtype = L3GPU_U16;
    else if (!strcmp(n, "float32") || !strcmp(n, "float")) *dtype = L3GPU_F32;
    else if (!strcmp(n, "float16") || !strcmp(n, "half")) *dtype = L3GPU_F16;
    else {
        PyErr_Format(PyExc_ValueError,
                     "dtype must be uint8, uint16, float32 or float16, not %s", n);
        r = -1;
    }
    Py_DECREF(s);
    return r;
}

/* Fills v[0..3] from None (keep defaults), a number or a sequence of 1..4. */
static int parse_floats(PyObject *o, const char *name, float v[4], int *given)
{
    if (!o || o == Py_None)
        return 0;
    *given = 1;
    if (PyNumber_Check(o) && !PySequence_Check(o)) {
        double d = PyFloat_AsDouble(o);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        for (int c = 0; c < 4; c++) v[c] = (float)d;
        return 0;
    }
    PyObject *seq = PySequence_Fast(o, "mean/std/scale must be a number or a sequence");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > 4) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s: expected 1 to 4 values", name);
        return -1;
    }
    for (Py_ssize_t c = 0; c < 4; c++) {
        double d = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, c < n ? c : n - 1));
        if (d == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        v[c] = (float)d;
    }
    Py_DECREF(seq);
    return 0;
}

static int parse_device(PyObject *o, int *dev)
{
    if (!o || o == Py_None) {
        *dev = -1;
        return 0;
    }
    if (PyLong_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v < 0 || v >= MAX_DEVICES) {
            PyErr_SetString(PyExc_ValueError, "bad CUDA device index");
            return -1;
        }
        *dev = (int)v;
        return 0;
    }
    PyObject *s = PyObject_Str(o); /* "cpu", "cuda", "cuda:1", torch.device */
    if (!s)
        return -1;
    const char *n = PyUnicode_AsUTF8(s);
    int r = 0;
    if (!n) {
        r = -1;
    } else if (!strcmp(n, "cpu")) {
        *dev = -1;
    } else if (!strcmp(n, "cuda")) {
        *dev = 0;
    } else if (!strncmp(n, "cuda:", 5)) {
        char *end;
        long v = strtol(n + 5, &end, 10);
        if (*end || end == n + 5 || v < 0 || v >= MAX_DEVICES) {
            PyErr_Format(PyExc_ValueError, "bad device %s", n);
            r = -1;
        } else {
            *dev = (int)v;
        }
    } else {
        PyErr_Format(PyExc_ValueError, "device must be 'cpu' or 'cuda[:N]', not %s", n);
        r = -1;
    }
    Py_DECREF(s);
    return r;
}

#ifdef L3_HAVE_CUDA
static l3gpu_ctx *get_ctx(int dev)
{
    if (g_ctx[dev] && g_ctx_pid[dev] != getpid()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "l3: CUDA was initialised in the parent process and cannot be used "
                        "after fork(); decode on the GPU in the main process (read bytes in "
                        "DataLoader workers) or use the 'spawn' start method");
        return NULL;
    }
    if (!g_ctx[dev]) {
        l3gpu_ctx *ctx = NULL;
        int st;
        Py_BEGIN_ALLOW_THREADS
        st = l3gpu_ctx_create(dev, &ctx);
        Py_END_ALLOW_THREADS
        if (st) {
            PyErr_Format(PyExc_RuntimeError, "l3: CUDA device %d is not usable: %s", dev,
                         l3gpu_strerror(st));
            return NULL;
        }
        if (g_ctx[dev]) { /* another thread won the race while the GIL was free */
            l3gpu_ctx_destroy(ctx);
        } else {
            g_ctx[dev] = ctx;
            g_ctx_pid[dev] = getpid();
        }
    }
    return g_ctx[dev];
}
#endif

static PyObject *py_cuda_available(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
#ifdef L3_HAVE_CUDA
    int n = 0;
    int st = l3gpu_device_count(&n);
    return PyBool_FromLong(st == 0 && n > 0);
#else
    Py_RETURN_FALSE;
#endif
}

static PyObject *py_decode_batch(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"bufs", "device", "layout", "dtype", "channels", "mean",
                             "std", "scale", "threads", "strict", "stream", NULL};
    PyObject *bufs, *device_obj = NULL, *dtype_obj = NULL, *channels_obj = Py_None;
    PyObject *mean_obj = NULL, *std_obj = NULL, *scale_obj = NULL, *threads_obj = NULL;
    const char *layout = "NCHW";
    int strict = 0;
    unsigned long long stream = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OsOOOOOOpK:decode_batch", kwlist, &bufs,
                                     &device_obj, &layout, &dtype_obj, &channels_obj,
                                     &mean_obj, &std_obj, &scale_obj, &threads_obj, &strict,
                                     &stream))
        return NULL;
    struct l3gpu_format fmt;
    l3gpu_format_init(&fmt);
    int dev;
    unsigned threads;
    if (parse_device(device_obj, &dev) || parse_dtype(dtype_obj, &fmt.dtype) ||
        parse_threads(threads_obj, &threads))
        return NULL;
    if (!strcmp(layout, "NCHW") || !strcmp(layout, "CHW")) {
        fmt.layout = L3GPU_CHW;
    } else if (!strcmp(layout, "NHWC") || !strcmp(layout, "HWC")) {
        fmt.layout = L3GPU_HWC;
    } else {
        PyErr_Format(PyExc_ValueError, "layout must be 'NCHW' or 'NHWC', not '%s'", layout);
        return NULL;
    }
    if (channels_obj != Py_None) {
        long c = PyLong_AsLong(channels_obj);
        if (c == -1 && PyErr_Occurred())
            return NULL;
        if (c != 1 && c != 3 && c != 4) {
            PyErr_SetString(PyExc_ValueError, "channels must be None, 1, 3 or 4");
            return NULL;
        }
        fmt.channels = (int)c;
    }
    int norm = 0;
    if (parse_floats(mean_obj, "mean", fmt.mean, &norm) ||
        parse_floats(std_obj, "std", fmt.std, &norm) ||
        parse_floats(scale_obj, "scale", fmt.scale, &norm))
        return NULL;
    fmt.normalize = norm;
    if (norm && fmt.dtype != L3GPU_F32 && fmt.dtype != L3GPU_F16) {
        PyErr_SetString(PyExc_ValueError, "mean/std/scale need dtype float32 or float16");
        return NULL;
    }
    if (l3gpu_format_check(&fmt)) {
        PyErr_SetString(PyExc_ValueError, "bad mean/std/scale (std must be non-zero, finite)");
        return NULL;
    }
#ifndef L3_HAVE_CUDA
    if (dev >= 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "l3: this build has no CUDA support (built without nvcc); use "
                        "device='cpu'");
        return NULL;
    }
#else
    l3gpu_ctx *ctx = NULL;
    if (dev >= 0 && !(ctx = get_ctx(dev)))
        return NULL;
#endif

    PyObject *seq = PySequence_Fast(bufs, "bufs must be a sequence of bytes-like objects");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "decode_batch: empty batch");
        return NULL;
    }
    Py_buffer *views = PyMem_Calloc((size_t)n, sizeof *views);
    struct l3gpu_input *in = PyMem_Calloc((size_t)n, sizeof *in);
    int *status = PyMem_Calloc((size_t)n, sizeof *status);
    BatchObject *batch = NULL;
    PyObject *result = NULL;
    Py_ssize_t got = 0;
    if (!views || !in || !status) {
        PyErr_NoMemory();
        goto out;
    }
    for (; got < n; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &views[got], PyBUF_SIMPLE))
            goto out;
        in[got].data = views[got].buf;
        in[got].size = (size_t)views[got].len;
    }
    /* Output shape: the first image whose header reads. */
    uint32_t shape[3] = {0, 0, 0};
    size_t slot = 0;
    for (Py_ssize_t i = 0; i < n && !slot; i++) {
        struct l3_info info;
        if (l3_read_info(in[i].data, in[i].size, &info, NULL) == L3_OK)
            l3gpu_output_shape(&info, &fmt, shape, &slot);
    }
    if (!slot) {
        struct l3_info info0;
        int st = l3_read_info(in[0].data, in[0].size, &info0, NULL);
        PyErr_Format(L3Error, "decode_batch: no image of the batch has a readable header "
                              "(first: %s)", l3_strerror(st));
        goto out;
    }
    if ((size_t)n > SIZE_MAX / slot) {
        PyErr_NoMemory();
        goto out;
    }
    batch = PyObject_New(BatchObject, &BatchType);
    if (!batch)
        goto out;
    batch->data = NULL;
    batch->status = batch->errors = NULL;
    batch->device = dev;
    batch->dtype = fmt.dtype;
    batch->ndim = 4;
    batch->exported = 0;
    batch->nbytes = (size_t)n * slot;
    batch->shape[0] = n;
    for (int k = 0; k < 3; k++) batch->shape[k + 1] = shape[k];
    int st;
    if (dev < 0) {
        void *mem = NULL;
        /* a large batch is 2 MiB aligned and asks for transparent huge pages:
         * the decoders then take a few hundred page faults on first touch
         * instead of one per 4 KiB (about 10% of a CPU batch decode) */
        size_t huge = (size_t)2 << 20;
        size_t align = batch->nbytes >= 2 * huge ? huge : 256;
        if (posix_memalign(&mem, align, batch->nbytes ? batch->nbytes : 1)) {
            PyErr_NoMemory();
            goto out;
        }
        if (align == huge)
            (void)madvise(mem, batch->nbytes, MADV_HUGEPAGE); /* advice only */
        batch->data = mem;
        Py_BEGIN_ALLOW_THREADS
        st = l3gpu_cpu_decode_batch(in, (size_t)n, &fmt, batch->data, batch->nbytes, NULL,
                                    status, threads);
        Py_END_ALLOW_THREADS
    } else {
#ifdef L3_HAVE_CUDA
        st = l3gpu_malloc(ctx, batch->nbytes, &batch->data);
        if (st) {
            batch->data = NULL;
            PyErr_Format(PyExc_MemoryError, "l3: cannot allocate %zu bytes on cuda:%d (%s)",
                         batch->nbytes, dev, l3gpu_ctx_error(ctx));
            goto out;
        }
        int fin;
        Py_BEGIN_ALLOW_THREADS
        st = l3gpu_decode_batch(ctx, in, (size_t)n, L3GPU_MEM_HOST, &fmt, batch->data,
                                batch->nbytes, NULL, NULL, 0, status,
                                (void *)(uintptr_t)stream);
        fin = (st == L3GPU_OK || st == L3GPU_ERR_IMAGE) ? l3gpu_batch_finish(ctx, status, (size_t)n)
                                                        : st;
        Py_END_ALLOW_THREADS
        if (st == L3GPU_OK || st == L3GPU_ERR_IMAGE)
            st = fin;
        if (st != L3GPU_OK && st != L3GPU_ERR_IMAGE) {
            PyErr_Format(PyExc_RuntimeError, "l3: GPU batch decode failed: %s (%s)",
                         l3gpu_strerror(st), l3gpu_ctx_error(ctx));
            goto out;
        }
#else
        st = L3GPU_ERR_NOT_BUILT;
#endif
    }
    if (st != L3GPU_OK && st != L3GPU_ERR_IMAGE) {
        PyErr_Format(st == L3GPU_ERR_NOMEM ? PyExc_MemoryError : PyExc_RuntimeError,
                     "l3: batch decode failed: %s", l3gpu_strerror(st));
        goto out;
    }
    batch->status = PyList_New(n);
    batch->errors = PyList_New(n);
    if (!batch->status || !batch->errors)
        goto out;
    int failed = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *code = PyLong_FromLong(status[i]);
        PyObject *err = status[i] ? PyUnicode_FromString(l3gpu_image_strerror(status[i]))
                                  : (Py_INCREF(Py_None), Py_None);
        if (!code || !err) {
            Py_XDECREF(code);
            Py_XDECREF(err);
            goto out;
        }
        PyList_SET_ITEM(batch->status, i, code);
        PyList_SET_ITEM(batch->errors, i, err);
        failed += status[i] != 0;
    }
    if (strict && failed) {
        PyObject *msg = PyUnicode_FromFormat("decode_batch: %d of %zd images failed:", failed, n);
        for (Py_ssize_t i = 0; msg && i < n; i++) {
            if (!status[i])
                continue;
            PyObject *m2 = PyUnicode_FromFormat("%U [%zd] %s;", msg, i,
                                                l3gpu_image_strerror(status[i]));
            Py_DECREF(msg);
            msg = m2;
        }
        if (msg) {
            PyErr_SetObject(L3Error, msg);
            Py_DECREF(msg);
        }
        goto out;
    }
    result = (PyObject *)batch;
    batch = NULL;
out:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(in);
    PyMem_Free(status);
    Py_DECREF(seq);
    Py_XDECREF(batch);
    return result;
}

/* ---------------- module ---------------- */

static PyMethodDef methods[] = {
    {"info", py_info, METH_O,
     "info(buf) -> dict: header of an L3 image (size, channels, depth, colour, palette)."},
    {"decode", (PyCFunction)(void (*)(void))py_decode, METH_VARARGS | METH_KEYWORDS,
     "decode(buf, threads=None, verify=False) -> numpy.ndarray of shape (H, W, C),\n"
     "uint8 (bit depth <= 8, sub-byte values kept) or uint16; palette images give indices."},
    {"encode", (PyCFunction)(void (*)(void))py_encode, METH_VARARGS | METH_KEYWORDS,
     "encode(data, threads=None, tile=0) -> bytes: from PNG bytes or a uint8/uint16\n"
     "array (H, W) or (H, W, C)."},
    {"decode_batch", (PyCFunction)(void (*)(void))py_decode_batch,
     METH_VARARGS | METH_KEYWORDS,
     "decode_batch(bufs, *, device='cpu', layout='NCHW', dtype='uint8', channels=None,\n"
     "             mean=None, std=None, scale=None, threads=None, strict=False, stream=0)\n"
     "-> l3.Batch. All images must give the same output shape. A failed image has its\n"
     "status set and its slot zeroed (strict=True raises l3.Error instead)."},
    {"cuda_available", py_cuda_available, METH_NOARGS,
     "True when this build has CUDA support and a usable GPU is present."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "l3",
    "L3 lossless images: decode to numpy, batch decode to DLPack tensors (CPU or CUDA).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_l3(void);
PyMODINIT_FUNC PyInit_l3(void)
{
    import_array();
    if (PyType_Ready(&BatchType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m)
        return NULL;
    L3Error = PyErr_NewExceptionWithDoc("l3.Error", "Invalid or corrupt L3 data.",
                                        PyExc_ValueError, NULL);
    if (!L3Error || PyModule_AddObject(m, "Error", L3Error)) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(L3Error); /* the module holds one reference, the C code another */
    Py_INCREF(&BatchType);
    if (PyModule_AddObject(m, "Batch", (PyObject *)&BatchType) ||
        PyModule_AddStringConstant(m, "__version__", L3_VERSION_STRING) ||
        PyModule_AddIntConstant(m, "built_with_cuda",
#ifdef L3_HAVE_CUDA
                                1
#else
                                0
#endif
                                )) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
