/* make_golden.c — made the pinned-format files of tests/golden/ (run once;
 * kept to show how, and to add cases): for each case a PNG of generated
 * pixels (the tests' own libpng writer), its L3 encoding by l3_transcode_png
 * (what l3fs serves), and a MANIFEST line with the SHA-256 of the PNG's
 * pixels as the tests' libpng reader decodes them (golden.h) — computed
 * without the L3 decoder. test_golden.c decodes the .l3 files on every run
 * and compares with these digests.
 *
 *   make_golden DIR > DIR/MANIFEST
 *
 * Never regenerate the files that exist (they pin what earlier encoders
 * wrote); add new names instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "helpers.h"
#include "l3.h"
#include "l3_tile.h"
#include "png_ref.h"
#include "tc_file.h"

enum content {
    HALVES,    /* left half repeats (th_lz_image), right half TH_MIXED */
    ALL_MODES, /* th_all_modes_image (RGB 8, 128x64) */
    KIND_MED,  /* th_kind_image (gray 8, 64x32) */
    KIND_GRAD,
    KIND_LEFT2,
    EDGES,     /* gray 8: 8x8 blocks of two levels, noise in every other column of blocks */
};

struct gcase {
    const char *name;
    unsigned color, depth;
    uint32_t w, h;
    enum content content;
    int effort;
    uint32_t tile;
    int key;      /* gray/RGB: a tRNS key colour */
    int no_alpha; /* palette: no tRNS chunk */
};

static const struct gcase cases[] = {
    {"gray1", L3_COLOR_GRAY, 1, 50, 30, HALVES, 0, 16, 0, 0},
    {"gray2", L3_COLOR_GRAY, 2, 50, 30, HALVES, 0, 16, 0, 0},
    {"gray4", L3_COLOR_GRAY, 4, 50, 30, HALVES, 0, 16, 0, 0},
    {"gray8", L3_COLOR_GRAY, 8, 50, 30, HALVES, 0, 16, 0, 0},
    {"gray16", L3_COLOR_GRAY, 16, 50, 30, HALVES, 0, 16, 0, 0},
    {"graya8", L3_COLOR_GRAY_ALPHA, 8, 50, 30, HALVES, 0, 16, 0, 0},
    {"graya16", L3_COLOR_GRAY_ALPHA, 16, 50, 30, HALVES, 0, 16, 0, 0},
    {"rgb8", L3_COLOR_RGB, 8, 50, 30, HALVES, 0, 16, 0, 0},
    {"rgb16", L3_COLOR_RGB, 16, 50, 30, HALVES, 0, 16, 0, 0},
    {"rgba8", L3_COLOR_RGBA, 8, 50, 30, HALVES, 0, 16, 0, 0},
    {"rgba16", L3_COLOR_RGBA, 16, 50, 30, HALVES, 0, 16, 0, 0},
    {"pal1", L3_COLOR_PALETTE, 1, 50, 30, HALVES, 0, 16, 0, 0},
    {"pal2", L3_COLOR_PALETTE, 2, 50, 30, HALVES, 0, 16, 0, 0},
    {"pal4", L3_COLOR_PALETTE, 4, 50, 30, HALVES, 0, 16, 0, 0},
    {"pal8", L3_COLOR_PALETTE, 8, 50, 30, HALVES, 0, 16, 0, 0},
    {"pal8-opaque", L3_COLOR_PALETTE, 8, 40, 24, HALVES, 2, 16, 0, 1},
    {"gray8-key", L3_COLOR_GRAY, 8, 40, 24, HALVES, -1, 16, 1, 0},
    {"rgb16-key", L3_COLOR_RGB, 16, 40, 24, HALVES, 2, 16, 1, 0},
    {"modes-rgb8", L3_COLOR_RGB, 8, 128, 64, ALL_MODES, -1, 32, 0, 0},
    {"lz-med", L3_COLOR_GRAY, 8, 64, 32, KIND_MED, 2, 32, 0, 0},
    {"lz-grad", L3_COLOR_GRAY, 8, 64, 32, KIND_GRAD, 2, 32, 0, 0},
    {"lz-left2", L3_COLOR_GRAY, 8, 64, 32, KIND_LEFT2, 2, 32, 0, 0},
    {"med-gray8", L3_COLOR_GRAY, 8, 64, 32, KIND_MED, -1, 32, 0, 0},
    {"edges-gray8", L3_COLOR_GRAY, 8, 64, 32, EDGES, -1, 32, 0, 0},
    {"grad-gray8", L3_COLOR_GRAY, 8, 64, 32, KIND_GRAD, -1, 16, 0, 0},
    {"left2-gray8", L3_COLOR_GRAY, 8, 64, 32, KIND_LEFT2, -1, 16, 0, 0},
};

static const char *const color_names[] = {"gray", "gray_alpha", "rgb", "rgba", "palette"};
static const int png_ctype[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA,
                                PNG_COLOR_TYPE_PALETTE};

static void die(const char *what, const char *name)
{
    fprintf(stderr, "make_golden: %s: %s\n", name, what);
    exit(1);
}

/* The case's pixels (tight rows, host order) and image description. */
static void *pixels(const struct gcase *k, struct l3_info *info)
{
    th_info(info, k->color, k->depth, k->w, k->h);
    if (k->no_alpha) {
        info->palette_alpha_len = 0;
        for (unsigned i = 0; i < info->palette_len; i++)
            info->palette[i][3] = 255;
    }
    if (k->key) {
        const uint16_t maxv = (uint16_t)((1u << k->depth) - 1);
        info->has_trns_key = 1;
        info->trns_key[0] = maxv / 3;
        info->trns_key[1] = maxv / 5;
        info->trns_key[2] = maxv;
    }
    switch (k->content) {
    case ALL_MODES: return th_all_modes_image();
    case KIND_MED:
    case KIND_GRAD:
    case KIND_LEFT2: {
        uint8_t *px = malloc(64 * 32);
        th_kind_image((int)(k->content - KIND_MED), px);
        return px;
    }
    case EDGES: {
        uint8_t *px = malloc((size_t)k->w * k->h);
        uint64_t st = 17;
        for (uint32_t y = 0; y < k->h; y++)
            for (uint32_t x = 0; x < k->w; x++) {
                unsigned v = ((x / 8 + y / 8) & 1) ? 200 : 50;
                if ((x / 8) & 1)
                    v += (unsigned)(tc_splitmix64(&st) % 24);
                px[(size_t)y * k->w + x] = (uint8_t)v;
            }
        return px;
    }
    case HALVES: break;
    }
    const size_t sb = k->depth > 8 ? 2 : 1, row = (size_t)k->w * info->channels * sb;
    uint8_t *rep = th_lz_image(info, 7 + k->depth + 5 * k->color);
    uint8_t *mix = th_image(info, TH_MIXED, 3 + k->depth, NULL);
    for (uint32_t y = 0; y < k->h; y++)
        memcpy(rep + y * row + row / 2, mix + y * row + row / 2, row - row / 2);
    free(mix);
    return rep;
}

static void png_desc(const struct l3_info *info, struct gen_desc *g)
{
    memset(g, 0, sizeof *g);
    g->w = info->width;
    g->h = info->height;
    g->ctype = png_ctype[info->color];
    g->depth = info->bit_depth;
    if (info->color == L3_COLOR_PALETTE) {
        g->npal = info->palette_len;
        for (int i = 0; i < g->npal; i++) {
            g->pal[i].red = info->palette[i][0];
            g->pal[i].green = info->palette[i][1];
            g->pal[i].blue = info->palette[i][2];
            g->trans[i] = info->palette[i][3];
        }
        g->ntrans = info->palette_alpha_len;
    }
    if (info->has_trns_key) {
        g->has_key = 1;
        g->key.gray = info->trns_key[0];
        g->key.red = info->trns_key[0];
        g->key.green = info->trns_key[1];
        g->key.blue = info->trns_key[2];
    }
}

/* The plane modes and tile flags of an L3 file, as text. */
static void modes_text(const uint8_t *f, size_t n, char *out, size_t cap)
{
    unsigned counts[256] = {0}, xform = 0;
    if (th_plane_modes(f, n, counts) != 0)
        die("tile headers do not parse", "modes");
    struct l3_layout lay;
    l3_read_layout(f, n, NULL, &lay, NULL);
    for (uint32_t t = 0; t < lay.tile_count; t++) {
        uint64_t b, e;
        l3_tile_span(f + lay.table_offset, t, &b, &e);
        xform |= f[lay.header_size + b];
    }
    static const char *kind[] = {"CONST", "RAW", "MED", "GRAD", "LEFT2", "LEFT"};
    size_t o = (size_t)snprintf(out, cap, "modes");
    for (unsigned m = 0; m < 256 && o < cap; m++)
        if (counts[m])
            o += (size_t)snprintf(out + o, cap - o, " %s%s%s:%u", kind[L3_PLANE_KIND(m)],
                                  m & L3_PLANE_SHORT ? "|SHORT" : "", m & L3_PLANE_LZ ? "|LZ" : "",
                                  counts[m]);
    if (o < cap && (xform & L3_TILE_XFORM_G))
        snprintf(out + o, cap - o, " XFORM_G");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_golden DIR > DIR/MANIFEST\n");
        return 2;
    }
    printf("# Pinned L3 files (tests/golden/make_golden.c; test: tests/codec/test_golden.c).\n"
           "# NAME.l3 = l3_transcode_png(NAME.png); SHA256 = SHA-256 of NAME.png's samples as\n"
           "# libpng decodes them, rows tight, 1 byte per sample up to 8 bits (unpacked,\n"
           "# palette indices), 2 bytes little-endian per 16-bit sample.\n"
           "# NAME WIDTH HEIGHT COLOR DEPTH SHA256 (then what the file holds)\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct gcase *k = &cases[i];
        struct l3_info info;
        void *px = pixels(k, &info);
        struct gen_desc g;
        png_desc(&info, &g);
        size_t pn;
        unsigned char *png = ref_write(&g, px, &pn);
        if (!png)
            die("libpng could not write the PNG", k->name);
        struct ref_img ref;
        if (ref_decode(png, pn, &ref) != 0)
            die("libpng could not read its PNG back", k->name);
        char sha[65];
        golden_digest(ref.px, ref.size, k->depth, sha);
        struct l3_encode_options eo = {
            .effort = k->effort, .tile_width = k->tile, .tile_height = k->tile};
        void *l3 = NULL;
        size_t ln = 0;
        if (l3_transcode_png(png, pn, &eo, &l3, &ln) != L3_OK)
            die("l3_transcode_png failed", k->name);
        /* a file that does not decode to the PNG's samples is no golden file */
        void *dec = NULL;
        size_t dn = 0;
        if (l3_decode_alloc(l3, ln, NULL, &dec, &dn, NULL) != L3_OK || dn != ref.size ||
            memcmp(dec, ref.px, dn) != 0)
            die("the L3 file does not decode to the PNG's samples", k->name);
        char path[4096], modes[512];
        snprintf(path, sizeof path, "%s/%s.png", argv[1], k->name);
        if (tc_write_file(path, png, pn) != 0)
            die("cannot write the PNG", path);
        snprintf(path, sizeof path, "%s/%s.l3", argv[1], k->name);
        if (tc_write_file(path, l3, ln) != 0)
            die("cannot write the L3 file", path);
        modes_text(l3, ln, modes, sizeof modes);
        printf("%s %u %u %s %u %s  %zu bytes (PNG %zu), effort %d, tiles %u, %s%s%s\n", k->name,
               k->w, k->h, color_names[k->color], k->depth, sha, ln, pn, k->effort, k->tile,
               modes, info.has_trns_key ? " tRNS-key" : "",
               info.palette_alpha_len ? " palette-alpha" : "");
        ref_free(&ref);
        l3_free(dec);
        l3_free(l3);
        free(png);
        free(px);
    }
    return 0;
}
