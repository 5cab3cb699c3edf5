/* cuda_fixture.c — helpers of the CUDA batch decoder tests (cuda_fixture.h). */
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

/* A context on `dev`, or a skip with the reason where no GPU is usable. */
l3gpu_ctx *open_ctx(int dev)
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
void runtime_clean(void)
{
#ifdef L3_FAKECUDA
    struct fakecuda_stats s;
    fakecuda_get_stats(&s);
    cr_assert_eq(s.races, 0, "fakecuda saw %llu race(s): %s", s.races, fakecuda_last_message());
    cr_assert_eq(s.faults, 0, "fakecuda saw %llu kernel fault(s): %s", s.faults,
                 fakecuda_last_message());
#endif
}

void *dev_alloc(l3gpu_ctx *ctx, size_t n, int poison)
{
    void *d = NULL;
    cr_assert_eq(l3gpu_malloc(ctx, n, &d), L3GPU_OK, "%s", l3gpu_ctx_error(ctx));
    uint8_t *h = malloc(n);
    memset(h, poison, n);
    cr_assert_eq(l3gpu_memcpy_to_device(ctx, d, h, n), L3GPU_OK, "%s", l3gpu_ctx_error(ctx));
    free(h);
    return d;
}

uint8_t *download(l3gpu_ctx *ctx, const void *d, size_t n)
{
    uint8_t *h = malloc(n);
    cr_assert_eq(l3gpu_memcpy_to_host(ctx, h, d, n), L3GPU_OK, "%s", l3gpu_ctx_error(ctx));
    return h;
}

void inputs_make(struct inputs *x, const struct l3gpu_input *src, size_t n, int memory)
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

void inputs_free(struct inputs *x)
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
void check_batch(l3gpu_ctx *ctx, const struct l3gpu_input *in, size_t n, int memory,
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
void rgb_set(struct gen g[3], uint64_t seed)
{
    for (int k = 0; k < 3; k++)
        gen_image(&g[k], L3_COLOR_RGB, 8, 64, 40, seed + (uint64_t)k, 32, 0);
}

void to_inputs(const struct gen *g, size_t n, struct l3gpu_input *in)
{
    for (size_t k = 0; k < n; k++) {
        in[k].data = g[k].l3;
        in[k].size = g[k].l3_size;
    }
}
