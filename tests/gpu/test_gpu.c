/* test_gpu.c — the batch decoder's C side without CUDA: conversion
 * arithmetic, the CPU batch reference against l3_decode for every layout x
 * dtype x channel count, broken images inside a batch, and the GPU plan run
 * on the host. (The CUDA library itself: test_cuda.c.) */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l3.h"
#include "l3gpu.h"
#include "l3_convert.h"
#include "l3gpu_kernels.h"

#include "gpu_gen.h"


/* ---------------- independent expectation of the conversion ---------------- */

/* The documented channel semantics, written out per colour model. Returns
 * the expected sample of output channel c and its full-scale value. */
static uint32_t expect_sample(const struct gen *g, int channels, uint32_t x, uint32_t y,
                              unsigned c, uint32_t *max_ret)
{
    const struct l3_info *f = &g->info;
    uint32_t smax = f->bit_depth == 16 ? 65535u : (1u << f->bit_depth) - 1u;
    uint32_t rgba[4];
    unsigned model = f->color;
    if (model == L3_COLOR_PALETTE) {
        uint32_t idx = src_sample(g, x, y, 0);
        if (channels == 0) {
            *max_ret = 255;
            return idx;
        }
        for (int k = 0; k < 4; k++) rgba[k] = f->palette[idx][k];
        smax = 255;
        model = L3_COLOR_RGBA;
    } else {
        for (unsigned k = 0; k < 4; k++)
            rgba[k] = k < f->channels ? src_sample(g, x, y, k) : 0;
    }
    *max_ret = smax;
    if (channels == 0)
        return rgba[c];
    int gray = model == L3_COLOR_GRAY || model == L3_COLOR_GRAY_ALPHA;
    int has_alpha = model == L3_COLOR_GRAY_ALPHA || model == L3_COLOR_RGBA;
    uint32_t alpha;
    if (has_alpha) {
        alpha = gray ? rgba[1] : rgba[3];
    } else {
        int keyed = f->has_trns_key &&
                    (gray ? rgba[0] == f->trns_key[0]
                          : (rgba[0] == f->trns_key[0] && rgba[1] == f->trns_key[1] &&
                             rgba[2] == f->trns_key[2]));
        alpha = keyed ? 0 : smax;
    }
    if (channels == 1) {
        if (gray)
            return rgba[0];
        /* ITU-R 601 luma, rounded; the library's 16.16 fixed point form */
        double l = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2];
        uint32_t fixed = (rgba[0] * 19595u + rgba[1] * 38470u + rgba[2] * 7471u + 32768u) >> 16;
        /* 16.16 weights differ from 0.299/0.587/0.114 by < 5e-6 each */
        cr_assert(fabs(l - fixed) <= 0.5 + 1e-5 * smax, "luma %f vs %u", l, fixed);
        return fixed;
    }
    if (c == 3)
        return alpha;
    return gray ? rgba[0] : rgba[c];
}


#ifdef __FLT16_MAX__
static uint16_t f16_ref(float f)
{
    _Float16 h = (_Float16)f; /* the compiler's own conversion (round to nearest even) */
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}
#endif

/* Checks one converted image (a batch slot) against expect_sample(). */
static void check_slot(const struct gen *g, const struct l3gpu_format *fmt, const void *slot,
                       const char *what)
{
    const struct l3_info *f = &g->info;
    unsigned C = fmt->channels ? (unsigned)fmt->channels : color_planes(f->color);
    size_t W = f->width, H = f->height;
    for (uint32_t y = 0; y < H; y++)
        for (uint32_t x = 0; x < W; x++)
            for (unsigned c = 0; c < C; c++) {
                uint32_t smax;
                uint32_t v = expect_sample(g, fmt->channels, x, y, c, &smax);
                size_t i = fmt->layout == L3GPU_HWC ? ((size_t)y * W + x) * C + c
                                                    : (size_t)c * W * H + (size_t)y * W + x;
                double t = (double)v / smax;
                switch (fmt->dtype) {
                case L3GPU_U8: {
                    uint32_t e = (uint32_t)floor(t * 255.0 + 0.5);
                    cr_assert_eq(((const uint8_t *)slot)[i], e,
                                 "%s: u8 at (%u,%u,%u): %u, expected %u (v %u / %u)", what, x, y,
                                 c, ((const uint8_t *)slot)[i], e, v, smax);
                    break;
                }
                case L3GPU_U16: {
                    uint32_t e = (uint32_t)floor(t * 65535.0 + 0.5);
                    cr_assert_eq(((const uint16_t *)slot)[i], e,
                                 "%s: u16 at (%u,%u,%u): %u, expected %u", what, x, y, c,
                                 ((const uint16_t *)slot)[i], e);
                    break;
                }
                case L3GPU_F32:
                case L3GPU_F16: {
                    double e = t;
                    if (fmt->normalize)
                        e = (t * fmt->scale[c] - fmt->mean[c]) / fmt->std[c];
                    float got;
                    if (fmt->dtype == L3GPU_F32) {
                        got = ((const float *)slot)[i];
                        if (!fmt->normalize)
                            cr_assert_eq(got, (float)v / (float)smax,
                                         "%s: f32 (%u,%u,%u) not v/max", what, x, y, c);
                        cr_assert(fabs(got - e) <= 1e-6 * (1 + fabs(e)),
                                  "%s: f32 at (%u,%u,%u): %.9g, expected %.9g", what, x, y, c,
                                  got, e);
                    } else {
                        uint16_t hb = ((const uint16_t *)slot)[i];
#ifdef __FLT16_MAX__
                        _Float16 hv;
                        memcpy(&hv, &hb, 2);
                        got = (float)hv;
                        /* the f16 value is the f32 value rounded: recompute the f32
                         * value with the formula above, round with the compiler */
                        float f32 = (float)v / (float)smax;
                        if (fmt->normalize) {
                            if (fmt->scale[c] != 1.0f) f32 = f32 * fmt->scale[c];
                            if (fmt->mean[c] != 0.0f) f32 = f32 - fmt->mean[c];
                            if (fmt->std[c] != 1.0f) f32 = f32 / fmt->std[c];
                        }
                        cr_assert_eq(hb, f16_ref(f32), "%s: f16 at (%u,%u,%u): %04x vs %04x",
                                     what, x, y, c, hb, f16_ref(f32));
#else
                        (void)hb;
                        got = (float)e;
#endif
                        cr_assert(fabs(got - e) <= 1e-3 * (1 + fabs(e)),
                                  "%s: f16 at (%u,%u,%u): %g, expected %g", what, x, y, c, got,
                                  e);
                    }
                    break;
                }
                }
            }
}

/* ---------------- conversion arithmetic ---------------- */

Test(convert, f16_rounding_matches_compiler)
{
#ifndef __FLT16_MAX__
    cr_skip_test("this compiler has no _Float16 to compare with");
#else
    static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f,
                                    1e9f, -1e9f, 6.1035156e-05f, 6.1e-05f, 5.9604645e-08f,
                                    2.9802322e-08f, 2.9802326e-08f, 1e-10f, 0.1f, 1.0f / 3};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        cr_assert_eq(l3cv_f16_bits(special[i]), f16_ref(special[i]), "value %.9g: %04x vs %04x",
                     special[i], l3cv_f16_bits(special[i]), f16_ref(special[i]));
    cr_assert_eq(l3cv_f16_bits(INFINITY), 0x7c00);
    cr_assert_eq(l3cv_f16_bits(-INFINITY), 0xfc00);
    cr_assert_eq(l3cv_f16_bits(NAN) & 0x7c00, 0x7c00);
    cr_assert_neq(l3cv_f16_bits(NAN) & 0x3ff, 0);
    /* every float16 value, the midpoints between neighbours (ties to even),
     * and random bit patterns */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        _Float16 a, b;
        uint16_t ha = (uint16_t)h, hb = (uint16_t)(h + 1);
        memcpy(&a, &ha, 2);
        memcpy(&b, &hb, 2);
        float fa = (float)a, mid = ((float)a + (float)b) / 2; /* exact in float */
        cr_assert_eq(l3cv_f16_bits(fa), ha);
        cr_assert_eq(l3cv_f16_bits(mid), f16_ref(mid), "midpoint above %04x", h);
        cr_assert_eq(l3cv_f16_bits(-mid), f16_ref(-mid));
        cr_assert_eq(l3cv_f16_bits(nextafterf(mid, 0)), f16_ref(nextafterf(mid, 0)));
        cr_assert_eq(l3cv_f16_bits(nextafterf(mid, 1e9f)), f16_ref(nextafterf(mid, 1e9f)));
    }
    uint64_t s = 5;
    for (int i = 0; i < 2000000; i++) {
        uint32_t bits = (uint32_t)tc_splitmix64(&s);
        float f;
        memcpy(&f, &bits, 4);
        if (f != f)
            continue;
        cr_assert_eq(l3cv_f16_bits(f), f16_ref(f), "bits %08x", bits);
    }
#endif
}

Test(convert, rescale_matches_rounded_ratio)
{
    static const uint32_t maxes[] = {1, 3, 15, 255, 65535};
    for (size_t m = 0; m < 5; m++)
        for (uint32_t v = 0; v <= maxes[m]; v++) {
            double t = (double)v / maxes[m];
            cr_assert_eq(l3cv_rescale(v, maxes[m], 255), (uint32_t)floor(t * 255 + 0.5),
                         "v %u max %u", v, maxes[m]);
            cr_assert_eq(l3cv_rescale(v, maxes[m], 65535), (uint32_t)floor(t * 65535 + 0.5),
                         "v %u max %u", v, maxes[m]);
        }
}

Test(convert, format_checks)
{
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    cr_assert_eq(l3gpu_format_check(&f), L3GPU_OK);
    f.channels = 2;
    cr_assert_eq(l3gpu_format_check(&f), L3GPU_ERR_INVALID_ARG);
    f.channels = 3;
    f.normalize = 1; /* integer dtype */
    cr_assert_eq(l3gpu_format_check(&f), L3GPU_ERR_INVALID_ARG);
    f.dtype = L3GPU_F32;
    cr_assert_eq(l3gpu_format_check(&f), L3GPU_OK);
    f.std[1] = 0.0f;
    cr_assert_eq(l3gpu_format_check(&f), L3GPU_ERR_INVALID_ARG);
    f.std[1] = NAN;
    cr_assert_eq(l3gpu_format_check(&f), L3GPU_ERR_INVALID_ARG);
    f.std[1] = 1.0f;
    f.layout = 7;
    cr_assert_eq(l3gpu_format_check(&f), L3GPU_ERR_INVALID_ARG);
    cr_assert_eq(l3gpu_format_check(NULL), L3GPU_ERR_INVALID_ARG);
    cr_assert_str_neq(l3gpu_strerror(L3GPU_ERR_NO_DRIVER), l3gpu_strerror(L3GPU_ERR_NO_DEVICE));
    cr_assert_str_eq(l3gpu_image_strerror(L3_ERR_CORRUPT), l3_strerror(L3_ERR_CORRUPT));
}

/* ---------------- CPU batch vs l3_decode, all formats ---------------- */


Test(cpu_batch, every_format_matches_l3_decode)
{
    for (size_t m = 0; m < NMODELS; m++) {
        /* two images of one model in a batch: 70x45 with 32x32 tiles (partial
         * edge tiles) */
        struct gen g[2];
        for (int k = 0; k < 2; k++)
            gen_image(&g[k], MODELS[m].color, MODELS[m].depth, 70, 45, 100 * m + k, 32,
                      MODELS[m].trns);
        /* l3_decode gives back the source samples */
        for (int k = 0; k < 2; k++) {
            void *dec = malloc(g[k].px_size);
            cr_assert_eq(l3_decode(g[k].l3, g[k].l3_size, dec, g[k].px_size, 0, NULL), L3_OK);
            cr_assert(!memcmp(dec, g[k].px, g[k].px_size), "l3_decode differs from the source");
            free(dec);
        }
        struct l3gpu_input in[2] = {{g[0].l3, g[0].l3_size}, {g[1].l3, g[1].l3_size}};
        struct l3gpu_format f;
        FOR_EACH_FORMAT(f) {
            char name[160];
            format_name(name, sizeof name, &g[0], &f);
            uint32_t shape[3];
            size_t bytes;
            cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, shape, &bytes), L3GPU_OK);
            uint8_t *out = malloc(2 * bytes);
            memset(out, 0xA5, 2 * bytes); /* poison: every byte must be written */
            int status[2] = {-1, -1};
            int st = l3gpu_cpu_decode_batch(in, 2, &f, out, 2 * bytes, NULL, status, 3);
            cr_assert_eq(st, L3GPU_OK, "%s: %s", name, l3gpu_strerror(st));
            cr_assert_eq(status[0], 0);
            cr_assert_eq(status[1], 0);
            for (int k = 0; k < 2; k++)
                check_slot(&g[k], &f, out + k * bytes, name);
            /* the same arithmetic from l3_decode's output */
            uint8_t *conv = malloc(bytes);
            cr_assert_eq(l3gpu_cpu_convert(&g[1].info, g[1].px, 0, &f, conv), L3GPU_OK);
            cr_assert(!memcmp(conv, out + bytes, bytes), "%s: convert != batch", name);
            /* separate outputs, one thread */
            uint8_t *o0 = malloc(bytes), *o1 = malloc(bytes);
            void *ptrs[2] = {o0, o1};
            cr_assert_eq(l3gpu_cpu_decode_batch(in, 2, &f, NULL, 0, ptrs, status, 1), L3GPU_OK);
            cr_assert(!memcmp(o0, out, bytes) && !memcmp(o1, out + bytes, bytes),
                      "%s: out_ptrs != contiguous", name);
            free(o0);
            free(o1);
            free(conv);
            free(out);
        }
        /* native format equals l3_decode byte for byte (except sub-byte gray,
         * which the batch rescales to the full range) */
        l3gpu_format_init(&f);
        f.dtype = MODELS[m].depth == 16 ? L3GPU_U16 : L3GPU_U8;
        if (MODELS[m].depth >= 8 || MODELS[m].color == L3_COLOR_PALETTE) {
            uint8_t *out = malloc(2 * g[0].px_size);
            int status[2];
            cr_assert_eq(l3gpu_cpu_decode_batch(in, 2, &f, out, 2 * g[0].px_size, NULL,
                                                status, 2), L3GPU_OK);
            cr_assert(!memcmp(out, g[0].px, g[0].px_size));
            cr_assert(!memcmp(out + g[0].px_size, g[1].px, g[1].px_size));
            free(out);
        }
        gen_free(&g[0]);
        gen_free(&g[1]);
    }
}

/* Every thread count splits a batch its own way (whole images per thread,
 * the last n mod threads images on all threads, or one image on all):
 * the bytes and statuses are those of one thread, for every batch size,
 * a truncated image among them. */
Test(cpu_batch, thread_counts_write_the_same_bytes)
{
    enum { N = 5 };
    struct gen g[N];
    for (int k = 0; k < N; k++)
        gen_image(&g[k], L3_COLOR_RGB, 8, 130, 70, 700 + k, 32, 0);
    struct l3gpu_input in[N];
    for (int k = 0; k < N; k++)
        in[k] = (struct l3gpu_input){g[k].l3, g[k].l3_size};
    in[2].size = g[2].l3_size / 2; /* truncated */
    for (int fi = 0; fi < 2; fi++) {
        struct l3gpu_format f;
        l3gpu_format_init(&f);
        if (fi) { /* converted (tile sink) rather than written by l3_decode */
            f.layout = L3GPU_CHW;
            f.dtype = L3GPU_F32;
        }
        size_t bytes;
        cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, NULL, &bytes), L3GPU_OK);
        uint8_t *ref = malloc(N * bytes), *out = malloc(N * bytes);
        for (size_t n = 1; n <= N; n++) {
            int sref[N], st[N];
            memset(ref, 0x5A, n * bytes);
            int r1 = l3gpu_cpu_decode_batch(in, n, &f, ref, n * bytes, NULL, sref, 1);
            cr_assert_eq(r1, n > 2 ? L3GPU_ERR_IMAGE : L3GPU_OK);
            for (unsigned threads = 2; threads <= 4; threads++) {
                memset(out, 0xA5, n * bytes);
                int r = l3gpu_cpu_decode_batch(in, n, &f, out, n * bytes, NULL, st, threads);
                cr_assert_eq(r, r1, "%zu images, %u threads", n, threads);
                for (size_t k = 0; k < n; k++)
                    cr_assert_eq(st[k], sref[k], "%zu images, %u threads: image %zu", n,
                                 threads, k);
                cr_assert(!memcmp(out, ref, n * bytes), "%zu images, %u threads (%s): bytes "
                          "differ from one thread's", n, threads, fi ? "CHW f32" : "native");
            }
        }
        free(ref);
        free(out);
    }
    for (int k = 0; k < N; k++)
        gen_free(&g[k]);
}

/* ---------------- broken images in a batch ---------------- */

Test(cpu_batch, corrupt_and_truncated_images)
{
    struct gen g[4];
    for (int k = 0; k < 4; k++)
        gen_image(&g[k], L3_COLOR_RGB, 8, 96, 64, 900 + k, 32, 0);
    /* 1: the last tile's data broken (the header is intact): its first plane
     * mode byte made invalid (0x80: an undefined flag, which FORMAT.md 6.6
     * says a decoder must reject, whatever the tile's content), and a byte
     * of its streams flipped */
    uint8_t *bad = malloc(g[1].l3_size);
    memcpy(bad, g[1].l3, g[1].l3_size);
    struct l3_info bi;
    struct l3_layout bl;
    cr_assert_eq(l3_read_layout(bad, g[1].l3_size, &bi, &bl, NULL), L3_OK);
    cr_assert_geq(bl.tile_count, 2);
    uint64_t last_start = 0; /* end offset of the tile before the last */
    for (int i = 7; i >= 0; i--)
        last_start = last_start << 8 | bad[bl.table_offset + 8 * (bl.tile_count - 2) + i];
    bad[bl.header_size + last_start + 1] = 0x80;
    bad[g[1].l3_size - 3] ^= 0x5a;
    /* 2: truncated */
    size_t trunc = g[2].l3_size - 100;
    /* 3: garbage */
    static const uint8_t junk[64] = "this is not an L3 file at all";
    struct l3gpu_input in[5] = {{g[0].l3, g[0].l3_size}, {bad, g[1].l3_size},
                                {g[2].l3, trunc}, {junk, sizeof junk}, {g[3].l3, g[3].l3_size}};
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    f.layout = L3GPU_CHW;
    f.dtype = L3GPU_F32;
    uint32_t shape[3];
    size_t bytes;
    cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, shape, &bytes), L3GPU_OK);
    uint8_t *out = malloc(5 * bytes);
    memset(out, 0x7f, 5 * bytes);
    int status[5];
    int st = l3gpu_cpu_decode_batch(in, 5, &f, out, 5 * bytes, NULL, status, 4);
    cr_assert_eq(st, L3GPU_ERR_IMAGE);
    cr_assert_eq(status[0], L3_OK);
    cr_assert_eq(status[1], L3_ERR_CORRUPT, "flipped tile bytes: %d", status[1]);
    cr_assert_eq(status[2], L3_ERR_TRUNCATED, "truncated: %d", status[2]);
    cr_assert_eq(status[3], L3_ERR_BAD_MAGIC, "junk: %d", status[3]);
    cr_assert_eq(status[4], L3_OK);
    check_slot(&g[0], &f, out, "image 0 next to broken ones");
    check_slot(&g[3], &f, out + 4 * bytes, "image 4 next to broken ones");
    for (int k = 1; k <= 3; k++)
        for (size_t i = 0; i < bytes; i++)
            cr_assert_eq(out[k * bytes + i], 0, "slot %d not zeroed", k);
    /* a different size in a contiguous batch: that image only */
    struct gen other;
    gen_image(&other, L3_COLOR_RGB, 8, 50, 64, 5, 32, 0);
    struct l3gpu_input mix[2] = {{g[0].l3, g[0].l3_size}, {other.l3, other.l3_size}};
    cr_assert_eq(l3gpu_cpu_decode_batch(mix, 2, &f, out, 2 * bytes, NULL, status, 1),
                 L3GPU_ERR_IMAGE);
    cr_assert_eq(status[0], 0);
    cr_assert_eq(status[1], L3GPU_IMG_SHAPE);
    /* output too small */
    cr_assert_eq(l3gpu_cpu_decode_batch(mix, 2, &f, out, bytes, NULL, status, 1),
                 L3GPU_ERR_OUTPUT_TOO_SMALL);
    gen_free(&other);
    free(out);
    free(bad);
    for (int k = 0; k < 4; k++)
        gen_free(&g[k]);
}

Test(cpu_batch, bad_arguments)
{
    struct l3gpu_format f;
    l3gpu_format_init(&f);
    int status[1];
    uint8_t out[16];
    struct l3gpu_input in[1] = {{out, sizeof out}};
    cr_assert_eq(l3gpu_cpu_decode_batch(in, 1, &f, NULL, 0, NULL, status, 1),
                 L3GPU_ERR_INVALID_ARG);
    cr_assert_eq(l3gpu_cpu_decode_batch(in, 1, &f, out, sizeof out, NULL, NULL, 1),
                 L3GPU_ERR_INVALID_ARG);
    f.dtype = 9;
    cr_assert_eq(l3gpu_cpu_decode_batch(in, 1, &f, out, sizeof out, NULL, status, 1),
                 L3GPU_ERR_INVALID_ARG);
    l3gpu_format_init(&f);
    cr_assert_eq(l3gpu_cpu_decode_batch(in, 0, &f, out, sizeof out, NULL, status, 1), L3GPU_OK);
}

/* ---------------- the GPU plan, run on the host ---------------- */

/* Decodes in[0..n) (n <= 4) into one output with the CPU batch (2 threads)
 * and with the emulated GPU plan: both return the same, give each image the
 * same status and write the same bytes. The CPU statuses go to sc; returns
 * the emulated output (n images of `bytes`; free it). */
static uint8_t *emulated_matches_cpu(const struct l3gpu_input *in, size_t n,
                                     const struct l3gpu_format *f, size_t bytes, int *sc,
                                     const char *name)
{
    uint8_t *cpu = malloc(n * bytes), *emu = malloc(n * bytes);
    memset(cpu, 0x11, n * bytes);
    memset(emu, 0xEE, n * bytes);
    int se[4];
    int r1 = l3gpu_cpu_decode_batch(in, n, f, cpu, n * bytes, NULL, sc, 2);
    int r2 = l3g_emulate_batch(in, n, f, emu, n * bytes, NULL, se);
    cr_assert_eq(r1, r2, "%s", name);
    for (size_t k = 0; k < n; k++)
        cr_assert_eq(se[k], sc[k], "%s: image %zu status emulated %d cpu %d", name, k, se[k],
                     sc[k]);
    cr_assert(!memcmp(cpu, emu, n * bytes), "%s: emulated GPU plan != CPU batch", name);
    free(cpu);
    return emu;
}

/* l3g_emulate_batch runs the CUDA path's descriptors, work-item indexing,
 * scratch layout and per-thread bodies (l3gpu_kernels.h) on the host: it
 * must give exactly the CPU batch's bytes and statuses. */
Test(gpu_plan, emulated_kernels_match_cpu_batch)
{
    for (size_t m = 0; m < NMODELS; m++) {
        struct gen g[2];
        gen_image(&g[0], MODELS[m].color, MODELS[m].depth, 70, 45, 500 + m, 32, MODELS[m].trns);
        gen_image(&g[1], MODELS[m].color, MODELS[m].depth, 70, 45, 600 + m, 32, MODELS[m].trns);
        uint8_t *bad = malloc(g[1].l3_size);
        memcpy(bad, g[1].l3, g[1].l3_size);
        bad[g[1].l3_size - 2] ^= 0x81;
        bad[g[1].l3_size - 30] ^= 0x18;
        struct l3gpu_input in[4] = {{g[0].l3, g[0].l3_size}, {g[1].l3, g[1].l3_size - 7},
                                    {bad, g[1].l3_size}, {g[1].l3, g[1].l3_size}};
        struct l3gpu_format f;
        FOR_EACH_FORMAT(f) {
            char name[160];
            format_name(name, sizeof name, &g[0], &f);
            size_t bytes;
            cr_assert_eq(l3gpu_output_shape(&g[0].info, &f, NULL, &bytes), 0);
            int sc[4], se[4];
            free(emulated_matches_cpu(in, 4, &f, bytes, sc, name));
            cr_assert_eq(sc[1], L3_ERR_TRUNCATED, "%s", name);
            /* separate outputs */
            void *pc[4], *pe[4];
            for (int k = 0; k < 4; k++) {
                pc[k] = calloc(1, bytes);
                pe[k] = malloc(bytes);
                memset(pe[k], 0x3C, bytes);
            }
            l3gpu_cpu_decode_batch(in, 4, &f, NULL, 0, pc, sc, 1);
            l3g_emulate_batch(in, 4, &f, NULL, 0, pe, se);
            for (int k = 0; k < 4; k++) {
                cr_assert_eq(se[k], sc[k], "%s: out_ptrs image %d", name, k);
                cr_assert(!memcmp(pc[k], pe[k], bytes), "%s: out_ptrs image %d differs", name, k);
                free(pc[k]);
                free(pe[k]);
            }
        }
        free(bad);
        gen_free(&g[0]);
        gen_free(&g[1]);
    }
}

/* Planes with the LZ flag in an encoded file, and which predictor kinds. */
static unsigned lz_planes(const struct gen *g, unsigned *kinds_ret)
{
    struct l3_layout lay;
    cr_assert_eq(l3_read_layout(g->l3, g->l3_size, NULL, &lay, NULL), L3_OK);
    const uint8_t *d = g->l3;
    unsigned count = 0;
    for (uint32_t t = 0; t < lay.tile_count; t++) {
        uint64_t b, e;
        l3_tile_span(d + lay.table_offset, t, &b, &e);
        struct l3_tile_header th;
        cr_assert_eq(l3_tile_parse(d + lay.header_size + b, (size_t)(e - b), lay.planes, &th),
                     L3_OK);
        for (unsigned p = 0; p < lay.planes; p++)
            if (th.mode[p] & L3_PLANE_LZ) {
                count++;
                *kinds_ret |= 1u << L3_PLANE_KIND(th.mode[p]);
            }
    }
    return count;
}

/* Files with LZ planes (repeated textures, effort 2, every colour model incl.
 * 16-bit and sub-byte): the emulated GPU plan gives the CPU batch's bytes,
 * and the native output is the source. */
Test(gpu_plan, lz_planes_match_cpu_batch)
{
    unsigned kinds = 0;
    for (size_t m = 0; m < NMODELS; m++) {
        struct gen g;
        gen_pattern(&g, MODELS[m].color, MODELS[m].depth, 70, 45, 700 + m, 32, MODELS[m].trns,
                    1, 2);
        cr_assert_gt(lz_planes(&g, &kinds), 0, "color %u depth %u: no LZ plane",
                     MODELS[m].color, MODELS[m].depth);
        struct l3gpu_input in[2] = {{g.l3, g.l3_size}, {g.l3, g.l3_size - 5}};
        static const int fmts[3][3] = { /* layout, dtype, channels */
            {L3GPU_HWC, L3GPU_U8, 0}, {L3GPU_HWC, L3GPU_U16, 4}, {L3GPU_CHW, L3GPU_F32, 3}};
        for (int k = 0; k < 3; k++) {
            struct l3gpu_format f;
            l3gpu_format_init(&f);
            f.layout = fmts[k][0];
            f.dtype = fmts[k][1];
            f.channels = fmts[k][2];
            char name[160];
            format_name(name, sizeof name, &g, &f);
            size_t bytes;
            cr_assert_eq(l3gpu_output_shape(&g.info, &f, NULL, &bytes), 0);
            int sc[2];
            uint8_t *emu = emulated_matches_cpu(in, 2, &f, bytes, sc, name);
            cr_assert_eq(sc[0], L3_OK, "%s", name);
            cr_assert_eq(sc[1], L3_ERR_TRUNCATED, "%s", name);
            check_slot(&g, &f, emu, name);
            free(emu);
        }
        gen_free(&g);
    }
    cr_assert(kinds & (1u << L3_PLANE_LEFT), "no LEFT LZ plane (kinds %#x)", kinds);
}
