/* png_fixture.c — the helpers of the PNG tests (png_fixture.h). */
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

#include "png_fixture.h"

const char *pt_corpus_dir(void)
{
    const char *c = getenv("L3_CORPUS");
    return c && *c ? c : "/var/cache/l3fs-corpus";
}

/* Sorted list of *.png in dir; NULL when the directory does not exist. */
char **pt_list_png(const char *dir, size_t *n_ret)
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

void pt_free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Reference decoder and writer: png_ref.h. The writer must work. */
unsigned char *gen_write(const struct gen_desc *g, const unsigned char *px, size_t *n_ret)
{
    unsigned char *d = ref_write(g, px, n_ret);
    cr_assert_not_null(d, "test PNG writer failed");
    return d;
}

/* PNG's CRC-32 (ISO 3309), to forge chunks with valid checksums. */
uint32_t pt_crc32(const unsigned char *p, size_t n)
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
unsigned char *gen_pixels(const struct gen_desc *g, size_t *size_ret)
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
void check_info(const char *name, const struct l3_info *i, const struct ref_img *r)
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

void check_same_desc(const char *name, const char *what, const struct l3_info *a,
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

size_t first_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return n;
}

/* The whole chain for one PNG. Returns 1 when checked, 0 when libpng itself
 * refuses the file (the caller decides whether that is acceptable). */
int check_png(const char *name, const unsigned char *png, size_t n, unsigned what)
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

void format_saw(struct format_seen *f, int ctype, int depth, int interlace)
{
    f->seen[ctype][depth][interlace] = 1;
}

/* Every format PNG allows was covered, progressive and Adam7. */
void format_assert_all(const struct format_seen *f, const char *test)
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

void gen_setup(struct gen_desc *g, int ctype, int depth, uint32_t w, uint32_t h,
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

/* An 8-bit RGB PNG of generated pixels. */
unsigned char *rgb8_png(uint32_t w, uint32_t h, int interlace, size_t *n_ret)
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

unsigned char *small_png(size_t *n_ret, int interlace)
{
    return rgb8_png(33, 17, interlace, n_ret);
}

void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Recomputes the CRC of the chunk whose length field is at p. */
void fix_crc(unsigned char *p)
{
    uint32_t len = get32(p);
    put32(p + 8 + len, pt_crc32(p + 4, len + 4));
}

unsigned char *find_chunk(unsigned char *png, size_t n, const char *type)
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

int tmpfile_with(const void *d, size_t n, char *path, size_t pathlen)
{
    snprintf(path, pathlen, "/tmp/l3-test-png-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, d, n), (ssize_t)n);
    cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
    return fd;
}

