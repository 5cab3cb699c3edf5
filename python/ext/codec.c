/* codec.c — one image through libl3 on the CPU: l3.info (the header),
 * l3.decode (pixels as a numpy array, GIL released) and l3.encode (from PNG
 * bytes or a numpy array). */
#include "l3py.h"

#include <string.h>

static const char *color_name(unsigned c)
{
    static const char *names[] = {"gray", "gray_alpha", "rgb", "rgba", "palette"};
    return c < 5 ? names[c] : "unknown";
}

PyObject *l3py_info(PyObject *self, PyObject *arg)
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
        return l3py_raise_status(st, "l3.info");
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
    return Py_BuildValue("{s:I,s:I,s:i,s:i,s:s,s:N,s:i,s:N,s:I,s:I,s:I,s:I}",
                         "width", info.width, "height", info.height,
                         "channels", info.channels, "bit_depth", info.bit_depth,
                         "color", color_name(info.color), "palette", pal,
                         "palette_alpha_len", info.palette_alpha_len, "trns_key", key,
                         "tile_width", info.tile_width, "tile_height", info.tile_height,
                         "tiles_x", info.tiles_x, "tiles_y", info.tiles_y);
}

/* (H, W, 1) -> (H, W), sharing the memory. */
static PyObject *squeeze_gray(PyObject *arr)
{
    PyArrayObject *a = (PyArrayObject *)arr;
    if (PyArray_NDIM(a) != 3 || PyArray_DIM(a, 2) != 1)
        return arr;
    npy_intp dims[2] = {PyArray_DIM(a, 0), PyArray_DIM(a, 1)};
    PyArray_Dims shape = {dims, 2};
    PyObject *r = PyArray_Newshape(a, &shape, NPY_CORDER);
    Py_DECREF(arr);
    return r;
}

/* Decodes the image in B into DST (dst_size bytes, HWC, the source's sample
 * type: uint16 for 16-bit, else uint8): the file's own samples, or with
 * channels 1/3/4 converted as decode_batch converts them (its fused tile
 * converters). 0, or -1 with an exception. */
static int decode_to(const Py_buffer *b, const struct l3_info *info, unsigned threads,
                     int verify, int channels, void *dst, size_t dst_size)
{
    struct l3_decode_options opt;
    memset(&opt, 0, sizeof opt);
    opt.threads = threads;
    opt.flags = verify ? L3_DECODE_VERIFY : 0;
    int st, ist = 0;
    Py_BEGIN_ALLOW_THREADS
    if (!channels) {
        st = l3_decode(b->buf, (size_t)b->len, dst, dst_size, 0, &opt);
    } else {
        struct l3gpu_format fmt;
        l3gpu_format_init(&fmt);
        fmt.dtype = info->bit_depth == 16 ? L3GPU_U16 : L3GPU_U8;
        fmt.channels = channels;
        struct l3gpu_input in = {b->buf, (size_t)b->len};
        /* l3_decode's checks: trailing bytes are corrupt; the payload
         * checksum first, when asked (the batch decoder has neither) */
        struct l3_info li;
        struct l3_layout lay;
        st = l3_read_layout(b->buf, (size_t)b->len, &li, &lay, NULL);
        if (!st && (uint64_t)b->len > lay.header_size + lay.payload_size)
            st = L3_ERR_CORRUPT;
        if (!st && verify)
            st = l3_verify(b->buf, (size_t)b->len);
        if (!st) {
            int bst = l3gpu_cpu_decode_batch(&in, 1, &fmt, dst, dst_size, NULL, &ist, threads);
            st = bst == L3GPU_ERR_IMAGE ? ist : bst ? -bst : L3_OK;
        }
    }
    Py_END_ALLOW_THREADS
    if (st < 0) {
        PyErr_Format(st == -L3GPU_ERR_NOMEM ? PyExc_MemoryError : PyExc_RuntimeError,
                     "l3.decode: %s", l3gpu_strerror(-st));
        return -1;
    }
    if (st) {
        l3py_raise_status(st, "l3.decode");
        return -1;
    }
    return 0;
}

/* decode(..., out=OBJ): into the caller's array, (H, W, C) or, with one
 * channel, (H, W); returns OBJ. */
static PyObject *decode_into(const Py_buffer *b, const struct l3_info *info, unsigned threads,
                             int verify, int channels, PyObject *out_obj)
{
    struct l3py_out o;
    if (l3py_out_get(out_obj, 0, &o, "l3.decode"))
        return NULL;
    int64_t shape[3] = {info->height, info->width, channels ? channels : info->channels};
    int nd = shape[2] == 1 && o.ndim == 2 ? 2 : 3;
    int dtype = info->bit_depth == 16 ? L3GPU_U16 : L3GPU_U8;
    PyObject *r = NULL;
    if (o.device >= 0)
        PyErr_SetString(PyExc_ValueError, "l3.decode: out is in GPU memory; l3.decode runs on "
                                          "the CPU (use decode_batch(..., out=) for a GPU "
                                          "tensor)");
    else if (!l3py_out_check(&o, dtype, nd, shape, "l3.decode") &&
             !decode_to(b, info, threads, verify, channels, o.data, o.nbytes))
        r = (Py_INCREF(out_obj), out_obj);
    l3py_out_release(&o);
    return r;
}

PyObject *l3py_decode(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"buf", "threads", "verify", "channels", "squeeze", "out", NULL};
    PyObject *obj, *threads_obj = NULL, *channels_obj = Py_None, *out_obj = Py_None;
    int verify = 0, squeeze = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OpOpO:decode", kwlist, &obj, &threads_obj,
                                     &verify, &channels_obj, &squeeze, &out_obj))
        return NULL;
    unsigned threads;
    int channels = 0;
    if (l3py_parse_threads(threads_obj, &threads) ||
        l3py_parse_channels(channels_obj, &channels))
        return NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(obj, &b, PyBUF_SIMPLE))
        return NULL;
    struct l3_info info;
    int st = l3_read_info(b.buf, (size_t)b.len, &info, NULL);
    if (st) {
        PyBuffer_Release(&b);
        return l3py_raise_status(st, "l3.decode");
    }
    if (out_obj != Py_None) {
        PyObject *r = decode_into(&b, &info, threads, verify, channels, out_obj);
        PyBuffer_Release(&b);
        return r;
    }
    npy_intp dims[3] = {info.height, info.width, channels ? channels : info.channels};
    PyObject *arr = PyArray_SimpleNew(3, dims, info.bit_depth == 16 ? NPY_UINT16 : NPY_UINT8);
    if (!arr) {
        PyBuffer_Release(&b);
        return NULL;
    }
    st = decode_to(&b, &info, threads, verify, channels, PyArray_DATA((PyArrayObject *)arr),
                   (size_t)PyArray_NBYTES((PyArrayObject *)arr));
    PyBuffer_Release(&b);
    if (st) {
        Py_DECREF(arr);
        return NULL;
    }
    return squeeze ? squeeze_gray(arr) : arr;
}

PyObject *l3py_encode(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"data", "threads", "tile", NULL};
    PyObject *obj, *threads_obj = NULL;
    unsigned tile = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OI:encode", kwlist, &obj, &threads_obj,
                                     &tile))
        return NULL;
    unsigned threads;
    if (l3py_parse_threads(threads_obj, &threads))
        return NULL;
    struct l3_encode_options opt;
    memset(&opt, 0, sizeof opt);
    opt.threads = threads;
    opt.tile_width = opt.tile_height = tile;
    void *out = NULL;
    size_t out_size = 0;
    int st;
    if (PyBytes_Check(obj) || PyByteArray_Check(obj) || PyMemoryView_Check(obj)) {
#ifdef L3PY_NO_PNG /* built without the codec's PNG side (gpu/bench/device_check.sh) */
        PyErr_SetString(PyExc_RuntimeError,
                        "l3.encode: this build has no PNG support (pass a numpy array)");
        return NULL;
#else
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
#endif
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
        return l3py_raise_status(st, "l3.encode");
    PyObject *res = PyBytes_FromStringAndSize(out, (Py_ssize_t)out_size);
    l3_free(out);
    return res;
}
