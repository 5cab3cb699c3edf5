/* cuda.c — the CUDA path of the extension: one libl3gpu context per device
 * (created on first use, bound to the process that created it: CUDA state
 * does not survive fork()), batch memory from the context's stream-ordered
 * caching pool (no cudaMalloc/cudaFree, no device synchronisation per
 * batch), GPU batch decodes that return as soon as the work is queued, so
 * that the host packs batch N+1 while the device decodes batch N (the
 * library keeps two batches in flight per context; the oldest is finished
 * when a third comes), and their statuses when asked for. Without CUDA
 * support built (no L3_HAVE_CUDA) every entry exists and says so.
 *
 * The GIL protects the tables below and the CUDA fields of every Batch. */
#include "l3py.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

#ifdef L3_HAVE_CUDA
const int l3py_built_with_cuda = 1;

struct device_state {
    l3gpu_ctx *ctx;
    pid_t pid;                /* process that created ctx */
    BatchObject *inflight[2]; /* decoded, not finished (borrowed; oldest first) */
    int ninflight;
};
static struct device_state g_dev[L3PY_MAX_DEVICES];
static pid_t g_load_pid; /* the process that loaded the module */

__attribute__((constructor)) static void remember_pid(void)
{
    g_load_pid = getpid();
}

/* RuntimeError for a device that cannot be used; after fork() (this process
 * is not the one that loaded the module, or torch says so) the message says
 * what to do instead. */
static void unusable(int dev, int st, const char *detail)
{
    if (getpid() != g_load_pid || l3py_torch_in_bad_fork())
        PyErr_Format(PyExc_RuntimeError,
                     "l3: CUDA cannot be used in this process (the runtime says: %s): it "
                     "was forked from a process that had initialised CUDA (a DataLoader "
                     "worker?), and CUDA does not survive fork(). Decode on the GPU in the "
                     "main process and only read the bytes in the workers, or start the "
                     "workers with the 'spawn' method.",
                     detail ? detail : l3gpu_strerror(st));
    else
        PyErr_Format(PyExc_RuntimeError, "l3: CUDA device %d is not usable: %s", dev,
                     detail ? detail : l3gpu_strerror(st));
}

static l3gpu_ctx *get_ctx(int dev)
{
    struct device_state *ds = &g_dev[dev];
    if (ds->ctx && ds->pid != getpid()) {
        unusable(dev, L3GPU_ERR_NO_DRIVER, "the context belongs to the parent process");
        return NULL;
    }
    if (!ds->ctx) {
        l3gpu_ctx *ctx = NULL;
        int st;
        Py_BEGIN_ALLOW_THREADS
        st = l3gpu_ctx_create(dev, &ctx);
        Py_END_ALLOW_THREADS
        if (st) {
            unusable(dev, st, NULL);
            return NULL;
        }
        if (ds->ctx) { /* another thread won the race while the GIL was free */
            l3gpu_ctx_destroy(ctx);
        } else {
            ds->ctx = ctx;
            ds->pid = getpid();
        }
    }
    return ds->ctx;
}

int l3py_cuda_prepare(int *dev)
{
    if (*dev == L3PY_DEVICE_CURRENT) {
        int d = l3py_torch_current_device();
        if (d < 0) {
            int st = l3gpu_current_device(&d);
            if (st) {
                unusable(0, st, NULL);
                return -1;
            }
        }
        *dev = d;
    }
    if (*dev < 0 || *dev >= L3PY_MAX_DEVICES) {
        PyErr_Format(PyExc_ValueError, "bad CUDA device index %d", *dev);
        return -1;
    }
    return get_ctx(*dev) ? 0 : -1;
}

static void inflight_remove(struct device_state *ds, BatchObject *b)
{
    for (int i = 0; i < ds->ninflight; i++)
        if (ds->inflight[i] == b) {
            memmove(&ds->inflight[i], &ds->inflight[i + 1],
                    (size_t)(ds->ninflight - i - 1) * sizeof ds->inflight[0]);
            ds->ninflight--;
            return;
        }
}

/* The caller keeps b alive (dealloc: refcount 0, not to be touched). */
int l3py_cuda_finish(BatchObject *b)
{
    if (!b->pending)
        return 0;
    struct device_state *ds = &g_dev[b->device];
    inflight_remove(ds, b);
    if (ds->pid != getpid()) { /* forked child: the parent's batch */
        PyErr_SetString(PyExc_RuntimeError,
                        "l3: this CUDA batch belongs to the parent process (fork())");
        return -1;
    }
    int *st = b->pending;
    size_t n = (size_t)b->shape[0];
    int r;
    b->finishing++; /* keeps `st` alive while another thread may finish it too */
    Py_BEGIN_ALLOW_THREADS
    r = l3gpu_batch_finish(ds->ctx, st, n);
    Py_END_ALLOW_THREADS
    b->finishing--;
    int ret = 0;
    if (r != L3GPU_OK && r != L3GPU_ERR_IMAGE) {
        PyErr_Format(PyExc_RuntimeError, "l3: GPU batch decode failed: %s (%s)",
                     l3gpu_strerror(r), l3gpu_ctx_error(ds->ctx));
        ret = -1;
    }
    if (!b->status) {
        if (l3py_batch_set_status(b, st) < 0)
            ret = -1;
        else if (ret == 0 && b->strict_mode == -1 && /* strict=None: warn now */
                 l3py_report_failures("decode_batch",
                                      "their slots are zero-filled (see Batch.status)", st,
                                      (Py_ssize_t)n, Py_None))
            ret = -1;
    }
    if (b->finishing == 0 && b->pending == st) {
        PyMem_RawFree(st);
        b->pending = NULL;
    }
    return ret;
}

/* Finishes a batch of the in-flight list (borrowed there: held while the
 * GIL is free). Its error stays its own (its .status raises it). */
static void finish_borrowed(BatchObject *b)
{
    Py_INCREF(b);
    if (l3py_cuda_finish(b))
        PyErr_Clear();
    Py_DECREF(b);
}

int l3py_cuda_decode_batch(BatchObject *b, const struct l3gpu_input *in, size_t n,
                           const struct l3gpu_format *fmt, void *stream)
{
    struct device_state *ds = &g_dev[b->device];
    l3gpu_ctx *ctx = ds->ctx;
    b->stream = stream;
    int *st = PyMem_RawCalloc(n, sizeof *st);
    if (!st) {
        PyErr_NoMemory();
        return -1;
    }
    int r = L3GPU_OK;
    if (!b->out) { /* decode_batch(out=) brings its own device memory */
        Py_BEGIN_ALLOW_THREADS
        r = l3gpu_alloc_async(ctx, b->nbytes, stream, &b->data);
        Py_END_ALLOW_THREADS
    }
    if (r) {
        b->data = NULL;
        PyMem_RawFree(st);
        PyErr_Format(r == L3GPU_ERR_NOMEM ? PyExc_MemoryError : PyExc_RuntimeError,
                     "l3: cannot allocate %zu bytes on cuda:%d (%s)", b->nbytes, b->device,
                     l3gpu_ctx_error(ctx));
        return -1;
    }
    for (;;) {
        /* two batches in flight per context: finish the older one first */
        while (ds->ninflight >= 2)
            finish_borrowed(ds->inflight[0]); /* removes it from the list */
        Py_BEGIN_ALLOW_THREADS
        r = l3gpu_decode_batch(ctx, in, n, L3GPU_MEM_HOST, fmt, b->data, b->nbytes, NULL, NULL,
                               0, st, stream);
        Py_END_ALLOW_THREADS
        if (r != L3GPU_ERR_BUSY)
            break;
        if (ds->ninflight == 0) { /* another thread's batch is not registered yet */
            Py_BEGIN_ALLOW_THREADS
            sched_yield();
            Py_END_ALLOW_THREADS
        } else {
            finish_borrowed(ds->inflight[0]);
        }
    }
    if (r != L3GPU_OK && r != L3GPU_ERR_IMAGE) {
        PyMem_RawFree(st);
        PyErr_Format(r == L3GPU_ERR_INVALID_ARG ? PyExc_ValueError : PyExc_RuntimeError,
                     "l3: GPU batch decode failed: %s (%s)", l3gpu_strerror(r),
                     l3gpu_ctx_error(ctx));
        return -1;
    }
    b->pending = st;
    ds->inflight[ds->ninflight++] = b;
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
    if (l3py_cuda_finish(b)) /* the decode's stream may be any: wait for the batch */
        return NULL;
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

void l3py_cuda_release(BatchObject *b)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    struct device_state *ds = &g_dev[b->device];
    if (b->pending && l3py_cuda_finish(b))
        PyErr_Clear();
    inflight_remove(ds, b);
    if (b->data && !b->out && ds->ctx && ds->pid == getpid()) {
        /* stream order: after the decode and after what every consumer
         * stream had queued by now (their work on this memory) */
        for (int i = 0; i < b->nconsumers; i++)
            (void)l3gpu_stream_wait(ds->ctx, b->stream, b->consumers[i]);
        if (l3gpu_free_async(ds->ctx, b->data, b->stream))
            (void)l3gpu_free_async(ds->ctx, b->data, NULL); /* its stream is gone */
    }
    b->data = NULL;
    if (b->pending && b->finishing == 0) {
        PyMem_RawFree(b->pending);
        b->pending = NULL;
    }
    PyErr_Restore(et, ev, tb);
}

int l3py_cuda_export(BatchObject *b, PyObject *stream_obj)
{
    void *s;
    int none;
    if (l3py_parse_dlpack_stream(stream_obj, &s, &none))
        return -1;
    if (none)
        return 0;
    struct device_state *ds = &g_dev[b->device];
    if (!ds->ctx || ds->pid != getpid()) {
        PyErr_SetString(PyExc_BufferError, "l3.Batch: CUDA batch of another process");
        return -1;
    }
    int known = 0;
    for (int i = 0; i < b->nconsumers; i++)
        known |= b->consumers[i] == s;
    if (!known && b->nconsumers == L3PY_MAX_CONSUMERS) {
        PyErr_Format(PyExc_BufferError, "l3.Batch: exported to more than %d streams",
                     L3PY_MAX_CONSUMERS);
        return -1;
    }
    int r = l3gpu_stream_wait(ds->ctx, s, b->stream); /* the consumer waits for the decode */
    if (r) {
        PyErr_Format(PyExc_BufferError, "l3.Batch: cannot order stream %p after the decode: %s",
                     s, l3gpu_ctx_error(ds->ctx));
        return -1;
    }
    if (!known)
        b->consumers[b->nconsumers++] = s;
    return 0;
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

int l3py_cuda_prepare(int *dev)
{
    (void)dev;
    PyErr_SetString(PyExc_RuntimeError,
                    "l3: this build has no CUDA support (built without nvcc); use "
                    "device='cpu'");
    return -1;
}

int l3py_cuda_decode_batch(BatchObject *b, const struct l3gpu_input *in, size_t n,
                           const struct l3gpu_format *fmt, void *stream)
{
    (void)b, (void)in, (void)n, (void)fmt, (void)stream;
    int dev = 0;
    return l3py_cuda_prepare(&dev);
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

int l3py_cuda_finish(BatchObject *b)
{
    (void)b;
    return 0;
}

void l3py_cuda_release(BatchObject *b)
{
    (void)b; /* never allocated */
}

int l3py_cuda_export(BatchObject *b, PyObject *stream)
{
    (void)b, (void)stream;
    return 0;
}

PyObject *l3py_cuda_available(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_RETURN_FALSE;
}
#endif
