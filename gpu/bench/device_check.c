/* device_check.c — l3gpu_devcheck: correctness and speed of batch decoding
 * on a GPU machine (driven by gpu/bench/device_check.sh).
 *
 *   l3gpu_devcheck check DIR [--quick]   CPU steps, then GPU == CPU
 *   l3gpu_devcheck small DIR             one small batch per memory kind
 *                                        (for compute-sanitizer and ncu)
 *   l3gpu_devcheck timing DIR [--quick]  the timing table
 *   l3gpu_devcheck write-ref DIR         DIR/ref.txt from this CPU decoder
 *
 * DIR is .devcheck/ (gpu/bench/devcheck_prep.sh): real photos pre-encoded
 * with reference hashes, if any. Every other input is generated here.
 * --quick: small timing images (for the CPU-executed test runtime).
 * Exit: 0 every step ran and passed; 1 a failure; 2 usage; 3 no usable GPU
 * (the CPU steps passed; the output says "no usable GPU" and why).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devcheck.h"

#ifdef L3_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int dc_failures;
static char rows[96][200];
static int nrows;

void dc_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    dc_failures++;
}

void dc_row(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rows[nrows < 95 ? nrows : 95], sizeof rows[0], fmt, ap);
    va_end(ap);
    printf("%s\n", rows[nrows < 95 ? nrows : 95]);
    if (nrows < 95)
        nrows++;
}

static void table(const char *mode)
{
    printf("\n==== l3 batch decode: device check (%s): %s ====\n", mode,
           dc_failures ? "FAILURES" : "no failures");
    for (int i = 0; i < nrows; i++)
        printf("%s\n", rows[i]);
}

/* A context on device 0, or NULL with the reason (no usable GPU). */
static l3gpu_ctx *gpu_open(const char **why)
{
#ifdef L3_HAVE_CUDA
    int n = 0;
    int st = l3gpu_device_count(&n);
    l3gpu_ctx *ctx = NULL;
    if (!st)
        st = l3gpu_ctx_create(0, &ctx);
    if (st) {
        *why = l3gpu_strerror(st);
        return NULL;
    }
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) == cudaSuccess)
        dc_row("GPU: %.120s (sm_%d%d, %d SMs, %.1f GiB), %d device(s)", p.name, p.major, p.minor,
               p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, n);
    return ctx;
#else
    *why = "this build has no CUDA (nvcc was not found)";
    return NULL;
#endif
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s check|small|timing|write-ref DIR [--quick]\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1], *dir = argv[2];
    int quick = argc > 3 && !strcmp(argv[3], "--quick");
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = ncpu > 0 ? (unsigned)ncpu : 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct dc_set gen = {NULL, 0}, photos = {NULL, 0};
    if (dc_load_photos(&photos, dir))
        return 2;
    if (!strcmp(mode, "write-ref")) {
        int r = dc_write_refs(&photos, dir);
        printf("wrote %zu reference hashes to %s/ref.txt\n", photos.n, dir);
        dc_set_free(&photos);
        return r ? 1 : 0;
    }
    int is_check = !strcmp(mode, "check"), is_small = !strcmp(mode, "small");
    int is_timing = !strcmp(mode, "timing");
    if (!is_check && !is_small && !is_timing) {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    if ((is_check || is_small) && dc_generate(&gen)) {
        dc_fail("generating the inputs");
        return 1;
    }
    if (is_timing && (photos.n == 0 || quick)) {
        dc_set_free(&photos);
        if (dc_synth_photos(&photos, quick ? 3 : 8, quick ? 256 : 2048, quick ? 128 : 1024)) {
            dc_fail("generating photo-like images");
            return 1;
        }
    }
    printf("device_check %s: %zu generated images, %zu photos%s\n", mode, gen.n, photos.n,
           photos.n && !photos.v[0].px ? " (real, from DIR/l3/photos)" : "");
    if (is_check)
        dc_cpu_checks(&gen, &photos, threads);
    const char *why = "";
    l3gpu_ctx *ctx = gpu_open(&why);
    int rc;
    if (!ctx) {
        printf("STEP gpu-%s: NOT RUN (no usable GPU: %s)\n", mode, why);
        dc_row("no usable GPU: %s", why);
        rc = dc_failures ? 1 : 3;
    } else {
#ifdef L3_HAVE_CUDA
        if (is_check)
            dc_gpu_checks(ctx, &gen, &photos, threads);
        else if (is_small)
            dc_gpu_small(ctx, &gen);
        else {
            static const int full[] = {1, 8, 64, 256}, small[] = {1, 2, 4};
            dc_gpu_timing(ctx, &photos, quick ? small : full, quick ? 3 : 4, threads);
        }
        l3gpu_ctx_destroy(ctx);
#endif
        rc = dc_failures ? 1 : 0;
    }
    table(mode);
    dc_set_free(&gen);
    dc_set_free(&photos);
    return rc;
}
