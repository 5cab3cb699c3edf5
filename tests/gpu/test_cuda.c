/* test_cuda.c — the CUDA batch decoder (libl3gpu), built twice:
 *   test_cuda_fake (meson test gpu-fake): against tests/gpu/fakecuda, the
 *     CPU-executed runtime, so that every test runs in CI; the tests marked
 *     FAKE below use its fault injection, device modes and counters and
 *     exist only in this build.
 *   test_cuda (meson test cuda): against the real runtime; where no GPU is
 *     usable the tests that need one skip with that reason.
 *
 * The rooms, in both builds: test_cuda.c (no GPU; GPU bytes == CPU bytes,
 * mixed outputs, broken images, pageable inputs), test_cuda_threads.c (one
 * context on two threads, stale runtime errors, the device guard),
 * test_cuda_pointers.c (pointers the device cannot use) and
 * test_cuda_buffers.c (failures and buffer growth, batches in flight, pool
 * memory, timing); cuda_fixture.c holds their helpers.
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
#include "cuda_fixture.h"

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
