/* device_check.c — correctness and speed of batch decoding on a GPU machine.
 *
 *   l3gpu_devcheck DIR [--write-ref] [--cpu-only]
 *
 * DIR (made by gpu/bench/devcheck_prep.sh on a normal machine) holds
 * l3/photos/ *.l3 (real 2048x1024 RGB photos), l3/mixed/ *.l3 (PngSuite and
 * rendered images: every colour model and depth) and ref.txt, the checksums
 * of the CPU decoder's output for every check image and format, computed
 * where the files were prepared.
 *
 * 1. Correctness: every format (layout x dtype x channels x normalisation) on
 *    the check set (mixed + 4 photos): the CPU batch decoder's output against
 *    ref.txt, the GPU output against the CPU output byte for byte (poisoned
 *    output buffers), host/pinned/device inputs, a batch with a corrupt and a
 *    truncated image.
 * 2. Speed: batch 1, 8, 64, 256 of the photos (repeated) with CUDA events
 *    after warm-up (median), next to a measured device-to-device memcpy and
 *    the CPU batch decoder (1 thread and all threads); one table at the end.
 * Without a GPU (or with --cpu-only) only the CPU parts run.
 * --write-ref writes ref.txt instead of checking it.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "l3.h"
#include "l3gpu.h"

#ifdef L3_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

struct file {
    char name[256]; /* relative to DIR/l3 */
    uint8_t *data;
    size_t size;
    struct l3_info info;
};

static struct file *files;
static size_t nfiles, nphotos;
static int failures;

#define FAIL(...)                                                                           \
    do {                                                                                    \
        fprintf(stderr, "FAIL: " __VA_ARGS__);                                              \
        fputc('\n', stderr);                                                                \
        failures++;                                                                         \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* FNV-1a over 64-bit little-endian words (tail bytes zero-padded) */
static uint64_t hash64(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    uint64_t w = 0;
    for (size_t k = 0; i + k < n; k++)
        w |= (uint64_t)b[i + k] << (8 * k);
    h = (h ^ w ^ n) * 0x100000001b3ull;
    return h;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct file *)a)->name, ((const struct file *)b)->name);
}

static void load_dir(const char *root, const char *sub)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/l3/%s", root, sub);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    size_t first = nfiles;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".l3"))
            continue;
        char fp[4352];
        snprintf(fp, sizeof fp, "%s/%s", path, e->d_name);
        FILE *f = fopen(fp, "rb");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        struct file *nf = realloc(files, (nfiles + 1) * sizeof *files);
        if (!nf || sz <= 0) {
            fclose(f);
            continue;
        }
        files = nf;
        struct file *x = &files[nfiles];
        memset(x, 0, sizeof *x);
        snprintf(x->name, sizeof x->name, "%.40s/%.200s", sub, e->d_name);
        x->size = (size_t)sz;
        x->data = malloc(x->size);
        if (!x->data || fread(x->data, 1, x->size, f) != x->size ||
            l3_read_info(x->data, x->size, &x->info, NULL) != L3_OK) {
            fprintf(stderr, "skipping unreadable %s\n", fp);
            free(x->data);
            fclose(f);
            continue;
        }
        fclose(f);
        nfiles++;
    }
    closedir(d);
    qsort(files + first, nfiles - first, sizeof *files, cmp_name);
}

/* ---------------- formats ---------------- */

struct fmtdesc {
    struct l3gpu_format f;
    char name[40];
};
static struct fmtdesc fmts[64];
static int nfmts;

static void make_formats(void)
{
    static const char *dt[] = {"u8", "u16", "f32", "f16"};
    static const int ch[] = {0, 1, 3, 4};
    static const float mean[4] = {0.485f, 0.456f, 0.406f, 0.5f};
    static const float std[4] = {0.229f, 0.224f, 0.225f, 0.25f};
    for (int lay = 0; lay < 2; lay++)
        for (int d = 0; d < 4; d++)
            for (int c = 0; c < 4; c++)
                for (int norm = 0; norm < (d >= 2 ? 2 : 1); norm++) {
                    struct fmtdesc *x = &fmts[nfmts++];
                    l3gpu_format_init(&x->f);
                    x->f.layout = lay;
                    x->f.dtype = d;
                    x->f.channels = ch[c];
                    x->f.normalize = norm;
                    memcpy(x->f.mean, mean, sizeof mean);
                    memcpy(x->f.std, std, sizeof std);
                    snprintf(x->name, sizeof x->name, "%s-%s-c%d%s", lay ? "CHW" : "HWC", dt[d],
                             ch[c], norm ? "-norm" : "");
                }
}

/* ---------------- reference checksums ---------------- */

struct ref {
    char key[320];
    uint64_t h;
};
static struct ref *refs;
static size_t nrefs;

static int cmp_ref(const void *a, const void *b)
{
    return strcmp(((const struct ref *)a)->key, ((const struct ref *)b)->key);
}

static void load_refs(const char *root)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ref.txt", root);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char a[256], b[40];
    unsigned long long h;
    while (fscanf(f, "%255s %39s %llx", a, b, &h) == 3) {
        struct ref *nr = realloc(refs, (nrefs + 1) * sizeof *refs);
        if (!nr)
            break;
        refs = nr;
        snprintf(refs[nrefs].key, sizeof refs[nrefs].key, "%s %s", a, b);
        refs[nrefs].h = h;
        nrefs++;
    }
    fclose(f);
    qsort(refs, nrefs, sizeof *refs, cmp_ref);
}

static const struct ref *find_ref(const char *file, const char *fmt)
{
    struct ref key;
    snprintf(key.key, sizeof key.key, "%s %s", file, fmt);
    return bsearch(&key, refs, nrefs, sizeof *refs, cmp_ref);
}

/* ---------------- table ---------------- */

static char table[64][160];
static int nrows;
#define ROW(...) snprintf(table[nrows < 63 ? nrows++ : 63], sizeof table[0], __VA_ARGS__)

#ifdef L3_HAVE_CUDA
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
#endif

static size_t out_bytes(const struct file *f, const struct l3gpu_format *fmt)
{
    size_t b = 0;
    l3gpu_output_shape(&f->info, fmt, NULL, &b);
    return b;
}

/* CPU decode of the check set in one call (separate outputs). */
static uint8_t **cpu_check_outputs(size_t nchk, const struct l3gpu_format *fmt, int *status,
                                   unsigned threads)
{
    struct l3gpu_input *in = calloc(nchk, sizeof *in);
    uint8_t **outs = calloc(nchk, sizeof *outs);
    for (size_t i = 0; i < nchk; i++) {
        in[i].data = files[i].data;
        in[i].size = files[i].size;
        outs[i] = malloc(out_bytes(&files[i], fmt));
    }
    int st = l3gpu_cpu_decode_batch(in, nchk, fmt, NULL, 0, (void *const *)outs, status, threads);
    if (st)
        FAIL("CPU batch decode: %s", l3gpu_strerror(st));
    free(in);
    return outs;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [--write-ref] [--cpu-only]\n", argv[0]);
        return 2;
    }
    const char *root = argv[1];
    int write_ref = 0, cpu_only = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--write-ref")) write_ref = 1;
        else if (!strcmp(argv[i], "--cpu-only")) cpu_only = 1;
    }
    (void)cpu_only; /* used only with CUDA */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = ncpu > 0 ? (unsigned)ncpu : 1;
    /* check set first (mixed, then photos), photos counted separately */
    load_dir(root, "mixed");
    size_t nmixed = nfiles;
    load_dir(root, "photos");
    nphotos = nfiles - nmixed;
    if (!nfiles) {
        fprintf(stderr, "no .l3 files under %s/l3 (run gpu/bench/devcheck_prep.sh)\n", root);
        return 2;
    }
    size_t nchk = nmixed + (nphotos < 4 ? nphotos : 4);
    make_formats();
    if (!write_ref)
        load_refs(root);
    printf("device_check: %zu mixed + %zu photo files; check set %zu files, %d formats, "
           "%zu reference checksums\n", nmixed, nphotos, nchk, nfmts, nrefs);

    /* ---- GPU context ---- */
    l3gpu_ctx *ctx = NULL;
    const char *gpu_why = "--cpu-only";
    char gpu_name[256] = "none";
#ifdef L3_HAVE_CUDA
    if (!cpu_only) {
        int st = l3gpu_ctx_create(0, &ctx);
        if (st) {
            gpu_why = l3gpu_strerror(st);
        } else {
            struct cudaDeviceProp prop;
            if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
                snprintf(gpu_name, sizeof gpu_name, "%.120s (sm_%d%d, %d SMs, %.0f GiB)", prop.name,
                         prop.major, prop.minor, prop.multiProcessorCount,
                         prop.totalGlobalMem / 1073741824.0);
        }
    }
#else
    gpu_why = "built without CUDA";
#endif
    printf("GPU: %s%s%s\n", ctx ? gpu_name : "not used (", ctx ? "" : gpu_why, ctx ? "" : ")");

    /* ---- 1. correctness ---- */
    FILE *ref_out = NULL;
    if (write_ref) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ref.txt", root);
        ref_out = fopen(path, "w");
        if (!ref_out) {
            perror(path);
            return 2;
        }
    }
    long ref_ok = 0, ref_bad = 0, ref_missing = 0, gpu_ok = 0, gpu_bad = 0;
    double t_check = now();
    int *sc = calloc(nchk, sizeof *sc), *sg = calloc(nchk, sizeof *sg);
    for (int k = 0; k < nfmts; k++) {
        const struct l3gpu_format *f = &fmts[k].f;
        uint8_t **outs = cpu_check_outputs(nchk, f, sc, threads);
        for (size_t i = 0; i < nchk; i++) {
            if (sc[i]) {
                FAIL("CPU %s %s: status %d (%s)", files[i].name, fmts[k].name, sc[i],
                     l3gpu_image_strerror(sc[i]));
                continue;
            }
            uint64_t h = hash64(outs[i], out_bytes(&files[i], f));
            if (ref_out) {
                fprintf(ref_out, "%s %s %016llx\n", files[i].name, fmts[k].name,
                        (unsigned long long)h);
            } else {
                const struct ref *r = find_ref(files[i].name, fmts[k].name);
                if (!r) ref_missing++;
                else if (r->h == h) ref_ok++;
                else {
                    ref_bad++;
                    FAIL("CPU output of %s as %s differs from the reference checksum",
                         files[i].name, fmts[k].name);
                }
            }
        }
#ifdef L3_HAVE_CUDA
        if (ctx) {
            size_t total = 0;
            size_t *off = calloc(nchk + 1, sizeof *off);
            for (size_t i = 0; i < nchk; i++) {
                off[i] = total;
                total += (out_bytes(&files[i], f) + 255) / 256 * 256;
            }
            uint8_t *dbuf = NULL;
            uint8_t *host = malloc(total);
            memset(host, 0xA7, total); /* poison */
            if (l3gpu_malloc(ctx, total, (void **)&dbuf) ||
                l3gpu_memcpy_to_device(ctx, dbuf, host, total)) {
                FAIL("GPU alloc: %s", l3gpu_ctx_error(ctx));
            } else {
                struct l3gpu_input *in = calloc(nchk, sizeof *in);
                void **ptrs = calloc(nchk, sizeof *ptrs);
                for (size_t i = 0; i < nchk; i++) {
                    in[i].data = files[i].data;
                    in[i].size = files[i].size;
                    ptrs[i] = dbuf + off[i];
                }
                int st = l3gpu_decode_batch(ctx, in, nchk, L3GPU_MEM_HOST, f, NULL, 0,
                                            (void *const *)ptrs, NULL, 0, sg, NULL);
                if (st == L3GPU_OK || st == L3GPU_ERR_IMAGE)
                    st = l3gpu_batch_finish(ctx, sg, nchk);
                if (st)
                    FAIL("GPU batch %s: %s (%s)", fmts[k].name, l3gpu_strerror(st),
                         l3gpu_ctx_error(ctx));
                if (l3gpu_memcpy_to_host(ctx, host, dbuf, total))
                    FAIL("GPU copy back: %s", l3gpu_ctx_error(ctx));
                for (size_t i = 0; i < nchk; i++) {
                    if (sg[i] != sc[i] || memcmp(host + off[i], outs[i], out_bytes(&files[i], f))) {
                        gpu_bad++;
                        if (gpu_bad <= 20)
                            FAIL("GPU != CPU: %s as %s (status gpu %d cpu %d)", files[i].name,
                                 fmts[k].name, sg[i], sc[i]);
                    } else {
                        gpu_ok++;
                    }
                }
                free(in);
                free(ptrs);
            }
            l3gpu_free(ctx, dbuf);
            free(host);
            free(off);
        }
#endif
        for (size_t i = 0; i < nchk; i++)
            free(outs[i]);
        free(outs);
    }
    t_check = now() - t_check;
    if (ref_out) {
        fclose(ref_out);
        printf("wrote %zu x %d reference checksums to %s/ref.txt\n", nchk, nfmts, root);
    }
    ROW("%-44s %.100s", "GPU", ctx ? gpu_name : gpu_why);
    ROW("%-44s %ld ok, %ld differ, %ld missing (%zu files x %d formats, %.1f s)",
        "CPU output vs reference checksums", ref_ok, ref_bad, ref_missing, nchk, nfmts, t_check);
    if (ctx)
        ROW("%-44s %ld identical, %ld differ", "GPU output vs CPU output (bytes)", gpu_ok, gpu_bad);
    else
        ROW("%-44s not run (%s)", "GPU output vs CPU output (bytes)", gpu_why);

    /* ---- broken images in a batch (CPU; GPU compared with it) ---- */
    if (nphotos >= 2) {
        const struct file *p0 = &files[nmixed], *p1 = &files[nmixed + 1];
        uint8_t *bad = malloc(p1->size);
        memcpy(bad, p1->data, p1->size);
        for (size_t k = p1->size / 2; k < p1->size; k += 4099)
            bad[k] ^= 0x55; /* tile data: header and table stay valid */
        struct l3gpu_input in[4] = {{p0->data, p0->size}, {bad, p1->size},
                                    {p1->data, p1->size - 1000}, {p1->data, p1->size}};
        struct l3gpu_format f;
        l3gpu_format_init(&f);
        size_t slot = out_bytes(p0, &f);
        uint8_t *cpu = malloc(4 * slot);
        int s_c[4];
        l3gpu_cpu_decode_batch(in, 4, &f, cpu, 4 * slot, NULL, s_c, threads);
        int zeroed = 1;
        for (size_t k = slot; k < 3 * slot; k++) zeroed &= cpu[k] == 0;
        if (s_c[0] || s_c[1] != L3_ERR_CORRUPT || s_c[2] != L3_ERR_TRUNCATED || s_c[3] || !zeroed)
            FAIL("corrupt batch on CPU: statuses %d %d %d %d, zeroed %d", s_c[0], s_c[1], s_c[2],
                 s_c[3], zeroed);
        const char *res = "not run (no GPU)";
#ifdef L3_HAVE_CUDA
        if (ctx) {
            int s_g[4];
            uint8_t *d = NULL, *gpu = malloc(4 * slot);
            memset(gpu, 0x33, 4 * slot);
            if (!l3gpu_malloc(ctx, 4 * slot, (void **)&d) &&
                !l3gpu_memcpy_to_device(ctx, d, gpu, 4 * slot)) {
                l3gpu_decode_batch(ctx, in, 4, L3GPU_MEM_HOST, &f, d, 4 * slot, NULL, NULL, 0,
                                   s_g, NULL);
                l3gpu_batch_finish(ctx, s_g, 4);
                l3gpu_memcpy_to_host(ctx, gpu, d, 4 * slot);
                int same = !memcmp(s_g, s_c, sizeof s_c) && !memcmp(gpu, cpu, 4 * slot);
                res = same ? "GPU == CPU (statuses + zeroed slots)" : "GPU DIFFERS";
                if (!same)
                    FAIL("corrupt batch: GPU statuses %d %d %d %d", s_g[0], s_g[1], s_g[2], s_g[3]);
            }
            l3gpu_free(ctx, d);
            free(gpu);
        }
#endif
        ROW("%-44s CPU statuses %d %d %d %d; %s", "batch with corrupt + truncated image", s_c[0],
            s_c[1], s_c[2], s_c[3], res);
        free(cpu);
        free(bad);
    }

    /* ---- 2. speed ---- */
    if (nphotos) {
        const struct file *ph = &files[nmixed];
        struct l3gpu_format f;
        l3gpu_format_init(&f);
        size_t slot = out_bytes(ph, &f);
        /* CPU batch decoder, HWC uint8 */
        int cpu_batch = 8;
        struct l3gpu_input *in = calloc(256, sizeof *in);
        for (int i = 0; i < 256; i++) {
            in[i].data = ph[i % nphotos].data;
            in[i].size = ph[i % nphotos].size;
        }
        uint8_t *out = malloc((size_t)cpu_batch * slot);
        int st8[256];
        unsigned tl[2] = {1, threads};
        for (int t = 0; t < 2; t++) {
            double best = 1e9;
            for (int r = 0; r < 3; r++) {
                double t0 = now();
                l3gpu_cpu_decode_batch(in, (size_t)cpu_batch, &f, out, cpu_batch * slot, NULL, st8,
                                       tl[t]);
                double dt = now() - t0;
                best = dt < best ? dt : best;
            }
            ROW("CPU batch decode, %2u thread%s, batch %d       %8.2f GB/s   (%.1f ms, best of 3)",
                tl[t], tl[t] > 1 ? "s" : " ", cpu_batch, cpu_batch * slot / best / 1e9,
                best * 1e3);
        }
        free(out);
#ifdef L3_HAVE_CUDA
        if (ctx) {
            /* device-to-device copy bandwidth */
            size_t cb = (size_t)1 << 30;
            void *a = NULL, *b = NULL;
            cudaEvent_t e0, e1;
            cudaEventCreate(&e0);
            cudaEventCreate(&e1);
            double copy_gbs = 0;
            if (cudaMalloc(&a, cb) == cudaSuccess && cudaMalloc(&b, cb) == cudaSuccess) {
                cudaMemset(a, 1, cb);
                double ms[10];
                for (int r = 0; r < 12; r++) {
                    cudaEventRecord(e0, 0);
                    cudaMemcpyAsync(b, a, cb, cudaMemcpyDeviceToDevice, 0);
                    cudaEventRecord(e1, 0);
                    cudaEventSynchronize(e1);
                    float m = 0;
                    cudaEventElapsedTime(&m, e0, e1);
                    if (r >= 2) ms[r - 2] = m;
                }
                double m = median(ms, 10);
                copy_gbs = cb / (m * 1e-3) / 1e9;
                ROW("device memcpy D2D, 1 GiB                     %8.1f GB/s copied (%.1f GB/s read+write)",
                    copy_gbs, 2 * copy_gbs);
            } else {
                FAIL("cudaMalloc for the copy test");
            }
            cudaFree(a);
            cudaFree(b);
            /* inputs: the photos in device memory and in pinned memory */
            uint8_t *dev_in[64] = {0}, *pin_in[64] = {0};
            int np = (int)(nphotos < 64 ? nphotos : 64);
            for (int i = 0; i < np; i++) {
                cudaMalloc((void **)&dev_in[i], ph[i].size);
                cudaMemcpy(dev_in[i], ph[i].data, ph[i].size, cudaMemcpyHostToDevice);
                cudaHostAlloc((void **)&pin_in[i], ph[i].size, cudaHostAllocDefault);
                memcpy(pin_in[i], ph[i].data, ph[i].size);
            }
            l3gpu_ctx_set_timing(ctx, 1);
            static const int batches[] = {1, 8, 64, 256};
            struct { int dtype, layout, norm, mem; const char *name; } cases[] = {
                {L3GPU_U8, L3GPU_HWC, 0, L3GPU_MEM_DEVICE, "HWC u8,  device inputs"},
                {L3GPU_U8, L3GPU_HWC, 0, L3GPU_MEM_PINNED, "HWC u8,  pinned inputs"},
                {L3GPU_U8, L3GPU_HWC, 0, L3GPU_MEM_HOST, "HWC u8,  pageable inputs"},
                {L3GPU_F32, L3GPU_CHW, 1, L3GPU_MEM_DEVICE, "CHW f32 norm, device inputs"},
                {L3GPU_F16, L3GPU_CHW, 1, L3GPU_MEM_DEVICE, "CHW f16 norm, device inputs"},
            };
            int sgs[256];
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                for (int bi = 0; bi < 4; bi++) {
                    int B = batches[bi];
                    if (c > 0 && B != 64)
                        continue; /* the other cases at batch 64 only */
                    struct l3gpu_format g;
                    l3gpu_format_init(&g);
                    g.dtype = cases[c].dtype;
                    g.layout = cases[c].layout;
                    g.normalize = cases[c].norm;
                    g.mean[0] = 0.485f; g.mean[1] = 0.456f; g.mean[2] = 0.406f;
                    g.std[0] = 0.229f; g.std[1] = 0.224f; g.std[2] = 0.225f;
                    size_t gs = out_bytes(ph, &g);
                    struct l3gpu_input gin[256];
                    for (int i = 0; i < B; i++) {
                        int p = i % np;
                        gin[i].size = ph[p].size;
                        gin[i].data = cases[c].mem == L3GPU_MEM_DEVICE ? (void *)dev_in[p]
                                    : cases[c].mem == L3GPU_MEM_PINNED ? (void *)pin_in[p]
                                    : (void *)ph[p].data;
                    }
                    void *dout = NULL;
                    if (cudaMalloc(&dout, (size_t)B * gs) != cudaSuccess) {
                        FAIL("cudaMalloc %zu bytes", (size_t)B * gs);
                        continue;
                    }
                    int reps = B >= 64 ? 10 : 30;
                    double tot[30], kdec[30], kconv[30];
                    int bad = 0;
                    for (int r = 0; r < reps + 3; r++) {
                        cudaEventRecord(e0, 0);
                        int st = l3gpu_decode_batch(ctx, gin, (size_t)B, cases[c].mem, &g, dout,
                                                    (size_t)B * gs, NULL, NULL, 0, sgs, NULL);
                        cudaEventRecord(e1, 0);
                        if (st == L3GPU_OK)
                            st = l3gpu_batch_finish(ctx, sgs, (size_t)B);
                        cudaEventSynchronize(e1);
                        if (st) {
                            bad = 1;
                            FAIL("timed batch %d: %s (%s)", B, l3gpu_strerror(st),
                                 l3gpu_ctx_error(ctx));
                            break;
                        }
                        float m = 0, a1 = 0, a2 = 0;
                        cudaEventElapsedTime(&m, e0, e1);
                        l3gpu_ctx_last_timing(ctx, &a1, &a2);
                        if (r >= 3) {
                            tot[r - 3] = m;
                            kdec[r - 3] = a1;
                            kconv[r - 3] = a2;
                        }
                    }
                    cudaFree(dout);
                    if (bad)
                        continue;
                    double mt = median(tot, reps), md = median(kdec, reps), mc = median(kconv, reps);
                    double gbs = (double)B * gs / (mt * 1e-3) / 1e9;
                    ROW("GPU %-28s batch %3d  %8.1f GB/s   (%.2f ms: decode %.2f + convert %.2f; %.0f%% of copy)",
                        cases[c].name, B, gbs, mt, md, mc, copy_gbs ? 100 * gbs / copy_gbs : 0);
                }
            }
            for (int i = 0; i < np; i++) {
                cudaFree(dev_in[i]);
                cudaFreeHost(pin_in[i]);
            }
            cudaEventDestroy(e0);
            cudaEventDestroy(e1);
        }
#endif
        free(in);
    }
#ifdef L3_HAVE_CUDA
    l3gpu_ctx_destroy(ctx);
#endif

    printf("\n==== l3 batch decode: device check (%s) ====\n", failures ? "FAILURES" : "all checks passed");
    for (int i = 0; i < nrows; i++)
        printf("%s\n", table[i]);
    printf("(GB/s = bytes of decoded output per second; photos are 2048x1024 RGB, repeated to fill a batch)\n");
    for (size_t i = 0; i < nfiles; i++)
        free(files[i].data);
    free(files);
    free(refs);
    free(sc);
    free(sg);
    return failures ? 1 : 0;
}
