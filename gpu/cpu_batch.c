/* cpu_batch.c — l3gpu_cpu_decode_batch: the CPU batch decoder.
 *
 * The batch is checked as the CUDA path checks it (l3_read_layout, output
 * shapes, sizes); then each image is decoded by the codec's tile decoder:
 * native interleaved outputs with l3_decode() itself (the bytes and speed of
 * a plain decode), every other format with l3_decode_tiles() and the fused
 * converters of cpu_convert.c as its sink, so each tile is converted while
 * its planes are in cache. The same bytes as the per-pixel l3_convert.h
 * reference (l3gpu_cpu_convert, the CUDA kernel), whichever tile decoder
 * (SIMD lanes or scalar) the codec picks.
 *
 * Threads: while every thread can get an image of its own, the threads take
 * whole images (one decode thread each: no sharing inside an image); the
 * last n mod threads images (all of them when n < threads) then go one after
 * another, each on all the threads (split by tile batches), so that no
 * thread idles through a whole image at the end: 3 images on 2 threads take
 * 1.5 image times, not 2.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "l3.h"
#include "l3gpu.h"
#include "l3_convert.h"
#include "cpu_convert.h"

struct cpu_image {
    const void *data;
    size_t size;        /* header + payload: trailing bytes are not the codec's */
    struct l3_info info;
    struct l3cv_image cv;
    struct l3cv_fast fast;
    uint8_t *out;
    size_t out_bytes;
    int direct;         /* interleaved native samples: l3_decode writes them */
    int status;         /* written by the one thread that decodes the image */
};

struct cpu_batch {
    struct cpu_image *im;
    size_t n;
    size_t whole;         /* images 0..whole-1 are taken whole by the pool */
    atomic_size_t next;   /* next image to take */
    uint8_t *scratch;     /* per decode worker: scratch_per bytes */
    size_t scratch_per;
};

/* What the sink of one image's decode needs. */
struct sink_ctx {
    struct cpu_image *im;
    uint8_t *scratch; /* one region of scratch_per bytes per decode thread */
    size_t scratch_per;
};

static int fused_sink(void *arg, unsigned worker, const struct l3_tile_out *t)
{
    struct sink_ctx *s = arg;
    l3cv_fast_tile(&s->im->fast, t, s->im->out, s->scratch + (size_t)worker * s->scratch_per);
    return 0;
}

static void decode_image(struct cpu_image *im, unsigned threads, uint8_t *scratch,
                         size_t scratch_per)
{
    struct l3_decode_options opts;
    memset(&opts, 0, sizeof opts);
    opts.threads = threads;
    if (im->direct) {
        im->status = l3_decode(im->data, im->size, im->out, im->out_bytes, 0, &opts);
        return;
    }
    struct sink_ctx s = {im, scratch, scratch_per};
    im->status = l3_decode_tiles(im->data, im->size, &opts, fused_sink, &s);
}

struct pool_arg {
    struct cpu_batch *b;
    unsigned slot; /* this thread's scratch region */
};

/* A pool thread: takes whole images, one decode thread each. */
static void *pool_thread(void *arg)
{
    struct pool_arg *pa = arg;
    struct cpu_batch *b = pa->b;
    uint8_t *scratch = b->scratch + (size_t)pa->slot * b->scratch_per;
    for (;;) {
        size_t i = atomic_fetch_add(&b->next, 1);
        if (i >= b->whole)
            break;
        if (!b->im[i].status)
            decode_image(&b->im[i], 1, scratch, b->scratch_per);
    }
    return NULL;
}

/* Output of a decode is "direct" when l3_decode() writes it as is:
 * interleaved native samples (channels forced to the native count of a
 * non-palette image change nothing). */
static int is_direct(const struct l3_info *info, const struct l3gpu_format *fmt)
{
    if (fmt->layout != L3GPU_HWC || fmt->normalize)
        return 0;
    if (fmt->channels != 0 &&
        (info->color == L3_COLOR_PALETTE || (unsigned)fmt->channels != info->channels))
        return 0;
    if (info->bit_depth == 8)
        return fmt->dtype == L3GPU_U8;
    if (info->bit_depth == 16)
        return fmt->dtype == L3GPU_U16;
    /* sub-byte palette indices stay indices in both */
    return info->color == L3_COLOR_PALETTE && fmt->dtype == L3GPU_U8;
}

/* Checks every image and fills b->im; returns the contiguous slot size. */
static size_t check_images(struct cpu_batch *b, const struct l3gpu_input *in,
                           const struct l3gpu_format *fmt, int contiguous,
                           uint32_t *max_tile_w)
{
    size_t slot = 0;
    uint32_t shape0[3] = {0, 0, 0};
    int have_shape = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct cpu_image *im = &b->im[i];
        struct l3_layout lay;
        int st = in[i].data ? l3_read_layout(in[i].data, in[i].size, &im->info, &lay, NULL)
                            : L3_ERR_INVALID_ARG;
        uint32_t shape[3];
        size_t bytes = 0;
        if (!st && l3gpu_output_shape(&im->info, fmt, shape, &bytes))
            st = L3_ERR_UNSUPPORTED;
        im->out_bytes = bytes; /* failed separate outputs are zeroed with it */
        if (!st && (lay.header_size > in[i].size ||
                    lay.payload_size > in[i].size - lay.header_size))
            st = L3_ERR_TRUNCATED;
        if (!st && l3cv_prepare(&im->info, fmt, &im->cv))
            st = L3_ERR_UNSUPPORTED;
        if (!st && contiguous) {
            if (!have_shape) {
                memcpy(shape0, shape, sizeof shape);
                slot = bytes;
                have_shape = 1;
            } else if (memcmp(shape0, shape, sizeof shape)) {
                st = L3GPU_IMG_SHAPE;
            }
        }
        if (!st) {
            im->data = in[i].data;
            im->size = lay.header_size + (size_t)lay.payload_size;
            im->direct = is_direct(&im->info, fmt);
            if (!im->direct && l3cv_fast_prepare(&im->cv, L3CV_STREAM_MIN, &im->fast))
                st = L3_ERR_UNSUPPORTED; /* a map l3cv_prepare never makes */
            if (im->info.tile_width > *max_tile_w)
                *max_tile_w = im->info.tile_width;
        }
        im->status = st;
    }
    return slot;
}

int l3gpu_cpu_decode_batch(const struct l3gpu_input *in, size_t n,
                           const struct l3gpu_format *fmt, void *out,
                           size_t out_size, void *const *out_ptrs, int *status_ret,
                           unsigned threads)
{
    if ((n && (!in || !status_ret)) || (!out == !out_ptrs) || l3gpu_format_check(fmt))
        return L3GPU_ERR_INVALID_ARG;
    const size_t esize = l3gpu_dtype_size(fmt->dtype);
    if (out && ((uintptr_t)out % esize))
        return L3GPU_ERR_INVALID_ARG; /* elements must be aligned */
    if (n == 0)
        return L3GPU_OK;
    struct cpu_batch b;
    memset(&b, 0, sizeof b);
    b.n = n;
    b.im = calloc(n, sizeof *b.im);
    if (!b.im)
        return L3GPU_ERR_NOMEM;
    int ret = L3GPU_OK;
    uint32_t max_tile_w = 0;
    size_t slot = check_images(&b, in, fmt, out != NULL, &max_tile_w);
    if (out) {
        if (slot && n > out_size / slot) {
            ret = L3GPU_ERR_OUTPUT_TOO_SMALL;
            goto done;
        }
        for (size_t i = 0; i < n; i++)
            b.im[i].out = (uint8_t *)out + i * slot;
    } else {
        for (size_t i = 0; i < n; i++) {
            b.im[i].out = out_ptrs[i];
            if (!b.im[i].status && (!out_ptrs[i] || (uintptr_t)out_ptrs[i] % esize))
                b.im[i].status = L3_ERR_INVALID_ARG;
        }
    }
    if (threads == 0)
        threads = 1;
    if (threads > 256)
        threads = 256;
    unsigned pool = (size_t)threads <= n ? threads : 1;
    b.whole = pool > 1 ? n - n % pool : 0;
    b.scratch_per = (L3CV_FAST_SCRATCH(max_tile_w) + 63) & ~(size_t)63;
    b.scratch = aligned_alloc(64, b.scratch_per * threads); /* per thread, either phase */
    if (!b.scratch) {
        ret = L3GPU_ERR_NOMEM;
        goto done;
    }
    if (b.whole) {
        atomic_init(&b.next, 0);
        pthread_t tid[256];
        struct pool_arg pa[256];
        unsigned started = 0;
        for (unsigned t = 1; t < pool; t++) {
            pa[t].b = &b;
            pa[t].slot = t;
            if (pthread_create(&tid[started], NULL, pool_thread, &pa[t]))
                break; /* fewer threads: the others take more images */
            started++;
        }
        pa[0].b = &b;
        pa[0].slot = 0;
        pool_thread(&pa[0]);
        for (unsigned t = 0; t < started; t++)
            pthread_join(tid[t], NULL);
    }
    for (size_t i = b.whole; i < n; i++) /* the rest, each on every thread */
        if (!b.im[i].status)
            decode_image(&b.im[i], threads, b.scratch, b.scratch_per);
    for (size_t i = 0; i < n; i++) {
        struct cpu_image *im = &b.im[i];
        int st = im->status;
        status_ret[i] = st;
        if (st) {
            if (ret == L3GPU_OK)
                ret = L3GPU_ERR_IMAGE;
            if (im->out && out)
                memset(im->out, 0, slot);
            else if (im->out && im->out_bytes)
                memset(im->out, 0, im->out_bytes);
        }
    }
    if (out && !slot)
        memset(out, 0, out_size);
done:
    free(b.scratch);
    free(b.im);
    return ret;
}
