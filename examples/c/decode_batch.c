/* decode_batch.c — decode a batch of .l3 files from C: on the GPU with libl3gpu
 * (gpu/l3gpu.h) when the library was built with CUDA and a device is usable,
 * else on the CPU with libl3 (codec/l3.h).
 *
 *   decode_batch [--cpu] [-j THREADS] [-o OUTDIR] FILE.l3...
 *
 *   --cpu       skip the GPU even when one is present
 *   -j N        CPU decoder threads per image (default: number of CPUs)
 *   -o OUTDIR   write each decoded image as OUTDIR/NAME.pam (PAM, netpbm)
 *
 * Prints one line per image (size, channels, bit depth, a checksum of the
 * decoded samples, or the error) and a summary. The exit status is 0 when every
 * image decoded, 1 when some failed (the others are still decoded), 2 on usage
 * or setup errors.
 *
 * Sample layout of the output: interleaved (HWC), one byte per sample up to 8
 * bits and a native-endian uint16_t for 16-bit images. On the CPU the samples
 * are exactly the PNG's (palette images as indices, sub-byte gray keeps 0..3
 * for 2-bit); the GPU path asks libl3gpu for uint8/uint16 HWC, which rescales
 * sub-byte gray to 0..255 (see l3gpu.h), so its PAM files use maxval 255.
 *
 * Build: examples/meson.build (linked with libl3gpu when it is built, else with
 * libl3 only; L3_HAVE_CUDA tells which).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "l3.h"
#ifdef L3_HAVE_CUDA
#include "l3gpu.h"
#endif

struct image {
    const char *path;
    void *data; /* file bytes */
    size_t size;
    struct l3_info info;
    void *pixels; /* decoded, host memory */
    size_t pixels_size;
    unsigned maxval; /* PAM maxval of `pixels` */
    int status;      /* 0 or an l3_status / per-image l3gpu status */
    const char *error;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int read_file(const char *path, void **data_ret, size_t *size_ret)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    size_t cap = 1 << 20, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        unsigned char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f) ? -EIO : 0;
    fclose(f);
    if (!buf)
        return -ENOMEM;
    if (err) {
        free(buf);
        return err;
    }
    *data_ret = buf;
    *size_ret = n;
    return 0;
}

/* FNV-1a over the decoded samples: lets two decoders' outputs be compared. */
static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int write_pam(const char *dir, const struct image *im)
{
    const char *base = strrchr(im->path, '/');
    base = base ? base + 1 : im->path;
    size_t len = strlen(base);
    if (len > 3 && !strcmp(base + len - 3, ".l3"))
        len -= 3;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%.*s.pam", dir, (int)len, base) >= (int)sizeof path)
        return -ENAMETOOLONG;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    unsigned c = im->info.channels;
    static const char *tuple[] = {"", "GRAYSCALE", "GRAYSCALE_ALPHA", "RGB", "RGB_ALPHA"};
    fprintf(f, "P7\nWIDTH %u\nHEIGHT %u\nDEPTH %u\nMAXVAL %u\nTUPLTYPE %s\nENDHDR\n",
            im->info.width, im->info.height, c, im->maxval, tuple[c]);
    int ok = 1;
    if (im->maxval > 255) { /* PAM stores 16-bit samples big-endian */
        const uint16_t *s = im->pixels;
        for (size_t i = 0; ok && i < im->pixels_size / 2; i++) {
            unsigned char be[2] = {(unsigned char)(s[i] >> 8), (unsigned char)s[i]};
            ok = fwrite(be, 1, 2, f) == 2;
        }
    } else {
        ok = fwrite(im->pixels, 1, im->pixels_size, f) == im->pixels_size;
    }
    if (fclose(f) != 0 || !ok)
        return -EIO;
    return 0;
}

/* CPU: libl3, the image's tiles spread over `threads` threads. */
static void decode_cpu(struct image *ims, size_t n, unsigned threads)
{
    struct l3_decode_options opts = {.threads = threads};
    for (size_t i = 0; i < n; i++) {
        struct image *im = &ims[i];
        if (im->status)
            continue;
        im->status = l3_decode_alloc(im->data, im->size, &opts, &im->pixels,
                                     &im->pixels_size, &im->info);
        if (im->status)
            im->error = l3_strerror(im->status);
        else
            im->maxval = (1u << im->info.bit_depth) - 1;
    }
}

#ifdef L3_HAVE_CUDA
/* GPU: the whole batch in one call (mixed sizes: one device buffer per image),
 * then the outputs copied back to the host. Returns 0, or an l3gpu_status
 * about the call as a whole (then the caller falls back to the CPU). */
static int decode_gpu(l3gpu_ctx *ctx, struct image *ims, size_t n)
{
    struct l3gpu_format fmt;
    l3gpu_format_init(&fmt); /* HWC, uint8, native channels */
    struct l3gpu_format fmt16 = fmt;
    fmt16.dtype = L3GPU_U16;
    /* One call per output dtype: 16-bit images decode to uint16, the rest to uint8. */
    for (int pass = 0; pass < 2; pass++) {
        const struct l3gpu_format *f = pass ? &fmt16 : &fmt;
        struct l3gpu_input *in = calloc(n, sizeof *in);
        void **dev = calloc(n, sizeof *dev);
        size_t *idx = calloc(n, sizeof *idx);
        int *st = calloc(n, sizeof *st);
        size_t m = 0;
        int rc = L3GPU_ERR_NOMEM;
        if (!in || !dev || !idx || !st)
            goto done;
        for (size_t i = 0; i < n; i++) {
            struct image *im = &ims[i];
            if (im->status || (im->info.bit_depth == 16) != pass)
                continue;
            uint32_t shape[3];
            size_t bytes;
            if ((rc = l3gpu_output_shape(&im->info, f, shape, &bytes)) != 0)
                goto done;
            if ((rc = l3gpu_malloc(ctx, bytes, &dev[m])) != 0)
                goto done;
            in[m] = (struct l3gpu_input){im->data, im->size};
            idx[m++] = i;
        }
        if (m == 0) {
            rc = 0;
            goto done;
        }
        rc = l3gpu_decode_batch(ctx, in, m, L3GPU_MEM_HOST, f, NULL, 0, dev, NULL, 0, st,
                                NULL);
        if (rc == 0 || rc == L3GPU_ERR_IMAGE)
            rc = l3gpu_batch_finish(ctx, st, m);
        if (rc != 0 && rc != L3GPU_ERR_IMAGE)
            goto done;
        rc = 0;
        for (size_t k = 0; k < m; k++) {
            struct image *im = &ims[idx[k]];
            if (st[k]) {
                im->status = st[k];
                im->error = l3gpu_image_strerror(st[k]);
                continue;
            }
            uint32_t shape[3];
            size_t bytes;
            l3gpu_output_shape(&im->info, f, shape, &bytes);
            if (!(im->pixels = malloc(bytes))) {
                rc = L3GPU_ERR_NOMEM;
                goto done;
            }
            if ((rc = l3gpu_memcpy_to_host(ctx, im->pixels, dev[k], bytes)) != 0)
                goto done;
            im->pixels_size = bytes;
            im->maxval = pass ? 65535 : 255;
        }
done:
        for (size_t k = 0; dev && k < m; k++)
            l3gpu_free(ctx, dev[k]);
        free(in);
        free(dev);
        free(idx);
        free(st);
        if (rc)
            return rc;
    }
    return 0;
}
#endif

static void usage(void)
{
    fprintf(stderr, "usage: decode_batch [--cpu] [-j THREADS] [-o OUTDIR] FILE.l3...\n");
}

int main(int argc, char **argv)
{
    int force_cpu = 0;
    const char *outdir = NULL;
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = nproc > 0 ? (unsigned)nproc : 1;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--cpu")) {
            force_cpu = 1;
        } else if (!strcmp(argv[i], "-j") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 1024) {
                usage();
                return 2;
            }
            threads = (unsigned)v;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            outdir = argv[++i];
        } else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else {
            usage();
            return 2;
        }
    }
    size_t n = (size_t)(argc - i);
    if (n == 0) {
        usage();
        return 2;
    }
    struct image *ims = calloc(n, sizeof *ims);
    if (!ims) {
        fprintf(stderr, "decode_batch: out of memory\n");
        return 2;
    }

    /* Read every file and its header (cheap: no pixels yet). */
    size_t in_bytes = 0;
    for (size_t k = 0; k < n; k++) {
        struct image *im = &ims[k];
        im->path = argv[i + (int)k];
        int r = read_file(im->path, &im->data, &im->size);
        if (r) {
            im->status = L3_ERR_IO;
            im->error = strerror(-r);
            continue;
        }
        in_bytes += im->size;
        if ((im->status = l3_read_info(im->data, im->size, &im->info, NULL)) != 0)
            im->error = l3_strerror(im->status);
    }

    const char *where = "cpu";
    double t0 = now_s();
#ifdef L3_HAVE_CUDA
    l3gpu_ctx *ctx = NULL;
    if (!force_cpu) {
        int count = 0, rc = l3gpu_device_count(&count);
        if (rc == 0 && count > 0)
            rc = l3gpu_ctx_create(0, &ctx);
        if (rc == 0 && ctx) {
            t0 = now_s();
            rc = decode_gpu(ctx, ims, n);
            if (rc == 0)
                where = "gpu";
        }
        if (rc != 0) {
            fprintf(stderr, "decode_batch: GPU not used (%s%s%s); decoding on the CPU\n",
                    l3gpu_strerror(rc), ctx ? ": " : "", ctx ? l3gpu_ctx_error(ctx) : "");
            /* Undo partial GPU results: the CPU decodes everything again. */
            for (size_t k = 0; k < n; k++) {
                free(ims[k].pixels);
                ims[k].pixels = NULL;
                if (ims[k].status >= 100) /* L3GPU_IMG_*: not an image error */
                    ims[k].status = 0, ims[k].error = NULL;
            }
            t0 = now_s();
        }
        l3gpu_ctx_destroy(ctx);
    }
    if (!strcmp(where, "cpu"))
        decode_cpu(ims, n, threads);
#else
    (void)force_cpu;
    decode_cpu(ims, n, threads);
#endif
    double dt = now_s() - t0;

    size_t ok = 0, out_bytes = 0;
    for (size_t k = 0; k < n; k++) {
        struct image *im = &ims[k];
        if (im->status) {
            printf("%s: error %d: %s\n", im->path, im->status, im->error ? im->error : "?");
            continue;
        }
        ok++;
        out_bytes += im->pixels_size;
        printf("%s: %ux%u, %u channels, %u-bit, %zu bytes decoded, fnv1a %016llx\n",
               im->path, im->info.width, im->info.height, im->info.channels,
               im->info.bit_depth, im->pixels_size,
               (unsigned long long)fnv1a(im->pixels, im->pixels_size));
        if (outdir) {
            int r = write_pam(outdir, im);
            if (r) {
                fprintf(stderr, "decode_batch: writing %s as PAM into %s: %s\n", im->path,
                        outdir, strerror(-r));
                return 2;
            }
        }
    }
    char dev[64] = "the GPU";
    if (!strcmp(where, "cpu"))
        snprintf(dev, sizeof dev, "the CPU (%u threads)", threads);
    printf("%zu of %zu images decoded on %s: %.1f MB in, %.1f MB out, %.1f ms, "
           "%.1f MB/s of pixels\n",
           ok, n, dev, in_bytes / 1e6, out_bytes / 1e6, dt * 1e3,
           dt > 0 ? out_bytes / 1e6 / dt : 0.0);
    for (size_t k = 0; k < n; k++) {
        free(ims[k].data);
        free(ims[k].pixels);
    }
    free(ims);
    return ok == n ? 0 : 1;
}
