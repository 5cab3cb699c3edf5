/* test_cuda_threads.c — the CUDA batch decoder (test_cuda.c says how it is
 * built twice): one context shared by two threads, stale runtime errors, and
 * (FAKE) the device guard. */
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

#ifdef L3_FAKECUDA
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

#endif /* L3_FAKECUDA */
