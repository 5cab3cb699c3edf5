/* test_cuda.c — the CUDA batch decoder (libl3gpu), built twice:
 *   test_cuda_fake (meson test gpu-fake): against tests/gpu/fakecuda, the
 *     CPU-executed runtime, so that every test runs in CI; the tests marked
 *     FAKE below use its fault injection, device modes and counters and
 *     exist only in this build.
 *   test_cuda (meson test cuda): against the real runtime; where no GPU is
 *     usable the tests that need one skip with that reason.
 */
#include <criterion/criterion.h>
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
Test(cuda, gpu_matches_cpu_every_format, .timeout = 600)
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

#ifdef L3_FAKECUDA
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
