/* test_png.c — the PNG side of libl3 against libpng's own decode.
 *
 * The reference for every comparison is png_read_png() (libpng's high-level
 * reader, a separate code path from codec/png.c) with only the transforms
 * that keep sample values: PNG_TRANSFORM_PACKING (sub-byte samples to one
 * byte each) and, on little-endian hosts, PNG_TRANSFORM_SWAP_ENDIAN.
 *
 * For each image: l3_png_decode == reference; l3_png_encode -> reference
 * decode == reference; PNG -> L3 -> pixels (1 and 2 threads, padded stride)
 * == reference, with the palette/tRNS description kept.
 */
#include <criterion/criterion.h>
#include "tc_timeout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "l3.h"
#include "png_ref.h"
#include "tc_file.h"
#include "tc_rand.h"

#if defined(__SANITIZE_ADDRESS__)
#define PT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PT_ASAN 1
#endif
#endif
#ifndef PT_ASAN
#define PT_ASAN 0
#endif

/* ------------------------------------------------------------ helpers */


static const char *pt_corpus_dir(void)
{
    const char *c = getenv("L3_CORPUS");
    return c && *c ? c : "/var/cache/l3fs-corpus";
}

/* Sorted list of *.png in dir; NULL when the directory does not exist. */
static char **pt_list_png(const char *dir, size_t *n_ret)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return NULL;
    char **v = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".png") != 0)
            continue;
        v = realloc(v, sizeof *v * (n + 1));
        cr_assert_not_null(v);
        size_t pl = strlen(dir) + l + 2;
        v[n] = malloc(pl);
        snprintf(v[n], pl, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
            char *t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    *n_ret = n;
    return v;
}

static void pt_free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Reference decoder and writer: png_ref.h. The writer must work. */
static unsigned char *gen_write(const struct gen_desc *g, const unsigned char *px, size_t *n_ret)
{
    unsigned char *d = ref_write(g, px, n_ret);
    cr_assert_not_null(d, "test PNG writer failed");
    return d;
}

/* PNG's CRC-32 (ISO 3309), to forge chunks with valid checksums. */
static uint32_t pt_crc32(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

static uint64_t gen_state = 1; /* gen_pixels' noise, one stream for the whole run */

static int channels_of(int ctype)
{
    switch (ctype) {
    case PNG_COLOR_TYPE_GRAY: return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
    case PNG_COLOR_TYPE_RGB: return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA: return 4;
    default: return 1;
    }
}

/* Pixels: a mix of smooth gradients, flat runs and noise, within range. */
static unsigned char *gen_pixels(const struct gen_desc *g, size_t *size_ret)
{
    int ch = channels_of(g->ctype);
    int sb = g->depth == 16 ? 2 : 1;
    size_t n = (size_t)g->w * g->h * ch;
    unsigned char *px = malloc(n * sb);
    unsigned maxv = g->ctype == PNG_COLOR_TYPE_PALETTE ? (unsigned)g->npal - 1
                                                       : (1u << g->depth) - 1u;
    for (uint32_t y = 0; y < g->h; y++)
        for (uint32_t x = 0; x < g->w; x++)
            for (int c = 0; c < ch; c++) {
                unsigned v;
                uint32_t region = (x / 13 + y / 7) % 3;
                if (region == 0)
                    v = (x * 37 + y * 11 + (unsigned)c * 5000) % (maxv + 1);
                else if (region == 1)
                    v = (unsigned)c % (maxv + 1);
                else
                    v = (unsigned)(tc_splitmix64(&gen_state) % (maxv + 1));
                size_t i = ((size_t)y * g->w + x) * ch + c;
                if (sb == 2) {
                    uint16_t s = (uint16_t)v;
                    memcpy(px + 2 * i, &s, 2);
                } else {
                    px[i] = (unsigned char)v;
                }
            }
    *size_ret = n * sb;
    return px;
}

/* ------------------------------------------------ the checks */

static int l3_color_of(int ctype)
{
    switch (ctype) {
    case PNG_COLOR_TYPE_GRAY: return L3_COLOR_GRAY;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return L3_COLOR_GRAY_ALPHA;
    case PNG_COLOR_TYPE_RGB: return L3_COLOR_RGB;
    case PNG_COLOR_TYPE_RGB_ALPHA: return L3_COLOR_RGBA;
    default: return L3_COLOR_PALETTE;
    }
}

/* The description l3 gives must match libpng's view of the file. */
static void check_info(const char *name, const struct l3_info *i, const struct ref_img *r)
{
    cr_assert_eq(i->width, r->w, "%s: width", name);
    cr_assert_eq(i->height, r->h, "%s: height", name);
    cr_assert_eq(i->color, l3_color_of(r->ctype), "%s: colour", name);
    cr_assert_eq(i->channels, r->channels, "%s: channels", name);
    cr_assert_eq(i->bit_depth, r->depth, "%s: bit depth", name);
    if (r->ctype == PNG_COLOR_TYPE_PALETTE) {
        cr_assert_geq(i->palette_len, r->npal, "%s: palette length", name);
        for (int k = 0; k < r->npal; k++) {
            cr_assert(i->palette[k][0] == r->pal[k].red && i->palette[k][1] == r->pal[k].green &&
                          i->palette[k][2] == r->pal[k].blue,
                      "%s: palette entry %d", name, k);
            unsigned a = k < r->ntrans ? r->trans[k] : 255;
            cr_assert_eq(i->palette[k][3], a, "%s: palette alpha %d", name, k);
        }
        cr_assert_eq(i->palette_alpha_len, r->ntrans > r->npal ? r->npal : r->ntrans,
                     "%s: tRNS length", name);
        cr_assert_eq(i->has_trns_key, 0, "%s", name);
    } else {
        cr_assert_eq(i->palette_len, 0, "%s", name);
        unsigned maxv = r->depth == 16 ? 65535u : (1u << r->depth) - 1u;
        int fits = r->has_key && r->key.gray <= maxv && r->key.red <= maxv &&
                   r->key.green <= maxv && r->key.blue <= maxv;
        if (r->ctype == PNG_COLOR_TYPE_GRAY)
            fits = r->has_key && r->key.gray <= maxv;
        else if (r->ctype == PNG_COLOR_TYPE_RGB)
            fits = r->has_key && r->key.red <= maxv && r->key.green <= maxv &&
                   r->key.blue <= maxv;
        else
            fits = 0;
        cr_assert_eq(i->has_trns_key, fits, "%s: tRNS key presence", name);
        if (fits && r->ctype == PNG_COLOR_TYPE_GRAY)
            cr_assert_eq(i->trns_key[0], r->key.gray, "%s: tRNS gray", name);
        if (fits && r->ctype == PNG_COLOR_TYPE_RGB)
            cr_assert(i->trns_key[0] == r->key.red && i->trns_key[1] == r->key.green &&
                          i->trns_key[2] == r->key.blue,
                      "%s: tRNS rgb", name);
    }
}

static void check_same_desc(const char *name, const char *what, const struct l3_info *a,
                            const struct l3_info *b)
{
    cr_assert(a->width == b->width && a->height == b->height && a->color == b->color &&
                  a->channels == b->channels && a->bit_depth == b->bit_depth,
              "%s: %s: geometry/colour differs", name, what);
    cr_assert(a->has_trns_key == b->has_trns_key &&
                  memcmp(a->trns_key, b->trns_key, sizeof a->trns_key) == 0,
              "%s: %s: tRNS key differs", name, what);
    cr_assert(a->palette_len == b->palette_len && a->palette_alpha_len == b->palette_alpha_len &&
                  memcmp(a->palette, b->palette, 4u * a->palette_len) == 0,
              "%s: %s: palette differs", name, what);
}

static size_t first_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return n;
}

#define CHECK_PNG_REENCODE 0x1
#define CHECK_L3 0x2
#define CHECK_L3_VARIANTS 0x4

/* The whole chain for one PNG. Returns 1 when checked, 0 when libpng itself
 * refuses the file (the caller decides whether that is acceptable). */
static int check_png(const char *name, const unsigned char *png, size_t n, unsigned what)
{
    struct ref_img r;
    if (ref_decode(png, n, &r) != 0) {
        ref_free(&r);
        return 0;
    }
    struct l3_info info;
    void *px = NULL;
    size_t pxn = 0;
    int st = l3_png_decode(png, n, NULL, &info, &px, &pxn);
    cr_assert_eq(st, L3_OK, "%s: l3_png_decode: %s", name, l3_strerror(st));
    check_info(name, &info, &r);
    cr_assert_eq(pxn, r.size, "%s: decoded size", name);
    size_t d = first_diff(px, r.px, r.size);
    cr_assert_eq(d, r.size, "%s: pixels differ from libpng at byte %zu", name, d);

    if (what & CHECK_PNG_REENCODE) {
        void *png2 = NULL;
        size_t n2 = 0;
        st = l3_png_encode(&info, px, 0, &png2, &n2);
        cr_assert_eq(st, L3_OK, "%s: l3_png_encode: %s", name, l3_strerror(st));
        struct ref_img r2;
        cr_assert_eq(ref_decode(png2, n2, &r2), 0, "%s: libpng rejects our PNG", name);
        cr_assert(r2.w == r.w && r2.h == r.h && r2.ctype == r.ctype && r2.depth == r.depth,
                  "%s: re-encoded PNG has another format", name);
        cr_assert(memcmp(r2.px, r.px, r.size) == 0, "%s: re-encoded PNG samples differ", name);
        struct l3_info info2;
        void *px2 = NULL;
        cr_assert_eq(l3_png_decode(png2, n2, NULL, &info2, &px2, NULL), L3_OK, "%s", name);
        check_same_desc(name, "PNG re-encode", &info, &info2);
        free(px2);
        ref_free(&r2);
        free(png2);
    }

    if (what & CHECK_L3) {
        void *l3 = NULL;
        size_t l3n = 0;
        st = l3_transcode_png(png, n, NULL, &l3, &l3n);
        cr_assert_eq(st, L3_OK, "%s: l3_transcode_png: %s", name, l3_strerror(st));
        struct l3_info li;
        st = l3_read_info(l3, l3n, &li, NULL);
        cr_assert_eq(st, L3_OK, "%s: l3_read_info: %s", name, l3_strerror(st));
        check_same_desc(name, "L3 header", &info, &li);
        cr_assert_eq(l3_verify(l3, l3n), L3_OK, "%s: l3_verify", name);
        void *out = NULL;
        size_t outn = 0;
        st = l3_decode_alloc(l3, l3n, NULL, &out, &outn, NULL);
        cr_assert_eq(st, L3_OK, "%s: l3_decode_alloc: %s", name, l3_strerror(st));
        cr_assert_eq(outn, r.size, "%s: L3 decoded size", name);
        d = first_diff(out, r.px, r.size);
        cr_assert_eq(d, r.size, "%s: L3 round trip differs from libpng at byte %zu", name, d);
        free(out);

        if (what & CHECK_L3_VARIANTS) {
            /* Two threads, padded stride, and a small tile size. (An odd
             * stride only for 8-bit samples: 16-bit rows stay aligned.) */
            size_t stride = r.row + (r.depth == 16 ? 8 : 7);
            size_t bn = stride * r.h;
            unsigned char *buf = malloc(bn);
            struct l3_decode_options dopt = {.flags = L3_DECODE_VERIFY, .threads = 2};
            st = l3_decode(l3, l3n, buf, bn, stride, &dopt);
            cr_assert_eq(st, L3_OK, "%s: l3_decode (2 threads, stride): %s", name, l3_strerror(st));
            for (uint32_t y = 0; y < r.h; y++)
                cr_assert(memcmp(buf + y * stride, r.px + y * r.row, r.row) == 0,
                          "%s: 2-thread strided decode differs in row %u", name, y);
            free(buf);
            struct l3_encode_options eo = {.tile_width = 16, .tile_height = 16, .threads = 2};
            void *l3b = NULL;
            size_t l3bn = 0;
            st = l3_transcode_png(png, n, &eo, &l3b, &l3bn);
            cr_assert_eq(st, L3_OK, "%s: transcode with 16x16 tiles: %s", name, l3_strerror(st));
            st = l3_decode_alloc(l3b, l3bn, NULL, &out, &outn, NULL);
            cr_assert_eq(st, L3_OK, "%s: decode 16x16 tiles: %s", name, l3_strerror(st));
            cr_assert(outn == r.size && memcmp(out, r.px, r.size) == 0,
                      "%s: 16x16-tile round trip differs", name);
            free(out);
            free(l3b);
        }
        free(l3);
    }
    free(px);
    ref_free(&r);
    return 1;
}

/* ------------------------------------------------------------ PngSuite */

/* The PngSuite files in dir (at least min_files); `source` says where they
 * come from, for the skip when dir is absent. */
static void run_pngsuite(const char *dir, size_t min_files, const char *source)
{
    size_t n = 0;
    char **files = pt_list_png(dir, &n);
    if (files == NULL)
        cr_skip_test("%s absent (%s)", dir, source);
    cr_assert_geq(n, min_files, "%s: expected at least %zu PngSuite files, found %zu", dir,
                  min_files, n);
    size_t checked = 0, refused = 0;
    for (size_t i = 0; i < n; i++) {
        size_t sz;
        unsigned char *d = tc_slurp(files[i], &sz);
        cr_assert_not_null(d, "%s", files[i]);
        const char *base = strrchr(files[i], '/') + 1;
        int corrupt = base[0] == 'x'; /* PngSuite's deliberately broken files */
        if (check_png(base, d, sz, CHECK_PNG_REENCODE | CHECK_L3 | CHECK_L3_VARIANTS)) {
            checked++;
        } else {
            cr_assert(corrupt, "%s: libpng refuses a valid PngSuite file", base);
            void *px = NULL;
            struct l3_info info;
            int st = l3_png_decode(d, sz, NULL, &info, &px, NULL);
            cr_assert(st == L3_ERR_PNG || st == L3_ERR_LIMIT,
                      "%s: corrupt file gives %s", base, l3_strerror(st));
            void *l3 = NULL;
            st = l3_transcode_png(d, sz, NULL, &l3, NULL);
            cr_assert(st == L3_ERR_PNG || st == L3_ERR_LIMIT, "%s: transcode of corrupt file", base);
            cr_assert_null(l3);
            refused++;
        }
        free(d);
    }
    cr_log_info("%s: %zu files round-tripped, %zu corrupt files refused", dir, checked, refused);
    pt_free_list(files, n);
}

Test(png, pngsuite_debian_subset)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/png/pngsuite", pt_corpus_dir());
    run_pngsuite(dir, 35, "made by scripts/fetch-pngsuite.sh");
}

Test(png, pngsuite_full)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/png/pngsuite-full", pt_corpus_dir());
    /* whatever subset is there (175 in the full suite) */
    run_pngsuite(dir, 1, "the full PngSuite is in no Debian package: copied there by hand");
}

/* ------------------------------------------- generated images */

static const struct {
    int ctype, depth;
} gen_formats[] = {
    {PNG_COLOR_TYPE_GRAY, 1}, {PNG_COLOR_TYPE_GRAY, 2}, {PNG_COLOR_TYPE_GRAY, 4},
    {PNG_COLOR_TYPE_GRAY, 8}, {PNG_COLOR_TYPE_GRAY, 16}, {PNG_COLOR_TYPE_GRAY_ALPHA, 8},
    {PNG_COLOR_TYPE_GRAY_ALPHA, 16}, {PNG_COLOR_TYPE_RGB, 8}, {PNG_COLOR_TYPE_RGB, 16},
    {PNG_COLOR_TYPE_RGB_ALPHA, 8}, {PNG_COLOR_TYPE_RGB_ALPHA, 16}, {PNG_COLOR_TYPE_PALETTE, 1},
    {PNG_COLOR_TYPE_PALETTE, 2}, {PNG_COLOR_TYPE_PALETTE, 4}, {PNG_COLOR_TYPE_PALETTE, 8},
};

static const struct {
    uint32_t w, h;
} gen_sizes[] = {{1, 1}, {1, 37}, {37, 1}, {65, 33}, {4097, 3}};

/* Colour type and bit depth combinations a PNG may have (PNG spec, table
 * 11.1), from the rules rather than from gen_formats. */
static int png_format_allowed(int ctype, int depth)
{
    switch (ctype) {
    case PNG_COLOR_TYPE_GRAY: return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
    case PNG_COLOR_TYPE_PALETTE: return depth == 1 || depth == 2 || depth == 4 || depth == 8;
    case PNG_COLOR_TYPE_RGB:
    case PNG_COLOR_TYPE_GRAY_ALPHA:
    case PNG_COLOR_TYPE_RGB_ALPHA: return depth == 8 || depth == 16;
    default: return 0;
    }
}

/* Formats a test went through, both interlace methods each. */
struct format_seen {
    unsigned char seen[7][17][2];
};

static void format_saw(struct format_seen *f, int ctype, int depth, int interlace)
{
    f->seen[ctype][depth][interlace] = 1;
}

/* Every format PNG allows was covered, progressive and Adam7. */
static void format_assert_all(const struct format_seen *f, const char *test)
{
    for (int ct = 0; ct <= 6; ct++)
        for (int d = 1; d <= 16; d++)
            for (int il = 0; il < 2; il++) {
                const int allowed = png_format_allowed(ct, d);
                cr_assert_eq(f->seen[ct][d][il], allowed,
                             "%s: colour type %d depth %d %s %s", test, ct, d,
                             il ? "Adam7" : "progressive",
                             allowed ? "not covered" : "is not a PNG format");
            }
}

static void gen_setup(struct gen_desc *g, int ctype, int depth, uint32_t w, uint32_t h,
                      int interlace, int variant)
{
    memset(g, 0, sizeof *g);
    g->w = w;
    g->h = h;
    g->ctype = ctype;
    g->depth = depth;
    g->interlace = interlace;
    if (ctype == PNG_COLOR_TYPE_PALETTE) {
        g->npal = (1 << depth) - (variant & 1); /* full and not-quite-full palettes */
        if (g->npal < 1)
            g->npal = 1;
        for (int i = 0; i < g->npal; i++) {
            g->pal[i].red = (png_byte)(i * 7);
            g->pal[i].green = (png_byte)(255 - i);
            g->pal[i].blue = (png_byte)(i * 31);
            g->trans[i] = (png_byte)(255 - i * 3);
        }
        if (variant & 1)
            g->ntrans = g->npal > 1 ? g->npal / 2 : 1;
    } else if ((variant & 1) &&
               (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_RGB)) {
        unsigned maxv = (1u << depth) - 1u;
        g->has_key = 1;
        g->key.gray = (png_uint_16)(maxv / 3);
        g->key.red = (png_uint_16)(maxv / 5);
        g->key.green = (png_uint_16)maxv;
        g->key.blue = 0;
    }
}

Test(png, generated_every_format_interlace_size)
{
    struct format_seen fs;
    memset(&fs, 0, sizeof fs);
    for (size_t f = 0; f < sizeof gen_formats / sizeof gen_formats[0]; f++)
        for (int il = 0; il < 2; il++)
            for (size_t s = 0; s < sizeof gen_sizes / sizeof gen_sizes[0]; s++) {
                struct gen_desc g;
                int variant = (int)(s + il);
                gen_setup(&g, gen_formats[f].ctype, gen_formats[f].depth, gen_sizes[s].w,
                          gen_sizes[s].h, il, variant);
                size_t pn, n;
                unsigned char *px = gen_pixels(&g, &pn);
                unsigned char *png = gen_write(&g, px, &n);
                char name[128];
                snprintf(name, sizeof name, "gen ctype %d depth %d %ux%u %s%s", g.ctype, g.depth,
                         g.w, g.h, il ? "Adam7" : "progressive",
                         g.ntrans || g.has_key ? " +tRNS" : "");
                cr_assert(check_png(name, png, n,
                                    CHECK_PNG_REENCODE | CHECK_L3 |
                                        (s == 3 ? CHECK_L3_VARIANTS : 0)),
                          "%s: libpng refuses its own output", name);
                /* Also the exact samples we generated (not only libpng's view). */
                void *dp = NULL;
                size_t dn = 0;
                cr_assert_eq(l3_png_decode(png, n, NULL, NULL, &dp, &dn), L3_OK, "%s", name);
                cr_assert(dn == pn && memcmp(dp, px, pn) == 0, "%s: samples changed", name);
                free(dp);
                free(png);
                free(px);
                format_saw(&fs, g.ctype, g.depth, il);
            }
    format_assert_all(&fs, "png.generated_every_format_interlace_size");
}

/* Label maps: few classes in large regions, palette indices must survive. */
Test(png, palette_label_maps)
{
    const int depths[] = {1, 2, 4, 8};
    for (size_t k = 0; k < 4; k++) {
        for (int classes = 2; classes <= 5; classes += 3) {
            struct gen_desc g;
            memset(&g, 0, sizeof g);
            g.w = 300;
            g.h = 171;
            g.ctype = PNG_COLOR_TYPE_PALETTE;
            g.depth = depths[k];
            int nc = classes < (1 << g.depth) ? classes : (1 << g.depth);
            g.npal = nc;
            for (int i = 0; i < nc; i++) {
                g.pal[i].red = (png_byte)(40 * i);
                g.pal[i].green = (png_byte)(200 - 30 * i);
                g.pal[i].blue = (png_byte)(i & 1 ? 255 : 0);
            }
            g.ntrans = 1;
            g.trans[0] = 0; /* class 0 transparent ("void") */
            unsigned char *px = malloc((size_t)g.w * g.h);
            for (uint32_t y = 0; y < g.h; y++)
                for (uint32_t x = 0; x < g.w; x++) {
                    int dx = (int)x - 150, dy = (int)y - 85;
                    int c = dx * dx + dy * dy < 60 * 60 ? 1 : (int)(y / 50);
                    px[(size_t)y * g.w + x] = (unsigned char)(c % nc);
                }
            size_t n;
            unsigned char *png = gen_write(&g, px, &n);
            char name[64];
            snprintf(name, sizeof name, "label map depth %d, %d classes", g.depth, nc);
            cr_assert(check_png(name, png, n, CHECK_PNG_REENCODE | CHECK_L3 | CHECK_L3_VARIANTS));
            void *dp = NULL;
            struct l3_info info;
            cr_assert_eq(l3_png_decode(png, n, NULL, &info, &dp, NULL), L3_OK);
            cr_assert(memcmp(dp, px, (size_t)g.w * g.h) == 0, "%s: class ids changed", name);
            cr_assert_eq(info.palette_len, nc);
            cr_assert_eq(info.palette_alpha_len, 1);
            cr_assert_eq(info.palette[0][3], 0);
            free(dp);
            free(png);
            free(px);
        }
    }
}

/* An index past the end of PLTE decodes with libpng (a warning only); the
 * palette is extended so the image stays encodable and indices survive. */
Test(png, palette_index_past_plte)
{
    struct gen_desc g;
    memset(&g, 0, sizeof g);
    g.w = 19;
    g.h = 5;
    g.ctype = PNG_COLOR_TYPE_PALETTE;
    g.depth = 8;
    g.npal = 3;
    for (int i = 0; i < 3; i++)
        g.pal[i].red = (png_byte)(i + 1);
    unsigned char px[19 * 5];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (unsigned char)(i % 7); /* indices 3..6 are past PLTE */
    size_t n;
    unsigned char *png = gen_write(&g, px, &n);
    struct l3_info info;
    void *dp = NULL;
    int st = l3_png_decode(png, n, NULL, &info, &dp, NULL);
    cr_assert_eq(st, L3_OK, "%s", l3_strerror(st));
    cr_assert(memcmp(dp, px, sizeof px) == 0);
    cr_assert_eq(info.palette_len, 7);
    cr_assert_eq(info.palette[2][0], 3);
    cr_assert(info.palette[6][0] == 0 && info.palette[6][3] == 255);
    cr_assert(check_png("index past PLTE", png, n, CHECK_PNG_REENCODE | CHECK_L3));
    free(dp);
    free(png);
}

/* A tRNS key that does not fit the bit depth matches no pixel and cannot be
 * written by libpng: it is dropped, the samples are kept. */
Test(png, trns_key_out_of_range_dropped)
{
    struct gen_desc g;
    memset(&g, 0, sizeof g);
    g.w = 9;
    g.h = 4;
    g.ctype = PNG_COLOR_TYPE_GRAY;
    g.depth = 8;
    g.has_key = 1;
    g.key.gray = 77;
    size_t pn, n;
    unsigned char *px = gen_pixels(&g, &pn);
    unsigned char *png = gen_write(&g, px, &n);
    /* Patch the tRNS value to 300 (> 255) and fix its CRC. */
    unsigned char *t = memmem(png, n, "tRNS", 4);
    cr_assert_not_null(t);
    t[4] = 0x01;
    t[5] = 0x2c;
    uint32_t crc = pt_crc32(t, 6);
    t[6] = (unsigned char)(crc >> 24);
    t[7] = (unsigned char)(crc >> 16);
    t[8] = (unsigned char)(crc >> 8);
    t[9] = (unsigned char)crc;
    struct l3_info info;
    void *dp = NULL;
    cr_assert_eq(l3_png_decode(png, n, NULL, &info, &dp, NULL), L3_OK);
    cr_assert_eq(info.has_trns_key, 0);
    cr_assert(memcmp(dp, px, pn) == 0);
    cr_assert(check_png("tRNS key 300 at depth 8", png, n, CHECK_PNG_REENCODE | CHECK_L3));
    free(dp);
    free(png);
    free(px);
}

/* ------------------------------------------------------- real corpus */

static void run_corpus(const char *sub, unsigned stride_asan)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/png/%s", pt_corpus_dir(), sub);
    size_t n = 0;
    char **files = pt_list_png(dir, &n);
    if (files == NULL || n == 0)
        cr_skip_test("%s absent or empty (made by scripts/fetch-corpus.sh)", dir);
    /* Under AddressSanitizer every stride-th file (still real images). */
    unsigned step = PT_ASAN ? stride_asan : 1;
    size_t checked = 0;
    for (size_t i = 0; i < n; i += step) {
        size_t sz;
        unsigned char *d = tc_slurp(files[i], &sz);
        cr_assert_not_null(d);
        struct l3_info info;
        void *px = NULL;
        /* PNG re-encode (zlib) is the slow step: only for smaller images. */
        unsigned what = CHECK_L3;
        size_t pxn = 0;
        if (l3_png_decode(d, sz, NULL, &info, &px, &pxn) == L3_OK &&
            (uint64_t)info.width * info.height <= 600000)
            what |= CHECK_PNG_REENCODE;
        free(px);
        cr_assert(check_png(strrchr(files[i], '/') + 1, d, sz, what), "%s: libpng refuses it",
                  files[i]);
        free(d);
        checked++;
    }
    cr_log_info("%s: %zu of %zu files round-tripped", dir, checked, n);
    pt_free_list(files, n);
}

Test(png, corpus_photos_2048, .timeout = TC_TIMEOUT(300)) { run_corpus("photos-2048", 2); }
Test(png, corpus_wallpapers, .timeout = TC_TIMEOUT(300)) { run_corpus("wallpapers", 2); }
Test(png, corpus_renders_2048, .timeout = TC_TIMEOUT(300)) { run_corpus("renders-2048", 2); }
Test(png, corpus_photos_full_size, .timeout = TC_TIMEOUT(300)) { run_corpus("photos", 3); }

/* --------------------------------------------------- hostile input */

/* An 8-bit RGB PNG of generated pixels. */
static unsigned char *rgb8_png(uint32_t w, uint32_t h, int interlace, size_t *n_ret)
{
    struct gen_desc g;
    memset(&g, 0, sizeof g);
    g.w = w;
    g.h = h;
    g.ctype = PNG_COLOR_TYPE_RGB;
    g.depth = 8;
    g.interlace = interlace;
    size_t pn;
    unsigned char *px = gen_pixels(&g, &pn);
    unsigned char *png = gen_write(&g, px, n_ret);
    free(px);
    return png;
}

static unsigned char *small_png(size_t *n_ret, int interlace)
{
    return rgb8_png(33, 17, interlace, n_ret);
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Recomputes the CRC of the chunk whose length field is at p. */
static void fix_crc(unsigned char *p)
{
    uint32_t len = get32(p);
    put32(p + 8 + len, pt_crc32(p + 4, len + 4));
}

static unsigned char *find_chunk(unsigned char *png, size_t n, const char *type)
{
    size_t off = 8;
    while (off + 12 <= n) {
        uint32_t len = get32(png + off);
        if (memcmp(png + off + 4, type, 4) == 0)
            return png + off;
        off += 12 + (size_t)len;
    }
    return NULL;
}

Test(png, truncated_at_every_offset)
{
    for (int il = 0; il < 2; il++) {
        size_t n;
        unsigned char *png = small_png(&n, il);
        for (size_t cut = 0; cut < n; cut++) {
            unsigned char *copy = malloc(cut ? cut : 1); /* exact size: ASan sees overreads */
            memcpy(copy, png, cut);
            void *px = (void *)1;
            struct l3_info info;
            int st = l3_png_decode(copy, cut, NULL, &info, &px, NULL);
            cr_assert_eq(st, L3_ERR_PNG, "cut at %zu of %zu: %s", cut, n, l3_strerror(st));
            cr_assert_null(px);
            free(copy);
        }
        free(png);
    }
}

Test(png, bit_flips_ihdr_idat_crc)
{
    size_t n;
    unsigned char *png = small_png(&n, 0);
    struct ref_img ref;
    cr_assert_eq(ref_decode(png, n, &ref), 0);
    unsigned char *copy = malloc(n);
    struct l3_limits lim = {.max_pixels = 1u << 20, .max_memory = 64u << 20};
    /* Every bit of IHDR (length, type, data, CRC): the CRC catches it. */
    for (size_t bit = 8 * 8; bit < 8 * 33; bit++) {
        memcpy(copy, png, n);
        copy[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        void *px = NULL;
        int st = l3_png_decode(copy, n, &lim, NULL, &px, NULL);
        cr_assert(st == L3_ERR_PNG || st == L3_ERR_LIMIT, "IHDR bit %zu: %s", bit, l3_strerror(st));
        free(px);
    }
    /* Every bit of IHDR's data with a valid CRC: either refused or decoded
     * exactly as libpng decodes it. */
    for (size_t bit = 16 * 8; bit < 29 * 8; bit++) {
        memcpy(copy, png, n);
        copy[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        fix_crc(copy + 8);
        void *px = NULL;
        size_t pxn = 0;
        int st = l3_png_decode(copy, n, &lim, NULL, &px, &pxn);
        cr_assert(st == L3_OK || st == L3_ERR_PNG || st == L3_ERR_LIMIT, "IHDR bit %zu (CRC ok): %s",
                  bit, l3_strerror(st));
        if (st == L3_OK) {
            struct ref_img r2;
            cr_assert_eq(ref_decode(copy, n, &r2), 0, "IHDR bit %zu: only l3 accepts it", bit);
            cr_assert(r2.size == pxn && memcmp(r2.px, px, pxn) == 0, "IHDR bit %zu", bit);
            ref_free(&r2);
        }
        free(px);
    }
    /* Bits of IDAT: with the stale CRC always refused; with a fixed CRC
     * refused (zlib) or equal to libpng's decode. */
    unsigned char *idat = find_chunk(png, n, "IDAT");
    cr_assert_not_null(idat);
    size_t off = (size_t)(idat - png);
    uint32_t len = get32(idat);
    for (size_t b = 0; b < 8 * (size_t)len; b += 3) {
        for (int fix = 0; fix < 2; fix++) {
            memcpy(copy, png, n);
            copy[off + 8 + b / 8] ^= (unsigned char)(1u << (b % 8));
            if (fix)
                fix_crc(copy + off);
            void *px = NULL;
            size_t pxn = 0;
            int st = l3_png_decode(copy, n, &lim, NULL, &px, &pxn);
            if (!fix) {
                cr_assert_eq(st, L3_ERR_PNG, "IDAT bit %zu: %s", b, l3_strerror(st));
            } else {
                cr_assert(st == L3_OK || st == L3_ERR_PNG, "IDAT bit %zu: %s", b, l3_strerror(st));
                if (st == L3_OK) {
                    struct ref_img r2;
                    cr_assert_eq(ref_decode(copy, n, &r2), 0);
                    cr_assert(r2.size == pxn && memcmp(r2.px, px, pxn) == 0, "IDAT bit %zu", b);
                    ref_free(&r2);
                }
            }
            free(px);
        }
    }
    /* A bad CRC on IEND and on IDAT. */
    memcpy(copy, png, n);
    copy[n - 1] ^= 0x40;
    void *px = NULL;
    cr_assert_eq(l3_png_decode(copy, n, NULL, NULL, &px, NULL), L3_ERR_PNG);
    memcpy(copy, png, n);
    copy[off + 8 + len] ^= 0x01;
    cr_assert_eq(l3_png_decode(copy, n, NULL, NULL, &px, NULL), L3_ERR_PNG);
    cr_assert_null(px);
    free(copy);
    free(png);
    ref_free(&ref);
}

/* A PNG with a valid IHDR claiming w x h and a tiny IDAT. */
static unsigned char *claim_png(uint32_t w, uint32_t h, size_t *n_ret)
{
    size_t n;
    unsigned char *png = small_png(&n, 0);
    put32(png + 16, w);
    put32(png + 20, h);
    fix_crc(png + 8);
    *n_ret = n;
    return png;
}

Test(png, huge_dimensions_hit_limit_before_allocating)
{
    size_t n;
    unsigned char *png = claim_png(100000, 100000, &n);
    void *px = NULL;
    struct l3_info info;
    int st = l3_png_decode(png, n, NULL, &info, &px, NULL);
    cr_assert_eq(st, L3_ERR_LIMIT, "%s", l3_strerror(st));
    cr_assert_null(px);
    /* Pixel limit out of the way: the memory limit (30 GB > 4 GiB) still
     * refuses it. Had it tried to allocate, the result would be NOMEM or a
     * decode error, not LIMIT. */
    struct l3_limits lim = {.max_pixels = UINT64_MAX};
    st = l3_png_decode(png, n, &lim, &info, &px, NULL);
    cr_assert_eq(st, L3_ERR_LIMIT, "%s", l3_strerror(st));
    void *l3 = NULL;
    st = l3_transcode_png(png, n, NULL, &l3, NULL);
    cr_assert_eq(st, L3_ERR_LIMIT);
    cr_assert_null(l3);
    free(png);
    /* Over the format's dimension limit. */
    png = claim_png(L3_MAX_DIM + 1, 1, &n);
    cr_assert_eq(l3_png_decode(png, n, &lim, NULL, &px, NULL), L3_ERR_LIMIT);
    free(png);
    /* Caller's own small limits. */
    png = small_png(&n, 0);
    struct l3_limits tiny = {.max_pixels = 33 * 17 - 1};
    cr_assert_eq(l3_png_decode(png, n, &tiny, NULL, &px, NULL), L3_ERR_LIMIT);
    struct l3_limits tight = {.max_memory = 1000};
    cr_assert_eq(l3_png_decode(png, n, &tight, NULL, &px, NULL), L3_ERR_LIMIT);
    struct l3_limits exact = {.max_pixels = 33 * 17};
    cr_assert_eq(l3_png_decode(png, n, &exact, NULL, &px, NULL), L3_OK);
    free(px);
    free(png);
}

Test(png, empty_and_non_png_input)
{
    void *px = (void *)1;
    struct l3_info info;
    cr_assert_eq(l3_png_decode("", 0, NULL, &info, &px, NULL), L3_ERR_PNG);
    cr_assert_null(px);
    cr_assert_eq(l3_png_decode(NULL, 0, NULL, &info, &px, NULL), L3_ERR_PNG);
    cr_assert_eq(l3_png_decode(NULL, 5, NULL, &info, &px, NULL), L3_ERR_INVALID_ARG);
    cr_assert_eq(l3_png_decode("x", 1, NULL, &info, NULL, NULL), L3_ERR_INVALID_ARG);
    const char *text = "hello, this is not a PNG file at all\n";
    cr_assert_eq(l3_png_decode(text, strlen(text), NULL, &info, &px, NULL), L3_ERR_PNG);
    static const unsigned char jpeg[] = {0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0};
    cr_assert_eq(l3_png_decode(jpeg, sizeof jpeg, NULL, &info, &px, NULL), L3_ERR_PNG);
    /* Signature only, and signature + garbage. */
    static const unsigned char sig[] = {137, 80, 78, 71, 13, 10, 26, 10, 1, 2, 3, 4, 5, 6, 7, 8,
                                        9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    cr_assert_eq(l3_png_decode(sig, 8, NULL, &info, &px, NULL), L3_ERR_PNG);
    cr_assert_eq(l3_png_decode(sig, sizeof sig, NULL, &info, &px, NULL), L3_ERR_PNG);
    cr_assert_eq(l3_is_png(sig, 8), 1);
    cr_assert_eq(l3_is_png(sig, 7), 0);
    cr_assert_eq(l3_is_png(text, strlen(text)), 0);
    cr_assert_eq(l3_is_png(NULL, 100), 0);
    void *l3 = (void *)1;
    cr_assert_eq(l3_transcode_png(text, strlen(text), NULL, &l3, NULL), L3_ERR_PNG);
    cr_assert_null(l3);
}

/* ------------------------------------------------------------- fds */

static int tmpfile_with(const void *d, size_t n, char *path, size_t pathlen)
{
    snprintf(path, pathlen, "/tmp/l3-test-png-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, d, n), (ssize_t)n);
    cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
    return fd;
}

Test(png, decode_from_fd)
{
    size_t n;
    unsigned char *png = small_png(&n, 1);
    struct l3_info mi, fi;
    void *mpx = NULL, *fpx = NULL;
    size_t mn, fn;
    cr_assert_eq(l3_png_decode(png, n, NULL, &mi, &mpx, &mn), L3_OK);

    char path[64];
    int fd = tmpfile_with(png, n, path, sizeof path);
    cr_assert_eq(l3_png_decode_fd(fd, NULL, &fi, &fpx, &fn), L3_OK);
    cr_assert(fn == mn && memcmp(fpx, mpx, mn) == 0);
    cr_assert_eq(memcmp(&fi, &mi, sizeof fi), 0);
    free(fpx);
    /* PNG -> L3 from an fd equals PNG -> L3 from memory. */
    cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
    void *l3a = NULL, *l3b = NULL;
    size_t na, nb;
    cr_assert_eq(l3_transcode_png_fd(fd, NULL, &l3a, &na), L3_OK);
    cr_assert_eq(l3_transcode_png(png, n, NULL, &l3b, &nb), L3_OK);
    cr_assert(na == nb && memcmp(l3a, l3b, na) == 0);
    l3_free(l3a);
    l3_free(l3b);
    close(fd);
    unlink(path);

    /* Through a pipe (short reads). */
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(p[0]);
        for (size_t off = 0; off < n; off += 100) {
            size_t k = n - off < 100 ? n - off : 100;
            if (write(p[1], png + off, k) != (ssize_t)k)
                _exit(1);
            usleep(100);
        }
        _exit(0);
    }
    close(p[1]);
    cr_assert_eq(l3_png_decode_fd(p[0], NULL, &fi, &fpx, &fn), L3_OK);
    cr_assert(fn == mn && memcmp(fpx, mpx, mn) == 0);
    free(fpx);
    close(p[0]);
    waitpid(pid, NULL, 0);

    /* Truncated file: a PNG error, not an I/O error. */
    fd = tmpfile_with(png, n / 2, path, sizeof path);
    cr_assert_eq(l3_png_decode_fd(fd, NULL, &fi, &fpx, &fn), L3_ERR_PNG);
    cr_assert_null(fpx);
    close(fd);
    unlink(path);
    /* Empty file and a non-PNG. */
    fd = tmpfile_with("", 0, path, sizeof path);
    cr_assert_eq(l3_png_decode_fd(fd, NULL, &fi, &fpx, &fn), L3_ERR_PNG);
    close(fd);
    unlink(path);
    fd = tmpfile_with("GIF89a....", 10, path, sizeof path);
    cr_assert_eq(l3_png_decode_fd(fd, NULL, &fi, &fpx, &fn), L3_ERR_PNG);
    close(fd);
    unlink(path);

    /* Read errors: a directory, a write-only fd, a closed fd, -1. */
    fd = open("/tmp", O_RDONLY | O_DIRECTORY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(l3_png_decode_fd(fd, NULL, &fi, &fpx, &fn), L3_ERR_IO);
    close(fd);
    fd = tmpfile_with(png, n, path, sizeof path);
    int wfd = open(path, O_WRONLY);
    cr_assert_eq(l3_png_decode_fd(wfd, NULL, &fi, &fpx, &fn), L3_ERR_IO);
    close(wfd);
    close(fd);
    unlink(path);
    cr_assert_eq(l3_png_decode_fd(wfd, NULL, &fi, &fpx, &fn), L3_ERR_IO);
    cr_assert_eq(l3_png_decode_fd(-1, NULL, &fi, &fpx, &fn), L3_ERR_IO);
    void *l3 = NULL;
    cr_assert_eq(l3_transcode_png_fd(-1, NULL, &l3, NULL), L3_ERR_IO);
    cr_assert_null(l3);
    free(mpx);
    free(png);
}

/* ------------------------------------------------------ l3_png_encode */

Test(png, encode_stride_and_bad_input)
{
    struct l3_info info;
    memset(&info, 0, sizeof info);
    info.width = 5;
    info.height = 3;
    info.color = L3_COLOR_RGB;
    info.channels = 3;
    info.bit_depth = 16;
    uint16_t px[3][8 * 3]; /* stride 8 pixels, 5 used */
    for (int y = 0; y < 3; y++)
        for (int i = 0; i < 24; i++)
            px[y][i] = (uint16_t)(y * 1000 + i * 2500 + 1);
    void *png = NULL;
    size_t n = 0;
    cr_assert_eq(l3_png_encode(&info, px, sizeof px[0], &png, &n), L3_OK);
    struct ref_img r;
    cr_assert_eq(ref_decode(png, n, &r), 0);
    cr_assert(r.w == 5 && r.h == 3 && r.depth == 16 && r.ctype == PNG_COLOR_TYPE_RGB);
    for (int y = 0; y < 3; y++)
        cr_assert(memcmp(r.px + y * r.row, px[y], 30) == 0, "row %d", y);
    ref_free(&r);
    free(png);

    /* Bad descriptions and out-of-range samples. */
    cr_assert_eq(l3_png_encode(&info, px, 10, &png, &n), L3_ERR_INVALID_ARG); /* stride < row */
    cr_assert_eq(l3_png_encode(NULL, px, 0, &png, &n), L3_ERR_INVALID_ARG);
    cr_assert_eq(l3_png_encode(&info, NULL, 0, &png, &n), L3_ERR_INVALID_ARG);
    struct l3_info bad = info;
    bad.bit_depth = 4; /* RGB at 4 bits does not exist */
    cr_assert_eq(l3_png_encode(&bad, px, 0, &png, &n), L3_ERR_INVALID_ARG);
    bad = info;
    bad.channels = 4;
    cr_assert_eq(l3_png_encode(&bad, px, 0, &png, &n), L3_ERR_INVALID_ARG);
    bad = info;
    bad.width = 0;
    cr_assert_eq(l3_png_encode(&bad, px, 0, &png, &n), L3_ERR_INVALID_ARG);

    unsigned char g2[4] = {0, 1, 3, 4}; /* 4 does not fit in 2 bits */
    struct l3_info gi;
    memset(&gi, 0, sizeof gi);
    gi.width = 4;
    gi.height = 1;
    gi.color = L3_COLOR_GRAY;
    gi.channels = 1;
    gi.bit_depth = 2;
    cr_assert_eq(l3_png_encode(&gi, g2, 0, &png, &n), L3_ERR_INVALID_ARG);
    g2[3] = 2;
    cr_assert_eq(l3_png_encode(&gi, g2, 0, &png, &n), L3_OK);
    void *dp = NULL;
    struct l3_info di;
    cr_assert_eq(l3_png_decode(png, n, NULL, &di, &dp, NULL), L3_OK);
    cr_assert(memcmp(dp, g2, 4) == 0 && di.bit_depth == 2);
    free(dp);
    free(png);

    struct l3_info pi = gi;
    pi.color = L3_COLOR_PALETTE;
    pi.palette_len = 2; /* index 2 and 3 out of range */
    cr_assert_eq(l3_png_encode(&pi, g2, 0, &png, &n), L3_ERR_INVALID_ARG);
    pi.palette_len = 4;
    pi.palette_alpha_len = 5;
    cr_assert_eq(l3_png_encode(&pi, g2, 0, &png, &n), L3_ERR_INVALID_ARG);
    pi.palette_alpha_len = 2;
    pi.palette[1][3] = 7;
    pi.palette[3][3] = 255;
    cr_assert_eq(l3_png_encode(&pi, g2, 0, &png, &n), L3_OK);
    cr_assert_eq(l3_png_decode(png, n, NULL, &di, &dp, NULL), L3_OK);
    cr_assert(di.palette_len == 4 && di.palette_alpha_len == 2 && di.palette[1][3] == 7);
    free(dp);
    free(png);

    struct l3_info ki = gi;
    ki.has_trns_key = 1;
    ki.trns_key[0] = 4; /* does not fit 2 bits */
    cr_assert_eq(l3_png_encode(&ki, g2, 0, &png, &n), L3_ERR_INVALID_ARG);
    ki.trns_key[0] = 3;
    cr_assert_eq(l3_png_encode(&ki, g2, 0, &png, &n), L3_OK);
    cr_assert_eq(l3_png_decode(png, n, NULL, &di, &dp, NULL), L3_OK);
    cr_assert(di.has_trns_key == 1 && di.trns_key[0] == 3);
    free(dp);
    free(png);
}

/* =================================================================
 * PNG -> L3 transcoding (codec/transcode.c): decoding and encoding
 * overlap, and the file must be byte for byte l3_encode's output for the
 * pixels l3_png_decode gives, with the same options.
 * ================================================================= */

/* l3_encode of l3_png_decode's pixels (one thread). */
static int tc_reference(const unsigned char *png, size_t n, const struct l3_encode_options *o,
                        void **ref_ret, size_t *ref_n_ret)
{
    struct l3_info info;
    void *px = NULL;
    *ref_ret = NULL;
    int st = l3_png_decode(png, n, &o->limits, &info, &px, NULL);
    if (st != L3_OK)
        return st;
    struct l3_encode_options one = *o;
    one.threads = 1;
    st = l3_encode(&info, px, 0, &one, ref_ret, ref_n_ret);
    free(px);
    return st;
}

/* Transcodes from memory and from an fd with `threads`; both must give the
 * reference's status and, when it succeeds, its bytes. */
static void tc_check(const char *name, const unsigned char *png, size_t n, unsigned threads,
                     uint32_t tw, uint32_t th)
{
    struct l3_encode_options o;
    memset(&o, 0, sizeof o);
    o.tile_width = tw;
    o.tile_height = th;
    void *ref = NULL;
    size_t ref_n = 0;
    int ref_st = tc_reference(png, n, &o, &ref, &ref_n);
    o.threads = threads;
    for (int via_fd = 0; via_fd < 2; via_fd++) {
        void *out = (void *)1;
        size_t out_n = 1;
        int st;
        if (via_fd) {
            char path[64];
            int fd = tmpfile_with(png, n, path, sizeof path);
            unlink(path);
            st = l3_transcode_png_fd(fd, &o, &out, &out_n);
            close(fd);
        } else {
            st = l3_transcode_png(png, n, &o, &out, &out_n);
        }
        cr_assert_eq(st, ref_st, "%s (%s, %u threads, tiles %ux%u): status %d, expected %d",
                     name, via_fd ? "fd" : "memory", threads, tw, th, st, ref_st);
        if (st != L3_OK) {
            cr_assert_null(out, "%s: output set on failure", name);
            cr_assert_eq(out_n, 0);
            continue;
        }
        cr_assert_eq(out_n, ref_n, "%s (%s, %u threads, tiles %ux%u): %zu bytes, expected %zu",
                     name, via_fd ? "fd" : "memory", threads, tw, th, out_n, ref_n);
        cr_assert(memcmp(out, ref, ref_n) == 0,
                  "%s (%s, %u threads, tiles %ux%u): bytes differ from l3_encode at %zu", name,
                  via_fd ? "fd" : "memory", threads, tw, th,
                  first_diff(out, ref, ref_n));
        cr_assert_eq(l3_verify(out, out_n), L3_OK, "%s", name);
        free(out);
    }
    free(ref);
}

/* A PNG large enough for many IDAT chunks and many tile bands. */
static unsigned char *tc_big_png(int interlace, size_t *n_ret)
{
    return rgb8_png(320, 240, interlace, n_ret);
}

Test(transcode, generated_every_format_byte_identical)
{
    static const struct {
        uint32_t w, h;
    } sizes[] = {{1, 1}, {37, 1}, {65, 33}, {130, 70}, {4097, 3}};
    static const unsigned threads[] = {1, 2, 4};
    struct format_seen fs;
    memset(&fs, 0, sizeof fs);
    for (size_t f = 0; f < sizeof gen_formats / sizeof gen_formats[0]; f++)
        for (int il = 0; il < 2; il++)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                struct gen_desc g;
                gen_setup(&g, gen_formats[f].ctype, gen_formats[f].depth, sizes[s].w,
                          sizes[s].h, il, (int)(s + il));
                size_t pn, n;
                unsigned char *px = gen_pixels(&g, &pn);
                unsigned char *png = gen_write(&g, px, &n);
                char name[128];
                snprintf(name, sizeof name, "ctype %d depth %d %ux%u %s", g.ctype, g.depth,
                         g.w, g.h, il ? "Adam7" : "progressive");
                for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
                    /* default tiles, and small tiles for many bands */
                    tc_check(name, png, n, threads[t], 0, 0);
                    tc_check(name, png, n, threads[t], 16, 8);
                }
                free(png);
                free(px);
                format_saw(&fs, g.ctype, g.depth, il);
            }
    format_assert_all(&fs, "transcode.generated_every_format_byte_identical");
}

Test(transcode, interlaced_falls_back_byte_identical)
{
    size_t n;
    unsigned char *png = tc_big_png(1, &n);
    for (unsigned t = 1; t <= 4; t++) {
        tc_check("320x240 Adam7", png, n, t, 0, 0);
        tc_check("320x240 Adam7", png, n, t, 32, 16);
    }
    free(png);
}

/* Flips a byte in the IDAT chunk that starts past `frac` of the file: the
 * decoder fails after earlier bands were handed to the workers. */
static void tc_corrupt_idat(unsigned char *png, size_t n, double frac, int fix)
{
    size_t off = 8;
    while (off + 12 <= n) {
        uint32_t len = get32(png + off);
        if (memcmp(png + off + 4, "IDAT", 4) == 0 && off >= (size_t)(n * frac) && len > 16) {
            png[off + 8 + len / 2] ^= 0x5a;
            if (fix)
                fix_crc(png + off);
            return;
        }
        off += 12 + (size_t)len;
    }
    cr_assert_fail("no IDAT past %.0f%% of the file", frac * 100);
}

Test(transcode, corrupt_mid_stream)
{
    size_t n;
    unsigned char *good = tc_big_png(0, &n);
    unsigned char *png = malloc(n);
    cr_assert_not_null(png);
    static const double fracs[] = {0.3, 0.6, 0.85};
    for (size_t i = 0; i < sizeof fracs / sizeof fracs[0]; i++)
        for (int fix = 0; fix < 2; fix++) {
            memcpy(png, good, n);
            tc_corrupt_idat(png, n, fracs[i], fix);
            struct l3_info info;
            void *px = NULL;
            int dst = l3_png_decode(png, n, NULL, &info, &px, NULL);
            free(px);
            /* a bad CRC on IDAT is always an error; with the CRC fixed the
             * deflate damage may or may not be detectable: the transcoder
             * must agree with the decoder either way */
            if (!fix)
                cr_assert_eq(dst, L3_ERR_PNG);
            for (unsigned t = 1; t <= 4; t++) {
                tc_check("corrupt IDAT", png, n, t, 0, 0);
                tc_check("corrupt IDAT", png, n, t, 64, 8);
            }
        }
    free(png);
    free(good);
}

Test(transcode, truncated)
{
    size_t n;
    unsigned char *png = tc_big_png(0, &n);
    struct l3_encode_options o;
    memset(&o, 0, sizeof o);
    for (unsigned k = 0; k < 20; k++) {
        size_t cut = k == 0 ? 7 : n * k / 20;
        for (unsigned t = 1; t <= 4; t *= 2) {
            o.threads = t;
            o.tile_height = 16;
            void *out = (void *)1;
            size_t out_n = 1;
            cr_assert_eq(l3_transcode_png(png, cut, &o, &out, &out_n), L3_ERR_PNG,
                         "cut at %zu of %zu, %u threads", cut, n, t);
            cr_assert(out == NULL && out_n == 0);
            char path[64];
            int fd = tmpfile_with(png, cut, path, sizeof path);
            unlink(path);
            out = (void *)1;
            cr_assert_eq(l3_transcode_png_fd(fd, &o, &out, &out_n), L3_ERR_PNG,
                         "fd cut at %zu of %zu, %u threads", cut, n, t);
            cr_assert_null(out);
            close(fd);
        }
    }
    free(png);
}

Test(transcode, limits_and_fd_errors)
{
    size_t n;
    unsigned char *png = tc_big_png(0, &n);
    struct l3_encode_options o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    void *out = NULL;
    size_t out_n;
    o.limits.max_pixels = 320 * 240 - 1;
    cr_assert_eq(l3_transcode_png(png, n, &o, &out, &out_n), L3_ERR_LIMIT);
    o.limits.max_pixels = 0;
    o.limits.max_memory = 4096;
    cr_assert_eq(l3_transcode_png(png, n, &o, &out, &out_n), L3_ERR_LIMIT);
    /* room for the pixels but not for the encoder: still a limit error */
    o.limits.max_memory = 320 * 240 * 3 + 64 * 1024;
    cr_assert_eq(l3_transcode_png(png, n, &o, &out, &out_n), L3_ERR_LIMIT);
    cr_assert_null(out);
    o.limits.max_memory = 0;
    cr_assert_eq(l3_transcode_png_fd(-1, &o, &out, &out_n), L3_ERR_IO);
    int dfd = open("/", O_RDONLY | O_DIRECTORY);
    cr_assert_geq(dfd, 0);
    cr_assert_eq(l3_transcode_png_fd(dfd, &o, &out, &out_n), L3_ERR_IO);
    close(dfd);
    cr_assert_eq(l3_transcode_png(NULL, 0, &o, &out, &out_n), L3_ERR_PNG);
    cr_assert_eq(l3_transcode_png(png, n, &o, NULL, &out_n), L3_ERR_INVALID_ARG);
    /* bad tile options: reported after a full decode, as l3_encode would */
    o.tile_width = 2000;
    cr_assert_eq(l3_transcode_png(png, n, &o, &out, &out_n), L3_ERR_INVALID_ARG);
    free(png);
}

static void tc_corpus(const char *sub)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/png/%s", pt_corpus_dir(), sub);
    size_t n = 0;
    char **files = pt_list_png(dir, &n);
    if (files == NULL || n == 0)
        cr_skip_test("%s absent or empty (made by scripts/fetch-corpus.sh)", dir);
    unsigned step = PT_ASAN ? 4 : 1;
    for (size_t i = 0; i < n; i += step) {
        size_t sz;
        unsigned char *d = tc_slurp(files[i], &sz);
        cr_assert_not_null(d);
        tc_check(strrchr(files[i], '/') + 1, d, sz, i % 2 ? 4 : 2, 0, 0);
        free(d);
    }
    pt_free_list(files, n);
}

Test(transcode, corpus_photos_2048, .timeout = TC_TIMEOUT(300)) { tc_corpus("photos-2048"); }
Test(transcode, corpus_renders_2048, .timeout = TC_TIMEOUT(300)) { tc_corpus("renders-2048"); }
Test(transcode, corpus_wallpapers, .timeout = TC_TIMEOUT(300)) { tc_corpus("wallpapers"); }
Test(transcode, corpus_pngsuite, .timeout = TC_TIMEOUT(300)) { tc_corpus("pngsuite"); }
