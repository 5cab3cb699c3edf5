/* peer_bench — L3 against the lossless codecs of Debian 12, in one run.
 *
 *   peer_bench [-r RUNS] [-j THREADS] DIR|FILE...
 *
 * For every 8-bit RGB or RGBA PNG (the formats every peer stores; other PNGs
 * are counted and left out): libpng decodes it once for the reference pixels;
 * QOI, WebP lossless (as WebPEncodeLosslessRGB, plus exact), JPEG XL lossless (libjxl, effort 1)
 * and L3 (default settings) encode those pixels once (WebP with `exact`, so that
 * RGB under alpha 0 is kept). Then RUNS interleaved
 * rounds time every decoder on the file: libpng, libspng, QOI, WebP, JPEG XL,
 * L3 with one thread and with THREADS threads, and the L3 encoder (one thread).
 * Each decoder's output is compared with libpng's pixels byte for byte; any
 * difference is an error (exit status 1). One-thread times are the calling
 * thread's CPU time, best of RUNS; the THREADS-thread L3 decode is wall-clock
 * time (compared with libpng's wall-clock time, and with L3's one-thread
 * wall-clock time for the scaling), each after one untimed run that wakes
 * the worker threads. Prints a Markdown table: size relative to the PNG files and decode
 * speed relative to libpng, totals over all files (MB/s of decoded pixels).
 */
#include <dirent.h>
#include <jxl/decode.h>
#include <jxl/encode.h>
#include <png.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <webp/decode.h>
#include <webp/encode.h>

#define QOI_IMPLEMENTATION
#define QOI_NO_STDIO
#include <qoi.h>

#include "l3.h"
#include "tc_file.h"

enum { D_PNG, D_SPNG, D_QOI, D_WEBP, D_JXL, D_L3, D_L3N, E_L3, NOPS };
static const char *const op_name[NOPS] = {
    "libpng", "libspng", "QOI", "WebP lossless", "JPEG XL lossless, effort 1",
    "L3, 1 thread", "L3, N threads", "L3 encode, 1 thread"};

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the peers: each returns 0 when `out` holds the w x h x ch pixels ---- */

static int dec_spng(const unsigned char *png, size_t n, unsigned ch, unsigned char *out,
                    size_t raw)
{
    spng_ctx *c = spng_ctx_new(0);
    if (!c)
        return -1;
    int r = spng_set_png_buffer(c, png, n);
    if (!r)
        r = spng_decode_image(c, out, raw, ch == 3 ? SPNG_FMT_RGB8 : SPNG_FMT_RGBA8, 0);
    spng_ctx_free(c);
    return r ? -1 : 0;
}

static int dec_qoi(const void *q, size_t n, unsigned ch, unsigned char *out, size_t raw)
{
    qoi_desc d;
    void *p = qoi_decode(q, (int)n, &d, (int)ch);
    if (!p)
        return -1;
    memcpy(out, p, raw); /* qoi_decode allocates; the copy is part of its cost */
    free(p);
    return 0;
}

static int dec_webp(const uint8_t *wp, size_t n, unsigned w, unsigned ch, unsigned char *out,
                    size_t raw)
{
    uint8_t *r = ch == 3 ? WebPDecodeRGBInto(wp, n, out, raw, (int)(w * 3))
                         : WebPDecodeRGBAInto(wp, n, out, raw, (int)(w * 4));
    return r ? 0 : -1;
}

static int dec_jxl(const uint8_t *jx, size_t n, unsigned ch, unsigned char *out, size_t raw)
{
    JxlDecoder *d = JxlDecoderCreate(NULL);
    if (!d)
        return -1;
    int rc = -1;
    JxlPixelFormat fmt = {ch, JXL_TYPE_UINT8, JXL_NATIVE_ENDIAN, 0};
    if (JxlDecoderSubscribeEvents(d, JXL_DEC_FULL_IMAGE) != JXL_DEC_SUCCESS ||
        JxlDecoderSetInput(d, jx, n) != JXL_DEC_SUCCESS)
        goto out;
    JxlDecoderCloseInput(d);
    for (;;) {
        JxlDecoderStatus s = JxlDecoderProcessInput(d);
        if (s == JXL_DEC_NEED_IMAGE_OUT_BUFFER) {
            size_t need;
            if (JxlDecoderImageOutBufferSize(d, &fmt, &need) != JXL_DEC_SUCCESS || need != raw ||
                JxlDecoderSetImageOutBuffer(d, &fmt, out, raw) != JXL_DEC_SUCCESS)
                goto out;
        } else if (s == JXL_DEC_FULL_IMAGE) {
            rc = 0;
        } else if (s == JXL_DEC_SUCCESS) {
            break;
        } else {
            rc = -1;
            break;
        }
    }
out:
    JxlDecoderDestroy(d);
    return rc;
}

/* WebP lossless as libwebp's simple API encodes it (WebPEncodeLosslessRGB:
 * default preset, quality 70), plus `exact`: RGB kept under alpha 0, which the
 * simple API may change. */
static size_t enc_webp(const unsigned char *px, unsigned w, unsigned h, unsigned ch,
                       uint8_t **o)
{
    WebPConfig cfg;
    WebPPicture pic;
    WebPMemoryWriter wr;
    if (!WebPConfigPreset(&cfg, WEBP_PRESET_DEFAULT, 70.f) || !WebPPictureInit(&pic))
        return 0;
    cfg.lossless = 1;
    cfg.exact = 1;
    pic.use_argb = 1;
    pic.width = (int)w;
    pic.height = (int)h;
    int ok = ch == 3 ? WebPPictureImportRGB(&pic, px, (int)(w * 3))
                     : WebPPictureImportRGBA(&pic, px, (int)(w * 4));
    WebPMemoryWriterInit(&wr);
    pic.writer = WebPMemoryWrite;
    pic.custom_ptr = &wr;
    ok = ok && WebPEncode(&cfg, &pic);
    WebPPictureFree(&pic);
    if (!ok) {
        WebPMemoryWriterClear(&wr);
        return 0;
    }
    *o = wr.mem;
    return wr.size;
}

static int enc_jxl(const unsigned char *px, unsigned w, unsigned h, unsigned ch, uint8_t **o,
                   size_t *on)
{
    JxlEncoder *e = JxlEncoderCreate(NULL);
    if (!e)
        return -1;
    int rc = -1;
    JxlBasicInfo bi;
    JxlEncoderInitBasicInfo(&bi);
    bi.xsize = w;
    bi.ysize = h;
    bi.bits_per_sample = 8;
    bi.num_color_channels = 3;
    bi.num_extra_channels = ch == 4;
    bi.alpha_bits = ch == 4 ? 8 : 0;
    bi.uses_original_profile = JXL_TRUE;
    JxlColorEncoding ce;
    JxlColorEncodingSetToSRGB(&ce, JXL_FALSE);
    JxlPixelFormat fmt = {ch, JXL_TYPE_UINT8, JXL_NATIVE_ENDIAN, 0};
    JxlEncoderFrameSettings *fs;
    if (JxlEncoderSetBasicInfo(e, &bi) != JXL_ENC_SUCCESS ||
        JxlEncoderSetColorEncoding(e, &ce) != JXL_ENC_SUCCESS ||
        !(fs = JxlEncoderFrameSettingsCreate(e, NULL)) ||
        JxlEncoderSetFrameLossless(fs, JXL_TRUE) != JXL_ENC_SUCCESS ||
        JxlEncoderFrameSettingsSetOption(fs, JXL_ENC_FRAME_SETTING_EFFORT, 1) != JXL_ENC_SUCCESS ||
        JxlEncoderAddImageFrame(fs, &fmt, px, (size_t)w * h * ch) != JXL_ENC_SUCCESS)
        goto out;
    JxlEncoderCloseInput(e);
    size_t cap = (size_t)w * h * ch / 2 + 4096, used = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf)
            goto out;
        uint8_t *next = buf + used;
        size_t avail = cap - used;
        JxlEncoderStatus s = JxlEncoderProcessOutput(e, &next, &avail);
        used = (size_t)(next - buf);
        if (s == JXL_ENC_SUCCESS)
            break;
        if (s != JXL_ENC_NEED_MORE_OUTPUT) {
            free(buf);
            goto out;
        }
        cap *= 2;
        uint8_t *nb = realloc(buf, cap);
        if (!nb)
            free(buf);
        buf = nb;
    }
    *o = buf;
    *on = used;
    rc = 0;
out:
    JxlEncoderDestroy(e);
    return rc;
}

/* ---- per file ---- */

struct totals {
    double raw, png, size[NOPS], t[NOPS], wall[NOPS];
    unsigned files, skipped;
};

static void best(double *b, double t)
{
    if (*b == 0 || t < *b)
        *b = t;
}

static int bench_file(const char *path, unsigned runs, unsigned threads, struct totals *tot)
{
    size_t pn;
    unsigned char *png = tc_slurp(path, &pn);
    if (!png) {
        fprintf(stderr, "peer_bench: %s: cannot read\n", path);
        return 1;
    }
    struct l3_info info;
    void *ref = NULL;
    size_t raw = 0;
    if (l3_png_decode(png, pn, NULL, &info, &ref, &raw) != L3_OK) {
        fprintf(stderr, "peer_bench: %s: libpng cannot decode it\n", path);
        free(png);
        return 1;
    }
    if (info.bit_depth != 8 || (info.color != L3_COLOR_RGB && info.color != L3_COLOR_RGBA)) {
        tot->skipped++;
        free(png);
        free(ref);
        return 0;
    }
    const unsigned w = info.width, h = info.height, ch = info.channels;
    int rc = 0;
    /* encode once with each peer */
    qoi_desc qd = {w, h, (unsigned char)ch, QOI_SRGB};
    int qn = 0;
    void *qoi = qoi_encode(ref, &qd, &qn);
    uint8_t *webp = NULL, *jxl = NULL;
    size_t wn = enc_webp(ref, w, h, ch, &webp);
    size_t jn = 0;
    int jst = enc_jxl(ref, w, h, ch, &jxl, &jn);
    void *l3 = NULL;
    size_t ln = 0;
    struct l3_encode_options eo;
    memset(&eo, 0, sizeof eo);
    eo.threads = 1;
    int lst = l3_encode(&info, ref, 0, &eo, &l3, &ln);
    unsigned char *out = malloc(raw);
    if (!qoi || !wn || jst || lst || !out) {
        fprintf(stderr, "peer_bench: %s: an encoder failed (qoi %d webp %d jxl %d l3 %d)\n", path,
                qoi != NULL, wn != 0, jst == 0, lst == 0);
        rc = 1;
        goto done;
    }
    double bt[NOPS] = {0}, bw[NOPS] = {0};
    struct l3_decode_options o1, on;
    memset(&o1, 0, sizeof o1);
    o1.threads = 1;
    on = o1;
    on.threads = threads;
    for (unsigned r = 0; r < runs && rc == 0; r++) {
        for (int op = 0; op < NOPS && rc == 0; op++) {
            int st = 0;
            /* the N-thread decode follows 1-thread ones: one untimed run
             * first wakes the worker threads and their idle vCPUs (in a
             * 2-vCPU KVM guest a woken worker started 0.15-2.2 ms after the
             * call, against a 4 ms decode), so the timed run is what a
             * decode loop gets */
            if (op == D_L3N && l3_decode(l3, ln, out, raw, 0, &on) != 0)
                st = -1;
            memset(out, 0x5a, raw); /* the timed run writes every byte anew */
            double c0 = cpu_now(), w0 = wall_now();
            switch (op) {
            case D_PNG: {
                void *p = NULL;
                st = l3_png_decode(png, pn, NULL, NULL, &p, NULL);
                if (!st)
                    memcpy(out, p, raw); /* as QOI: the decoder allocates */
                free(p);
                break;
            }
            case D_SPNG: st = dec_spng(png, pn, ch, out, raw); break;
            case D_QOI: st = dec_qoi(qoi, (size_t)qn, ch, out, raw); break;
            case D_WEBP: st = dec_webp(webp, wn, w, ch, out, raw); break;
            case D_JXL: st = dec_jxl(jxl, jn, ch, out, raw); break;
            case D_L3: st = l3_decode(l3, ln, out, raw, 0, &o1); break;
            case D_L3N:
                if (st == 0)
                    st = l3_decode(l3, ln, out, raw, 0, &on);
                break;
            default: {
                void *e = NULL;
                size_t en = 0;
                st = l3_encode(&info, ref, 0, &eo, &e, &en);
                l3_free(e);
                memcpy(out, ref, raw);
                break;
            }
            }
            double t = cpu_now() - c0, tw = wall_now() - w0;
            if (st != 0 || memcmp(out, ref, raw) != 0) {
                fprintf(stderr, "peer_bench: %s: %s: %s\n", path, op_name[op],
                        st ? "failed" : "pixels differ from libpng's");
                rc = 1;
            }
            best(&bt[op], t);
            best(&bw[op], tw);
        }
    }
    if (rc == 0) {
        tot->files++;
        tot->raw += (double)raw;
        tot->png += (double)pn;
        const double sz[NOPS] = {(double)pn, (double)pn, (double)qn, (double)wn, (double)jn,
                                 (double)ln, (double)ln, (double)ln};
        for (int op = 0; op < NOPS; op++) {
            tot->size[op] += sz[op];
            tot->t[op] += op == D_L3N ? bw[op] : bt[op];
            tot->wall[op] += bw[op];
        }
    }
done:
    free(out);
    free(qoi);
    WebPFree(webp);
    free(jxl);
    l3_free(l3);
    free(ref);
    free(png);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.png of a directory (sorted), or the file itself. */
static int each_png(const char *arg, unsigned runs, unsigned threads, struct totals *tot)
{
    struct stat st;
    if (stat(arg, &st) != 0) {
        fprintf(stderr, "peer_bench: %s: not found\n", arg);
        return 1;
    }
    if (!S_ISDIR(st.st_mode))
        return bench_file(arg, runs, threads, tot);
    DIR *d = opendir(arg);
    if (!d)
        return 1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".png") != 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn)
                break;
            names = nn;
        }
        names[n] = malloc(strlen(arg) + l + 2);
        if (!names[n])
            break;
        sprintf(names[n++], "%s/%s", arg, e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (rc == 0)
            rc = bench_file(names[i], runs, threads, tot);
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    unsigned runs = 3, threads = 2;
    int first = 1;
    while (first + 1 < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "-r") == 0)
            runs = (unsigned)atoi(argv[first + 1]);
        else if (strcmp(argv[first], "-j") == 0)
            threads = (unsigned)atoi(argv[first + 1]);
        else
            break;
        first += 2;
    }
    if (first >= argc || runs < 1 || threads < 1) {
        fprintf(stderr, "usage: peer_bench [-r RUNS] [-j THREADS] DIR|FILE...\n");
        return 2;
    }
    struct totals tot;
    memset(&tot, 0, sizeof tot);
    int rc = 0;
    for (int i = first; i < argc && rc == 0; i++)
        rc = each_png(argv[i], runs, threads, &tot);
    if (rc)
        return 1;
    if (tot.files == 0) {
        fprintf(stderr, "peer_bench: no 8-bit RGB/RGBA PNG (%u others left out)\n", tot.skipped);
        return 1;
    }
    printf("%u files (8-bit RGB/RGBA; %u other PNGs left out), %.1f MB of pixels, best of %u "
           "runs, N = %u threads; every decoder's pixels equal libpng's\n\n",
           tot.files, tot.skipped, tot.raw / 1e6, runs, threads);
    printf("| codec | size / PNG | decode vs libpng | MB/s |\n|---|---:|---:|---:|\n");
    for (int op = 0; op < NOPS; op++) {
        double mbs = tot.raw / tot.t[op] / 1e6;
        if (op == D_L3N)
            printf("| %s (wall clock, vs libpng's) | %.3f | %.2fx | %.0f |\n", op_name[op],
                   tot.size[op] / tot.png, tot.wall[D_PNG] / tot.t[op], mbs);
        else if (op == E_L3)
            printf("| %s | | %.2fx libpng decode | %.0f |\n", op_name[op],
                   tot.t[D_PNG] / tot.t[op], mbs);
        else
            printf("| %s | %.3f | %.2fx | %.0f |\n", op_name[op], tot.size[op] / tot.png,
                   tot.t[D_PNG] / tot.t[op], mbs);
    }
    printf("\nL3: %u threads decode %.2fx as fast as one (wall clock both)\n", threads,
           tot.wall[D_L3] / tot.wall[D_L3N]);
    return 0;
}
