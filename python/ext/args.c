/* args.c — keyword arguments shared by the decoders: thread counts, devices,
 * dtypes, layouts, channel counts and normalisation constants. Each parser
 * returns 0, or -1 with a Python exception set. */
#include "l3py.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)(n > 256 ? 256 : n) : 1;
}

int l3py_parse_threads(PyObject *obj, unsigned *threads)
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

int l3py_parse_dtype(PyObject *o, int *dtype)
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

int l3py_parse_floats(PyObject *o, const char *name, float v[4], int *given)
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

int l3py_parse_device(PyObject *o, int *dev)
{
    if (!o || o == Py_None) {
        *dev = -1;
        return 0;
    }
    if (PyLong_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v < 0 || v >= L3PY_MAX_DEVICES) {
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
        *dev = L3PY_DEVICE_CURRENT; /* PyTorch's current device, else CUDA's */
    } else if (!strncmp(n, "cuda:", 5)) {
        char *end;
        long v = strtol(n + 5, &end, 10);
        if (*end || end == n + 5 || v < 0 || v >= L3PY_MAX_DEVICES) {
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

int l3py_parse_layout(const char *layout, int *layout_ret)
{
    if (!strcmp(layout, "NCHW") || !strcmp(layout, "CHW")) {
        *layout_ret = L3GPU_CHW;
    } else if (!strcmp(layout, "NHWC") || !strcmp(layout, "HWC")) {
        *layout_ret = L3GPU_HWC;
    } else {
        PyErr_Format(PyExc_ValueError, "layout must be 'NCHW' or 'NHWC', not '%s'", layout);
        return -1;
    }
    return 0;
}

int l3py_parse_channels(PyObject *obj, int *channels)
{
    if (obj == Py_None)
        return 0;
    long c = PyLong_AsLong(obj);
    if (c == -1 && PyErr_Occurred())
        return -1;
    if (c != 1 && c != 3 && c != 4) {
        PyErr_SetString(PyExc_ValueError, "channels must be None, 1, 3 or 4");
        return -1;
    }
    *channels = (int)c;
    return 0;
}

int l3py_parse_format(const char *layout, PyObject *channels_obj, PyObject *mean_obj,
                      PyObject *std_obj, PyObject *scale_obj, struct l3gpu_format *fmt)
{
    if (l3py_parse_layout(layout, &fmt->layout) || l3py_parse_channels(channels_obj, &fmt->channels))
        return -1;
    int norm = 0;
    if (l3py_parse_floats(mean_obj, "mean", fmt->mean, &norm) ||
        l3py_parse_floats(std_obj, "std", fmt->std, &norm) ||
        l3py_parse_floats(scale_obj, "scale", fmt->scale, &norm))
        return -1;
    fmt->normalize = norm;
    if (norm && fmt->dtype != L3GPU_F32 && fmt->dtype != L3GPU_F16) {
        PyErr_SetString(PyExc_ValueError, "mean/std/scale need dtype float32 or float16");
        return -1;
    }
    if (l3gpu_format_check(fmt)) {
        PyErr_SetString(PyExc_ValueError, "bad mean/std/scale (std must be non-zero, finite)");
        return -1;
    }
    return 0;
}
