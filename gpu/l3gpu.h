/* l3gpu.h — batch decoding of L3 images into tensors, on a CUDA GPU or on the CPU.
 *
 * One public header for libl3gpu (CUDA, built when nvcc is available) and
 * libl3gpu_cpu (the CPU reference of the same batch decode, always built).
 * Plain C ABI: no CUDA header is needed to include it. Streams are passed as
 * `void *` and are CUDA `cudaStream_t` values (NULL = the legacy default
 * stream); device pointers are plain `void *`.
 *
 * What a batch decode does
 *   N .l3 buffers -> either one contiguous tensor (all images must give the
 *   same output shape) or one output buffer per image (mixed sizes). Every
 *   image is converted on the fly to the requested layout (HWC or CHW), dtype
 *   (uint8, uint16, float32, float16), channel count (native, or forced to
 *   1/3/4) and, for float outputs, an optional per-channel scale/mean/std.
 *   The conversion arithmetic lives in l3_convert.h and the per-tile decoding
 *   in the codec's l3_tile.h; both are compiled for host and device, so the
 *   CPU functions below produce bit-identical results to the GPU ones.
 *
 * Sample semantics of the converted output (both CPU and GPU)
 *   - integer outputs are rescaled to the full range of the output type:
 *     out = round(v * outmax / srcmax) (8-bit -> uint16 is v*257, 16-bit ->
 *     uint8 is round(v/257), 1/2/4-bit gray -> v*255/1, v*85, v*17).
 *   - float outputs: t = v / srcmax, then t = (t * scale[c] - mean[c]) / std[c],
 *     every step an IEEE float32 operation rounded to nearest (steps with
 *     scale 1, mean 0, std 1 are exact no-ops). With scale 1 this equals
 *     torchvision's ToTensor() followed by Normalize(mean, std).
 *     float16 output is that float32 value rounded to nearest-even.
 *   - palette images, channels native (0): the palette index as an 8-bit
 *     sample (uint8 index; other dtypes scale it like any 8-bit sample).
 *     Forced 3/4 channels expand through the palette (RGB / RGBA, alpha from
 *     the tRNS table); forced 1 channel is the luma of the palette colour.
 *   - forced channels: gray -> 3: (g,g,g); -> 4: (g,g,g,A); RGB -> 1: luma
 *     (r*19595 + g*38470 + b*7471 + 32768) >> 16 (the ITU-R 601 weights, as
 *     Pillow's convert("L")); RGBA/gray+alpha -> 3 or 1 drop alpha;
 *     A = opaque (srcmax), or 0 where the pixel equals the tRNS key colour.
 *
 * Status
 *   Functions return 0 (L3GPU_OK) or a positive enum l3gpu_status. Per-image
 *   statuses (status_ret arrays) are 0, an enum l3_status from the codec
 *   (L3_ERR_CORRUPT, L3_ERR_TRUNCATED, ...) or an L3GPU_IMG_* code; an image
 *   whose status is not 0 has its output slot zero-filled, the others decode.
 *   The batch call then returns L3GPU_ERR_IMAGE.
 */
#ifndef L3GPU_H
#define L3GPU_H

#include <stddef.h>
#include <stdint.h>

#include "l3.h"

/* L3GPU_API marks the public functions (see L3_API in l3.h). */
#ifndef L3GPU_API
#if defined(__GNUC__) || defined(__clang__)
#define L3GPU_API __attribute__((visibility("default")))
#else
#define L3GPU_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum l3gpu_status {
    L3GPU_OK = 0,
    L3GPU_ERR_INVALID_ARG = 1,       /* NULL pointer, bad enum, mean/std for an integer dtype */
    L3GPU_ERR_NOMEM = 2,             /* host or device allocation failed */
    L3GPU_ERR_NO_DRIVER = 3,         /* no CUDA driver, or one too old for this build */
    L3GPU_ERR_NO_DEVICE = 4,         /* no CUDA device, or the index is out of range */
    L3GPU_ERR_CUDA = 5,              /* another CUDA error (l3gpu_ctx_error() names it) */
    L3GPU_ERR_IMAGE = 6,             /* one or more images failed: see the statuses */
    L3GPU_ERR_OUTPUT_TOO_SMALL = 7,  /* out_size below what the batch needs */
    L3GPU_ERR_SCRATCH_TOO_SMALL = 8, /* caller scratch below l3gpu_scratch_size() */
    L3GPU_ERR_NOT_BUILT = 9,         /* this build has no CUDA support */
    L3GPU_ERR_THREAD = 10,           /* could not start worker threads */
    L3GPU_ERR_BUSY = 11,             /* two batches in flight on the context: finish one */
};

/* Per-image codes beyond enum l3_status (values >= 100). */
enum l3gpu_image_status {
    L3GPU_IMG_SHAPE = 100,   /* output shape differs from the batch's first valid image */
    L3GPU_IMG_ABORTED = 101, /* not decoded: the batch failed as a whole (CUDA error) */
    L3GPU_IMG_PENDING = 102, /* GPU batch not finished yet (see l3gpu_batch_finish) */
};

/* Static English text for an l3gpu_status; never NULL. */
L3GPU_API const char *l3gpu_strerror(int status);
/* Static English text for a per-image status (l3_status or L3GPU_IMG_*). */
L3GPU_API const char *l3gpu_image_strerror(int image_status);

enum l3gpu_layout { L3GPU_HWC = 0, L3GPU_CHW = 1 };
enum l3gpu_dtype { L3GPU_U8 = 0, L3GPU_U16 = 1, L3GPU_F32 = 2, L3GPU_F16 = 3 };

/* Where the input bytes live. */
enum l3gpu_memory {
    L3GPU_MEM_HOST = 0,   /* pageable host memory */
    L3GPU_MEM_PINNED = 1, /* page-locked host memory (cudaHostAlloc/Register) */
    L3GPU_MEM_DEVICE = 2, /* device memory of the context's device */
};

/* Output format of a batch. Initialise with l3gpu_format_init(). */
struct l3gpu_format {
    int layout;     /* enum l3gpu_layout */
    int dtype;      /* enum l3gpu_dtype */
    int channels;   /* 0 = native (1..4 as the image has), or 1, 3, 4 */
    int normalize;  /* float dtypes only: apply scale/mean/std */
    float scale[4]; /* per output channel; defaults 1 */
    float mean[4];  /* defaults 0 */
    float std[4];   /* defaults 1; must be non-zero */
};

/* One input buffer. */
struct l3gpu_input {
    const void *data;
    size_t size;
};

/* HWC, uint8, native channels, no normalisation. */
L3GPU_API void l3gpu_format_init(struct l3gpu_format *fmt);
/* Checks a format: L3GPU_OK or L3GPU_ERR_INVALID_ARG. */
L3GPU_API int l3gpu_format_check(const struct l3gpu_format *fmt);
/* Bytes of one output element (1, 2, 4, 2). 0 for a bad dtype. */
L3GPU_API size_t l3gpu_dtype_size(int dtype);

/* Output shape of one image in the format's layout order ([H, W, C] for HWC,
 * [C, H, W] for CHW) and its size in bytes. Thread-safe. */
L3GPU_API int l3gpu_output_shape(const struct l3_info *info, const struct l3gpu_format *fmt,
                                 uint32_t shape_ret[3], size_t *bytes_ret);

/* ---------------- CPU (libl3gpu_cpu; always available) ---------------- */

/* Decodes a batch on the CPU with up to `threads` threads (0 = 1) spread over
 * images and tiles. Exactly one of `out` (contiguous: n images of equal
 * output shape, out_size bytes) and `out_ptrs` (n host buffers, each at least
 * l3gpu_output_shape()'s bytes; out_size ignored) is non-NULL. status_ret (n
 * entries, required) receives each image's status. Returns L3GPU_OK,
 * L3GPU_ERR_IMAGE (some images failed, the others are decoded) or an error
 * about the call itself (nothing decoded). Thread-safe (no shared state). */
L3GPU_API int l3gpu_cpu_decode_batch(const struct l3gpu_input *in, size_t n,
                                     const struct l3gpu_format *fmt, void *out,
                                     size_t out_size, void *const *out_ptrs, int *status_ret,
                                     unsigned threads);

/* Converts an already decoded image (l3_decode's layout: interleaved samples,
 * rows `stride` bytes apart, 0 = tight) to the format: the same arithmetic as
 * the batch decoders. out receives l3gpu_output_shape()'s bytes. */
L3GPU_API int l3gpu_cpu_convert(const struct l3_info *info, const void *pixels, size_t stride,
                                const struct l3gpu_format *fmt, void *out);

/* ---------------- CUDA (libl3gpu; only when built with nvcc) ---------------- */

/* A decoder bound to one CUDA device. It owns two sets of pinned staging and
 * device descriptor memory (so that the host packs one batch while the
 * device decodes the previous one), the default scratch and a stream-ordered
 * memory pool, all reused and grown on demand, never with a device-wide
 * synchronisation (buffers replaced by larger ones are freed stream-ordered,
 * page-locked ones when the context is destroyed).
 *
 * Devices: every call switches the calling thread to the context's device
 * and back; "back" only to a device whose primary context exists, so a
 * thread that never used a device gets no context there (it is left on the
 * context's device, as PyTorch's device guards leave it).
 * Errors: a per-thread CUDA error left by an earlier failed call (anyone's)
 * does not fail a batch; the library reads launch errors after clearing it. */
typedef struct l3gpu_ctx l3gpu_ctx;

/* Number of CUDA devices; L3GPU_ERR_NO_DRIVER / L3GPU_ERR_NO_DEVICE (with
 * *count_ret = 0) when there is no usable GPU. Never aborts. Thread-safe. */
L3GPU_API int l3gpu_device_count(int *count_ret);
/* The calling thread's current CUDA device (cudaGetDevice: 0 when it never
 * chose one; makes no context). Thread-safe. */
L3GPU_API int l3gpu_current_device(int *device_ret);

/* Creates a context on `device`. Without a driver or device it returns
 * L3GPU_ERR_NO_DRIVER or L3GPU_ERR_NO_DEVICE and sets *ctx_ret = NULL (no
 * crash, no abort). Thread-safe. */
L3GPU_API int l3gpu_ctx_create(int device, l3gpu_ctx **ctx_ret);
/* Waits for the context's own pending work, then frees it. NULL is fine. Not
 * to be called while another thread uses the context. */
L3GPU_API void l3gpu_ctx_destroy(l3gpu_ctx *ctx);
/* Text of the last error seen by the context (owned by ctx; not for use while
 * another thread calls into the context). */
L3GPU_API const char *l3gpu_ctx_error(const l3gpu_ctx *ctx);

/* Device scratch a batch of these images needs (the decoded tile planes and
 * per-tile tables). Thread-safe. */
L3GPU_API int l3gpu_scratch_size(const struct l3_info *infos, size_t n, size_t *bytes_ret);

/* Decodes a batch on the context's device, asynchronously on `stream` (a
 * cudaStream_t of the context's device; NULL = legacy default stream). All
 * tiles of all images are decoded in one kernel launch and converted in a
 * second one; pageable host inputs are packed into pinned staging and copied
 * with one cudaMemcpyAsync. Nothing waits for the device except reading the
 * headers of L3GPU_MEM_DEVICE inputs (a small copy + a synchronisation of
 * `stream`). A batch that uses the context's scratch is ordered after the
 * previous batch (a device-side wait, whatever its stream).
 *
 * Headers and tile tables are validated on the host before the launch
 * (l3_read_layout); images failing it get their status at once and are not
 * decoded. `out` (contiguous, out_size bytes) or `out_ptrs` (n pointers):
 * device memory of the context's device, aligned for the dtype; otherwise as
 * for l3gpu_cpu_decode_batch. scratch: NULL to use the context's own, else
 * device memory of scratch_size >= l3gpu_scratch_size(), 2-byte aligned.
 * Inputs: L3GPU_MEM_HOST pageable (or any host) memory, L3GPU_MEM_PINNED
 * page-locked memory, L3GPU_MEM_DEVICE device memory of the context's device.
 * Pointers that do not satisfy this are L3GPU_ERR_INVALID_ARG, found before
 * anything is launched.
 *
 * status_ret (n entries, host) receives the host-side validation results at
 * once; images that were launched read L3GPU_IMG_PENDING until
 * l3gpu_batch_finish(ctx, status_ret, n). It identifies the batch: up to two
 * batches may be in flight on a context, a third call returns L3GPU_ERR_BUSY
 * (nothing done) until one of them is finished. Return value: L3GPU_OK,
 * L3GPU_ERR_IMAGE (some image failed validation) or a call error (then no
 * image is pending; work already queued stays ordered before later batches).
 *
 * Thread-safe: calls on one context are serialised by a mutex, and each
 * thread's batches keep their own statuses. Pageable inputs may be reused as
 * soon as the call returns; pinned and device inputs, out and scratch must
 * stay valid and unchanged until `stream` reaches this work. */
L3GPU_API int l3gpu_decode_batch(l3gpu_ctx *ctx, const struct l3gpu_input *in, size_t n,
                                 int memory, const struct l3gpu_format *fmt, void *out,
                                 size_t out_size, void *const *out_ptrs, void *scratch,
                                 size_t scratch_size, int *status_ret, void *stream);

/* Blocks until the batch decoded with status_ret has completed (waits on
 * that batch's event, not on the stream or the device), then replaces its
 * L3GPU_IMG_PENDING entries with the kernel's per-image results. Returns
 * L3GPU_OK, L3GPU_ERR_IMAGE or L3GPU_ERR_CUDA (pending entries become
 * L3GPU_IMG_ABORTED). Calling it again for a finished batch only recomputes
 * the return value; PENDING entries that belong to no batch of the context
 * are L3GPU_ERR_INVALID_ARG. */
L3GPU_API int l3gpu_batch_finish(l3gpu_ctx *ctx, int *status_ret, size_t n);

/* Benchmarks: when enabled, each batch records CUDA events around its two
 * kernels; l3gpu_ctx_last_timing() then gives the milliseconds of the last
 * batch's decode and convert kernels (it waits for that batch). */
L3GPU_API int l3gpu_ctx_set_timing(l3gpu_ctx *ctx, int enable);
L3GPU_API int l3gpu_ctx_last_timing(l3gpu_ctx *ctx, float *decode_ms_ret, float *convert_ms_ret);

/* Stream-ordered device memory from the context's caching pool (freed
 * memory is kept for reuse, not returned to the driver): usable by work on
 * `stream` enqueued after the call (other streams: after an event wait);
 * l3gpu_free_async releases it once `stream` reaches that point. Neither
 * synchronises anything. */
L3GPU_API int l3gpu_alloc_async(l3gpu_ctx *ctx, size_t size, void *stream, void **ptr_ret);
L3GPU_API int l3gpu_free_async(l3gpu_ctx *ctx, void *ptr, void *stream);
/* Makes `waiter` wait (on the device) for the work enqueued on `producer` so
 * far: an event recorded on producer, waited on by waiter. No-op when they
 * are the same stream. Both streams of the context's device. */
L3GPU_API int l3gpu_stream_wait(l3gpu_ctx *ctx, void *waiter, void *producer);

/* Small helpers so that callers without CUDA headers (the Python module,
 * tests) can manage device memory on the context's device. l3gpu_malloc and
 * l3gpu_free are cudaMalloc/cudaFree (cudaFree synchronises the device). */
L3GPU_API int l3gpu_malloc(l3gpu_ctx *ctx, size_t size, void **ptr_ret);
L3GPU_API void l3gpu_free(l3gpu_ctx *ctx, void *ptr);
L3GPU_API int l3gpu_memcpy_to_host(l3gpu_ctx *ctx, void *dst, const void *src, size_t size);
L3GPU_API int l3gpu_memcpy_to_device(l3gpu_ctx *ctx, void *dst, const void *src, size_t size);
L3GPU_API int l3gpu_stream_synchronize(l3gpu_ctx *ctx, void *stream);
/* Device index the context is bound to. */
L3GPU_API int l3gpu_ctx_device(const l3gpu_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif /* L3GPU_H */
