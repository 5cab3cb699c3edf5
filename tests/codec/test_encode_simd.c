/* test_encode_simd.c — the encoder's AVX2 kernels (codec/enc_simd.c) against
 * its portable reference code: every image, at every effort, must encode to
 * the same bytes with both (l3_enc_use_portable), and decode back to its
 * samples. The images are made to reach each kernel and its edges: widths
 * below, at and off multiples of 16, every predictor (smooth, noisy and
 * dithered content), escaped codes (spikes on flat ground), groups of 8,
 * LZ planes (repeats), constant planes, 1..16-bit depths. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "enc_lz.h"
#include "enc_predict.h"
#include "enc_rice.h"
#include "enc_simd.h"
#include "helpers.h"
#include "l3.h"
#include "l3_internal.h"
#include "tc_file.h"

/* Encodes px with the kernels (portable = 0) or the reference (1). */
static void *encode_with(const struct l3_info *info, const void *px,
                         const struct l3_encode_options *eo, int portable, size_t *n)
{
    struct l3_enc *x = NULL;
    cr_assert_eq(l3_enc_begin(info, px, 0, eo, &x), L3_OK);
    if (portable)
        l3_enc_use_portable(x);
    const uint64_t tiles = l3_enc_tiles(x);
    for (uint64_t t = 0; t < tiles; t++)
        cr_assert_eq(l3_enc_tile(x, 0, t), L3_OK);
    void *out = NULL;
    cr_assert_eq(l3_enc_finish(x, &out, n), L3_OK);
    l3_enc_free(x);
    return out;
}

/* Both encodings of px must be identical and decode to px. */
static void check_same(const struct l3_info *info, const void *px, int effort, uint32_t tile,
                       const char *what)
{
    struct l3_encode_options eo;
    memset(&eo, 0, sizeof eo);
    eo.effort = effort;
    eo.tile_width = eo.tile_height = tile;
    eo.threads = 1;
    size_t ns = 0, np = 0;
    void *s = encode_with(info, px, &eo, 0, &ns);
    void *p = encode_with(info, px, &eo, 1, &np);
    cr_assert(ns == np && memcmp(s, p, ns) == 0,
              "%s (%ux%u color %u depth %u, effort %d, tile %u): kernels %zu bytes, "
              "reference %zu bytes, not the same",
              what, info->width, info->height, info->color, info->bit_depth, effort, tile, ns,
              np);
    size_t raw = l3_decoded_size(info, 0);
    uint8_t *back = malloc(raw);
    cr_assert_eq(l3_decode(s, ns, back, raw, 0, NULL), L3_OK, "%s", what);
    cr_assert(memcmp(back, px, raw) == 0, "%s: round trip differs", what);
    free(back);
    l3_free(s);
    l3_free(p);
}

enum pat { P_SMOOTH, P_NOISE, P_DITHER, P_SPIKES, P_BURST, P_REPEAT, P_FLAT_G, NPAT };
static const char *const pat_name[NPAT] = {"smooth", "noise",   "dither", "spikes",
                                           "bursts", "repeats", "flat G"};

/* An 8-bit (or 16-bit: depth) image of pattern pat; sample values fit depth. */
static void *make(const struct l3_info *info, enum pat pat, uint64_t seed)
{
    const uint32_t w = info->width, h = info->height, ch = info->channels;
    const uint32_t maxv = info->color == L3_COLOR_PALETTE ? info->palette_len - 1u
                                                          : (1u << info->bit_depth) - 1;
    const size_t sb = info->bit_depth > 8 ? 2 : 1;
    uint8_t *px = malloc((size_t)w * h * ch * sb + 1);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t c = 0; c < ch; c++) {
                uint64_t r = tc_splitmix64(&s);
                uint32_t v;
                switch (pat) {
                case P_SMOOTH: v = (x * 3 + y * 5 + c * 40 + (uint32_t)(r % 3)); break;
                case P_NOISE: v = (uint32_t)r; break;
                case P_DITHER: /* period-2 patterns: LEFT2 wins */
                    v = ((x + y) & 1 ? 200u : 40u) + x / 9 + c * 7 + (uint32_t)(r % 2);
                    break;
                case P_SPIKES: /* flat with rare outliers: escaped codes */
                    v = r % 61 == 0 ? (uint32_t)(r >> 20) : 90u + c;
                    break;
                case P_BURST: /* short runs of +-a on flat ground: codes at and
                                 just below the escape, several long codes
                                 in a row */
                    if (x % 24 < 4 && (y * 7 + x / 24) % 3 == 0) {
                        uint32_t a = 4 + (uint32_t)((y * 31 + x / 24 * 17) % 37);
                        v = x & 1 ? 100 + a : 100 - a / 2;
                    } else {
                        v = 100;
                    }
                    break;
                case P_REPEAT: { /* a noisy block repeated: LZ copies */
                    uint64_t t = ((uint64_t)(x % 37) * 131 + (y % 11) * 7 + c) * 0x2545F4914F6CDD1Dull;
                    v = (uint32_t)(t >> 40);
                    break;
                }
                default: /* constant G, smooth R and B */
                    v = c == 1 ? 77u : x + y + (uint32_t)(r % 5);
                    break;
                }
                v %= maxv + 1;
                if (sb == 1)
                    px[((size_t)y * w + x) * ch + c] = (uint8_t)v;
                else
                    memcpy(px + (((size_t)y * w + x) * ch + c) * 2, &(uint16_t){(uint16_t)v}, 2);
            }
    return px;
}

static const int efforts[] = {-1, 0, 2};

static void require_kernels(void)
{
    if (!l3_enc_simd_available())
        cr_skip_test("this CPU (or build) has no AVX2: the encoder runs only its reference code");
}

Test(encode_simd, rgb_every_pattern_width_and_effort)
{
    require_kernels();
    static const uint32_t dims[][2] = {{1, 1},   {5, 3},   {17, 9},   {18, 18}, {31, 33},
                                       {32, 32}, {64, 64}, {100, 70}, {130, 40}, {200, 129}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (unsigned p = 0; p < NPAT; p++)
            for (size_t e = 0; e < 3; e++) {
                struct l3_info info;
                th_info(&info, L3_COLOR_RGB, 8, dims[d][0], dims[d][1]);
                void *px = make(&info, (enum pat)p, d * 16 + p);
                check_same(&info, px, efforts[e], 64, pat_name[p]);
                free(px);
            }
}

Test(encode_simd, tile_sizes)
{
    require_kernels();
    static const uint32_t tiles[] = {16, 24, 48, 128};
    for (size_t t = 0; t < 4; t++)
        for (unsigned p = 0; p < NPAT; p++) {
            struct l3_info info;
            th_info(&info, L3_COLOR_RGB, 8, 300, 140);
            void *px = make(&info, (enum pat)p, 100 + t * 8 + p);
            check_same(&info, px, 0, tiles[t], pat_name[p]);
            free(px);
        }
}

Test(encode_simd, every_color_model_and_depth)
{
    require_kernels();
    static const unsigned colors[] = {L3_COLOR_GRAY, L3_COLOR_GRAY_ALPHA, L3_COLOR_RGB,
                                      L3_COLOR_RGBA, L3_COLOR_PALETTE};
    static const unsigned depths[5][5] = {
        {1, 2, 4, 8, 16}, {8, 16}, {8, 16}, {8, 16}, {1, 2, 4, 8}};
    static const unsigned nd[5] = {5, 2, 2, 2, 4};
    for (unsigned ci = 0; ci < 5; ci++)
        for (unsigned di = 0; di < nd[ci]; di++)
            for (unsigned p = 0; p < NPAT; p++)
                for (size_t e = 0; e < 3; e++) {
                    struct l3_info info;
                    th_info(&info, colors[ci], depths[ci][di], 150, 90);
                    void *px = make(&info, (enum pat)p, ci * 100 + di * 10 + p);
                    check_same(&info, px, efforts[e], 64, pat_name[p]);
                    free(px);
                }
}

Test(encode_simd, sample_images)
{
    require_kernels();
    static const char *const files[] = {
        "leftImg8bit/train/meadow/meadow_000000_000019_leftImg8bit.png",
        "leftImg8bit/val/storm/storm_000000_000019_leftImg8bit.png",
        "gtFine/train/meadow/meadow_000000_000019_gtFine_color.png",
        "art/earth_rgba.png",
        "art/depth16.png",
    };
    const char *root = getenv("L3_SOURCE_ROOT");
    cr_assert_not_null(root, "L3_SOURCE_ROOT is set by meson test");
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/data/sample/%s", root, files[i]);
        size_t pn;
        uint8_t *png = tc_slurp(path, &pn);
        cr_assert_not_null(png, "%s", path);
        struct l3_info info;
        void *px = NULL;
        cr_assert_eq(l3_png_decode(png, pn, NULL, &info, &px, NULL), L3_OK, "%s", path);
        for (size_t e = 0; e < 3; e++)
            check_same(&info, px, efforts[e], 64, files[i]);
        free(px);
        free(png);
    }
}

/* The kernels one by one against their references on random inputs, where
 * the images above rarely go: any Rice parameter for any residuals (runs of
 * escapes, codes of every length), every depth up to 8. */
Test(encode_simd, kernels_on_random_input)
{
    require_kernels();
    enum { W = 96, H = 12, N = W * H };
    static uint16_t src[N], z1[N], z2[N], zrow[W];
    static uint8_t syms[N], o1[4 * N + 64], o2[4 * N + 64];
    static uint32_t c1[N + 1], c2[N + 1];
    uint64_t s = 42;
    for (unsigned trial = 0; trial < 400; trial++) {
        const unsigned depth = 1 + trial % 8, scale = trial / 8 % 4;
        const uint32_t w = trial % 3 == 0 ? W : 18 + trial % 70, h = 1 + trial % H;
        const uint32_t mask = (1u << depth) - 1;
        for (uint32_t i = 0; i < w * h; i++) {
            uint64_t r = tc_splitmix64(&s);
            /* scale 0: noise, 1..3: mostly small with outliers */
            src[i] = (uint16_t)((scale == 0 ? r : (r % 11 ? (r >> 8) % (1u << scale) : r >> 20)) &
                                mask);
        }
        for (unsigned pred = L3_PLANE_MED; pred <= L3_PLANE_LEFT; pred++) {
            l3_plane_residuals(src, w, h, depth, z1, pred);
            l3_simd_plane_residuals(src, w, h, depth, z2, pred);
            cr_assert(memcmp(z1, z2, 2u * w * h) == 0, "residuals, pred %u depth %u w %u", pred,
                      depth, w);
            if (h > 1 && w % 16 == 0)
                cr_assert_eq(l3_simd_estimate(src, w, h, depth, pred, zrow, 2),
                             l3_plane_estimate(src, w, h, depth, pred, zrow, 2),
                             "estimate, pred %u depth %u", pred, depth);
        }
        /* residuals of any size with any parameters: every code length */
        for (uint32_t i = 0; i < w * h; i++)
            z1[i] = (uint16_t)(tc_splitmix64(&s) % (2u * mask + 1 > mask ? mask + 1 : 1));
        for (uint32_t gs = 8; gs <= 16; gs += 8) {
            const size_t groups = (size_t)h * ((w + gs - 1) / gs);
            for (size_t g = 0; g < groups; g++)
                syms[g] = (uint8_t)(tc_splitmix64(&s) % (depth + 2));
            uint8_t *e1 = l3_plane_write_rice(z1, syms, w, h, depth, o1, gs);
            uint8_t *e2 = l3_simd_write_rice(z1, syms, w, h, depth, o2, gs);
            cr_assert(e1 - o1 == e2 - o2 && memcmp(o1, o2, (size_t)(e1 - o1)) == 0,
                      "Rice writer, groups of %u, depth %u w %u", gs, depth, w);
        }
        /* LZ literal costs, against enc_lz.h's per-group rule */
        c1[0] = 0;
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x0 = 0; x0 < w; x0 += L3_GROUP) {
                uint32_t *cr = c1 + (size_t)y * w + 1 + x0;
                uint32_t g = w - x0 < L3_GROUP ? w - x0 : L3_GROUP;
                lz_cost_group(cr, z1 + (size_t)y * w + x0, g, cr[-1], depth);
            }
        l3_simd_lz_costs(c2, z1, w, 0, h, depth);
        cr_assert(memcmp(c1, c2, 4u * (w * h + 1)) == 0, "LZ costs, depth %u w %u", depth, w);
    }
}
