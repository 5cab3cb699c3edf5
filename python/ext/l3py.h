/* l3py.h — what the rooms of the `l3._l3` extension share (internal header).
 *
 * The extension is split by concern:
 *   module.c        method table, l3.Error, module init
 *   args.c          keyword parsing shared by the decoders (threads, device, dtype, format)
 *   codec.c         one image through libl3: l3.info, l3.decode, l3.encode (CPU)
 *   batch.c         the l3.Batch object: its buffer, numpy/CUDA array interfaces, repr
 *   hostmem.c       host memory of CPU batches: freed blocks kept for the next batches,
 *                   l3.batch_memory
 *   dlpack.c        DLPack export of a Batch (__dlpack__, __dlpack_device__)
 *   share.c         buffer protocol and pickling of CPU batches
 *   decode_batch.c  l3.decode_batch: inputs, output shape, statuses, the CPU batch path
 *   decode_list.c   l3.decode_list: a list of arrays, each image its own shape (CPU)
 *   status.c        failed images: strict=True raises, None warns, False is silent
 *   cuda.c          the CUDA path: per-device contexts, pool memory, GPU batch decode,
 *                   finishing batches (statuses), fork()
 *   out.c           a caller's output buffer (out=): buffer protocol or DLPack, checked
 *   cuda_stream.c   which device and stream: PyTorch's current ones, "cuda:N", explicit
 *                   streams; DLPack and CUDA-array-interface stream values
 * The pure-Python package (python/l3/) re-exports all of it as `l3`.
 */
#ifndef L3PY_H
#define L3PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
/* one numpy C-API table for the whole extension, imported by module.c */
#define PY_ARRAY_UNIQUE_SYMBOL l3py_numpy_api
#ifndef L3PY_IMPORT_NUMPY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <stddef.h>
#include <stdint.h>

#include "l3.h"
#include "l3gpu.h"

#define L3PY_MAX_DEVICES 16
#define L3PY_DEVICE_CURRENT (-2) /* "cuda": the current CUDA device (PyTorch's, if in use) */
#define L3PY_MAX_CONSUMERS 8     /* streams a batch was exported to, waited on before its free */

/* ---- out.c: a caller's output buffer ---- */
#define L3PY_OUT_MAX_DIMS 8
struct l3py_out {
    void *data;
    size_t nbytes;
    int device;  /* -1: host memory, else the CUDA device index */
    int dtype;   /* enum l3gpu_dtype, -1 for another element type */
    int untyped; /* 1-D bytes (bytearray, memoryview of bytes): only the size is checked */
    int ndim;
    int64_t shape[L3PY_OUT_MAX_DIMS];
    Py_buffer view; /* buffer protocol: held while the memory is in use */
    int have_view;
    PyObject *capsule; /* DLPack: the consumed capsule; its deleter runs at release */
    void *managed;
};
/* Reads OBJ's memory (buffer protocol, else DLPack; for a CUDA tensor the
 * producer orders its work before STREAM). 0, or -1 with an exception naming
 * WHAT. On success l3py_out_release must follow. */
int l3py_out_get(PyObject *obj, uintptr_t stream, struct l3py_out *o, const char *what);
/* The CUDA device OBJ's memory says (DLPack) it is on, else -1. Never raises. */
int l3py_out_device(PyObject *obj);
/* Checks element type, shape (NDIM extents) and element alignment; 0 or -1
 * with ValueError. */
int l3py_out_check(const struct l3py_out *o, int dtype, int ndim, const int64_t *shape,
                   const char *what);
void l3py_out_release(struct l3py_out *o);

/* ---- module.c ---- */
extern PyObject *l3py_error;          /* l3.Error(ValueError), with .status */
extern PyObject *l3py_decode_warning; /* l3.DecodeWarning(UserWarning) */
/* Raises l3.Error("WHAT: <l3_strerror(st)>") with .status = st; returns NULL. */
PyObject *l3py_raise_status(int st, const char *what);

/* ---- args.c: each returns 0, or -1 with a Python exception set ---- */
int l3py_parse_threads(PyObject *obj, unsigned *threads);  /* None/0: all CPUs (<= 256) */
int l3py_parse_device(PyObject *obj, int *device);         /* -1: CPU, L3PY_DEVICE_CURRENT,
                                                               else a CUDA index */
int l3py_parse_dtype(PyObject *obj, int *dtype);           /* enum l3gpu_dtype */
int l3py_parse_layout(const char *layout, int *layout_ret); /* enum l3gpu_layout */
int l3py_parse_channels(PyObject *obj, int *channels);     /* None keeps 0 (native) */
/* mean/std/scale: None (keep defaults), a number, or a sequence of 1..4 values;
 * sets *given when one was passed. */
int l3py_parse_floats(PyObject *obj, const char *name, float v[4], int *given);
/* layout, channels and mean/std/scale into FMT, whose dtype is already set
 * (checks that normalisation has a float dtype and that the values are sane). */
int l3py_parse_format(const char *layout, PyObject *channels, PyObject *mean, PyObject *std,
                      PyObject *scale, struct l3gpu_format *fmt);

/* ---- status.c ---- */
/* Per-image failures of a batch call WHAT: none, or strict False: 0; strict
 * True: l3.Error, -1; strict None (default): l3.DecodeWarning saying OUTCOME
 * ("their slots are zero-filled"), 0 (-1 when the warning is an error). */
int l3py_report_failures(const char *what, const char *outcome, const int *status,
                         Py_ssize_t n, PyObject *strict);

/* ---- codec.c ---- */
PyObject *l3py_info(PyObject *self, PyObject *arg);
PyObject *l3py_decode(PyObject *self, PyObject *args, PyObject *kw);
PyObject *l3py_encode(PyObject *self, PyObject *args, PyObject *kw);

/* ---- batch.c ---- */
typedef struct {
    PyObject_HEAD
    void *data;       /* host (posix_memalign) or device (cuda.c) memory */
    size_t nbytes;
    size_t nbytes_held; /* host: bytes of the block behind data (a reused one may be larger) */
    int device;       /* -1: CPU, else CUDA device index */
    int dtype;        /* enum l3gpu_dtype */
    int ndim;
    int64_t shape[4];
    PyObject *status; /* list of int; NULL while a CUDA batch is not finished */
    PyObject *errors; /* list of str or None; likewise */
    int exported;     /* number of live DLPack exports */
    Py_ssize_t py_shape[4], py_strides[4]; /* the buffer protocol's shape, strides */
    struct l3py_out *out; /* decode_batch(out=): the caller's memory, held; NULL: data is ours */
    /* CUDA batches (the GIL protects these) */
    void *stream;     /* the stream it was decoded on (a cudaStream_t) */
    int *pending;     /* statuses of a batch not finished yet (PyMem_Raw), else NULL */
    int finishing;    /* threads inside l3py_cuda_finish() (they use `pending`) */
    int strict_mode;  /* strict= of the call: -1 None (warn when finished), 0, 1 */
    void *consumers[L3PY_MAX_CONSUMERS]; /* streams given to __dlpack__ */
    int nconsumers;
} BatchObject;

extern PyTypeObject l3py_batch_type;
/* A new batch of shape (n, shape[0..2]) without memory (data NULL), or NULL. */
BatchObject *l3py_batch_new(int device, int dtype, Py_ssize_t n, const uint32_t shape[3],
                            size_t nbytes);
/* Host memory for a CPU batch, from l3py_hostmem_get (a kept block when one
 * fits); Batch_dealloc gives it to l3py_hostmem_put. */
int l3py_batch_alloc_host(BatchObject *b);

/* hostmem.c (the GIL held): a block of at least NBYTES, perhaps a kept one
 * of up to twice that (*size_ret: its size, for l3py_hostmem_put); NULL when
 * out of memory. put keeps or frees a block got from get. */
#define L3PY_POOL_BLOCKS 16
#define L3PY_POOL_DEFAULT_LIMIT ((size_t)512 << 20)
void *l3py_hostmem_get(size_t nbytes, size_t *size_ret);
void l3py_hostmem_put(void *mem, size_t size);
PyObject *l3py_batch_memory(PyObject *self, PyObject *args, PyObject *kw);

/* Fills .status and .errors from per-image statuses; returns the number failed, or -1. */
int l3py_batch_set_status(BatchObject *b, const int *status);
/* A CUDA batch's statuses are known only once it is finished: finishes it
 * (waits for that batch only) if needed. 0, or -1 with an exception set. */
int l3py_batch_resolve(BatchObject *b);
PyObject *l3py_batch_shape_tuple(const BatchObject *b);

/* ---- share.c ---- */
extern PyBufferProcs l3py_batch_as_buffer; /* CPU batches; BufferError for GPU ones */
PyObject *l3py_batch_reduce_ex(PyObject *self, PyObject *protocol);
/* l3._l3._batch_rebuild(data, shape, dtype, status, errors): unpickles a CPU batch. */
PyObject *l3py_batch_rebuild(PyObject *self, PyObject *args);
const char *l3py_dtype_name(int dtype);
const char *l3py_dtype_typestr(int dtype);

/* ---- dlpack.c ---- */
PyObject *l3py_batch_dlpack(PyObject *self, PyObject *args, PyObject *kw);
PyObject *l3py_batch_dlpack_device(PyObject *self, PyObject *unused);

/* ---- decode_batch.c, decode_list.c ---- */
PyObject *l3py_decode_batch(PyObject *self, PyObject *args, PyObject *kw);
PyObject *l3py_decode_list(PyObject *self, PyObject *args, PyObject *kw);
/* Views of the buffers of sequence SEQ (PySequence_Fast) in VIEWS/IN (n
 * entries each); on failure the views taken so far are released. 0 or -1. */
int l3py_get_inputs(PyObject *seq, Py_buffer *views, struct l3gpu_input *in);
void l3py_release_inputs(Py_buffer *views, Py_ssize_t n);

/* ---- cuda.c (every entry exists with or without CUDA support built) ---- */
/* Resolves *dev (L3PY_DEVICE_CURRENT: the current device) and makes sure it
 * can be used now (its context created on first use). 0, or -1 with
 * RuntimeError: not built with CUDA, no usable device, or CUDA after fork(). */
int l3py_cuda_prepare(int *dev);
/* Decodes the batch on b->device, on STREAM (a cudaStream_t from
 * l3py_parse_stream), into memory of the context's pool (or b->out's).
 * Returns when the work is queued: the statuses come with
 * l3py_batch_resolve(). 0, or -1 with an exception. */
int l3py_cuda_decode_batch(BatchObject *b, const struct l3gpu_input *in, size_t n,
                           const struct l3gpu_format *fmt, void *stream);
/* Finishes a pending CUDA batch (fills .status/.errors). 0, or -1. */
int l3py_cuda_finish(BatchObject *b);
/* Before a CUDA batch goes: finishes it, frees its memory in stream order
 * after every stream it was exported to. Never raises. */
void l3py_cuda_release(BatchObject *b);
/* __dlpack__(stream=S): S waits (on the device) for the batch. 0, or -1. */
int l3py_cuda_export(BatchObject *b, PyObject *stream);
PyObject *l3py_cuda_available(PyObject *self, PyObject *unused);
/* l3._l3._copy_to_host(batch) -> bytes: the batch's memory, copied from the
 * device for a GPU batch (tests read GPU batches with it where torch has no
 * CUDA, as on the CPU-executed CUDA runtime). */
PyObject *l3py_copy_to_host(PyObject *self, PyObject *arg);
extern const int l3py_built_with_cuda;

/* ---- cuda_stream.c ---- */
/* PyTorch's current CUDA device when torch is imported and its CUDA is
 * initialised, else -1 (no exception). */
int l3py_torch_current_device(void);
/* A stream argument: NULL/None -> PyTorch's current stream of dev when it
 * uses CUDA, else the legacy default stream (NULL); an int (0 and 1: legacy,
 * 2: per-thread); an object with .cuda_stream (torch) or .ptr (CuPy).
 * 0, or -1 with an exception set. */
int l3py_parse_stream(PyObject *obj, int dev, void **stream);
/* DLPack's stream argument (None: legacy, -1: no synchronisation wanted,
 * 0 refused, 1 legacy, 2 per-thread, else a handle): 0 with *stream set and
 * *none = 1 for -1; -1 with BufferError/TypeError. */
int l3py_parse_dlpack_stream(PyObject *obj, void **stream, int *none);
/* The CUDA array interface's value for a stream (legacy NULL -> 1). */
PyObject *l3py_cai_stream(void *stream);
/* True when torch says this process is a child forked after its parent
 * initialised CUDA (torch.cuda._is_in_bad_fork()). */
int l3py_torch_in_bad_fork(void);
#endif
