/* test_decode_lz.c — the fast decoder of LEFT + LZ planes (codec/dec_lz.c)
 * against the reference routine of codec/l3_tile.h: on every such plane of
 * real encoder output and on mutated copies of them it must accept exactly
 * the streams the reference accepts (returning 0 where the reference says
 * L3_ERR_CORRUPT), with the same samples, never writing outside the plane;
 * and whole files must decode to the same status and samples with and
 * without L3_DECODE_SCALAR. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "l3.h"
#include "l3_internal.h"

/* Images whose LEFT + LZ planes take every branch of the copy decoder:
 * flat areas and ramps (copies at distance 1, also across rows), textures
 * of periods 1..40 (short and long distances, pieces cut at the columns 0
 * of source and destination), a row-to-row repeat, and noise blocks so that
 * literal runs of every group symbol sit between the copies. */
static void *lz_texture_image(const struct l3_info *info, uint64_t seed)
{
    const unsigned C = info->channels;
    const uint32_t maxv = info->color == L3_COLOR_PALETTE ? info->palette_len - 1u
                                                          : (1u << info->bit_depth) - 1;
    static const uint32_t periods[] = {1, 2, 3, 5, 7, 13, 16, 17, 31, 40};
    uint64_t s = seed;
    uint8_t *px = malloc((size_t)info->width * info->height * C);
    uint32_t tex[40][4];
    for (int i = 0; i < 40; i++)
        for (unsigned c = 0; c < C; c++)
            tex[i][c] = (uint32_t)(tc_splitmix64(&s) % (maxv + 1));
    for (uint32_t y = 0; y < info->height; y++) {
        uint32_t band = (y / 9) % 14, per = periods[band % 10];
        for (uint32_t x = 0; x < info->width; x++)
            for (unsigned c = 0; c < C; c++) {
                uint32_t v;
                if (band == 10) /* a ramp: constant residual */
                    v = (x * (c + 1) + y) % (maxv + 1);
                else if (band == 11) /* flat */
                    v = (c * 37 + 5) % (maxv + 1);
                else if (band == 12) /* noise */
                    v = (uint32_t)(tc_splitmix64(&s) % (maxv + 1));
                else if (band == 13) /* the row two above, shifted */
                    v = (tex[(x + y) % 40][c] + y / 9) % (maxv + 1);
                else /* a texture of period `per` on a slow ramp */
                    v = (tex[(x + 3 * (y % 2)) % per][c] + x / 50) % (maxv + 1);
                if ((x / 11 + y / 7) % 23 == 4) /* sparse noise blocks */
                    v = (uint32_t)(tc_splitmix64(&s) % (maxv + 1));
                px[((size_t)y * info->width + x) * C + c] = (uint8_t)v;
            }
    }
    return px;
}

struct lz_tally {
    unsigned planes;    /* LEFT + LZ planes seen */
    unsigned mutants;   /* mutated streams tried */
    unsigned accepted;  /* ... that still decode */
};

/* The fast decoder on one plane stream, with 8 bytes of `pad` behind it (as
 * the file holds other data there), against the reference decoder. */
static int check_stream(const uint8_t *stream, size_t len, uint32_t mode, uint32_t w,
                        uint32_t h, unsigned depth, uint8_t pad, const char *what)
{
    const size_t n = (size_t)w * h;
    uint8_t *s = malloc(len + 8);
    memcpy(s, stream, len);
    memset(s + len, pad, 8);
    uint16_t *ref = malloc((n + 1) * sizeof *ref);
    uint8_t *got = malloc(n + 16);
    memset(got, 0xa5, n + 16);
    int st = l3_tile_plane_decode(s, len, mode, w, h, depth, ref);
    int ok = l3_lz_decode_u8(s, (uint32_t)len, mode, w, h, depth, got);
    cr_assert(st == L3_OK || st == L3_ERR_CORRUPT, "%s: reference status %d", what, st);
    cr_assert_eq(ok, st == L3_OK, "%s: fast decoder %s, reference %s", what,
                 ok ? "accepts" : "rejects", l3_strerror(st));
    for (size_t i = n; i < n + 16; i++)
        cr_assert_eq(got[i], 0xa5, "%s: wrote past the plane", what);
    if (ok)
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(got[i], ref[i], "%s: sample %zu is %u, reference %u", what, i, got[i],
                         ref[i]);
    free(s);
    free(ref);
    free(got);
    return ok;
}

/* Every LEFT + LZ plane of an encoded file, as it is and mutated. */
static void check_file_planes(const uint8_t *f, size_t n, const char *name, uint64_t seed,
                              struct lz_tally *t)
{
    struct l3_info info;
    struct l3_layout lay;
    cr_assert_eq(l3_read_layout(f, n, &info, &lay, NULL), L3_OK);
    uint64_t rs = seed;
    for (uint32_t ti = 0; ti < lay.tile_count; ti++) {
        uint64_t b, e;
        l3_tile_span(f + lay.table_offset, ti, &b, &e);
        uint32_t x0, y0, w, h;
        l3_tile_rect(info.width, info.height, info.tile_width, info.tile_height, ti, &x0, &y0, &w,
                     &h);
        struct l3_tile_header th;
        const uint8_t *tile = f + lay.header_size + b;
        cr_assert_eq(l3_tile_parse(tile, (size_t)(e - b), lay.planes, &th), L3_OK);
        for (unsigned p = 0; p < lay.planes; p++) {
            if ((th.mode[p] & ~L3_PLANE_SHORT) != (L3_PLANE_LEFT | L3_PLANE_LZ))
                continue;
            t->planes++;
            const uint8_t *s = tile + th.off[p];
            const size_t len = th.len[p];
            char what[160];
            snprintf(what, sizeof what, "%s tile %u plane %u", name, ti, p);
            cr_assert(check_stream(s, len, th.mode[p], w, h, info.bit_depth, (uint8_t)ti, what),
                      "%s: the encoder's plane does not decode", what);
            uint8_t *m = malloc(len);
            for (int k = 0; k < 24; k++) {
                memcpy(m, s, len);
                size_t ml = len;
                size_t at = tc_splitmix64(&rs) % len;
                switch (k % 4) {
                case 0: m[at] ^= (uint8_t)(1u << (tc_splitmix64(&rs) % 8)); break;
                case 1: m[at] = (uint8_t)tc_splitmix64(&rs); break;
                case 2: ml = at; break; /* cut short */
                default: /* a run of zeros or ones */
                    memset(m + at, k & 8 ? 0xff : 0, len - at < 6 ? len - at : 6);
                }
                snprintf(what, sizeof what, "%s tile %u plane %u mutant %d", name, ti, p, k);
                t->mutants++;
                if (ml && check_stream(m, ml, th.mode[p], w, h, info.bit_depth, (uint8_t)k, what))
                    t->accepted++;
            }
            free(m);
        }
    }
}

/* Whole files: l3_decode with and without L3_DECODE_SCALAR, 1 and 2
 * threads, same status and samples. */
static void parity(const uint8_t *f, size_t n, size_t raw, const char *what)
{
    uint8_t *a = malloc(raw), *b = malloc(raw);
    for (unsigned threads = 1; threads <= 2; threads++) {
        struct l3_decode_options o = {0};
        o.threads = threads;
        o.flags = L3_DECODE_SCALAR;
        memset(a, 0, raw);
        int sa = l3_decode(f, n, a, raw, 0, &o);
        o.flags = 0;
        memset(b, 1, raw);
        int sb = l3_decode(f, n, b, raw, 0, &o);
        cr_assert_eq(sa, sb, "%s: reference %s, fast %s", what, l3_strerror(sa), l3_strerror(sb));
        if (sa == L3_OK)
            cr_assert_eq(memcmp(a, b, raw), 0, "%s: samples differ", what);
    }
    free(a);
    free(b);
}

Test(decode_lz, fast_planes_match_reference)
{
    static const struct {
        unsigned color, depth;
        uint32_t w, h, tile;
        int effort;
    } cases[] = {
        {L3_COLOR_RGB, 8, 200, 130, 64, 0},   {L3_COLOR_RGBA, 8, 150, 100, 48, 0},
        {L3_COLOR_GRAY, 8, 131, 77, 20, 2},   {L3_COLOR_GRAY, 4, 96, 64, 32, 2},
        {L3_COLOR_GRAY, 2, 70, 50, 24, 2},    {L3_COLOR_GRAY, 1, 64, 64, 32, 2},
        {L3_COLOR_PALETTE, 8, 90, 60, 64, 0}, {L3_COLOR_GRAY_ALPHA, 8, 100, 70, 40, 2},
    };
    struct lz_tally t = {0};
    unsigned by_depth[9] = {0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int img = 0; img < 2; img++) {
            struct l3_info info;
            th_info(&info, cases[c].color, cases[c].depth, cases[c].w, cases[c].h);
            void *px = img ? th_lz_image(&info, 7 + c) : lz_texture_image(&info, 3 + c);
            size_t n;
            void *f;
            int st = th_encode(&info, px, cases[c].tile, cases[c].effort, &f, &n);
            cr_assert_eq(st, L3_OK, "encode: %s", l3_strerror(st));
            char name[96];
            snprintf(name, sizeof name, "case %zu image %d (color %u depth %u)", c, img,
                     cases[c].color, cases[c].depth);
            unsigned before = t.planes;
            check_file_planes(f, n, name, 11 * c + img, &t);
            by_depth[cases[c].depth] += t.planes - before;
            parity(f, n, l3_decoded_size(&info, 0), name);
            free(px);
            l3_free(f);
        }
    /* the encoder must have written what this test is about */
    for (unsigned d = 1; d <= 8; d *= 2)
        cr_assert_gt(by_depth[d], 0, "no LEFT + LZ plane at depth %u", d);
    cr_assert_gt(t.planes, 100, "only %u LEFT + LZ planes", t.planes);
    cr_assert_gt(t.accepted, 0, "no mutant decoded: the comparison on success was not run");
    cr_assert_lt(t.accepted, t.mutants, "every mutant decoded: the rejections were not run");
}

Test(decode_lz, corrupt_files_same_status)
{
    struct l3_info info;
    th_info(&info, L3_COLOR_RGB, 8, 190, 140);
    void *px = lz_texture_image(&info, 42);
    size_t n;
    void *f;
    int st = th_encode(&info, px, 64, 0, &f, &n);
    cr_assert_eq(st, L3_OK, "encode: %s", l3_strerror(st));
    unsigned counts[256] = {0};
    cr_assert_eq(th_plane_modes(f, n, counts), 0);
    cr_assert_gt(th_lz_planes(counts, L3_PLANE_LEFT), 10);
    struct l3_layout lay;
    cr_assert_eq(l3_read_layout(f, n, NULL, &lay, NULL), L3_OK);
    size_t raw = l3_decoded_size(&info, 0);
    uint8_t *g = malloc(n);
    uint64_t s = 17;
    for (int trial = 0; trial < 300; trial++) {
        memcpy(g, f, n);
        size_t pos = lay.header_size + tc_splitmix64(&s) % lay.payload_size;
        if (trial % 2)
            g[pos] ^= (uint8_t)(1u << (tc_splitmix64(&s) % 8));
        else
            g[pos] = (uint8_t)tc_splitmix64(&s);
        char what[64];
        snprintf(what, sizeof what, "trial %d at %zu", trial, pos);
        parity(g, n, raw, what);
    }
    free(g);
    free(px);
    l3_free(f);
}
