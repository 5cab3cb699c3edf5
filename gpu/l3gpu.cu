/* l3gpu.cu — batch decoding of L3 images on a CUDA device.
 *
 * Two launches per batch, whatever its size:
 *   1. l3g_decode_planes: one thread per (tile, plane) of every image of the
 *      batch, in one flat grid. Each thread runs the codec's
 *      l3_tile_plane_decode() (codec/l3_tile.h, the routine the CPU decoder
 *      runs) on its plane's bitstream and writes the plane as uint16 samples
 *      into the scratch area (tile-major, plane after plane).
 *   2. l3g_convert<layout, dtype, channels>: one block of 32 x 8 threads per
 *      output tile, a warp on 32 consecutive pixels of a tile row, so reads
 *      of the decoded planes and writes of the output are coalesced; one
 *      kernel per (layout, dtype, output channels), so its index math has
 *      no division and its stores no dtype switch. It undoes the colour
 *      transform with l3_tile_pixel() and converts with l3_convert.h, the
 *      code the CPU reference runs. Images that failed are zero-filled.
 * Headers and tile tables are validated on the host before the launch; the
 * kernels still check every tile span against the payload size, and the tile
 * routine checks every read against its stream length.
 *
 * Host side: a context has two staging slots (pinned descriptors + packed
 * inputs, their device copy, the status copy-back, a completion event), so
 * that the host packs batch N+1 while the device decodes batch N; a slot is
 * reused only after its batch was finished. The default scratch is shared:
 * a batch that uses it waits (on the device) for the previous one.
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
#include "l3gpu_rt.h"

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

/* Kernel 2, one per (layout, dtype, output channels): blockIdx.z = image
 * (plus z_base), blockIdx.x/y = a tile of its output grid (striding when the
 * grid is larger than the launch), 32 x 8 threads on the tile's pixels;
 * body in l3gpu_kernels.h. Images with another channel count are left to
 * that count's kernel. Integer dtypes with 1-3 channels: at least 5 blocks
 * per SM (at most 48 registers); the others 4 (at most 64: with 48 float and
 * 4-channel instances spill on sm_80 or sm_90; without any bound ptxas
 * spilled in one instance). */
template <int LAYOUT, int DTYPE, int C>
__global__ void
__launch_bounds__(L3G_CONVERT_BX * L3G_CONVERT_BY, DTYPE <= L3GPU_U16 && C < 4 ? 5 : 4)
l3g_convert(const l3g_image *__restrict__ ims, uint32_t z_base,
            const uint16_t *__restrict__ scratch, const uint8_t *__restrict__ tile_flags,
            const int *__restrict__ status)
{
    const uint32_t img = z_base + blockIdx.z;
    const l3g_image *im = ims + img;
    if (!im->out || im->cv.out_channels != C)
        return;
    const int st = status[img];
    for (uint32_t ty = blockIdx.y; ty < im->tiles_y; ty += gridDim.y)
        for (uint32_t tx = blockIdx.x; tx < im->tiles_x; tx += gridDim.x)
            l3g_convert_tile(im, st, tx, ty, threadIdx.x, threadIdx.y, LAYOUT, DTYPE, C, scratch,
                             tile_flags);
}

typedef void (*convert_kernel)(const l3g_image *, uint32_t, const uint16_t *, const uint8_t *,
                               const int *);

template <int L, int D> convert_kernel convert_for_channels(unsigned c)
{
    switch (c) {
    case 1: return l3g_convert<L, D, 1>;
    case 2: return l3g_convert<L, D, 2>;
    case 3: return l3g_convert<L, D, 3>;
    default: return l3g_convert<L, D, 4>;
    }
}

template <int L> convert_kernel convert_for_dtype(unsigned dtype, unsigned c)
{
    switch (dtype) {
    case L3GPU_U8: return convert_for_channels<L, L3GPU_U8>(c);
    case L3GPU_U16: return convert_for_channels<L, L3GPU_U16>(c);
    case L3GPU_F32: return convert_for_channels<L, L3GPU_F32>(c);
    default: return convert_for_channels<L, L3GPU_F16>(c);
    }
}

/* The convert kernel of a format and an output channel count (1..4). */
convert_kernel convert_for(unsigned layout, unsigned dtype, unsigned c)
{
    return layout == L3GPU_HWC ? convert_for_dtype<L3GPU_HWC>(dtype, c)
                               : convert_for_dtype<L3GPU_CHW>(dtype, c);
}

} // namespace

using l3rt::device_guard;
using l3rt::map_error;

/* One batch's staging: reused only after its batch was finished. */
struct l3g_slot {
    enum { FREE, IN_FLIGHT, FAILED } state = FREE;
    uint8_t *pin = nullptr;     /* pinned: descriptors, item starts, statuses, packed inputs */
    size_t pin_cap = 0;
    uint8_t *dev = nullptr;     /* device copy of the staging (stream-ordered allocation) */
    size_t dev_cap = 0;
    int *status_pin = nullptr;  /* kernel statuses copied back */
    size_t status_cap = 0;
    cudaEvent_t done = nullptr; /* the batch's last operation */
    const int *owner = nullptr; /* status_ret of the batch in flight */
    size_t n = 0;
};
typedef l3g_slot slot;

static const int MAX_RETIRED = 64;

struct l3gpu_ctx {
    int device;
    pthread_mutex_t mu;          /* serialises every call on the context; guards all below */
    char err[256];
    slot slots[2];
    int next_slot = 0;
    int scratch_slot = -1;       /* slot of the last batch that used `scratch` */
    uint8_t *scratch = nullptr;  /* default scratch (stream-ordered allocation) */
    size_t scratch_cap = 0;
    uint8_t *probe = nullptr;    /* pinned: headers of device inputs */
    size_t probe_cap = 0;
    void *retired[MAX_RETIRED];  /* pinned buffers replaced by larger ones: freed at destroy */
    int nretired = 0;
    int broken = 0;              /* queued work could not be ordered: the context is unusable */
    int timing = 0;              /* record kernel events (benchmarks) */
    cudaEvent_t tev[3] = {nullptr, nullptr, nullptr};
    cudaEvent_t order_ev = nullptr; /* l3gpu_stream_wait */
    cudaMemPool_t pool = nullptr;   /* l3gpu_alloc_async */
};

static int record(l3gpu_ctx *ctx, cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return L3GPU_OK;
    snprintf(ctx->err, sizeof ctx->err, "%s: %s (%s)", what, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return map_error(e);
}

static int invalid(l3gpu_ctx *ctx, const char *msg)
{
    snprintf(ctx->err, sizeof ctx->err, "%s", msg);
    return L3GPU_ERR_INVALID_ARG;
}

/* Grows a pinned buffer without a device synchronisation: the old one (its
 * last copy may still be queued) is kept until the context is destroyed;
 * sizes double, so the kept ones add up to less than the current one. */
static cudaError_t grow_pinned(l3gpu_ctx *ctx, void **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return cudaSuccess;
    size_t ncap = need > 2 * *cap ? need : 2 * *cap;
    void *p = nullptr;
    cudaError_t e = cudaHostAlloc(&p, ncap, cudaHostAllocDefault);
    if (e != cudaSuccess)
        return e;
    if (*buf) {
        if (ctx->nretired == MAX_RETIRED) { /* not reached with doubling sizes */
            cudaFreeHost(p);
            return cudaErrorMemoryAllocation;
        }
        ctx->retired[ctx->nretired++] = *buf;
    }
    *buf = p;
    *cap = ncap;
    return cudaSuccess;
}

/* Grows a device buffer in stream order on `stream`: every earlier use of
 * the old buffer must already be ordered before `stream`'s current point. */
static cudaError_t grow_device(uint8_t **buf, size_t *cap, size_t need, cudaStream_t stream)
{
    if (*cap >= need)
        return cudaSuccess;
    size_t ncap = need + need / 4;
    if (*buf) {
        cudaError_t e = cudaFreeAsync(*buf, stream);
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

int l3gpu_current_device(int *device_ret)
{
    if (!device_ret)
        return L3GPU_ERR_INVALID_ARG;
    int n = 0;
    int st = l3gpu_device_count(&n);
    if (st)
        return st;
    int d = 0;
    cudaError_t e = cudaGetDevice(&d);
    if (e != cudaSuccess)
        return map_error(e);
    *device_ret = d;
    return L3GPU_OK;
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
    cudaError_t e;
    {
        device_guard g(device);
        e = cudaFree(nullptr); /* creates the primary context */
        for (int k = 0; k < 2 && e == cudaSuccess; k++)
            e = cudaEventCreateWithFlags(&ctx->slots[k].done, cudaEventDisableTiming);
        if (e == cudaSuccess)
            e = cudaEventCreateWithFlags(&ctx->order_ev, cudaEventDisableTiming);
    }
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
        for (slot &s : ctx->slots)
            if (s.done && s.state != slot::FREE)
                cudaEventSynchronize(s.done);
        if (ctx->scratch_slot >= 0)
            cudaEventSynchronize(ctx->slots[ctx->scratch_slot].done);
        for (slot &s : ctx->slots) {
            if (s.dev)
                cudaFree(s.dev);
            if (s.pin)
                cudaFreeHost(s.pin);
            if (s.status_pin)
                cudaFreeHost(s.status_pin);
            if (s.done)
                cudaEventDestroy(s.done);
        }
        if (ctx->scratch)
            cudaFree(ctx->scratch);
        if (ctx->probe)
            cudaFreeHost(ctx->probe);
        for (int k = 0; k < ctx->nretired; k++)
            cudaFreeHost(ctx->retired[k]);
        for (int k = 0; k < 3; k++)
            if (ctx->tev[k])
                cudaEventDestroy(ctx->tev[k]);
        if (ctx->order_ev)
            cudaEventDestroy(ctx->order_ev);
        if (ctx->pool)
            cudaMemPoolDestroy(ctx->pool); /* outstanding allocations stay valid */
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

} /* extern "C" */

/* ---------------- one batch ---------------- */

/* R4: every pointer the device will use, before anything is queued. */
static int check_pointers(l3gpu_ctx *ctx, const struct l3gpu_input *in, size_t n, int memory,
                          const struct l3gpu_format *fmt, void *out, void *const *out_ptrs,
                          void *scratch, cudaStream_t stream)
{
    const size_t align = l3gpu_dtype_size(fmt->dtype);
    int st = L3GPU_OK;
    if (out)
        st = l3rt::check_device_pointer(out, align, ctx->device, "out", -1, ctx->err,
                                        sizeof ctx->err);
    for (size_t i = 0; !out && i < n && !st; i++)
        if (out_ptrs[i])
            st = l3rt::check_device_pointer(out_ptrs[i], align, ctx->device, "out_ptrs",
                                            (long)i, ctx->err, sizeof ctx->err);
    if (!st && scratch)
        st = l3rt::check_device_pointer(scratch, 2, ctx->device, "scratch", -1, ctx->err,
                                        sizeof ctx->err);
    for (size_t i = 0; i < n && !st; i++) {
        if (!in[i].data)
            continue;
        l3rt::mem_kind k = l3rt::pointer_kind(in[i].data, ctx->device);
        if (memory == L3GPU_MEM_DEVICE)
            st = l3rt::check_device_pointer(in[i].data, 1, ctx->device, "in", (long)i, ctx->err,
                                            sizeof ctx->err);
        else if (memory == L3GPU_MEM_PINNED && k != l3rt::MK_PINNED)
            st = invalid(ctx, "an L3GPU_MEM_PINNED input is not page-locked host memory");
        else if (memory == L3GPU_MEM_HOST && (k == l3rt::MK_DEVICE || k == l3rt::MK_OTHER_DEVICE))
            st = invalid(ctx, "an L3GPU_MEM_HOST input is device memory (use L3GPU_MEM_DEVICE)");
    }
    if (st)
        return st;
    int sdev = -1;
    cudaError_t e = cudaStreamGetDevice(stream, &sdev);
    if (e == cudaErrorInvalidResourceHandle || e == cudaErrorInvalidValue ||
        e == cudaErrorContextIsDestroyed) {
        (void)cudaGetLastError();
        return invalid(ctx, "the stream is not a valid CUDA stream");
    }
    if (e != cudaSuccess) { /* a driver without cuStreamGetDevice: not checked */
        (void)cudaGetLastError();
        return L3GPU_OK;
    }
    if (sdev != ctx->device) {
        snprintf(ctx->err, sizeof ctx->err, "the stream belongs to cuda:%d, the context to cuda:%d",
                 sdev, ctx->device);
        return L3GPU_ERR_INVALID_ARG;
    }
    return L3GPU_OK;
}

/* Reads the headers and tile tables of device inputs: their first bytes are
 * copied back in one go (one stream synchronisation), a second round fetches
 * longer headers (large tile tables). */
static int read_device_headers(l3gpu_ctx *ctx, const struct l3gpu_input *in, size_t n,
                               l3g_host_image *hi, int *status_ret, cudaStream_t stream)
{
    size_t *want = (size_t *)calloc(n, sizeof(size_t));
    size_t *off = (size_t *)calloc(n, sizeof(size_t));
    int ret = want && off ? L3GPU_OK : L3GPU_ERR_NOMEM;
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
        cudaError_t e = grow_pinned(ctx, (void **)&ctx->probe, &ctx->probe_cap, total);
        for (size_t i = 0; i < n && e == cudaSuccess; i++)
            if (want[i])
                e = cudaMemcpyAsync(ctx->probe + off[i], in[i].data, want[i],
                                    cudaMemcpyDeviceToHost, stream);
        cudaError_t es = cudaStreamSynchronize(stream); /* also after a failed copy */
        if (e == cudaSuccess)
            e = es;
        if (e != cudaSuccess) {
            ret = record(ctx, e, "reading headers of device inputs");
            break;
        }
        for (size_t i = 0; i < n; i++) {
            if (!want[i])
                continue;
            size_t needed = 0, got = want[i];
            status_ret[i] = l3_read_layout(ctx->probe + off[i], got, &hi[i].info, &hi[i].lay,
                                           &needed);
            want[i] = 0;
            if (status_ret[i] == L3_ERR_TRUNCATED && round == 0 && needed > got &&
                needed <= in[i].size)
                want[i] = needed;
        }
    }
    free(want);
    free(off);
    return ret;
}

/* A slot for the next batch: a free one, else a failed one (its queued work
 * is waited for); NULL when both hold batches in flight. */
static slot *take_slot(l3gpu_ctx *ctx, int *idx_ret)
{
    for (int k = 0; k < 2; k++) {
        int i = (ctx->next_slot + k) % 2;
        if (ctx->slots[i].state == slot::FREE) {
            *idx_ret = i;
            return &ctx->slots[i];
        }
    }
    for (int i = 0; i < 2; i++) {
        slot &s = ctx->slots[i];
        if (s.state == slot::FAILED) {
            cudaEventSynchronize(s.done); /* an error shows again where it matters */
            s.state = slot::FREE;
            *idx_ret = i;
            return &s;
        }
    }
    return nullptr;
}

/* R7: the call fails after work was queued on `stream`: that work stays
 * ordered before later batches (the slot's event marks its end), or, if no
 * event can be recorded, is waited for; failing that the context is dead. */
static void abandon(l3gpu_ctx *ctx, slot *s, int idx, bool used_scratch, cudaStream_t stream)
{
    if (cudaEventRecord(s->done, stream) == cudaSuccess) {
        s->state = slot::FAILED;
        s->owner = nullptr;
        if (used_scratch)
            ctx->scratch_slot = idx;
        return;
    }
    if (cudaStreamSynchronize(stream) != cudaSuccess)
        ctx->broken = 1;
}

static int decode_batch_locked(l3gpu_ctx *ctx, const struct l3gpu_input *in, size_t n,
                               int memory, const struct l3gpu_format *fmt, void *out,
                               size_t out_size, void *const *out_ptrs, void *scratch,
                               size_t scratch_size, int *status_ret, cudaStream_t stream)
{
    if (ctx->broken)
        return L3GPU_ERR_CUDA; /* ctx->err says why */
    for (const slot &s : ctx->slots)
        if (s.state == slot::IN_FLIGHT && s.owner == status_ret)
            return invalid(ctx, "status_ret belongs to a batch that is not finished");
    int ret = check_pointers(ctx, in, n, memory, fmt, out, out_ptrs, scratch, stream);
    if (ret)
        return ret;
    int si = -1;
    slot *sl = take_slot(ctx, &si);
    if (!sl) {
        snprintf(ctx->err, sizeof ctx->err, "%s", l3gpu_strerror(L3GPU_ERR_BUSY));
        return L3GPU_ERR_BUSY;
    }
    l3g_host_image *hi = (l3g_host_image *)calloc(n, sizeof *hi);
    size_t *sizes = (size_t *)calloc(n, sizeof *sizes);
    const uint8_t **bases = (const uint8_t **)calloc(n, sizeof *bases);
    bool enqueued = false, uses_scratch = !scratch;
    cudaError_t e = cudaSuccess;
    if (!hi || !sizes || !bases) {
        ret = L3GPU_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        sizes[i] = in[i].size;
        status_ret[i] = in[i].data ? L3_OK : L3_ERR_INVALID_ARG;
    }

    /* 1. headers and tile tables, on the host */
    if (memory == L3GPU_MEM_DEVICE) {
        ret = read_device_headers(ctx, in, n, hi, status_ret, stream);
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
    if (ret)
        goto out;

    {
        /* 2. plan: descriptors, item prefix sums, statuses (pinned staging) */
        size_t desc_bytes = align_up(n * sizeof(l3g_image));
        size_t start_bytes = align_up((n + 1) * sizeof(uint64_t));
        size_t status_bytes = align_up(n * sizeof(int));
        size_t lut_off = desc_bytes + start_bytes + status_bytes;
        size_t meta = lut_off + align_up(L3G_LUT_BYTES);
        size_t in_bytes = memory == L3GPU_MEM_DEVICE ? 0 : tot.in_total;
        size_t stage_bytes = meta + (memory == L3GPU_MEM_HOST ? in_bytes : 0);
        e = grow_pinned(ctx, (void **)&sl->pin, &sl->pin_cap, stage_bytes);
        if (e == cudaSuccess)
            e = grow_pinned(ctx, (void **)&sl->status_pin, &sl->status_cap, n * sizeof(int));
        if (e == cudaSuccess && sl->dev_cap < meta + in_bytes) {
            enqueued = true; /* the slot's last batch is finished: its buffer is idle */
            e = grow_device(&sl->dev, &sl->dev_cap, meta + in_bytes, stream);
        }
        if (e != cudaSuccess) {
            ret = record(ctx, e, "allocating staging memory");
            goto out;
        }
        l3g_image *ims = (l3g_image *)sl->pin;
        uint64_t *item_start = (uint64_t *)(sl->pin + desc_bytes);
        int *dstatus = (int *)(sl->pin + desc_bytes + start_bytes);
        uint8_t *dev_inputs = sl->dev + meta;
        for (size_t i = 0; i < n; i++) {
            if (status_ret[i])
                continue;
            if (memory == L3GPU_MEM_DEVICE) {
                bases[i] = (const uint8_t *)in[i].data;
            } else {
                bases[i] = dev_inputs + hi[i].in_off;
                if (memory == L3GPU_MEM_HOST)
                    memcpy(sl->pin + meta + hi[i].in_off, in[i].data,
                           hi[i].lay.header_size + (size_t)hi[i].lay.payload_size);
            }
        }
        l3g_fill(hi, n, status_ret, fmt, out, out_ptrs, bases, ims, item_start, dstatus,
                 sl->pin + lut_off, sl->dev + lut_off, &tot);

        /* 3. scratch: the context's own follows the batch that used it last */
        size_t need_scratch = align_up((size_t)(tot.samples * 2)) + align_up((size_t)tot.tiles);
        uint8_t *scr;
        cudaEvent_t scratch_wait =
            uses_scratch && ctx->scratch_slot >= 0 ? ctx->slots[ctx->scratch_slot].done : nullptr;
        if (scratch) {
            if (scratch_size < need_scratch) {
                ret = L3GPU_ERR_SCRATCH_TOO_SMALL;
                goto out;
            }
            scr = (uint8_t *)scratch;
        } else {
            if (ctx->scratch_cap < need_scratch) {
                enqueued = true;
                if (scratch_wait)
                    e = cudaStreamWaitEvent(stream, scratch_wait, 0);
                if (e == cudaSuccess)
                    e = grow_device(&ctx->scratch, &ctx->scratch_cap, need_scratch, stream);
                if (e != cudaSuccess) {
                    ret = record(ctx, e, "allocating scratch");
                    goto out;
                }
            }
            scr = ctx->scratch;
        }
        uint16_t *planes_buf = (uint16_t *)scr;
        uint8_t *flags_buf = scr + align_up((size_t)(tot.samples * 2));

        /* 4. copies, launches, status copy-back: all on the caller's stream */
        enqueued = true;
        e = cudaMemcpyAsync(sl->dev, sl->pin, stage_bytes, cudaMemcpyHostToDevice, stream);
        if (e == cudaSuccess && memory == L3GPU_MEM_PINNED) {
            for (size_t i = 0; i < n && e == cudaSuccess; i++)
                if (!status_ret[i])
                    e = cudaMemcpyAsync(dev_inputs + hi[i].in_off, in[i].data,
                                        hi[i].lay.header_size + (size_t)hi[i].lay.payload_size,
                                        cudaMemcpyHostToDevice, stream);
        }
        if (e == cudaSuccess && out && tot.slot == 0) /* no image readable: zero it all */
            e = cudaMemsetAsync(out, 0, out_size, stream);
        if (e == cudaSuccess && scratch_wait)
            e = cudaStreamWaitEvent(stream, scratch_wait, 0);
        const l3g_image *d_ims = (const l3g_image *)sl->dev;
        const uint64_t *d_start = (const uint64_t *)(sl->dev + desc_bytes);
        int *d_status = (int *)(sl->dev + desc_bytes + start_bytes);
        if (e == cudaSuccess && ctx->timing)
            e = cudaEventRecord(ctx->tev[0], stream);
        /* R3: an error some earlier call left in this thread is not this launch's */
        if (e == cudaSuccess)
            (void)cudaGetLastError();
        if (e == cudaSuccess && tot.items) {
            uint64_t blocks = (tot.items + 127) / 128;
            L3G_LAUNCH(l3g_decode_planes, (unsigned)blocks, 128, stream, d_ims, d_start,
                       (uint32_t)n, tot.items, planes_buf, flags_buf, d_status);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess && ctx->timing)
            e = cudaEventRecord(ctx->tev[1], stream);
        /* one convert launch per output channel count in the batch (one,
         * unless separate outputs of native channels mix gray and colour) */
        for (unsigned c = 1; c <= 4 && e == cudaSuccess && tot.max_tiles_x; c++) {
            if (!(tot.channel_mask >> (c - 1) & 1u))
                continue;
            convert_kernel l3g_convert_k = convert_for(fmt->layout, fmt->dtype, c);
            unsigned gx = tot.max_tiles_x < 0x7fffffffu ? tot.max_tiles_x : 0x7fffffffu;
            unsigned gy = tot.max_tiles_y < 65535u ? tot.max_tiles_y : 65535u;
            for (size_t z0 = 0; z0 < n && e == cudaSuccess; z0 += 65535) {
                unsigned gz = (unsigned)(n - z0 < 65535 ? n - z0 : 65535);
                L3G_LAUNCH(l3g_convert_k, dim3(gx, gy, gz), dim3(L3G_CONVERT_BX, L3G_CONVERT_BY),
                           stream, d_ims, (uint32_t)z0, planes_buf, flags_buf, d_status);
                e = cudaGetLastError();
            }
        }
        if (e == cudaSuccess && ctx->timing)
            e = cudaEventRecord(ctx->tev[2], stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(sl->status_pin, d_status, n * sizeof(int),
                                cudaMemcpyDeviceToHost, stream);
        if (e == cudaSuccess)
            e = cudaEventRecord(sl->done, stream);
        if (e != cudaSuccess) {
            ret = record(ctx, e, "launching the batch");
            goto out;
        }
    }
    sl->state = slot::IN_FLIGHT;
    sl->owner = status_ret;
    sl->n = n;
    if (uses_scratch)
        ctx->scratch_slot = si;
    ctx->next_slot = si ^ 1;
    for (size_t i = 0; i < n; i++) {
        if (!status_ret[i])
            status_ret[i] = L3GPU_IMG_PENDING;
        else
            ret = L3GPU_ERR_IMAGE;
    }
out:
    if (ret != L3GPU_OK && ret != L3GPU_ERR_IMAGE) {
        if (enqueued)
            abandon(ctx, sl, si, uses_scratch, stream);
        for (size_t i = 0; i < n; i++)
            if (!status_ret[i] || status_ret[i] == L3GPU_IMG_PENDING)
                status_ret[i] = L3GPU_IMG_ABORTED;
    }
    free(hi);
    free(sizes);
    free(bases);
    return ret;
}

extern "C" {

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
    int st;
    {
        device_guard g(ctx->device);
        st = decode_batch_locked(ctx, in, n, memory, fmt, out, out_size, out_ptrs, scratch,
                                 scratch_size, status_ret, (cudaStream_t)stream);
    }
    pthread_mutex_unlock(&ctx->mu);
    return st;
}

int l3gpu_batch_finish(l3gpu_ctx *ctx, int *status_ret, size_t n)
{
    if (!ctx || (n && !status_ret))
        return L3GPU_ERR_INVALID_ARG;
    pthread_mutex_lock(&ctx->mu);
    int ret = L3GPU_OK;
    slot *sl = nullptr;
    for (slot &s : ctx->slots)
        if (s.state == slot::IN_FLIGHT && s.owner == status_ret)
            sl = &s;
    if (sl) {
        cudaError_t e;
        {
            device_guard g(ctx->device);
            e = cudaEventSynchronize(sl->done);
        }
        if (e != cudaSuccess) {
            ret = record(ctx, e, "batch");
            for (size_t i = 0; i < n; i++)
                if (status_ret[i] == L3GPU_IMG_PENDING)
                    status_ret[i] = L3GPU_IMG_ABORTED;
        } else {
            for (size_t i = 0; i < n && i < sl->n; i++)
                if (status_ret[i] == L3GPU_IMG_PENDING)
                    status_ret[i] = sl->status_pin[i];
        }
        sl->state = slot::FREE;
        sl->owner = nullptr;
    }
    for (size_t i = 0; i < n && ret == L3GPU_OK; i++) {
        if (status_ret[i] == L3GPU_IMG_PENDING)
            ret = invalid(ctx, "l3gpu_batch_finish: no batch in flight has this status array");
        else if (status_ret[i])
            ret = L3GPU_ERR_IMAGE;
    }
    pthread_mutex_unlock(&ctx->mu);
    return ret;
}

int l3gpu_ctx_set_timing(l3gpu_ctx *ctx, int enable)
{
    if (!ctx)
        return L3GPU_ERR_INVALID_ARG;
    pthread_mutex_lock(&ctx->mu);
    int st;
    {
        device_guard g(ctx->device);
        cudaError_t e = cudaSuccess;
        for (int k = 0; k < 3 && e == cudaSuccess; k++)
            if (!ctx->tev[k])
                e = cudaEventCreate(&ctx->tev[k]);
        if (e == cudaSuccess)
            ctx->timing = enable != 0;
        st = record(ctx, e, "cudaEventCreate");
    }
    pthread_mutex_unlock(&ctx->mu);
    return st;
}

int l3gpu_ctx_last_timing(l3gpu_ctx *ctx, float *decode_ms_ret, float *convert_ms_ret)
{
    if (!ctx || !ctx->timing)
        return L3GPU_ERR_INVALID_ARG;
    pthread_mutex_lock(&ctx->mu);
    float a = 0, b = 0;
    int st;
    {
        device_guard g(ctx->device);
        cudaError_t e = cudaEventSynchronize(ctx->tev[2]);
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&a, ctx->tev[0], ctx->tev[1]);
        if (e == cudaSuccess)
            e = cudaEventElapsedTime(&b, ctx->tev[1], ctx->tev[2]);
        st = record(ctx, e, "kernel timing");
    }
    pthread_mutex_unlock(&ctx->mu);
    if (decode_ms_ret)
        *decode_ms_ret = a;
    if (convert_ms_ret)
        *convert_ms_ret = b;
    return st;
}

/* ---------------- memory and stream helpers ---------------- */

int l3gpu_alloc_async(l3gpu_ctx *ctx, size_t size, void *stream, void **ptr_ret)
{
    if (!ctx || !ptr_ret)
        return L3GPU_ERR_INVALID_ARG;
    *ptr_ret = nullptr;
    pthread_mutex_lock(&ctx->mu);
    int st;
    {
        device_guard g(ctx->device);
        cudaError_t e = cudaSuccess;
        if (!ctx->pool) {
            cudaMemPoolProps props;
            memset(&props, 0, sizeof props);
            props.allocType = cudaMemAllocationTypePinned;
            props.handleTypes = cudaMemHandleTypeNone;
            props.location.type = cudaMemLocationTypeDevice;
            props.location.id = ctx->device;
            e = cudaMemPoolCreate(&ctx->pool, &props);
            uint64_t keep = UINT64_MAX; /* a cache: never give memory back at a sync */
            if (e == cudaSuccess)
                e = cudaMemPoolSetAttribute(ctx->pool, cudaMemPoolAttrReleaseThreshold, &keep);
        }
        if (e == cudaSuccess)
            e = cudaMallocFromPoolAsync(ptr_ret, size ? size : 1, ctx->pool,
                                        (cudaStream_t)stream);
        st = record(ctx, e, "cudaMallocFromPoolAsync");
    }
    pthread_mutex_unlock(&ctx->mu);
    return st;
}

int l3gpu_free_async(l3gpu_ctx *ctx, void *ptr, void *stream)
{
    if (!ctx)
        return L3GPU_ERR_INVALID_ARG;
    if (!ptr)
        return L3GPU_OK;
    pthread_mutex_lock(&ctx->mu);
    int st;
    {
        device_guard g(ctx->device);
        st = record(ctx, cudaFreeAsync(ptr, (cudaStream_t)stream), "cudaFreeAsync");
    }
    pthread_mutex_unlock(&ctx->mu);
    return st;
}

static bool same_stream(void *a, void *b)
{
    void *legacy = (void *)cudaStreamLegacy;
    if (!a)
        a = legacy;
    if (!b)
        b = legacy;
    return a == b;
}

int l3gpu_stream_wait(l3gpu_ctx *ctx, void *waiter, void *producer)
{
    if (!ctx)
        return L3GPU_ERR_INVALID_ARG;
    if (same_stream(waiter, producer))
        return L3GPU_OK;
    pthread_mutex_lock(&ctx->mu);
    int st;
    {
        device_guard g(ctx->device);
        cudaError_t e = cudaEventRecord(ctx->order_ev, (cudaStream_t)producer);
        if (e == cudaSuccess)
            e = cudaStreamWaitEvent((cudaStream_t)waiter, ctx->order_ev, 0);
        st = record(ctx, e, "ordering streams");
    }
    pthread_mutex_unlock(&ctx->mu);
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
