/* test_cuda.c — the CUDA batch decoder (libl3gpu), built twice:
 *   test_cuda_fake (meson test gpu-fake): against tests/gpu/fakecuda, the
 *     CPU-executed runtime, so that every test runs in CI; the tests marked
 *     FAKE below use its fault injection, device modes and counters and
 *     exist only in this build.
 *   test_cuda (meson test cuda): against the real runtime; where no GPU is
 *     usable the tests that need one skip with that reason.
 */
#include <criterion/criterion.h>
#include "tc_timeout.h"
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_gen.h"
#include "l3gpu.h"

#ifdef L3_FAKECUDA
#include "fakecuda.h"
#endif

/* ---------------- helpers ---------------- */

/* A context on `dev`, or a skip with the reason where no GPU is usable. */
static l3gpu_ctx *open_ctx(int dev)
{
    l3gpu_ctx *ctx = NULL;
    int st = l3gpu_ctx_create(dev, &ctx);
#ifndef L3_FAKECUDA
    if (st == L3GPU_ERR_NO_DRIVER || st == L3GPU_ERR_NO_DEVICE)
        cr_skip_test("no usable GPU here (%s): the fake-runtime build (test gpu-fake) runs this",
                     l3gpu_strerror(st));
#endif
    cr_assert_eq(st, L3GPU_OK, "l3gpu_ctx_create(%d): %s", dev, l3gpu_strerror(st));
    cr_assert_not_null(ctx);
    return ctx;
}

/* Fake runtime: no race and no kernel fault happened so far. */
static void runtime_clean(void)
{
#ifdef L3_FAKECUDA
    struct fakecuda_stats s;
    fakecuda_get_stats(&s);
    cr_assert_eq(s.races, 0, "fakecuda saw %llu race(s): %s", s.races, fakecuda_last_message());
    cr_assert_eq(s.faults, 0, "fakecuda saw %llu kernel fault(s): %s", s.faults,
                 fakecuda_last_message());
#endif
}

static void *dev_alloc(l3gpu_ctx *ctx, size_t n, int poison)
{
    void *d = NULL;
    cr_assert_eq(l3gpu_malloc(ctx, n, &d), L3GPU_OK, "%s", l3gpu_ctx_error(ctx));
    uint8_t *h = malloc(n);
    memset(h, poison, n);
    cr_assert_eq(l3gpu_memcpy_to_device(ctx, d, h, n), L3GPU_OK, "%s", l3gpu_ctx_error(ctx));
    free(h);
    return d;
}

static uint8_t *download(l3gpu_ctx *ctx, const void *d, size_t n)
{
    uint8_t *h = malloc(n);
    cr_assert_eq(l3gpu_memcpy_to_host(ctx, h, d, n), L3GPU_OK, "%s", l3gpu_ctx_error(ctx));
    return h;
}

/* Copies of the inputs in the memory kind the batch says. */
struct inputs {
    struct l3gpu_input in[8];
    void *mem[8];
    int memory;
    size_t n;
};

static void inputs_make(struct inputs *x, const struct l3gpu_input *src, size_t n, int memory)
{
    cr_assert_leq(n, 8);
    memset(x, 0, sizeof *x);
    x->memory = memory;
    x->n = n;
    for (size_t i = 0; i < n; i++) {
        x->in[i].size = src[i].size;
        if (memory == L3GPU_MEM_HOST) {
            x->in[i].data = src[i].data;
            continue;
        }
        void *p = NULL;
        cudaError_t e = memory == L3GPU_MEM_PINNED ? cudaHostAlloc(&p, src[i].size, 0)
                                                   : cudaMalloc(&p, src[i].size);
        cr_assert_eq(e, cudaSuccess, "%s", cudaGetErrorString(e));
        e = cudaMemcpy(p, src[i].data, src[i].size,
                       memory == L3GPU_MEM_PINNED ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice);
        cr_assert_eq(e, cudaSuccess, "%s", cudaGetErrorString(e));
        x->mem[i] = p;
        x->in[i].data = p;
    }
}

static void inputs_free(struct inputs *x)
{
    for (size_t i = 0; i < x->n; i++) {
        if (!x->mem[i])
            continue;
        if (x->memory == L3GPU_MEM_PINNED)
            cudaFreeHost(x->mem[i]);
        else
            cudaFree(x->mem[i]);
    }
}

/* Decodes in[0..n) on the GPU into one contiguous output and checks bytes
 * and statuses against the CPU batch. */
static void check_batch(l3gpu_ctx *ctx, const struct l3gpu_input *in, size_t n, int memory,
                        const struct l3gpu_format *f, void *stream, const char *name)
{
    size_t bytes = 0;
    struct l3_info info;
    cr_assert_eq(l3_read_info(in[0].data, in[0].size, &info, NULL), L3_OK);
    cr_assert_eq(l3gpu_output_shape(&info, f, NULL, &bytes), L3GPU_OK);
    uint8_t *cpu = malloc(n * bytes);
    int sc[8], sg[8];
    l3gpu_cpu_decode_batch(in, n, f, cpu, n * bytes, NULL, sc, 2);
    struct inputs x;
    inputs_make(&x, in, n, memory);
    void *d = dev_alloc(ctx, n * bytes, 0x5c);
    int st = l3gpu_decode_batch(ctx, x.in, n, memory, f, d, n * bytes, NULL, NULL, 0, sg, stream);
    cr_assert(st == L3GPU_OK || st == L3GPU_ERR_IMAGE, "%s: %s (%s)", name, l3gpu_strerror(st),
              l3gpu_ctx_error(ctx));
    st = l3gpu_batch_finish(ctx, sg, n);
    cr_assert(st == L3GPU_OK || st == L3GPU_ERR_IMAGE, "%s: finish %s (%s)", name,
              l3gpu_strerror(st), l3gpu_ctx_error(ctx));
    uint8_t *gpu = download(ctx, d, n * bytes);
    for (size_t k = 0; k < n; k++)
        cr_assert_eq(sg[k], sc[k], "%s: image %zu status gpu %d cpu %d", name, k, sg[k], sc[k]);
    cr_assert(!memcmp(cpu, gpu, n * bytes), "%s: GPU output differs from CPU", name);
    l3gpu_free(ctx, d);
    inputs_free(&x);
    free(cpu);
    free(gpu);
}

/* Three RGB8 images (64x40, 32x32 tiles). */
static void rgb_set(struct gen g[3], uint64_t seed)
{
    for (int k = 0; k < 3; k++)
        gen_image(&g[k], L3_COLOR_RGB, 8, 64, 40, seed + (uint64_t)k, 32, 0);
}

static void to_inputs(const struct gen *g, size_t n, struct l3gpu_input *in)
{
    for (size_t k = 0; k < n; k++) {
        in[k].data = g[k].l3;
        in[k].size = g[k].l3_size;
    }
}

/* ---------------- no GPU ---------------- */

static void expect_unusable(int expected)
{
    l3gpu_ctx *ctx = (l3gpu_ctx *)&ctx; /* must be reset to NULL on failure */
    int n = -1;
    int st_count = l3gpu_device_count(&n);
    int st = l3gpu_ctx_create(0, &ctx);
    cr_assert_eq(st, expected, "ctx_create: %d (%s)", st, l3gpu_strerror(st));
    cr_assert_null(ctx);
    cr_assert_eq(n, 0);
    cr_assert_eq(st_count, st);
    cr_assert_eq(l3gpu_ctx_create(-1, &ctx), st);
    l3gpu_ctx_destroy(NULL);
}

Test(cuda, no_gpu_is_a_status)
{
#ifdef L3_FAKECUDA
    fakecuda_set_devices(FAKECUDA_NO_DRIVER);
    expect_unusable(L3GPU_ERR_NO_DRIVER);
    fakecuda_set_devices(0);
    expect_unusable(L3GPU_ERR_NO_DEVICE);
    fakecuda_set_devices(2);
    l3gpu_ctx *ctx = NULL;
    cr_assert_eq(l3gpu_ctx_create(2, &ctx), L3GPU_ERR_NO_DEVICE);
    cr_assert_null(ctx);
    cr_assert_eq(l3gpu_ctx_create(1, &ctx), L3GPU_OK);
    cr_assert_eq(l3gpu_ctx_device(ctx), 1);
    l3gpu_ctx_destroy(ctx);
#else
    int n = 0;
    if (l3gpu_device_count(&n) == L3GPU_OK) {
        cr_assert_geq(n, 1);
        cr_assert_eq(l3gpu_ctx_create(n, &(l3gpu_ctx *){NULL}), L3GPU_ERR_NO_DEVICE);
    } else {
        int st = l3gpu_ctx_create(0, &(l3gpu_ctx *){NULL});
        cr_assert(st == L3GPU_ERR_NO_DRIVER || st == L3GPU_ERR_NO_DEVICE, "status %d", st);
        cr_log_info("no usable GPU here: %s", l3gpu_strerror(st));
        expect_unusable(st);
    }
#endif
    /* scratch sizing works without a device */
    struct l3_info info;
    memset(&info, 0, sizeof info);
    info.color = L3_COLOR_RGB;
    info.width = 100;
    info.height = 70;
    info.tile_width = info.tile_height = 64;
    info.tiles_x = 2;
    info.tiles_y = 2;
    size_t sz = 0;
    cr_assert_eq(l3gpu_scratch_size(&info, 1, &sz), L3GPU_OK);
    cr_assert_geq(sz, (size_t)4 * 3 * 64 * 64 * 2 + 4);
}

/* ---------------- GPU bytes == CPU bytes ---------------- */

/* Every colour model x every format x pageable/pinned/device inputs: a good
 * image, a truncated one and one with LZ planes per batch; then separate
 * outputs (out_ptrs) for every model. */
Test(cuda, gpu_matches_cpu_every_format, .timeout = TC_TIMEOUT(600))
{
    l3gpu_ctx *ctx = open_ctx(0);
    static const char *mem_name[] = {"host", "pinned", "device"};
    for (size_t m = 0; m < NMODELS; m++) {
        struct gen g, z;
        gen_image(&g, MODELS[m].color, MODELS[m].depth, 70, 45, 300 + m, 32, MODELS[m].trns);
        gen_pattern(&z, MODELS[m].color, MODELS[m].depth, 70, 45, 800 + m, 32, MODELS[m].trns, 1,
                    2);
        struct l3gpu_input in[3] = {{g.l3, g.l3_size}, {g.l3, g.l3_size - 10}, {z.l3, z.l3_size}};
        struct l3gpu_format f;
        FOR_EACH_FORMAT(f) {
            for (int mem = 0; mem < 3; mem++) {
                char name[200];
                format_name(name, sizeof name, &g, &f);
                strcat(name, ", ");
                strcat(name, mem_name[mem]);
                check_batch(ctx, in, 3, mem, &f, NULL, name);
            }
        }
        /* out_ptrs, native format */
        l3gpu_format_init(&f);
        size_t bytes;
        cr_assert_eq(l3gpu_output_shape(&g.info, &f, NULL, &bytes), 0);
        void *d[3], *h[3];
        int sc[3], sg[3];
        for (int k = 0; k < 3; k++) {
            d[k] = dev_alloc(ctx, bytes, 0x3c);
            h[k] = malloc(bytes);
        }
        l3gpu_cpu_decode_batch(in, 3, &f, NULL, 0, h, sc, 1);
        int st = l3gpu_decode_batch(ctx, in, 3, L3GPU_MEM_HOST, &f, NULL, 0, d, NULL, 0, sg, NULL);
        cr_assert_eq(st, L3GPU_ERR_IMAGE, "%s", l3gpu_ctx_error(ctx));
        cr_assert_eq(l3gpu_batch_finish(ctx, sg, 3), L3GPU_ERR_IMAGE);
        for (int k = 0; k < 3; k++) {
            uint8_t *got = download(ctx, d[k], bytes);
            cr_assert_eq(sg[k], sc[k]);
            cr_assert(!memcmp(got, h[k], bytes), "model %zu out_ptrs[%d] differs", m, k);
            free(got);
            free(h[k]);
            l3gpu_free(ctx, d[k]);
        }
        gen_free(&g);
        gen_free(&z);
    }
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

/* Separate outputs mixing native channel counts (1, 2, 3, 4), image sizes
 * and tile sizes in one batch, with a truncated and a corrupt image: bytes
 * and statuses as on the CPU, in every layout x dtype. The convert kernels
 * are one per output channel count: on the fake runtime, one decode launch
 * plus one convert launch per channel count present (4 native, 1 forced). */
Test(cuda, mixed_outputs_in_one_batch)
{
    l3gpu_ctx *ctx = open_ctx(0);
    enum { N = 6 };
    static const struct { unsigned color, depth, w, h, tile; } IM[N] = {
        {L3_COLOR_GRAY, 8, 70, 45, 32},   {L3_COLOR_RGB, 16, 33, 17, 16},
        {L3_COLOR_RGBA, 8, 130, 66, 64},  {L3_COLOR_GRAY_ALPHA, 8, 1, 1, 32},
        {L3_COLOR_PALETTE, 4, 65, 3, 64}, {L3_COLOR_RGB, 8, 40, 40, 32},
    };
    struct gen g[N];
    struct l3gpu_input in[N];
    for (int k = 0; k < N; k++)
        gen_image(&g[k], IM[k].color, IM[k].depth, IM[k].w, IM[k].h, 900 + (uint64_t)k,
                  IM[k].tile, 0);
    to_inputs(g, N, in);
    in[1].size -= 7; /* truncated: status, slot zeroed */
    uint8_t *bad = malloc(g[5].l3_size);
    memcpy(bad, g[5].l3, g[5].l3_size);
    struct l3_layout lay;
    cr_assert_eq(l3_read_layout(bad, g[5].l3_size, NULL, &lay, NULL), L3_OK);
    bad[lay.header_size + 1] = 0x80; /* first tile's first plane mode: undefined flag */
    in[5].data = bad;
    struct l3gpu_format f;
    for (int forced = 0; forced < 2; forced++)
        for (int lay_ = 0; lay_ < 2; lay_++)
            for (int dt = 0; dt < 4; dt++) {
                l3gpu_format_init(&f);
                f.layout = lay_;
                f.dtype = dt;
                f.channels = forced ? 3 : 0;
                void *d[N], *h[N];
                size_t bytes[N];
                int sc[N], sg[N];
                for (int k = 0; k < N; k++) {
                    cr_assert_eq(l3gpu_output_shape(&g[k].info, &f, NULL, &bytes[k]), 0);
                    d[k] = dev_alloc(ctx, bytes[k], 0x3c);
                    h[k] = malloc(bytes[k]);
                }
                l3gpu_cpu_decode_batch(in, N, &f, NULL, 0, h, sc, 1);
#ifdef L3_FAKECUDA
                struct fakecuda_stats s0, s1;
                fakecuda_get_stats(&s0);
#endif
                int st = l3gpu_decode_batch(ctx, in, N, L3GPU_MEM_HOST, &f, NULL, 0, d, NULL, 0,
                                            sg, NULL);
                cr_assert_eq(st, L3GPU_ERR_IMAGE, "%s", l3gpu_ctx_error(ctx));
                cr_assert_eq(l3gpu_batch_finish(ctx, sg, N), L3GPU_ERR_IMAGE);
#ifdef L3_FAKECUDA
                fakecuda_get_stats(&s1);
                cr_assert_eq(s1.launches - s0.launches, forced ? 2u : 5u,
                             "layout %d dtype %d channels %d: %llu launches", lay_, dt, f.channels,
                             s1.launches - s0.launches);
#endif
                cr_assert_eq(sc[1], L3_ERR_TRUNCATED);
                cr_assert_neq(sc[5], 0);
                for (int k = 0; k < N; k++) {
                    uint8_t *got = download(ctx, d[k], bytes[k]);
                    cr_assert_eq(sg[k], sc[k], "image %d: status gpu %d cpu %d", k, sg[k], sc[k]);
                    cr_assert(!memcmp(got, h[k], bytes[k]),
                              "layout %d dtype %d channels %d: image %d differs", lay_, dt,
                              f.channels, k);
                    free(got);
                    free(h[k]);
                    l3gpu_free(ctx, d[k]);
                }
            }
    free(bad);
    for (int k = 0; k < N; k++)
        gen_free(&g[k]);
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

/* A broken tile, a truncated file and junk inside a batch: statuses and
 * zeroed slots as on the CPU; on a caller stream. */
Test(cuda, broken_images_on_a_stream)
{
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3];
    rgb_set(g, 40);
    uint8_t *bad = malloc(g[1].l3_size);
    memcpy(bad, g[1].l3, g[1].l3_size);
    struct l3_layout lay;
    cr_assert_eq(l3_read_layout(bad, g[1].l3_size, NULL, &lay, NULL), L3_OK);
    bad[lay.header_size + 1] = 0x80; /* first tile's first plane mode: undefined flag */
    static const uint8_t junk[64] = "not an L3 file";
    struct l3gpu_input in[5] = {{g[0].l3, g[0].l3_size}, {bad, g[1].l3_size},
                                {g[2].l3, g[2].l3_size - 99}, {junk, sizeof junk},
                                {g[2].l3, g[2].l3_size}};
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    f.dtype = L3GPU_F32;
    f.layout = L3GPU_CHW;
    check_batch(ctx, in, 5, L3GPU_MEM_HOST, &f, s, "broken images, HOST");
    check_batch(ctx, in, 5, L3GPU_MEM_DEVICE, &f, s, "broken images, DEVICE");
    cudaStreamDestroy(s);
    free(bad);
    for (int k = 0; k < 3; k++)
        gen_free(&g[k]);
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

/* Pageable inputs may be reused as soon as the call returns. */
Test(cuda, pageable_inputs_reusable_at_return)
{
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3];
    rgb_set(g, 60);
    struct l3gpu_input in[3];
    to_inputs(g, 3, in);
    uint8_t *copy[3];
    struct l3gpu_input cin[3];
    for (int k = 0; k < 3; k++) {
        copy[k] = malloc(g[k].l3_size);
        memcpy(copy[k], g[k].l3, g[k].l3_size);
        cin[k].data = copy[k];
        cin[k].size = g[k].l3_size;
    }
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    size_t bytes;
    cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, NULL, &bytes), 0);
    uint8_t *cpu = malloc(3 * bytes);
    int sc[3], sg[3];
    l3gpu_cpu_decode_batch(in, 3, &f, cpu, 3 * bytes, NULL, sc, 1);
    void *d = dev_alloc(ctx, 3 * bytes, 0);
    cr_assert_eq(l3gpu_decode_batch(ctx, cin, 3, L3GPU_MEM_HOST, &f, d, 3 * bytes, NULL, NULL, 0,
                                    sg, NULL),
                 L3GPU_OK);
    for (int k = 0; k < 3; k++)
        memset(copy[k], 0xEE, g[k].l3_size); /* reused before the stream ran */
    cr_assert_eq(l3gpu_batch_finish(ctx, sg, 3), L3GPU_OK);
    uint8_t *got = download(ctx, d, 3 * bytes);
    cr_assert(!memcmp(got, cpu, 3 * bytes));
    free(got);
    free(cpu);
    l3gpu_free(ctx, d);
    for (int k = 0; k < 3; k++) {
        free(copy[k]);
        gen_free(&g[k]);
    }
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

/* ---------------- R2: one context, two threads ---------------- */

struct r2_thread {
    l3gpu_ctx *ctx;
    const struct l3gpu_input *in;
    size_t n;
    const struct l3gpu_format *f;
    void *out;
    size_t out_size;
    int status[4];
    int ret_decode, ret_finish;
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *step; /* 0: A decodes, 1: B decodes, 2: A finishes, 3: B finishes */
    int first; /* decode at step `first`, finish at step `first + 2` */
};

static void r2_wait(struct r2_thread *t, int step)
{
    pthread_mutex_lock(t->mu);
    while (*t->step != step)
        pthread_cond_wait(t->cv, t->mu);
    pthread_mutex_unlock(t->mu);
}

static void r2_next(struct r2_thread *t)
{
    pthread_mutex_lock(t->mu);
    (*t->step)++;
    pthread_cond_broadcast(t->cv);
    pthread_mutex_unlock(t->mu);
}

static void *r2_run(void *arg)
{
    struct r2_thread *t = arg;
    r2_wait(t, t->first);
    t->ret_decode = l3gpu_decode_batch(t->ctx, t->in, t->n, L3GPU_MEM_HOST, t->f, t->out,
                                       t->out_size, NULL, NULL, 0, t->status, NULL);
    r2_next(t);
    r2_wait(t, t->first + 2);
    t->ret_finish = l3gpu_batch_finish(t->ctx, t->status, t->n);
    r2_next(t);
    return NULL;
}

/* R2: thread A decodes, thread B decodes on the same context, then A and B
 * finish: each gets its own batch's statuses and bytes. */
Test(cuda, shared_context_threads_keep_their_statuses)
{
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3], h[3];
    rgb_set(g, 100);
    rgb_set(h, 200);
    struct l3gpu_input a[3], b[3];
    to_inputs(g, 3, a);
    to_inputs(h, 3, b);
    b[1].size -= 50; /* truncated */
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    size_t bytes;
    cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, NULL, &bytes), 0);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int step = 0;
    struct r2_thread ta = {ctx, a, 3, &f, dev_alloc(ctx, 3 * bytes, 1), 3 * bytes, {0},
                           -1, -1, &mu, &cv, &step, 0};
    struct r2_thread tb = {ctx, b, 3, &f, dev_alloc(ctx, 3 * bytes, 2), 3 * bytes, {0},
                           -1, -1, &mu, &cv, &step, 1};
    pthread_t pa, pb;
    pthread_create(&pa, NULL, r2_run, &ta);
    pthread_create(&pb, NULL, r2_run, &tb);
    pthread_join(pa, NULL);
    pthread_join(pb, NULL);
    cr_assert_eq(ta.ret_decode, L3GPU_OK, "A decode: %s", l3gpu_strerror(ta.ret_decode));
    cr_assert_eq(ta.ret_finish, L3GPU_OK, "A finish: %s; A statuses %d %d %d",
                 l3gpu_strerror(ta.ret_finish), ta.status[0], ta.status[1], ta.status[2]);
    cr_assert_eq(tb.ret_decode, L3GPU_ERR_IMAGE, "B decode: %s", l3gpu_strerror(tb.ret_decode));
    cr_assert_eq(tb.ret_finish, L3GPU_ERR_IMAGE, "B finish: %s", l3gpu_strerror(tb.ret_finish));
    for (int k = 0; k < 3; k++)
        cr_assert_eq(ta.status[k], 0, "A statuses %d %d %d", ta.status[0], ta.status[1],
                     ta.status[2]);
    cr_assert(tb.status[0] == 0 && tb.status[1] == L3_ERR_TRUNCATED && tb.status[2] == 0,
              "B statuses %d %d %d", tb.status[0], tb.status[1], tb.status[2]);
    int sc[3];
    uint8_t *cpu = malloc(3 * bytes);
    for (int t = 0; t < 2; t++) {
        struct r2_thread *x = t ? &tb : &ta;
        l3gpu_cpu_decode_batch(x->in, 3, &f, cpu, 3 * bytes, NULL, sc, 1);
        uint8_t *got = download(ctx, x->out, 3 * bytes);
        cr_assert(!memcmp(got, cpu, 3 * bytes), "thread %c: bytes differ", 'A' + t);
        free(got);
        l3gpu_free(ctx, x->out);
    }
    free(cpu);
    for (int k = 0; k < 3; k++) {
        gen_free(&g[k]);
        gen_free(&h[k]);
    }
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

/* ---------------- R3: stale runtime errors ---------------- */

/* R3: a failed runtime call before a batch (an allocation too large) must
 * not fail the next good batch. */
Test(cuda, stale_error_does_not_fail_next_batch)
{
    l3gpu_ctx *ctx = open_ctx(0);
    void *p = NULL;
    cr_assert_eq(l3gpu_malloc(ctx, (size_t)1 << 62, &p), L3GPU_ERR_NOMEM);
    cr_assert_null(p);
    struct gen g[3];
    rgb_set(g, 300);
    struct l3gpu_input in[3];
    to_inputs(g, 3, in);
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    check_batch(ctx, in, 3, L3GPU_MEM_HOST, &f, NULL, "batch after a failed allocation");
    for (int k = 0; k < 3; k++)
        gen_free(&g[k]);
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

/* ---------------- R4: pointers the device cannot use ---------------- */

static int try_out(l3gpu_ctx *ctx, const struct l3gpu_input *in, size_t n, int memory,
                   const struct l3gpu_format *f, void *out, size_t out_size, void *const *ptrs,
                   void *scratch, size_t scratch_size)
{
    int st_[8];
    int st = l3gpu_decode_batch(ctx, in, n, memory, f, out, out_size, ptrs, scratch, scratch_size,
                                st_, NULL);
    if (st == L3GPU_OK || st == L3GPU_ERR_IMAGE)
        st = l3gpu_batch_finish(ctx, st_, n);
    return st;
}

/* R4: a misaligned float output, host memory as output, scratch or device
 * input, a misaligned out_ptrs entry: L3GPU_ERR_INVALID_ARG before anything
 * is launched, and the context (the process's CUDA context) still works. */
Test(cuda, unusable_pointers_are_invalid_arguments)
{
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3];
    rgb_set(g, 400);
    struct l3gpu_input in[3];
    to_inputs(g, 3, in);
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    f.dtype = L3GPU_F32;
    size_t bytes, scr;
    cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, NULL, &bytes), 0);
    struct l3_info infos[3] = {g[0].info, g[1].info, g[2].info};
    cr_assert_eq(l3gpu_scratch_size(infos, 3, &scr), 0);
    uint8_t *d = dev_alloc(ctx, 3 * bytes + 64, 0);
    uint8_t *host = malloc(3 * bytes + 64);
    int st;
    st = try_out(ctx, in, 3, L3GPU_MEM_HOST, &f, d + 1, 3 * bytes, NULL, NULL, 0);
    cr_assert_eq(st, L3GPU_ERR_INVALID_ARG, "misaligned f32 output: %s (%s)", l3gpu_strerror(st),
                 l3gpu_ctx_error(ctx));
    st = try_out(ctx, in, 3, L3GPU_MEM_HOST, &f, host, 3 * bytes, NULL, NULL, 0);
    cr_assert_eq(st, L3GPU_ERR_INVALID_ARG, "host memory as output: %s (%s)", l3gpu_strerror(st),
                 l3gpu_ctx_error(ctx));
    void *ptrs[3] = {d, d + bytes + 2, d + 2 * bytes + 32};
    st = try_out(ctx, in, 3, L3GPU_MEM_HOST, &f, NULL, 0, ptrs, NULL, 0);
    cr_assert_eq(st, L3GPU_ERR_INVALID_ARG, "misaligned out_ptrs[1]: %s (%s)", l3gpu_strerror(st),
                 l3gpu_ctx_error(ctx));
    void *hscr = malloc(scr);
    st = try_out(ctx, in, 3, L3GPU_MEM_HOST, &f, d, 3 * bytes, NULL, hscr, scr);
    cr_assert_eq(st, L3GPU_ERR_INVALID_ARG, "host memory as scratch: %s (%s)", l3gpu_strerror(st),
                 l3gpu_ctx_error(ctx));
    st = try_out(ctx, in, 3, L3GPU_MEM_DEVICE, &f, d, 3 * bytes, NULL, NULL, 0);
    cr_assert_eq(st, L3GPU_ERR_INVALID_ARG, "host memory as device input: %s (%s)",
                 l3gpu_strerror(st), l3gpu_ctx_error(ctx));
    free(hscr);
    /* the context still decodes */
    check_batch(ctx, in, 3, L3GPU_MEM_HOST, &f, NULL, "after the rejected calls");
    free(host);
    l3gpu_free(ctx, d);
    for (int k = 0; k < 3; k++)
        gen_free(&g[k]);
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

#ifdef L3_FAKECUDA
/* R4 (FAKE: two devices): memory and streams of another device. */
Test(cuda, other_device_memory_is_invalid_argument)
{
    fakecuda_set_devices(2);
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3];
    rgb_set(g, 450);
    struct l3gpu_input in[3];
    to_inputs(g, 3, in);
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    size_t bytes;
    cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, NULL, &bytes), 0);
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    void *other = NULL;
    cudaStream_t s1;
    cr_assert_eq(cudaMalloc(&other, 3 * bytes), cudaSuccess);
    cr_assert_eq(cudaStreamCreate(&s1), cudaSuccess);
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    int st = try_out(ctx, in, 3, L3GPU_MEM_HOST, &f, other, 3 * bytes, NULL, NULL, 0);
    cr_assert_eq(st, L3GPU_ERR_INVALID_ARG, "output on device 1: %s (%s)", l3gpu_strerror(st),
                 l3gpu_ctx_error(ctx));
    void *d = dev_alloc(ctx, 3 * bytes, 0);
    int sg[3];
    st = l3gpu_decode_batch(ctx, in, 3, L3GPU_MEM_HOST, &f, d, 3 * bytes, NULL, NULL, 0, sg, s1);
    if (st == L3GPU_OK)
        st = l3gpu_batch_finish(ctx, sg, 3);
    cr_assert_eq(st, L3GPU_ERR_INVALID_ARG, "stream of device 1: %s (%s)", l3gpu_strerror(st),
                 l3gpu_ctx_error(ctx));
    check_batch(ctx, in, 3, L3GPU_MEM_HOST, &f, NULL, "after the rejected calls");
    l3gpu_free(ctx, d);
    for (int k = 0; k < 3; k++)
        gen_free(&g[k]);
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

/* ---------------- R6: the device guard ---------------- */

struct r6_thread {
    int dev_before; /* -1: the thread never chooses a device */
    int dev_after;
    int ok;
};

static void *r6_run(void *arg)
{
    struct r6_thread *t = arg;
    if (t->dev_before >= 0)
        cudaSetDevice(t->dev_before);
    l3gpu_ctx *ctx = NULL;
    if (l3gpu_ctx_create(2, &ctx))
        return NULL;
    struct gen g[3];
    rgb_set(g, 500);
    struct l3gpu_input in[3];
    to_inputs(g, 3, in);
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    size_t bytes;
    l3gpu_output_shape(&g[0].info, &f, NULL, &bytes);
    void *d = NULL;
    int sg[3];
    t->ok = l3gpu_malloc(ctx, 3 * bytes, &d) == 0 &&
            l3gpu_decode_batch(ctx, in, 3, L3GPU_MEM_HOST, &f, d, 3 * bytes, NULL, NULL, 0, sg,
                               NULL) == 0 &&
            l3gpu_batch_finish(ctx, sg, 3) == 0 && l3gpu_stream_synchronize(ctx, NULL) == 0;
    l3gpu_free(ctx, d);
    l3gpu_ctx_destroy(ctx);
    for (int k = 0; k < 3; k++)
        gen_free(&g[k]);
    cudaGetDevice(&t->dev_after);
    return NULL;
}

/* R6 (FAKE: four devices): a thread that never chose a device uses GPU 2
 * only: no context appears on GPU 0; a thread on GPU 1 is back on GPU 1. */
Test(cuda, device_guard_makes_no_context_on_gpu0)
{
    fakecuda_set_devices(4);
    struct r6_thread t = {-1, -1, 0};
    pthread_t p;
    pthread_create(&p, NULL, r6_run, &t);
    pthread_join(p, NULL);
    cr_assert(t.ok, "decode on GPU 2 failed");
    cr_assert_not(fakecuda_context_active(0), "a context was created on GPU 0");
    cr_assert_not(fakecuda_context_active(1));
    cr_assert(fakecuda_context_active(2));
    struct r6_thread u = {1, -1, 0};
    pthread_create(&p, NULL, r6_run, &u);
    pthread_join(p, NULL);
    cr_assert(u.ok);
    cr_assert_eq(u.dev_after, 1, "current device after the calls: %d", u.dev_after);
    cr_assert_not(fakecuda_context_active(0), "a context was created on GPU 0");
    runtime_clean();
}

/* ---------------- R7: failures and buffer growth ---------------- */

/* R7 (FAKE): the second kernel launch of a batch fails after the copies and
 * the first kernel were enqueued on stream 1; the next batch on stream 2
 * must be ordered after that work (no race on the context's buffers) and
 * decode right. */
Test(cuda, failed_batch_keeps_its_buffers_ordered)
{
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3], h[3];
    rgb_set(g, 600);
    rgb_set(h, 700);
    struct l3gpu_input a[3], b[3];
    to_inputs(g, 3, a);
    to_inputs(h, 3, b);
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    size_t bytes;
    cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, NULL, &bytes), 0);
    cudaStream_t s1, s2;
    cr_assert_eq(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
    void *d1 = dev_alloc(ctx, 3 * bytes, 0), *d2 = dev_alloc(ctx, 3 * bytes, 0);
    int s_a[3], s_b[3];
    fakecuda_fail_call(FAKECUDA_CALL_LAUNCH, cudaErrorLaunchOutOfResources, 1);
    int st = l3gpu_decode_batch(ctx, a, 3, L3GPU_MEM_HOST, &f, d1, 3 * bytes, NULL, NULL, 0, s_a,
                                s1);
    cr_assert_eq(st, L3GPU_ERR_CUDA, "failed launch: %s", l3gpu_strerror(st));
    for (int k = 0; k < 3; k++)
        cr_assert_eq(s_a[k], L3GPU_IMG_ABORTED);
    l3gpu_batch_finish(ctx, s_a, 3);
    st = l3gpu_decode_batch(ctx, b, 3, L3GPU_MEM_HOST, &f, d2, 3 * bytes, NULL, NULL, 0, s_b, s2);
    cr_assert_eq(st, L3GPU_OK, "%s (%s)", l3gpu_strerror(st), l3gpu_ctx_error(ctx));
    cr_assert_eq(l3gpu_batch_finish(ctx, s_b, 3), L3GPU_OK);
    cr_assert_eq(l3gpu_stream_synchronize(ctx, s2), L3GPU_OK);
    uint8_t *cpu = malloc(3 * bytes);
    int sc[3];
    l3gpu_cpu_decode_batch(b, 3, &f, cpu, 3 * bytes, NULL, sc, 1);
    uint8_t *got = download(ctx, d2, 3 * bytes);
    cr_assert(!memcmp(got, cpu, 3 * bytes), "batch after the failed one: bytes differ");
    cr_assert_eq(l3gpu_stream_synchronize(ctx, s1), L3GPU_OK);
    runtime_clean();
    free(got);
    free(cpu);
    l3gpu_free(ctx, d1);
    l3gpu_free(ctx, d2);
    l3gpu_ctx_destroy(ctx);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
    for (int k = 0; k < 3; k++) {
        gen_free(&g[k]);
        gen_free(&h[k]);
    }
}

/* Batches of n copies of g[0..2] (n <= 8), checked against the CPU. */
static void grow_batch(l3gpu_ctx *ctx, const struct gen *g, size_t n, void *stream,
                       const char *name)
{
    struct l3gpu_input in[8];
    for (size_t k = 0; k < n; k++) {
        in[k].data = g[k % 3].l3;
        in[k].size = g[k % 3].l3_size;
    }
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    check_batch(ctx, in, n, L3GPU_MEM_HOST, &f, stream, name);
}

/* R7 (FAKE): a batch on a stream the caller then destroys, then a larger
 * batch on another stream (the context's buffers grow). */
Test(cuda, growth_after_the_last_stream_was_destroyed)
{
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3];
    rgb_set(g, 800);
    cudaStream_t s1, s2;
    cr_assert_eq(cudaStreamCreate(&s1), cudaSuccess);
    cr_assert_eq(cudaStreamCreate(&s2), cudaSuccess);
    grow_batch(ctx, g, 1, s1, "small batch on stream 1");
    cr_assert_eq(cudaStreamSynchronize(s1), cudaSuccess);
    cr_assert_eq(cudaStreamDestroy(s1), cudaSuccess);
    grow_batch(ctx, g, 8, s2, "larger batch on stream 2 after stream 1 was destroyed");
    cudaStreamDestroy(s2);
    for (int k = 0; k < 3; k++)
        gen_free(&g[k]);
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

/* R7 (FAKE): growing the context's buffers does not synchronise the device
 * (other streams' work stays queued; no cudaFree/cudaFreeHost). */
Test(cuda, growth_does_not_synchronise_the_device)
{
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3];
    rgb_set(g, 900);
    grow_batch(ctx, g, 1, NULL, "small batch");
    cudaStream_t other;
    cr_assert_eq(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    void *buf = NULL;
    cr_assert_eq(cudaMalloc(&buf, 4096), cudaSuccess);
    cr_assert_eq(cudaMemsetAsync(buf, 7, 4096, other), cudaSuccess); /* someone else's work */
    struct fakecuda_stats before, after;
    fakecuda_get_stats(&before);
    struct l3gpu_input in[8];
    for (int k = 0; k < 8; k++) {
        in[k].data = g[k % 3].l3;
        in[k].size = g[k % 3].l3_size;
    }
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    size_t bytes;
    cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, NULL, &bytes), 0);
    void *d = NULL;
    cr_assert_eq(cudaMalloc(&d, 8 * bytes), cudaSuccess);
    int sg[8];
    cr_assert_eq(l3gpu_decode_batch(ctx, in, 8, L3GPU_MEM_HOST, &f, d, 8 * bytes, NULL, NULL, 0,
                                    sg, NULL),
                 L3GPU_OK, "%s", l3gpu_ctx_error(ctx));
    cr_assert_eq(l3gpu_batch_finish(ctx, sg, 8), L3GPU_OK);
    fakecuda_get_stats(&after);
    cr_assert_eq(cudaStreamQuery(other), cudaErrorNotReady,
                 "the other stream's work was forced to run");
    cr_assert_eq(after.device_syncs, before.device_syncs,
                 "%llu device synchronisation(s) while the buffers grew",
                 after.device_syncs - before.device_syncs);
    cudaFree(d);
    cudaFree(buf);
    cudaStreamDestroy(other);
    for (int k = 0; k < 3; k++)
        gen_free(&g[k]);
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

/* A kernel fault (sticky, as an illegal address on a GPU) is an
 * L3GPU_ERR_CUDA of the batch, named in the context's error text. */
Test(cuda, kernel_fault_is_a_cuda_error)
{
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3];
    rgb_set(g, 950);
    struct l3gpu_input in[3];
    to_inputs(g, 3, in);
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    size_t bytes;
    cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, NULL, &bytes), 0);
    void *d = dev_alloc(ctx, 3 * bytes, 0);
    int sg[3];
    fakecuda_fault_kernel(cudaErrorIllegalAddress, 0);
    cr_assert_eq(l3gpu_decode_batch(ctx, in, 3, L3GPU_MEM_HOST, &f, d, 3 * bytes, NULL, NULL, 0,
                                    sg, NULL),
                 L3GPU_OK);
    cr_assert_eq(l3gpu_batch_finish(ctx, sg, 3), L3GPU_ERR_CUDA);
    for (int k = 0; k < 3; k++)
        cr_assert_eq(sg[k], L3GPU_IMG_ABORTED);
    cr_assert(strstr(l3gpu_ctx_error(ctx), "illegal"), "%s", l3gpu_ctx_error(ctx));
    l3gpu_ctx_destroy(ctx);
    for (int k = 0; k < 3; k++)
        gen_free(&g[k]);
}
#endif /* L3_FAKECUDA */

/* Two batches in flight: the host packs the second while the first is
 * queued (FAKE: nothing runs during the second call); a third is BUSY until
 * one is finished; finishing twice is harmless; an unknown status array is
 * an invalid argument. */
Test(cuda, two_batches_in_flight_then_busy)
{
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3], h[3];
    rgb_set(g, 1100);
    rgb_set(h, 1200);
    struct l3gpu_input a[3], b[3];
    to_inputs(g, 3, a);
    to_inputs(h, 3, b);
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    size_t bytes;
    cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, NULL, &bytes), 0);
    void *d1 = dev_alloc(ctx, 3 * bytes, 0), *d2 = dev_alloc(ctx, 3 * bytes, 0);
    void *d3 = dev_alloc(ctx, 3 * bytes, 0);
    int s1[3], s2[3], s3[3];
    cr_assert_eq(l3gpu_decode_batch(ctx, a, 3, L3GPU_MEM_HOST, &f, d1, 3 * bytes, NULL, NULL, 0,
                                    s1, NULL), L3GPU_OK);
#ifdef L3_FAKECUDA
    struct fakecuda_stats before, after;
    fakecuda_get_stats(&before);
#endif
    cr_assert_eq(l3gpu_decode_batch(ctx, b, 3, L3GPU_MEM_HOST, &f, d2, 3 * bytes, NULL, NULL, 0,
                                    s2, NULL), L3GPU_OK);
#ifdef L3_FAKECUDA
    fakecuda_get_stats(&after);
    cr_assert_eq(after.ops_executed, before.ops_executed,
                 "the second batch waited for %llu operation(s) of the first",
                 after.ops_executed - before.ops_executed);
    cr_assert_eq(after.host_waits, before.host_waits);
#endif
    cr_assert_eq(l3gpu_decode_batch(ctx, a, 3, L3GPU_MEM_HOST, &f, d3, 3 * bytes, NULL, NULL, 0,
                                    s3, NULL), L3GPU_ERR_BUSY);
    cr_assert_eq(l3gpu_decode_batch(ctx, a, 3, L3GPU_MEM_HOST, &f, d3, 3 * bytes, NULL, NULL, 0,
                                    s1, NULL), L3GPU_ERR_INVALID_ARG, "status array in flight");
    cr_assert_eq(l3gpu_batch_finish(ctx, s2, 3), L3GPU_OK);
    cr_assert_eq(l3gpu_batch_finish(ctx, s2, 3), L3GPU_OK, "finishing twice");
    cr_assert_eq(l3gpu_decode_batch(ctx, a, 3, L3GPU_MEM_HOST, &f, d3, 3 * bytes, NULL, NULL, 0,
                                    s3, NULL), L3GPU_OK);
    cr_assert_eq(l3gpu_batch_finish(ctx, s3, 3), L3GPU_OK);
    cr_assert_eq(l3gpu_batch_finish(ctx, s1, 3), L3GPU_OK);
    int stray[3] = {L3GPU_IMG_PENDING, 0, 0};
    cr_assert_eq(l3gpu_batch_finish(ctx, stray, 3), L3GPU_ERR_INVALID_ARG);
    uint8_t *cpu = malloc(3 * bytes);
    int sc[3];
    void *outs[3] = {d1, d2, d3};
    const struct l3gpu_input *ins[3] = {a, b, a};
    for (int k = 0; k < 3; k++) {
        l3gpu_cpu_decode_batch(ins[k], 3, &f, cpu, 3 * bytes, NULL, sc, 1);
        uint8_t *got = download(ctx, outs[k], 3 * bytes);
        cr_assert(!memcmp(got, cpu, 3 * bytes), "batch %d: bytes differ", k);
        free(got);
        l3gpu_free(ctx, outs[k]);
    }
    free(cpu);
    for (int k = 0; k < 3; k++) {
        gen_free(&g[k]);
        gen_free(&h[k]);
    }
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

/* Stream-ordered allocation from the context's pool and ordering between
 * streams: a batch decoded on one stream into pool memory, read on
 * another after l3gpu_stream_wait, freed there; no device-wide sync. */
Test(cuda, pool_memory_and_stream_order)
{
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3];
    rgb_set(g, 1300);
    struct l3gpu_input in[3];
    to_inputs(g, 3, in);
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    size_t bytes;
    cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, NULL, &bytes), 0);
    cudaStream_t sd, sc_;
    cr_assert_eq(cudaStreamCreateWithFlags(&sd, cudaStreamNonBlocking), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&sc_, cudaStreamNonBlocking), cudaSuccess);
#ifdef L3_FAKECUDA
    struct fakecuda_stats before, after;
    fakecuda_get_stats(&before);
#endif
    uint8_t *host = NULL;
    cr_assert_eq(cudaHostAlloc((void **)&host, 3 * bytes, 0), cudaSuccess);
    for (int round = 0; round < 3; round++) {
        void *d = NULL;
        int sg[3];
        cr_assert_eq(l3gpu_alloc_async(ctx, 3 * bytes, sd, &d), L3GPU_OK, "%s",
                     l3gpu_ctx_error(ctx));
        cr_assert_eq(l3gpu_decode_batch(ctx, in, 3, L3GPU_MEM_HOST, &f, d, 3 * bytes, NULL, NULL,
                                        0, sg, sd), L3GPU_OK);
        cr_assert_eq(l3gpu_stream_wait(ctx, sc_, sd), L3GPU_OK); /* the consumer's stream */
        cr_assert_eq(cudaMemcpyAsync(host, d, 3 * bytes, cudaMemcpyDeviceToHost, sc_),
                     cudaSuccess);
        cr_assert_eq(l3gpu_free_async(ctx, d, sc_), L3GPU_OK);
        cr_assert_eq(l3gpu_batch_finish(ctx, sg, 3), L3GPU_OK);
        cr_assert_eq(cudaStreamSynchronize(sc_), cudaSuccess);
        uint8_t *cpu = malloc(3 * bytes);
        int sc[3];
        l3gpu_cpu_decode_batch(in, 3, &f, cpu, 3 * bytes, NULL, sc, 1);
        cr_assert(!memcmp(host, cpu, 3 * bytes), "round %d: bytes differ", round);
        free(cpu);
    }
#ifdef L3_FAKECUDA
    fakecuda_get_stats(&after);
    cr_assert_eq(after.device_syncs, before.device_syncs);
    cr_assert_eq(after.mallocs, before.mallocs, "cudaMalloc per batch");
#endif
    cudaFreeHost(host);
    cudaStreamDestroy(sd);
    cudaStreamDestroy(sc_);
    for (int k = 0; k < 3; k++)
        gen_free(&g[k]);
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}

/* Kernel timing gives two non-negative numbers. */
Test(cuda, kernel_timing)
{
    l3gpu_ctx *ctx = open_ctx(0);
    struct gen g[3];
    rgb_set(g, 990);
    struct l3gpu_input in[3];
    to_inputs(g, 3, in);
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    cr_assert_eq(l3gpu_ctx_set_timing(ctx, 1), L3GPU_OK);
    check_batch(ctx, in, 3, L3GPU_MEM_HOST, &f, NULL, "timed batch");
    float a = -1, b = -1;
    cr_assert_eq(l3gpu_ctx_last_timing(ctx, &a, &b), L3GPU_OK, "%s", l3gpu_ctx_error(ctx));
    cr_assert(a >= 0 && b >= 0, "decode %g ms, convert %g ms", a, b);
    for (int k = 0; k < 3; k++)
        gen_free(&g[k]);
    l3gpu_ctx_destroy(ctx);
    runtime_clean();
}
