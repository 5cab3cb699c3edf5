/* test_cuda_buffers.c — the CUDA batch decoder (test_cuda.c says how it is
 * built twice): (FAKE) failed batches keep their buffers ordered, buffer
 * growth, kernel faults; two batches in flight, pool memory and stream order,
 * kernel timing. */
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

#ifdef L3_FAKECUDA

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
