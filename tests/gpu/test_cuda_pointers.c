/* test_cuda_pointers.c — the CUDA batch decoder (test_cuda.c says how it is
 * built twice): pointers the device cannot use are invalid arguments, and
 * (FAKE: two devices) so are another device's memory and streams. */
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

#endif /* L3_FAKECUDA */
