/* decode_list.c — l3.decode_list: a batch of images of any sizes decoded on
 * the CPU into one numpy array each (libl3gpu's CPU batch decoder with one
 * output pointer per image, threads spread over images and tiles). dtype None
 * keeps each image's sample type (uint16 for 16-bit, else uint8); a failed
 * image is None in the list (status.c: strict=True raises, None warns). */
#include "l3py.h"

#include <string.h>

/* One group of images sharing an output format: decodes IDX[0..k) of IN. */
static int decode_group(const struct l3gpu_input *in, const Py_ssize_t *idx, Py_ssize_t k,
                        const struct l3gpu_format *fmt, void **ptrs, int *status,
                        unsigned threads)
{
    if (!k)
        return 0;
    struct l3gpu_input *gin = PyMem_Calloc((size_t)k, sizeof *gin);
    void **gptr = PyMem_Calloc((size_t)k, sizeof *gptr);
    int *gst = PyMem_Calloc((size_t)k, sizeof *gst);
    int r = -1;
    if (!gin || !gptr || !gst) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        gin[j] = in[idx[j]];
        gptr[j] = ptrs[idx[j]];
    }
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = l3gpu_cpu_decode_batch(gin, (size_t)k, fmt, NULL, 0, gptr, gst, threads);
    Py_END_ALLOW_THREADS
    if (st != L3GPU_OK && st != L3GPU_ERR_IMAGE) {
        PyErr_Format(st == L3GPU_ERR_NOMEM ? PyExc_MemoryError : PyExc_RuntimeError,
                     "l3: batch decode failed: %s", l3gpu_strerror(st));
        goto out;
    }
    for (Py_ssize_t j = 0; j < k; j++)
        status[idx[j]] = gst[j];
    r = 0;
out:
    PyMem_Free(gin);
    PyMem_Free(gptr);
    PyMem_Free(gst);
    return r;
}

static int npy_type(int dtype)
{
    switch (dtype) {
    case L3GPU_U16: return NPY_UINT16;
    case L3GPU_F32: return NPY_FLOAT32;
    case L3GPU_F16: return NPY_FLOAT16;
    default: return NPY_UINT8;
    }
}

/* The output array of one image (shape from its header), or Py_None when the
 * header does not read (status set). */
static PyObject *new_output(const struct l3gpu_input *in, struct l3gpu_format *fmt,
                            int native_dtype, int squeeze, int *status)
{
    struct l3_info info;
    int st = l3_read_info(in->data, in->size, &info, NULL);
    if (st) {
        *status = st;
        Py_RETURN_NONE;
    }
    if (native_dtype)
        fmt->dtype = info.bit_depth == 16 ? L3GPU_U16 : L3GPU_U8;
    uint32_t shape[3];
    size_t bytes;
    if ((st = l3gpu_output_shape(&info, fmt, shape, &bytes)) != L3GPU_OK) {
        *status = L3_ERR_INVALID_ARG;
        Py_RETURN_NONE;
    }
    npy_intp dims[3] = {shape[0], shape[1], shape[2]};
    int nd = 3;
    if (squeeze && fmt->layout == L3GPU_HWC && shape[2] == 1)
        nd = 2;
    else if (squeeze && fmt->layout == L3GPU_CHW && shape[0] == 1)
        nd = 2, dims[0] = shape[1], dims[1] = shape[2];
    return PyArray_SimpleNew(nd, dims, npy_type(fmt->dtype));
}

PyObject *l3py_decode_list(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"bufs", "layout", "dtype", "channels", "mean", "std", "scale",
                             "threads", "strict", "squeeze", NULL};
    PyObject *bufs, *dtype_obj = Py_None, *channels_obj = Py_None, *mean_obj = NULL;
    PyObject *std_obj = NULL, *scale_obj = NULL, *threads_obj = NULL, *strict = Py_None;
    const char *layout = "HWC";
    int squeeze = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$sOOOOOOOp:decode_list", kwlist, &bufs,
                                     &layout, &dtype_obj, &channels_obj, &mean_obj, &std_obj,
                                     &scale_obj, &threads_obj, &strict, &squeeze))
        return NULL;
    struct l3gpu_format fmt;
    l3gpu_format_init(&fmt);
    int native = dtype_obj == Py_None;
    unsigned threads;
    /* native dtype: checked as uint8 here (mean/std need a float dtype anyway) */
    if ((!native && l3py_parse_dtype(dtype_obj, &fmt.dtype)) ||
        l3py_parse_threads(threads_obj, &threads) ||
        l3py_parse_format(layout, channels_obj, mean_obj, std_obj, scale_obj, &fmt))
        return NULL;

    PyObject *seq = PySequence_Fast(bufs, "bufs must be a sequence of bytes-like objects");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_buffer *views = PyMem_Calloc((size_t)n + 1, sizeof *views);
    struct l3gpu_input *in = PyMem_Calloc((size_t)n + 1, sizeof *in);
    int *status = PyMem_Calloc((size_t)n + 1, sizeof *status);
    void **ptrs = PyMem_Calloc((size_t)n + 1, sizeof *ptrs);
    Py_ssize_t *idx8 = PyMem_Calloc((size_t)n + 1, sizeof *idx8);
    Py_ssize_t *idx16 = PyMem_Calloc((size_t)n + 1, sizeof *idx16);
    PyObject *list = NULL, *result = NULL;
    Py_ssize_t got = 0, k8 = 0, k16 = 0;
    if (!views || !in || !status || !ptrs || !idx8 || !idx16) {
        PyErr_NoMemory();
        goto out;
    }
    if (l3py_get_inputs(seq, views, in))
        goto out;
    got = n;
    if (!(list = PyList_New(n)))
        goto out;
    for (Py_ssize_t i = 0; i < n; i++) {
        struct l3gpu_format f = fmt;
        PyObject *arr = new_output(&in[i], &f, native, squeeze, &status[i]);
        if (!arr)
            goto out;
        PyList_SET_ITEM(list, i, arr);
        if (arr == Py_None)
            continue;
        ptrs[i] = PyArray_DATA((PyArrayObject *)arr);
        if (native && f.dtype == L3GPU_U16)
            idx16[k16++] = i;
        else
            idx8[k8++] = i;
    }
    struct l3gpu_format f16 = fmt;
    f16.dtype = L3GPU_U16;
    if (native)
        fmt.dtype = L3GPU_U8;
    if (decode_group(in, idx8, k8, &fmt, ptrs, status, threads) ||
        decode_group(in, idx16, k16, &f16, ptrs, status, threads))
        goto out;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (status[i] && PyList_GET_ITEM(list, i) != Py_None) {
            Py_DECREF(PyList_GET_ITEM(list, i));
            Py_INCREF(Py_None);
            PyList_SET_ITEM(list, i, Py_None);
        }
    }
    if (l3py_report_failures("decode_list", "they are None in the list", status, n, strict))
        goto out;
    result = list;
    list = NULL;
out:
    l3py_release_inputs(views, got);
    PyMem_Free(views);
    PyMem_Free(in);
    PyMem_Free(status);
    PyMem_Free(ptrs);
    PyMem_Free(idx8);
    PyMem_Free(idx16);
    Py_DECREF(seq);
    Py_XDECREF(list);
    return result;
}
