/* cuda.c — the CUDA path of the extension: one libl3gpu context per device,
 * created on first use and bound to the process that created it (CUDA state
 * does not survive fork()), device buffers for batches, and the GPU batch
 * decode. Without CUDA support built (no L3_HAVE_CUDA) every entry exists and
 * says so. */
#include "l3py.h"

#include <unistd.h>

#ifdef L3_HAVE_CUDA
const int l3py_built_with_cuda = 1;

static l3gpu_ctx *g_ctx[L3PY_MAX_DEVICES];
static pid_t g_ctx_pid[L3PY_MAX_DEVICES];

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

int l3py_cuda_prepare(int dev)
{
    return get_ctx(dev) ? 0 : -1;
}

int l3py_cuda_decode_batch(BatchObject *b, const struct l3gpu_input *in, size_t n,
                           const struct l3gpu_format *fmt, int *status, uintptr_t stream)
{
    int dev = b->device;
    l3gpu_ctx *ctx = get_ctx(dev);
    if (!ctx)
        return -1;
    /* decode_batch(out=) gives device memory of its own (b->out) */
    int st = b->out ? L3GPU_OK : l3gpu_malloc(ctx, b->nbytes, &b->data);
    if (st) {
        b->data = NULL;
        PyErr_Format(PyExc_MemoryError, "l3: cannot allocate %zu bytes on cuda:%d (%s)",
                     b->nbytes, dev, l3gpu_ctx_error(ctx));
        return -1;
    }
    int fin;
    Py_BEGIN_ALLOW_THREADS
    st = l3gpu_decode_batch(ctx, in, n, L3GPU_MEM_HOST, fmt, b->data, b->nbytes, NULL, NULL, 0,
                            status, (void *)stream);
    fin = (st == L3GPU_OK || st == L3GPU_ERR_IMAGE) ? l3gpu_batch_finish(ctx, status, n) : st;
    Py_END_ALLOW_THREADS
    if (st == L3GPU_OK || st == L3GPU_ERR_IMAGE)
        st = fin;
    if (st != L3GPU_OK && st != L3GPU_ERR_IMAGE) {
        PyErr_Format(PyExc_RuntimeError, "l3: GPU batch decode failed: %s (%s)",
                     l3gpu_strerror(st), l3gpu_ctx_error(ctx));
        return -1;
    }
    return 0;
}

PyObject *l3py_copy_to_host(PyObject *self, PyObject *arg)
{
    (void)self;
    if (!PyObject_TypeCheck(arg, &l3py_batch_type))
        return PyErr_Format(PyExc_TypeError, "_copy_to_host: an l3.Batch, not %s",
                            Py_TYPE(arg)->tp_name);
    BatchObject *b = (BatchObject *)arg;
    if (b->device < 0)
        return PyBytes_FromStringAndSize(b->data, (Py_ssize_t)b->nbytes);
    l3gpu_ctx *ctx = get_ctx(b->device);
    if (!ctx)
        return NULL;
    PyObject *r = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)b->nbytes);
    if (!r)
        return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = l3gpu_memcpy_to_host(ctx, PyBytes_AS_STRING(r), b->data, b->nbytes);
    Py_END_ALLOW_THREADS
    if (st) {
        Py_DECREF(r);
        return PyErr_Format(PyExc_RuntimeError, "_copy_to_host: %s (%s)", l3gpu_strerror(st),
                            l3gpu_ctx_error(ctx));
    }
    return r;
}

void l3py_cuda_free(int dev, void *data)
{
    if (dev >= 0 && dev < L3PY_MAX_DEVICES && g_ctx[dev] && g_ctx_pid[dev] == getpid())
        l3gpu_free(g_ctx[dev], data);
}

PyObject *l3py_cuda_available(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    int n = 0;
    int st = l3gpu_device_count(&n);
    return PyBool_FromLong(st == 0 && n > 0);
}

#else /* no CUDA support built */
const int l3py_built_with_cuda = 0;

int l3py_cuda_prepare(int dev)
{
    (void)dev;
    PyErr_SetString(PyExc_RuntimeError,
                    "l3: this build has no CUDA support (built without nvcc); use "
                    "device='cpu'");
    return -1;
}

int l3py_cuda_decode_batch(BatchObject *b, const struct l3gpu_input *in, size_t n,
                           const struct l3gpu_format *fmt, int *status, uintptr_t stream)
{
    (void)b, (void)in, (void)n, (void)fmt, (void)status, (void)stream;
    return l3py_cuda_prepare(0);
}

PyObject *l3py_copy_to_host(PyObject *self, PyObject *arg)
{
    (void)self;
    if (!PyObject_TypeCheck(arg, &l3py_batch_type))
        return PyErr_Format(PyExc_TypeError, "_copy_to_host: an l3.Batch, not %s",
                            Py_TYPE(arg)->tp_name);
    BatchObject *b = (BatchObject *)arg;
    return PyBytes_FromStringAndSize(b->data, (Py_ssize_t)b->nbytes); /* CPU only here */
}

void l3py_cuda_free(int dev, void *data)
{
    (void)dev, (void)data; /* never allocated */
}

PyObject *l3py_cuda_available(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_RETURN_FALSE;
}
#endif
