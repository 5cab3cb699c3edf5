/* l3gpu.cu — batch decoding of L3 images on a CUDA device.
 *
 * Two launches per batch, whatever its size:
 *   1. l3g_decode_planes: one thread per (tile, plane) of every image of the
 *      batch, in one flat grid. Each thread runs the codec's
 *      l3_tile_plane_decode() (codec/l3_tile.h, the routine the CPU decoder
 *      runs) on its plane's bitstream and writes the plane as uint16 samples
 *      into the scratch area (tile-major, plane after plane).
 *   2. l3g_convert: one thread per output pixel, consecutive threads on
 *      consecutive pixels of one row, so reads of the decoded planes and
 *      writes of the output (any layout/dtype) are coalesced. It undoes the
 *      colour transform with l3_tile_pixel() and converts with l3_convert.h,
 *      the code the CPU reference runs. Images that failed are zero-filled.
 * Headers and tile tables are validated on the host before the launch; the
 * kernels still check every tile span against the payload size, and the tile
 * routine checks every read against its stream length.
 */
#include <cuda_runtime.h>

#include <new>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l3.h"
#include "l3_tile.h"
#include "l3gpu.h"
#include "l3_convert.h"
#include "l3gpu_kernels.h"

/* Kernel launch: <<<>>> under nvcc; built with a host C++ compiler against
 * the CPU-executed test runtime (tests/gpu/fakecuda), the same launch is
 * enqueued on the stream and runs there as a serial loop over the grid. */
#if defined(__CUDACC__)
#define L3G_LAUNCH(kernel, grid, block, stream, ...)                                        \
    kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#elif defined(FAKECUDA)
#define L3G_LAUNCH(kernel, grid, block, stream, ...)                                        \
    fakecuda_launch(#kernel, kernel, (grid), (block), 0, (stream), __VA_ARGS__)
#else
#error "l3gpu.cu is compiled by nvcc (or, for tests, against tests/gpu/fakecuda)"
#endif

namespace {

const size_t ALIGN = 256;
inline size_t align_up(size_t v) { return (v + ALIGN - 1) / ALIGN * ALIGN; }

/* Kernel 1: one thread per (image, plane, tile); body in l3gpu_kernels.h. */
__global__ void __launch_bounds__(128)
l3g_decode_planes(const l3g_image *__restrict__ ims, const uint64_t *__restrict__ item_start,
                  uint32_t n, uint64_t items, uint16_t *__restrict__ scratch,
                  uint8_t *__restrict__ tile_flags, int *__restrict__ status)
{
    uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < items)
        l3g_decode_item(ims, item_start, n, k, scratch, tile_flags, status);
}

/* Kernel 2: blockIdx.y = image (plus y_base), threads stride over its
 * pixels, consecutive threads on consecutive pixels of a row. */
__global__ void __launch_bounds__(256)
l3g_convert(const l3g_image *__restrict__ ims, uint32_t y_base,
            const uint16_t *__restrict__ scratch, const uint8_t *__restrict__ tile_flags,
            const int *__restrict__ status)
{
    const uint32_t img = y_base + blockIdx.y;
    const l3g_image *im = ims + img;
    if (!im->out)
        return;
    const uint64_t npix = (uint64_t)im->cv.width * im->cv.height;
    const int st = status[img];
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t p = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; p < npix; p += stride)
        l3g_convert_pixel(im, st, p, scratch, tile_flags);
}

/* Restores the caller's current device on scope exit. */
struct device_guard {
    int prev = -1;
    explicit device_guard(int dev)
    {
        if (cudaGetDevice(&prev) != cudaSuccess)
            prev = -1;
        if (prev != dev)
            cudaSetDevice(dev);
    }
    ~device_guard()
    {
        int cur = -1;
        if (prev >= 0 && cudaGetDevice(&cur) == cudaSuccess && cur != prev)
            cudaSetDevice(prev);
    }
};

int map_error(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return L3GPU_OK;
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady:
        return L3GPU_ERR_NO_DRIVER;
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
        return L3GPU_ERR_NO_DEVICE;
    case cudaErrorMemoryAllocation:
        return L3GPU_ERR_NOMEM;
    default:
        return L3GPU_ERR_CUDA;
    }
}

} // namespace

struct l3gpu_ctx {
    int device;
    pthread_mutex_t mu;
    char err[192];
    uint8_t *pin = nullptr;       /* pinned staging: descriptors + host inputs */
    size_t pin_cap = 0;
    uint8_t *dev = nullptr;       /* device copy of the staging */
    size_t dev_cap = 0;
    uint8_t *scratch = nullptr;   /* default scratch */
    size_t scratch_cap = 0;
    uint8_t *probe = nullptr;     /* pinned: headers of device inputs */
    size_t probe_cap = 0;
    int *status_pin = nullptr;    /* kernel statuses copied back */
    size_t status_cap = 0;
    size_t last_n = 0;            /* images of the last batch */
    int pending = 0;              /* a batch was launched and not finished */
    cudaEvent_t staging_free = nullptr; /* H2D copy of the last batch done */
    cudaEvent_t done = nullptr;         /* last batch complete */
    cudaStream_t dev_stream = nullptr;  /* stream `dev` and `scratch` were last used on */
    int timing = 0;                     /* record kernel events (benchmarks) */
    cudaEvent_t tev[3] = {nullptr, nullptr, nullptr};
};

static int record(l3gpu_ctx *ctx, cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return L3GPU_OK;
    snprintf(ctx->err, sizeof ctx->err, "%s: %s (%s)", what, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return map_error(e);
}

extern "C" {

int l3gpu_device_count(int *count_ret)
{
    if (!count_ret)
        return L3GPU_ERR_INVALID_ARG;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        *count_ret = 0;
        int st = map_error(e);
        return st == L3GPU_ERR_CUDA ? L3GPU_ERR_NO_DRIVER : st;
    }
    *count_ret = n;
    return n > 0 ? L3GPU_OK : L3GPU_ERR_NO_DEVICE;
}

int l3gpu_ctx_create(int device, l3gpu_ctx **ctx_ret)
{
    if (!ctx_ret)
        return L3GPU_ERR_INVALID_ARG;
    *ctx_ret = nullptr;
    int count = 0;
    int st = l3gpu_device_count(&count);
    if (st)
        return st;
    if (device < 0 || device >= count)
        return L3GPU_ERR_NO_DEVICE;
    l3gpu_ctx *ctx = new (std::nothrow) l3gpu_ctx;
    if (!ctx)
        return L3GPU_ERR_NOMEM;
    ctx->device = device;
    ctx->err[0] = 0;
    pthread_mutex_init(&ctx->mu, nullptr);
    device_guard g(device);
    cudaError_t e = cudaFree(nullptr); /* creates the primary context */
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&ctx->staging_free, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&ctx->done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        st = map_error(e);
        l3gpu_ctx_destroy(ctx);
        return st == L3GPU_OK ? L3GPU_ERR_CUDA : st;
    }
    *ctx_ret = ctx;
    return L3GPU_OK;
}

void l3gpu_ctx_destroy(l3gpu_ctx *ctx)
{
    if (!ctx)
        return;
    {
        device_guard g(ctx->device);
        if (ctx->done)
            cudaEventSynchronize(ctx->done);
        if (ctx->staging_free)
            cudaEventSynchronize(ctx->staging_free);
        if (ctx->dev)
            cudaFree(ctx->dev);
        if (ctx->scratch)
            cudaFree(ctx->scratch);
        if (ctx->pin)
            cudaFreeHost(ctx->pin);
        if (ctx->status_pin)
            cudaFreeHost(ctx->status_pin);
        if (ctx->probe)
            cudaFreeHost(ctx->probe);
        if (ctx->done)
            cudaEventDestroy(ctx->done);
        for (int k = 0; k < 3; k++)
            if (ctx->tev[k])
                cudaEventDestroy(ctx->tev[k]);
        if (ctx->staging_free)
            cudaEventDestroy(ctx->staging_free);
    }
    pthread_mutex_destroy(&ctx->mu);
    delete ctx;
}

const char *l3gpu_ctx_error(const l3gpu_ctx *ctx)
{
    if (!ctx)
        return "no context";
    return ctx->err[0] ? ctx->err : "no error";
}

int l3gpu_ctx_device(const l3gpu_ctx *ctx)
{
    return ctx ? ctx->device : -1;
}

int l3gpu_scratch_size(const struct l3_info *infos, size_t n, size_t *bytes_ret)
{
    if ((n && !infos) || !bytes_ret)
        return L3GPU_ERR_INVALID_ARG;
    uint64_t tiles = 0, samples = 0;
    for (size_t i = 0; i < n; i++) {
        const struct l3_info *f = &infos[i];
        unsigned planes = l3_planes(f->color);
        uint64_t t = (uint64_t)f->tiles_x * f->tiles_y;
        tiles += t;
        samples += t * planes * f->tile_width * f->tile_height;
    }
    uint64_t b = align_up((size_t)(samples * 2)) + align_up((size_t)tiles);
    if (b > SIZE_MAX)
        return L3GPU_ERR_INVALID_ARG;
    *bytes_ret = (size_t)b;
    return L3GPU_OK;
}

/* Grows a device buffer, stream-ordered: the old one is freed on the stream
 * it was last used on, the new one allocated on `stream`. */
static cudaError_t grow_device(uint8_t **buf, size_t *cap, size_t need, cudaStream_t old_stream,
                               cudaStream_t stream)
{
    if (*cap >= need)
        return cudaSuccess;
    size_t ncap = need + need / 4;
    if (*buf) {
        cudaError_t e = cudaFreeAsync(*buf, old_stream);
        if (e != cudaSuccess)
            return e;
        *buf = nullptr;
        *cap = 0;
    }
    void *p = nullptr;
    cudaError_t e = cudaMallocAsync(&p, ncap, stream);
    if (e != cudaSuccess)
        return e;
    *buf = (uint8_t *)p;
    *cap = ncap;
    return cudaSuccess;
}

static cudaError_t grow_pinned(void **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return cudaSuccess;
    size_t ncap = need + need / 4;
    if (*buf)
        cudaFreeHost(*buf);
    *buf = nullptr;
    *cap = 0;
    cudaError_t e = cudaHostAlloc(buf, ncap, cudaHostAllocDefault);
    if (e != cudaSuccess)
        return e;
    *cap = ncap;
    return cudaSuccess;
}

static int decode_batch_locked(l3gpu_ctx *ctx, const struct l3gpu_input *in, size_t n,
                               int memory, const struct l3gpu_format *fmt, void *out,
                               size_t out_size, void *const *out_ptrs, void *scratch,
                               size_t scratch_size, int *status_ret, cudaStream_t stream)
{
    /* The previous batch's staging must have been copied before it is reused;
     * its device buffers are reused in stream order: make this stream wait
     * for the previous batch (device-side wait, no host block). */
    cudaError_t e = cudaEventSynchronize(ctx->staging_free);
    if (e == cudaSuccess && ctx->pending)
        e = cudaStreamWaitEvent(stream, ctx->done, 0);
    if (e != cudaSuccess)
        return record(ctx, e, "waiting for the previous batch");

    l3g_host_image *hi = (l3g_host_image *)calloc(n, sizeof *hi);
    size_t *sizes = (size_t *)calloc(n, sizeof *sizes);
    const uint8_t **bases = (const uint8_t **)calloc(n, sizeof *bases);
    int ret = L3GPU_OK;
    if (!hi || !sizes || !bases) {
        free(hi);
        free(sizes);
        free(bases);
        return L3GPU_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        sizes[i] = in[i].size;
        status_ret[i] = in[i].data ? L3_OK : L3_ERR_INVALID_ARG;
    }

    /* 1. headers and tile tables, on the host. Device inputs: the first
     * bytes of every image are copied back in one go (one stream sync), and
     * a second round fetches longer headers (large tile tables). */
    if (memory == L3GPU_MEM_DEVICE) {
        size_t *want = (size_t *)calloc(n, sizeof(size_t));
        size_t *off = (size_t *)calloc(n, sizeof(size_t));
        if (!want || !off)
            ret = L3GPU_ERR_NOMEM;
        for (size_t i = 0; i < n && !ret; i++)
            want[i] = in[i].data ? (in[i].size < 16384 ? in[i].size : 16384) : 0;
        for (int round = 0; round < 2 && ret == L3GPU_OK; round++) {
            size_t total = 0;
            for (size_t i = 0; i < n; i++) {
                off[i] = total;
                total += want[i];
            }
            if (total == 0)
                break;
            e = grow_pinned((void **)&ctx->probe, &ctx->probe_cap, total);
            for (size_t i = 0; i < n && e == cudaSuccess; i++)
                if (want[i])
                    e = cudaMemcpyAsync(ctx->probe + off[i], in[i].data, want[i],
                                        cudaMemcpyDeviceToHost, stream);
            if (e == cudaSuccess)
                e = cudaStreamSynchronize(stream);
            if (e != cudaSuccess) {
                ret = record(ctx, e, "reading headers of device inputs");
                break;
            }
            for (size_t i = 0; i < n; i++) {
                if (!want[i])
                    continue;
                size_t needed = 0, got = want[i];
                status_ret[i] = l3_read_layout(ctx->probe + off[i], got, &hi[i].info,
                                               &hi[i].lay, &needed);
                want[i] = 0;
                if (status_ret[i] == L3_ERR_TRUNCATED && round == 0 && needed > got &&
                    needed <= in[i].size)
                    want[i] = needed;
            }
        }
        free(want);
        free(off);
    } else {
        for (size_t i = 0; i < n; i++)
            if (!status_ret[i])
                status_ret[i] = l3_read_layout(in[i].data, in[i].size, &hi[i].info, &hi[i].lay,
                                               nullptr);
    }
    struct l3g_totals tot;
    memset(&tot, 0, sizeof tot);
    if (!ret) {
        l3g_validate(sizes, n, fmt, out != nullptr, out_ptrs, hi, status_ret, &tot);
        if (out && tot.slot && n > out_size / tot.slot)
            ret = L3GPU_ERR_OUTPUT_TOO_SMALL;
    }

    /* 2. plan: descriptors, item prefix sums, statuses (pinned staging) */
    size_t desc_bytes = align_up(n * sizeof(l3g_image));
    size_t start_bytes = align_up((n + 1) * sizeof(uint64_t));
    size_t status_bytes = align_up(n * sizeof(int));
    size_t meta = desc_bytes + start_bytes + status_bytes;
    size_t in_bytes = memory == L3GPU_MEM_DEVICE ? 0 : tot.in_total;
    size_t stage_bytes = meta + (memory == L3GPU_MEM_HOST ? in_bytes : 0);
    if (!ret) {
        e = grow_pinned((void **)&ctx->pin, &ctx->pin_cap, stage_bytes);
        if (e == cudaSuccess)
            e = grow_pinned((void **)&ctx->status_pin, &ctx->status_cap, n * sizeof(int));
        if (e == cudaSuccess)
            e = grow_device(&ctx->dev, &ctx->dev_cap, meta + in_bytes, ctx->dev_stream, stream);
        if (e != cudaSuccess)
            ret = record(ctx, e, "allocating staging memory");
    }
    if (ret) {
        free(hi);
        free(sizes);
        free(bases);
        return ret;
    }
    l3g_image *ims = (l3g_image *)ctx->pin;
    uint64_t *item_start = (uint64_t *)(ctx->pin + desc_bytes);
    int *dstatus = (int *)(ctx->pin + desc_bytes + start_bytes);
    uint8_t *dev_inputs = ctx->dev + meta;
    for (size_t i = 0; i < n; i++) {
        if (status_ret[i])
            continue;
        if (memory == L3GPU_MEM_DEVICE) {
            bases[i] = (const uint8_t *)in[i].data;
        } else {
            bases[i] = dev_inputs + hi[i].in_off;
            if (memory == L3GPU_MEM_HOST)
                memcpy(ctx->pin + meta + hi[i].in_off, in[i].data,
                       hi[i].lay.header_size + (size_t)hi[i].lay.payload_size);
        }
    }
    l3g_fill(hi, n, status_ret, fmt, out, out_ptrs, bases, ims, item_start, dstatus, &tot);

    /* 3. scratch */
    size_t need_scratch = align_up((size_t)(tot.samples * 2)) + align_up((size_t)tot.tiles);
    uint8_t *scr;
    if (scratch) {
        if (scratch_size < need_scratch) {
            free(hi);
            free(sizes);
            free(bases);
            return L3GPU_ERR_SCRATCH_TOO_SMALL;
        }
        scr = (uint8_t *)scratch;
    } else {
        e = grow_device(&ctx->scratch, &ctx->scratch_cap, need_scratch, ctx->dev_stream, stream);
        if (e != cudaSuccess) {
            free(hi);
            free(sizes);
            free(bases);
            return record(ctx, e, "allocating scratch");
        }
        scr = ctx->scratch;
    }
    ctx->dev_stream = stream;
    uint16_t *planes_buf = (uint16_t *)scr;
    uint8_t *flags_buf = scr + align_up((size_t)(tot.samples * 2));

    /* 4. copies, launches, status copy-back: all on the caller's stream */
    e = cudaMemcpyAsync(ctx->dev, ctx->pin, stage_bytes, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess && memory == L3GPU_MEM_PINNED) {
        for (size_t i = 0; i < n && e == cudaSuccess; i++)
            if (!status_ret[i])
                e = cudaMemcpyAsync(dev_inputs + hi[i].in_off, in[i].data,
                                    hi[i].lay.header_size + (size_t)hi[i].lay.payload_size,
                                    cudaMemcpyHostToDevice, stream);
    }
    if (e == cudaSuccess)
        e = cudaEventRecord(ctx->staging_free, stream);
    if (e == cudaSuccess && out && tot.slot == 0) /* no image readable: zero it all */
        e = cudaMemsetAsync(out, 0, out_size, stream);
    const l3g_image *d_ims = (const l3g_image *)ctx->dev;
    const uint64_t *d_start = (const uint64_t *)(ctx->dev + desc_bytes);
    int *d_status = (int *)(ctx->dev + desc_bytes + start_bytes);
    if (e == cudaSuccess && ctx->timing)
        e = cudaEventRecord(ctx->tev[0], stream);
    if (e == cudaSuccess && tot.items) {
        uint64_t blocks = (tot.items + 127) / 128;
        L3G_LAUNCH(l3g_decode_planes, (unsigned)blocks, 128, stream, d_ims, d_start, (uint32_t)n,
                   tot.items, planes_buf, flags_buf, d_status);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess && ctx->timing)
        e = cudaEventRecord(ctx->tev[1], stream);
    if (e == cudaSuccess && tot.max_pixels) {
        uint64_t bx = ((uint64_t)tot.max_pixels + 1023) / 1024; /* ~4 pixels per thread */
        if (bx > 65535)
            bx = 65535;
        for (size_t y0 = 0; y0 < n && e == cudaSuccess; y0 += 65535) {
            unsigned gy = (unsigned)(n - y0 < 65535 ? n - y0 : 65535);
            dim3 grid((unsigned)bx, gy);
            L3G_LAUNCH(l3g_convert, grid, 256, stream, d_ims, (uint32_t)y0, planes_buf, flags_buf,
                       d_status);
            e = cudaGetLastError();
        }
    }
    if (e == cudaSuccess && ctx->timing)
        e = cudaEventRecord(ctx->tev[2], stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(ctx->status_pin, d_status, n * sizeof(int), cudaMemcpyDeviceToHost,
                            stream);
    if (e == cudaSuccess)
        e = cudaEventRecord(ctx->done, stream);
    free(hi);
    free(sizes);
    free(bases);
    if (e != cudaSuccess) {
        for (size_t i = 0; i < n; i++)
            if (!status_ret[i])
                status_ret[i] = L3GPU_IMG_ABORTED;
        return record(ctx, e, "launching the batch");
    }
    ctx->pending = 1;
    ctx->last_n = n;
    for (size_t i = 0; i < n; i++) {
        if (!status_ret[i])
            status_ret[i] = L3GPU_IMG_PENDING;
        else
            ret = L3GPU_ERR_IMAGE;
    }
    return ret;
}

int l3gpu_decode_batch(l3gpu_ctx *ctx, const struct l3gpu_input *in, size_t n, int memory,
                       const struct l3gpu_format *fmt, void *out, size_t out_size,
                       void *const *out_ptrs, void *scratch, size_t scratch_size,
                       int *status_ret, void *stream)
{
    if (!ctx || (n && (!in || !status_ret)) || (!out == !out_ptrs) ||
        l3gpu_format_check(fmt) ||
        (memory != L3GPU_MEM_HOST && memory != L3GPU_MEM_PINNED && memory != L3GPU_MEM_DEVICE))
        return L3GPU_ERR_INVALID_ARG;
    if (n == 0)
        return L3GPU_OK;
    pthread_mutex_lock(&ctx->mu);
    device_guard g(ctx->device);
    int st = decode_batch_locked(ctx, in, n, memory, fmt, out, out_size, out_ptrs, scratch,
                                 scratch_size, status_ret, (cudaStream_t)stream);
    pthread_mutex_unlock(&ctx->mu);
    return st;
}

int l3gpu_batch_finish(l3gpu_ctx *ctx, int *status_ret, size_t n)
{
    if (!ctx || (n && !status_ret))
        return L3GPU_ERR_INVALID_ARG;
    pthread_mutex_lock(&ctx->mu);
    device_guard g(ctx->device);
    int ret = L3GPU_OK;
    if (ctx->pending) {
        cudaError_t e = cudaEventSynchronize(ctx->done);
        if (e != cudaSuccess) {
            ret = record(ctx, e, "batch");
            for (size_t i = 0; i < n; i++)
                if (status_ret[i] == L3GPU_IMG_PENDING)
                    status_ret[i] = L3GPU_IMG_ABORTED;
        } else {
            for (size_t i = 0; i < n && i < ctx->last_n; i++)
                if (status_ret[i] == L3GPU_IMG_PENDING)
                    status_ret[i] = ctx->status_pin[i];
        }
        ctx->pending = 0;
    }
    for (size_t i = 0; i < n && ret == L3GPU_OK; i++)
        if (status_ret[i])
            ret = L3GPU_ERR_IMAGE;
    pthread_mutex_unlock(&ctx->mu);
    return ret;
}

int l3gpu_ctx_set_timing(l3gpu_ctx *ctx, int enable)
{
    if (!ctx)
        return L3GPU_ERR_INVALID_ARG;
    pthread_mutex_lock(&ctx->mu);
    device_guard g(ctx->device);
    cudaError_t e = cudaSuccess;
    for (int k = 0; k < 3 && e == cudaSuccess; k++)
        if (!ctx->tev[k])
            e = cudaEventCreate(&ctx->tev[k]);
    if (e == cudaSuccess)
        ctx->timing = enable != 0;
    int st = record(ctx, e, "cudaEventCreate");
    pthread_mutex_unlock(&ctx->mu);
    return st;
}

int l3gpu_ctx_last_timing(l3gpu_ctx *ctx, float *decode_ms_ret, float *convert_ms_ret)
{
    if (!ctx || !ctx->timing)
        return L3GPU_ERR_INVALID_ARG;
    pthread_mutex_lock(&ctx->mu);
    device_guard g(ctx->device);
    float a = 0, b = 0;
    cudaError_t e = cudaEventSynchronize(ctx->tev[2]);
    if (e == cudaSuccess)
        e = cudaEventElapsedTime(&a, ctx->tev[0], ctx->tev[1]);
    if (e == cudaSuccess)
        e = cudaEventElapsedTime(&b, ctx->tev[1], ctx->tev[2]);
    int st = record(ctx, e, "kernel timing");
    pthread_mutex_unlock(&ctx->mu);
    if (decode_ms_ret)
        *decode_ms_ret = a;
    if (convert_ms_ret)
        *convert_ms_ret = b;
    return st;
}

int l3gpu_malloc(l3gpu_ctx *ctx, size_t size, void **ptr_ret)
{
    if (!ctx || !ptr_ret)
        return L3GPU_ERR_INVALID_ARG;
    device_guard g(ctx->device);
    *ptr_ret = nullptr;
    return record(ctx, cudaMalloc(ptr_ret, size ? size : 1), "cudaMalloc");
}

void l3gpu_free(l3gpu_ctx *ctx, void *ptr)
{
    if (!ctx || !ptr)
        return;
    device_guard g(ctx->device);
    cudaFree(ptr);
}

int l3gpu_memcpy_to_host(l3gpu_ctx *ctx, void *dst, const void *src, size_t size)
{
    if (!ctx || (size && (!dst || !src)))
        return L3GPU_ERR_INVALID_ARG;
    device_guard g(ctx->device);
    return record(ctx, cudaMemcpy(dst, src, size, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

int l3gpu_memcpy_to_device(l3gpu_ctx *ctx, void *dst, const void *src, size_t size)
{
    if (!ctx || (size && (!dst || !src)))
        return L3GPU_ERR_INVALID_ARG;
    device_guard g(ctx->device);
    return record(ctx, cudaMemcpy(dst, src, size, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

int l3gpu_stream_synchronize(l3gpu_ctx *ctx, void *stream)
{
    if (!ctx)
        return L3GPU_ERR_INVALID_ARG;
    device_guard g(ctx->device);
    return record(ctx, cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
}

} /* extern "C" */
