/* devcheck_gpu.c — the device check's GPU steps: GPU bytes and statuses
 * against the CPU batch decoder for every format x pageable/pinned/device
 * inputs (poisoned outputs, a caller stream), broken images, two batches in
 * flight on two streams, a small batch for compute-sanitizer/ncu, and the
 * timing table next to a device-to-device copy. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devcheck.h"

static const char *MEM_NAME[] = {"pageable", "pinned", "device"};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? v[n / 2] : 0;
}

#define CU(call, what)                                                                      \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            dc_fail("%s: %s (%s)", what, cudaGetErrorString(e_), cudaGetErrorName(e_));       \
            goto out;                                                                       \
        }                                                                                   \
    } while (0)

/* The inputs of a set in each memory kind. */
struct staged {
    struct l3gpu_input *in[3];
    size_t n;
};

static int stage(struct staged *x, const struct dc_set *s)
{
    memset(x, 0, sizeof *x);
    x->n = s->n;
    for (int m = 0; m < 3; m++) {
        x->in[m] = calloc(s->n ? s->n : 1, sizeof *x->in[m]);
        if (!x->in[m])
            return -1;
    }
    for (size_t i = 0; i < s->n; i++) {
        const struct dc_image *im = &s->v[i];
        void *p = NULL, *d = NULL;
        if (cudaHostAlloc(&p, im->size, cudaHostAllocDefault) != cudaSuccess ||
            cudaMalloc(&d, im->size) != cudaSuccess ||
            cudaMemcpy(d, im->l3, im->size, cudaMemcpyHostToDevice) != cudaSuccess) {
            dc_fail("staging %s in pinned/device memory failed", im->name);
            return -1;
        }
        memcpy(p, im->l3, im->size);
        x->in[0][i] = (struct l3gpu_input){im->l3, im->size};
        x->in[1][i] = (struct l3gpu_input){p, im->size};
        x->in[2][i] = (struct l3gpu_input){d, im->size};
    }
    return 0;
}

static void unstage(struct staged *x)
{
    for (size_t i = 0; i < x->n && x->in[2]; i++) {
        cudaFreeHost((void *)x->in[1][i].data);
        cudaFree((void *)x->in[2][i].data);
    }
    for (int m = 0; m < 3; m++)
        free(x->in[m]);
}

/* One set, one format, every memory kind: separate outputs (mixed shapes).
 * Returns the number of identical images. */
static long compare_set(l3gpu_ctx *ctx, const struct dc_set *s, const struct staged *x,
                        const struct dc_format *fm, unsigned threads, cudaStream_t stream,
                        long *differ)
{
    long same = 0;
    size_t n = s->n, total = 0;
    size_t *bytes = calloc(n, sizeof *bytes), *off = calloc(n, sizeof *off);
    void **cpu = calloc(n, sizeof *cpu), **dptr = calloc(n, sizeof *dptr);
    int *sc = calloc(n, sizeof *sc), *sg = calloc(n, sizeof *sg);
    uint8_t *dev = NULL, *host = NULL;
    for (size_t i = 0; i < n; i++) {
        l3gpu_output_shape(&s->v[i].info, &fm->f, NULL, &bytes[i]);
        off[i] = total;
        total += (bytes[i] + 255) / 256 * 256;
        cpu[i] = malloc(bytes[i]);
    }
    int r = l3gpu_cpu_decode_batch(x->in[0], n, &fm->f, NULL, 0, cpu, sc, threads);
    if (r && r != L3GPU_ERR_IMAGE)
        dc_fail("CPU batch %s: %s", fm->name, l3gpu_strerror(r));
    host = malloc(total);
    CU(cudaMalloc((void **)&dev, total), "cudaMalloc (outputs)");
    for (size_t i = 0; i < n; i++)
        dptr[i] = dev + off[i];
    for (int m = 0; m < 3; m++) {
        CU(cudaMemset(dev, 0xA7, total), "cudaMemset (poison)");
        r = l3gpu_decode_batch(ctx, x->in[m], n, m, &fm->f, NULL, 0, dptr, NULL, 0, sg, stream);
        if (r == L3GPU_OK || r == L3GPU_ERR_IMAGE)
            r = l3gpu_batch_finish(ctx, sg, n);
        if (r && r != L3GPU_ERR_IMAGE) {
            dc_fail("GPU batch %s, %s inputs: %s (%s)", fm->name, MEM_NAME[m], l3gpu_strerror(r),
                    l3gpu_ctx_error(ctx));
            *differ += (long)n;
            continue;
        }
        CU(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        CU(cudaMemcpy(host, dev, total, cudaMemcpyDeviceToHost), "cudaMemcpy (outputs)");
        for (size_t i = 0; i < n; i++) {
            if (sg[i] != sc[i] || memcmp(host + off[i], cpu[i], bytes[i])) {
                if (++*differ <= 20)
                    dc_fail("GPU != CPU: %s as %s, %s inputs (status gpu %d cpu %d)",
                            s->v[i].name, fm->name, MEM_NAME[m], sg[i], sc[i]);
            } else {
                same++;
            }
        }
    }
out:
    cudaFree(dev);
    free(host);
    for (size_t i = 0; i < n; i++)
        free(cpu[i]);
    free(cpu);
    free(dptr);
    free(bytes);
    free(off);
    free(sc);
    free(sg);
    return same;
}

void dc_gpu_checks(l3gpu_ctx *ctx, const struct dc_set *gen, const struct dc_set *photos,
                   unsigned threads)
{
    int before = dc_failures;
    struct dc_format fm[64];
    int nf = dc_formats(fm, 64);
    struct staged xg, xp;
    cudaStream_t s1 = NULL, s2 = NULL;
    long same_g = 0, same_p = 0, differ = 0;
    int sg_ok = stage(&xg, gen) == 0, sp_ok = stage(&xp, photos) == 0;
    CU(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "cudaStreamCreate");
    CU(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "cudaStreamCreate");
    for (int k = 0; k < nf && sg_ok && sp_ok; k++) {
        same_g += compare_set(ctx, gen, &xg, &fm[k], threads, s1, &differ);
        if (photos->n)
            same_p += compare_set(ctx, photos, &xp, &fm[k], threads, s1, &differ);
    }
    dc_row("GPU == CPU bytes+statuses, %d formats x pageable/pinned/device: generated %ld/%zu, "
           "photos %ld/%zu, %ld differ",
           nf, same_g, (size_t)nf * 3 * gen->n, same_p, (size_t)nf * 3 * photos->n, differ);
    if (same_g != (long)((size_t)nf * 3 * gen->n) || same_p != (long)((size_t)nf * 3 * photos->n))
        dc_fail("GPU comparison incomplete or different (%ld + %ld identical)", same_g, same_p);

    /* broken images, contiguous output, on a stream; and two batches in
     * flight on two streams */
    if (gen->n >= 2) {
        const struct dc_image *a = &gen->v[0];
        for (size_t i = 0; i < gen->n; i++)
            if (gen->v[i].info.color == L3_COLOR_RGB && gen->v[i].info.width >= 64) {
                a = &gen->v[i];
                break;
            }
        uint8_t *bad = malloc(a->size);
        memcpy(bad, a->l3, a->size);
        struct l3_layout lay;
        l3_read_layout(bad, a->size, NULL, &lay, NULL);
        bad[lay.header_size + 1] = 0x80;
        static const uint8_t junk[40] = "not an L3 file";
        struct l3gpu_input in[4] = {{a->l3, a->size}, {bad, a->size}, {a->l3, a->size - 30},
                                    {junk, sizeof junk}};
        struct l3gpu_format f;
        l3gpu_format_init(&f);
        f.dtype = L3GPU_F32;
        size_t slot = 0;
        l3gpu_output_shape(&a->info, &f, NULL, &slot);
        uint8_t *c = malloc(4 * slot), *g1 = malloc(4 * slot), *g2 = malloc(4 * slot);
        uint8_t *d1 = NULL, *d2 = NULL;
        int st_c[4], st_1[4], st_2[4];
        l3gpu_cpu_decode_batch(in, 4, &f, c, 4 * slot, NULL, st_c, threads);
        if (cudaMalloc((void **)&d1, 4 * slot) == cudaSuccess &&
            cudaMalloc((void **)&d2, 4 * slot) == cudaSuccess &&
            cudaMemset(d1, 0x33, 4 * slot) == cudaSuccess &&
            cudaMemset(d2, 0x44, 4 * slot) == cudaSuccess) {
            int r1 = l3gpu_decode_batch(ctx, in, 4, L3GPU_MEM_HOST, &f, d1, 4 * slot, NULL, NULL,
                                        0, st_1, s1);
            int r2 = l3gpu_decode_batch(ctx, in, 4, L3GPU_MEM_HOST, &f, d2, 4 * slot, NULL, NULL,
                                        0, st_2, s2);
            int f2 = l3gpu_batch_finish(ctx, st_2, 4), f1 = l3gpu_batch_finish(ctx, st_1, 4);
            cudaDeviceSynchronize();
            cudaMemcpy(g1, d1, 4 * slot, cudaMemcpyDeviceToHost);
            cudaMemcpy(g2, d2, 4 * slot, cudaMemcpyDeviceToHost);
            int same = r1 == L3GPU_ERR_IMAGE && r2 == L3GPU_ERR_IMAGE && f1 == L3GPU_ERR_IMAGE &&
                       f2 == L3GPU_ERR_IMAGE && !memcmp(st_1, st_c, sizeof st_c) &&
                       !memcmp(st_2, st_c, sizeof st_c) && !memcmp(g1, c, 4 * slot) &&
                       !memcmp(g2, c, 4 * slot);
            if (!same)
                dc_fail("GPU broken batch on two streams: statuses %d %d %d %d / %d %d %d %d, "
                        "CPU %d %d %d %d (%s)", st_1[0], st_1[1], st_1[2], st_1[3], st_2[0],
                        st_2[1], st_2[2], st_2[3], st_c[0], st_c[1], st_c[2], st_c[3],
                        l3gpu_ctx_error(ctx));
            dc_row("GPU: broken images, two batches in flight on two streams: %s",
                   same ? "== CPU (statuses, zeroed slots)" : "DIFFERENT");
        } else {
            dc_fail("cudaMalloc for the broken batch");
        }
        cudaFree(d1);
        cudaFree(d2);
        free(c);
        free(g1);
        free(g2);
        free(bad);
    }
out:
    if (s1)
        cudaStreamDestroy(s1);
    if (s2)
        cudaStreamDestroy(s2);
    if (sg_ok)
        unstage(&xg);
    if (sp_ok)
        unstage(&xp);
    printf("STEP gpu-checks: %s\n", dc_failures == before ? "PASS" : "FAIL");
}

void dc_gpu_small(l3gpu_ctx *ctx, const struct dc_set *gen)
{
    int before = dc_failures;
    struct dc_set small = {gen->v, gen->n < 12 ? gen->n : 12};
    struct dc_format fm[64];
    int nf = dc_formats(fm, 64);
    static const int pick[] = {0, 7, 21, 40};
    struct staged x;
    long differ = 0, same = 0;
    if (stage(&x, &small) == 0) {
        for (int k = 0; k < 4; k++)
            same += compare_set(ctx, &small, &x, &fm[pick[k] % nf], 1, NULL, &differ);
        unstage(&x);
    }
    dc_row("GPU small batch (%zu images, 4 formats x 3 memories): %ld identical, %ld differ",
           small.n, same, differ);
    if (same != (long)(12 * small.n))
        dc_fail("small batch: %ld of %zu identical", same, 12 * small.n);
    printf("STEP gpu-small: %s\n", dc_failures == before ? "PASS" : "FAIL");
}

void dc_gpu_timing(l3gpu_ctx *ctx, const struct dc_set *photos, const int *batches, int nb,
                   unsigned threads)
{
    int before = dc_failures;
    const struct dc_image *ph = photos->v;
    int np = (int)(photos->n < 64 ? photos->n : 64);
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    size_t slot = 0;
    l3gpu_output_shape(&ph[0].info, &f, NULL, &slot);
    int maxb = 1;
    for (int i = 0; i < nb; i++)
        maxb = batches[i] > maxb ? batches[i] : maxb;
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaStream_t s = NULL;
    void *a = NULL, *b = NULL, *dout = NULL;
    struct dc_set sub = {photos->v, (size_t)np};
    struct staged x;
    int staged = 0;
    struct l3gpu_input *in = calloc((size_t)maxb, sizeof *in);
    int *sg = calloc((size_t)maxb, sizeof *sg);
    double copy_gbs = 0;
    CU(cudaEventCreate(&e0), "cudaEventCreate");
    CU(cudaEventCreate(&e1), "cudaEventCreate");
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    /* device-to-device copy: the bandwidth ceiling of this run */
    {
        size_t cb = slot * (size_t)maxb;
        if (cb > ((size_t)1 << 30))
            cb = (size_t)1 << 30;
        CU(cudaMalloc(&a, cb), "cudaMalloc (copy test)");
        CU(cudaMalloc(&b, cb), "cudaMalloc (copy test)");
        CU(cudaMemset(a, 1, cb), "cudaMemset");
        double ms[12];
        for (int r = 0; r < 14; r++) {
            CU(cudaEventRecord(e0, s), "cudaEventRecord");
            CU(cudaMemcpyAsync(b, a, cb, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync D2D");
            CU(cudaEventRecord(e1, s), "cudaEventRecord");
            CU(cudaEventSynchronize(e1), "cudaEventSynchronize");
            float m = 0;
            CU(cudaEventElapsedTime(&m, e0, e1), "cudaEventElapsedTime");
            if (r >= 2)
                ms[r - 2] = m;
        }
        double m = median(ms, 12);
        copy_gbs = m > 0 ? cb / (m * 1e-3) / 1e9 : 0;
        dc_row("device memcpy D2D %7.1f MiB: %8.1f GB/s copied (%.1f GB/s read + write)",
               cb / 1048576.0, copy_gbs, 2 * copy_gbs);
        printf("TIMING copy %.3f GBs\n", copy_gbs);
        cudaFree(a);
        cudaFree(b);
        a = b = NULL;
    }
    if (stage(&x, &sub))
        goto out;
    staged = 1;
    CU(cudaMalloc(&dout, slot * (size_t)maxb), "cudaMalloc (batch output)");
    CU(cudaMemset(dout, 0, slot * (size_t)maxb), "cudaMemset");
    if (l3gpu_ctx_set_timing(ctx, 1))
        dc_fail("l3gpu_ctx_set_timing: %s", l3gpu_ctx_error(ctx));
    dc_row("%-9s %5s %10s %10s %10s %10s %9s %8s", "inputs", "batch", "host ms", "device ms",
           "decode ms", "convert ms", "GB/s out", "of copy");
    static const int mems[] = {L3GPU_MEM_DEVICE, L3GPU_MEM_PINNED, L3GPU_MEM_HOST};
    for (int mi = 0; mi < 3; mi++) {
        int m = mems[mi];
        for (int bi = 0; bi < nb; bi++) {
            int B = batches[bi];
            for (int i = 0; i < B; i++)
                in[i] = x.in[m][i % np];
            int reps = B >= 64 ? 10 : 30;
            double hs[30], ds[30], dec[30], cv[30];
            int bad = 0;
            for (int r = 0; r < reps + 3 && !bad; r++) {
                double t0 = now_s();
                cudaEventRecord(e0, s);
                int st = l3gpu_decode_batch(ctx, in, (size_t)B, m, &f, dout, slot * (size_t)B,
                                            NULL, NULL, 0, sg, s);
                cudaEventRecord(e1, s);
                if (st == L3GPU_OK)
                    st = l3gpu_batch_finish(ctx, sg, (size_t)B);
                double t1 = now_s();
                float dm = 0, a1 = 0, a2 = 0;
                if (st || cudaEventSynchronize(e1) || cudaEventElapsedTime(&dm, e0, e1) ||
                    l3gpu_ctx_last_timing(ctx, &a1, &a2)) {
                    dc_fail("timed batch %d (%s inputs): %s (%s)", B, MEM_NAME[m],
                            l3gpu_strerror(st), l3gpu_ctx_error(ctx));
                    bad = 1;
                } else if (r >= 3) {
                    hs[r - 3] = (t1 - t0) * 1e3;
                    ds[r - 3] = dm;
                    dec[r - 3] = a1;
                    cv[r - 3] = a2;
                }
            }
            if (bad)
                continue;
            double mh = median(hs, reps), md = median(ds, reps);
            double mdec = median(dec, reps), mcv = median(cv, reps);
            double gbs = (double)B * slot / (mh * 1e-3) / 1e9;
            dc_row("%-9s %5d %10.3f %10.3f %10.3f %10.3f %9.1f %7.0f%%", MEM_NAME[m], B, mh, md,
                   mdec, mcv, gbs, copy_gbs > 0 ? 100 * gbs / copy_gbs : 0);
            printf("TIMING %s %d host_ms %.4f device_ms %.4f decode_ms %.4f convert_ms %.4f\n",
                   MEM_NAME[m], B, mh, md, mdec, mcv);
        }
    }
    dc_row("(photos %ux%u RGB8, %d distinct repeated; HWC uint8; host ms = wall time of "
           "decode_batch + batch_finish, medians)",
           ph[0].info.width, ph[0].info.height, np);
    (void)threads;
out:
    cudaFree(dout);
    cudaFree(a);
    cudaFree(b);
    if (staged)
        unstage(&x);
    if (s)
        cudaStreamDestroy(s);
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    free(in);
    free(sg);
    printf("STEP gpu-timing: %s\n", dc_failures == before ? "PASS" : "FAIL");
}
