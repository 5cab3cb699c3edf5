/* test_golden.c — the pinned files of tests/golden/ (made once by
 * tests/golden/make_golden.c): every .l3 there must decode, with the SIMD
 * decoder and with the reference decoder, on 1 and 2 threads, to the pixels
 * whose SHA-256 its MANIFEST line holds; that digest was computed from the
 * source PNG by the tests' own libpng reader (png_ref.c) and nettle's
 * SHA-256 (golden.c), not by the L3 decoder, and is checked against the PNG
 * again here. The set must keep covering every colour model, bit depth and
 * plane mode the encoder writes. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "helpers.h"
#include "l3.h"
#include "l3_tile.h"
#include "png_ref.h"
#include "tc_file.h"

static const char *const color_names[] = {"gray", "gray_alpha", "rgb", "rgba", "palette"};
static const int png_ctype[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA,
                                PNG_COLOR_TYPE_PALETTE};

/* What the whole set holds. */
struct coverage {
    unsigned model_depth[5][17];
    unsigned modes[256];
    unsigned xform, trns_key[5], palette_alpha, palette_opaque, lz_16bit, lz_subbyte;
};

static void golden_dir(char *buf, size_t cap)
{
    const char *root = getenv("L3_SOURCE_ROOT");
    snprintf(buf, cap, "%s/tests/golden", root ? root : ".");
}

static int color_of(const char *name)
{
    for (int c = 0; c < 5; c++)
        if (strcmp(name, color_names[c]) == 0)
            return c;
    return -1;
}

/* The header fields that are not pixels agree with the PNG's chunks. */
static void check_chunks(const char *name, const struct l3_info *info, const struct ref_img *r)
{
    cr_assert_eq(r->ctype, png_ctype[info->color], "%s: colour type", name);
    cr_assert_eq(r->depth, info->bit_depth, "%s: bit depth", name);
    if (info->color == L3_COLOR_PALETTE) {
        cr_assert_eq(r->npal, info->palette_len, "%s: palette length", name);
        cr_assert_eq(r->ntrans, info->palette_alpha_len, "%s: palette alpha entries", name);
        for (int i = 0; i < r->npal; i++) {
            const uint8_t *p = info->palette[i];
            cr_assert(p[0] == r->pal[i].red && p[1] == r->pal[i].green &&
                          p[2] == r->pal[i].blue &&
                          p[3] == (i < r->ntrans ? r->trans[i] : 255),
                      "%s: palette entry %d", name, i);
        }
    }
    cr_assert_eq(info->has_trns_key, r->has_key, "%s: tRNS key present", name);
    if (r->has_key && info->color == L3_COLOR_GRAY)
        cr_assert_eq(info->trns_key[0], r->key.gray, "%s: tRNS gray key", name);
    if (r->has_key && info->color == L3_COLOR_RGB)
        cr_assert(info->trns_key[0] == r->key.red && info->trns_key[1] == r->key.green &&
                      info->trns_key[2] == r->key.blue,
                  "%s: tRNS colour key", name);
}

/* Plane modes and tile flags of the file into the coverage. */
static void tally(const char *name, const uint8_t *f, size_t n, const struct l3_info *info,
                  struct coverage *cov)
{
    unsigned counts[256] = {0};
    cr_assert_eq(th_plane_modes(f, n, counts), 0, "%s: tile headers", name);
    struct l3_layout lay;
    cr_assert_eq(l3_read_layout(f, n, NULL, &lay, NULL), L3_OK, "%s", name);
    for (uint32_t t = 0; t < lay.tile_count; t++) {
        uint64_t b, e;
        l3_tile_span(f + lay.table_offset, t, &b, &e);
        cov->xform |= f[lay.header_size + b] & L3_TILE_XFORM_G;
    }
    unsigned lz = 0;
    for (unsigned m = 0; m < 256; m++) {
        cov->modes[m] += counts[m];
        if (m & L3_PLANE_LZ)
            lz += counts[m];
    }
    if (lz && info->bit_depth == 16)
        cov->lz_16bit++;
    if (lz && info->bit_depth < 8)
        cov->lz_subbyte++;
    cov->model_depth[info->color][info->bit_depth]++;
    if (info->has_trns_key)
        cov->trns_key[info->color]++;
    if (info->color == L3_COLOR_PALETTE) {
        if (info->palette_alpha_len)
            cov->palette_alpha++;
        else
            cov->palette_opaque++;
    }
}

/* One MANIFEST line's files. */
static void check_file(const char *dir, const char *name, uint32_t w, uint32_t h, int color,
                       unsigned depth, const char *sha, struct coverage *cov)
{
    char path[4400];
    size_t n, pn;
    snprintf(path, sizeof path, "%s/%s.l3", dir, name);
    uint8_t *f = tc_slurp(path, &n);
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    struct l3_info info;
    cr_assert_eq(l3_read_info(f, n, &info, NULL), L3_OK, "%s", name);
    cr_assert(info.width == w && info.height == h && info.color == color &&
                  info.bit_depth == depth,
              "%s: header says %ux%u colour %u depth %u", name, info.width, info.height,
              info.color, info.bit_depth);
    cr_assert_eq(l3_verify(f, n), L3_OK, "%s: checksums", name);
    static const struct {
        uint32_t flags;
        unsigned threads;
    } ways[] = {{0, 1}, {0, 2}, {L3_DECODE_SCALAR, 1}, {L3_DECODE_SCALAR | L3_DECODE_VERIFY, 2}};
    for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
        struct l3_decode_options o = {.flags = ways[i].flags, .threads = ways[i].threads};
        void *px = NULL;
        size_t pxn = 0;
        cr_assert_eq(l3_decode_alloc(f, n, &o, &px, &pxn, NULL), L3_OK, "%s: decode", name);
        char got[65];
        golden_digest(px, pxn, depth, got);
        cr_assert_str_eq(got, sha, "%s (flags %#x, %u threads): decoded pixels changed", name,
                         ways[i].flags, ways[i].threads);
        l3_free(px);
    }
    /* the pin itself: the source PNG's pixels, decoded without the L3 code */
    snprintf(path, sizeof path, "%s/%s.png", dir, name);
    unsigned char *png = tc_slurp(path, &pn);
    cr_assert_not_null(png, "%s: %s", path, strerror(errno));
    struct ref_img ref;
    cr_assert_eq(ref_decode(png, pn, &ref), 0, "%s: libpng refuses the PNG", name);
    cr_assert(ref.w == w && ref.h == h, "%s: PNG is %ux%u", name, ref.w, ref.h);
    char want[65];
    golden_digest(ref.px, ref.size, depth, want);
    cr_assert_str_eq(want, sha, "%s: the MANIFEST digest is not the PNG's pixels", name);
    check_chunks(name, &info, &ref);
    tally(name, f, n, &info, cov);
    ref_free(&ref);
    free(png);
    free(f);
}

Test(golden, files_decode_to_their_pinned_pixels)
{
    char dir[4096], path[4200];
    golden_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    FILE *m = fopen(path, "r");
    cr_assert_not_null(m, "%s: %s", path, strerror(errno));
    struct coverage cov;
    memset(&cov, 0, sizeof cov);
    char line[1024];
    unsigned files = 0;
    while (fgets(line, sizeof line, m)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char name[128], color[32], sha[80];
        unsigned w, h, depth;
        cr_assert_eq(sscanf(line, "%127s %u %u %31s %u %79s", name, &w, &h, color, &depth, sha), 6,
                     "MANIFEST line: %s", line);
        const int c = color_of(color);
        cr_assert(c >= 0 && strlen(sha) == 64, "MANIFEST line: %s", line);
        check_file(dir, name, w, h, c, depth, sha, &cov);
        files++;
    }
    fclose(m);
    cr_assert_geq(files, 20, "MANIFEST lists %u files", files);

    /* every colour model at every depth PNG allows */
    static const unsigned depths[5][5] = {{1, 2, 4, 8, 16}, {8, 16}, {8, 16}, {8, 16}, {1, 2, 4, 8}};
    for (int c = 0; c < 5; c++)
        for (int i = 0; i < 5 && depths[c][i]; i++)
            cr_assert_gt(cov.model_depth[c][depths[c][i]], 0, "no %s file of depth %u",
                         color_names[c], depths[c][i]);
    /* every plane mode the encoder writes */
    static const struct {
        unsigned mode;
        const char *what;
    } modes[] = {
        {L3_PLANE_CONST, "CONST"},
        {L3_PLANE_RAW, "RAW"},
        {L3_PLANE_MED, "MED"},
        {L3_PLANE_GRAD, "GRAD"},
        {L3_PLANE_LEFT2, "LEFT2"},
        {L3_PLANE_MED | L3_PLANE_SHORT, "MED|SHORT"},
        {L3_PLANE_GRAD | L3_PLANE_SHORT, "GRAD|SHORT"},
        {L3_PLANE_LEFT2 | L3_PLANE_SHORT, "LEFT2|SHORT"},
        {L3_PLANE_LEFT | L3_PLANE_LZ, "LEFT|LZ"},
        {L3_PLANE_MED | L3_PLANE_LZ, "MED|LZ"},
        {L3_PLANE_GRAD | L3_PLANE_LZ, "GRAD|LZ"},
        {L3_PLANE_LEFT2 | L3_PLANE_LZ, "LEFT2|LZ"},
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        cr_assert_gt(cov.modes[modes[i].mode], 0, "no %s plane in the golden files", modes[i].what);
    cr_assert(cov.xform, "no tile with the colour transform");
    cr_assert(cov.trns_key[L3_COLOR_GRAY] && cov.trns_key[L3_COLOR_RGB],
              "no gray and RGB files with a tRNS key");
    cr_assert(cov.palette_alpha && cov.palette_opaque, "palette files with and without alpha");
    cr_assert(cov.lz_16bit && cov.lz_subbyte, "LZ planes at 16 bits and below 8 bits");
}
