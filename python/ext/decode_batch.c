/* decode_batch.c — l3.decode_batch: parses the output format, takes a view
 * of every input, sizes the batch from the first readable header, decodes on
 * the CPU (libl3gpu's CPU batch decoder, GIL released) or hands the batch to
 * cuda.c (which returns once the work is queued), then reports per-image
 * statuses (status.c: strict=True raises, after waiting for a CUDA batch;
 * None warns, for a CUDA batch when its statuses are known). Also the input
 * views decode_list.c shares. */
#include "l3py.h"

#include <string.h>

/* The per-image output shape and slot size from the first image whose header
 * reads; 0, or -1 with l3.Error when none does. */
static int batch_shape(const struct l3gpu_input *in, Py_ssize_t n,
                       const struct l3gpu_format *fmt, uint32_t shape[3], size_t *slot)
{
    *slot = 0;
    for (Py_ssize_t i = 0; i < n && !*slot; i++) {
        struct l3_info info;
        if (l3_read_info(in[i].data, in[i].size, &info, NULL) == L3_OK)
            l3gpu_output_shape(&info, fmt, shape, slot);
    }
    if (*slot)
        return 0;
    struct l3_info info0;
    int st = l3_read_info(in[0].data, in[0].size, &info0, NULL);
    PyErr_Format(l3py_error, "decode_batch: no image of the batch has a readable header "
                             "(first: %s)", l3_strerror(st));
    return -1;
}

static int cpu_decode_batch(BatchObject *b, const struct l3gpu_input *in, size_t n,
                            const struct l3gpu_format *fmt, int *status, unsigned threads)
{
    if (!b->out && l3py_batch_alloc_host(b))
        return -1;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = l3gpu_cpu_decode_batch(in, n, fmt, b->data, b->nbytes, NULL, status, threads);
    Py_END_ALLOW_THREADS
    if (st != L3GPU_OK && st != L3GPU_ERR_IMAGE) {
        PyErr_Format(st == L3GPU_ERR_NOMEM ? PyExc_MemoryError : PyExc_RuntimeError,
                     "l3: batch decode failed: %s", l3gpu_strerror(st));
        return -1;
    }
    return 0;
}

int l3py_get_inputs(PyObject *seq, Py_buffer *views, struct l3gpu_input *in)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, i), &views[i], PyBUF_SIMPLE)) {
            l3py_release_inputs(views, i);
            return -1;
        }
        in[i].data = views[i].buf;
        in[i].size = (size_t)views[i].len;
    }
    return 0;
}

void l3py_release_inputs(Py_buffer *views, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        PyBuffer_Release(&views[i]);
}

PyObject *l3py_decode_batch(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"bufs", "device", "layout", "dtype", "channels", "mean",
                             "std", "scale", "threads", "strict", "stream", "out", NULL};
    PyObject *bufs, *device_obj = NULL, *dtype_obj = NULL, *channels_obj = Py_None;
    PyObject *mean_obj = NULL, *std_obj = NULL, *scale_obj = NULL, *threads_obj = NULL;
    PyObject *strict = Py_None, *stream_obj = NULL, *out_obj = Py_None;
    const char *layout = "NCHW";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OsOOOOOOOOO:decode_batch", kwlist, &bufs,
                                     &device_obj, &layout, &dtype_obj, &channels_obj,
                                     &mean_obj, &std_obj, &scale_obj, &threads_obj, &strict,
                                     &stream_obj, &out_obj))
        return NULL;
    struct l3gpu_format fmt;
    l3gpu_format_init(&fmt);
    int dev;
    unsigned threads;
    if (l3py_parse_device(device_obj, &dev) || l3py_parse_dtype(dtype_obj, &fmt.dtype) ||
        l3py_parse_threads(threads_obj, &threads))
        return NULL;
    /* out=: the caller's memory; the device follows it ("cuda" takes any GPU's) */
    if (out_obj != Py_None) {
        int odev = l3py_out_device(out_obj);
        if (device_obj && device_obj != Py_None && dev != odev &&
            !(dev == L3PY_DEVICE_CURRENT && odev >= 0)) {
            if (odev < 0 && dev == L3PY_DEVICE_CURRENT)
                return PyErr_Format(PyExc_ValueError, "decode_batch: out is in host memory "
                                                      "but device is cuda");
            if (odev < 0)
                return PyErr_Format(PyExc_ValueError, "decode_batch: out is in host memory "
                                                      "but device is cuda:%d", dev);
            return PyErr_Format(PyExc_ValueError, "decode_batch: out is on cuda:%d but device "
                                                  "is %s", odev, dev < 0 ? "cpu" : "another GPU");
        }
        dev = odev;
    }
    /* a CUDA device and stream are resolved before out is read: a CUDA
     * producer orders its pending work on out before that stream */
    void *stream = NULL;
    if (dev != -1 && (l3py_cuda_prepare(&dev) || l3py_parse_stream(stream_obj, dev, &stream)))
        return NULL;
    struct l3py_out *out = NULL;
    if (out_obj != Py_None) {
        out = PyMem_Calloc(1, sizeof *out);
        if (!out)
            return PyErr_NoMemory();
        if (l3py_out_get(out_obj, (uintptr_t)stream, out, "decode_batch")) {
            PyMem_Free(out);
            return NULL;
        }
        if (out->device != dev) /* said one device by __dlpack_device__, another in the capsule */
            PyErr_Format(PyExc_ValueError, "decode_batch: out's DLPack capsule is on device "
                                           "%d, its __dlpack_device__ said %d", out->device, dev);
        else if ((!dtype_obj || dtype_obj == Py_None) && out->dtype >= 0 && !out->untyped)
            fmt.dtype = out->dtype;
    }
    if (PyErr_Occurred() ||
        l3py_parse_format(layout, channels_obj, mean_obj, std_obj, scale_obj, &fmt)) {
        if (out) {
            l3py_out_release(out);
            PyMem_Free(out);
        }
        return NULL;
    }

    PyObject *seq = PySequence_Fast(bufs, "bufs must be a sequence of bytes-like objects");
    if (!seq) {
        if (out) {
            l3py_out_release(out);
            PyMem_Free(out);
        }
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        Py_DECREF(seq);
        if (out) {
            l3py_out_release(out);
            PyMem_Free(out);
        }
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
    if (l3py_get_inputs(seq, views, in))
        goto out;
    got = n;
    uint32_t shape[3] = {0, 0, 0};
    size_t slot;
    if (batch_shape(in, n, &fmt, shape, &slot))
        goto out;
    if ((size_t)n > SIZE_MAX / slot) {
        PyErr_NoMemory();
        goto out;
    }
    if (out) {
        int64_t want[4] = {n, shape[0], shape[1], shape[2]};
        if (l3py_out_check(out, fmt.dtype, 4, want, "decode_batch"))
            goto out;
    }
    batch = l3py_batch_new(dev, fmt.dtype, n, shape, (size_t)n * slot);
    if (!batch)
        goto out;
    if (out) { /* the batch views the caller's memory and holds it */
        batch->data = out->data;
        batch->out = out;
        out = NULL;
    }
    if (dev < 0) {
        if (cpu_decode_batch(batch, in, (size_t)n, &fmt, status, threads) ||
            l3py_batch_set_status(batch, status) < 0 ||
            l3py_report_failures("decode_batch", "their slots are zero-filled (see Batch.status)",
                                 status, n, strict))
            goto out;
    } else {
        int mode = strict == Py_None ? -1 : PyObject_IsTrue(strict);
        if (mode < 0 && strict != Py_None)
            goto out;
        batch->strict_mode = mode; /* None: warn once the statuses are known */
        if (l3py_cuda_decode_batch(batch, in, (size_t)n, &fmt, stream))
            goto out; /* else queued: the statuses come when asked for */
        if (mode == 1) { /* strict=True: wait for it, raise for failed images */
            if (l3py_cuda_finish(batch))
                goto out;
            for (Py_ssize_t i = 0; i < n; i++)
                status[i] = (int)PyLong_AsLong(PyList_GET_ITEM(batch->status, i));
            if (l3py_report_failures("decode_batch", "", status, n, strict))
                goto out;
        }
    }
    result = (PyObject *)batch;
    batch = NULL;
out:
    l3py_release_inputs(views, got);
    PyMem_Free(views);
    PyMem_Free(in);
    PyMem_Free(status);
    Py_DECREF(seq);
    Py_XDECREF(batch);
    if (out) {
        l3py_out_release(out);
        PyMem_Free(out);
    }
    return result;
}
