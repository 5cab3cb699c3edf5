/* test_tile_simt.c — the SIMT variant of codec/l3_tile.h (what the CUDA
 * kernel runs, compiled as C in tile_simt.c) against the CPU variant (this
 * file's include): the same statuses for every stream, the same samples
 * for every good one. Streams sit at the end of exactly sized heap buffers
 * at each of the four alignments, so a read past a stream's end is an ASan
 * error in the sanitizer build; the output is 8-byte aligned (the vector
 * row path of 4-sample rows) but for one alignment. Streams: every tile plane of generated
 * images of every colour model and depth (all plane modes the encoder
 * makes), the same with flipped bits, cut or extended; random streams in
 * every valid mode; mutated tile headers for l3_tile_parse_plane. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l3.h"
#include "l3_tile.h"

#include "gpu_gen.h"
#include "tile_simt.h"

struct tally {
    unsigned long streams, ok;
    unsigned long ok_mode[64]; /* good streams by mode byte */
};

/* Both variants on one stream; returns the status (asserts they agree). */
static int compare(const uint8_t *s, size_t len, unsigned mode, uint32_t w, uint32_t h,
                   unsigned depth, struct tally *t)
{
    size_t n = (size_t)w * h;
    uint16_t *ref = malloc(n * 2), *gotbuf = malloc(n * 2 + 2), *got;
    cr_assert(ref && gotbuf);
    memset(ref, 0xa5, n * 2);
    int sr = l3_tile_plane_decode(s, len, mode, w, h, depth, ref);
    for (unsigned shift = 0; shift < 4; shift++) {
        uint8_t *buf = malloc(shift + len + (len == 0));
        cr_assert(buf);
        if (len)
            memcpy(buf + shift, s, len);
        got = gotbuf + (shift == 1); /* dst 8-byte aligned or not (vector rows or not) */
        memset(got, 0x5a, n * 2);
        int sg = simt_plane_decode(buf + shift, len, mode, w, h, depth, got);
        cr_assert_eq(sg, sr, "mode %#x %ux%u depth %u len %zu shift %u: SIMT %d, CPU %d", mode,
                     w, h, depth, len, shift, sg, sr);
        if (sr == L3_OK)
            cr_assert(!memcmp(ref, got, n * 2), "mode %#x %ux%u depth %u len %zu shift %u: "
                      "samples differ", mode, w, h, depth, len, shift);
        free(buf);
    }
    t->streams++;
    if (sr == L3_OK) {
        t->ok++;
        t->ok_mode[mode & 63]++;
    }
    free(ref);
    free(gotbuf);
    return sr;
}

/* Every plane of every tile of one encoded image, intact and mutated. */
static void image_streams(const struct gen *g, uint64_t *rng, struct tally *t)
{
    struct l3_info info;
    struct l3_layout lay;
    cr_assert_eq(l3_read_layout(g->l3, g->l3_size, &info, &lay, NULL), L3_OK);
    const uint8_t *file = g->l3, *payload = file + lay.header_size;
    const uint8_t *table = file + lay.table_offset;
    for (uint32_t i = 0; i < lay.tile_count; i++) {
        uint64_t b, e;
        uint32_t x0, y0, w, h;
        l3_tile_span(table, i, &b, &e);
        l3_tile_rect(info.width, info.height, info.tile_width, info.tile_height, i, &x0, &y0,
                     &w, &h);
        struct l3_tile_header th;
        cr_assert_eq(l3_tile_parse(payload + b, e - b, lay.planes, &th), L3_OK);
        for (unsigned p = 0; p < lay.planes; p++) {
            const uint8_t *s = payload + b + th.off[p];
            size_t len = th.len[p];
            cr_assert_eq(compare(s, len, th.mode[p], w, h, info.bit_depth, t), L3_OK);
            uint8_t *m = malloc(len + 8);
            cr_assert(m);
            for (int k = 0; k < 3 && len; k++) { /* one flipped bit */
                memcpy(m, s, len);
                uint64_t r = tc_splitmix64(rng);
                m[r % len] ^= (uint8_t)(1u << (r >> 32) % 8);
                compare(m, len, th.mode[p], w, h, info.bit_depth, t);
            }
            memcpy(m, s, len);
            for (int k = 0; k < 8; k++)
                m[len + k] = (uint8_t)tc_splitmix64(rng);
            for (size_t cut = 1; cut <= 5 && cut <= len; cut += 4) /* cut short */
                compare(m, len - cut, th.mode[p], w, h, info.bit_depth, t);
            compare(m, len + 1, th.mode[p], w, h, info.bit_depth, t); /* extended */
            compare(m, len + 7, th.mode[p], w, h, info.bit_depth, t);
            free(m);
        }
    }
}

/* Sharp-edged shapes with a little noise (MED planes), the last channel of
 * models with alpha constant and the first tile row flat (CONST planes);
 * not for palettes. */
static void gen_edges(struct gen *g, unsigned color, unsigned depth, uint32_t w, uint32_t h,
                      uint64_t seed, unsigned tile)
{
    uint32_t maxv = gen_begin(g, color, depth, w, h);
    struct l3_info *f = &g->info;
    const unsigned C = f->channels, alpha = color == L3_COLOR_RGBA || color == L3_COLOR_GRAY_ALPHA;
    g->px_size = (size_t)w * h * C * (depth == 16 ? 2 : 1);
    g->px = malloc(g->px_size);
    cr_assert_not_null(g->px);
    uint64_t s = seed;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (unsigned c = 0; c < C; c++) {
                uint32_t v;
                if ((alpha && c == C - 1) || y < tile)
                    v = maxv / 3;
                else {
                    int in = (x * 3 + y * 2 + c * 5) % 23 < 11 || (x / 9 + y / 7) % 3 == 0;
                    v = in ? maxv - maxv / 5 : maxv / 6;
                    if (maxv > 16 && tc_splitmix64(&s) % 4 == 0)
                        v += (uint32_t)(tc_splitmix64(&s) % 3);
                }
                size_t i = ((size_t)y * w + x) * C + c;
                if (depth == 16)
                    ((uint16_t *)g->px)[i] = (uint16_t)v;
                else
                    ((uint8_t *)g->px)[i] = (uint8_t)v;
            }
    gen_encode(g, tile, 1);
}

Test(tile_simt, encoded_planes_of_every_model)
{
    struct tally t;
    memset(&t, 0, sizeof t);
    uint64_t rng = 0x5317;
    static const unsigned tiles[] = {32, 13, 64};
    for (size_t m = 0; m < NMODELS; m++) {
        for (unsigned k = 0; k < 4; k++) {
            struct gen g;
            if (k == 3 && MODELS[m].color == L3_COLOR_PALETTE)
                continue; /* palettes: the generators above */
            if (k == 3)
                gen_edges(&g, MODELS[m].color, MODELS[m].depth, 96, 80, 900 + m, 16);
            else if (k == 0)
                gen_image(&g, MODELS[m].color, MODELS[m].depth, 70, 45, 300 + m, tiles[k],
                          MODELS[m].trns);
            else
                gen_pattern(&g, MODELS[m].color, MODELS[m].depth, 70 + k, 45, 800 + m, tiles[k],
                            MODELS[m].trns, k == 1, k == 1 ? 2 : 1);
            image_streams(&g, &rng, &t);
            gen_free(&g);
        }
    }
    /* the plane modes the decoders have: each must have been decoded */
    static const unsigned need[] = {L3_PLANE_CONST, L3_PLANE_MED, L3_PLANE_GRAD,
                                    L3_PLANE_MED | L3_PLANE_SHORT,
                                    L3_PLANE_GRAD | L3_PLANE_SHORT};
    char seen[512] = "";
    for (unsigned md = 0; md < 64; md++)
        if (t.ok_mode[md])
            snprintf(seen + strlen(seen), sizeof seen - strlen(seen), " %#x:%lu", md, t.ok_mode[md]);
    cr_log_info("%lu streams, %lu good; good by mode:%s", t.streams, t.ok, seen);
    for (size_t k = 0; k < sizeof need / sizeof need[0]; k++)
        cr_assert_gt(t.ok_mode[need[k]], 0, "no good stream of mode %#x (seen:%s)", need[k], seen);
    unsigned long lz = 0;
    for (unsigned md = 0; md < 64; md++)
        if (md & L3_PLANE_LZ)
            lz += t.ok_mode[md];
    cr_assert_gt(lz, 0, "no good LZ stream (seen:%s)", seen);
    cr_assert_lt(t.ok, t.streams, "no mutated stream failed: the mutations test nothing");
}

/* Random bytes in every valid mode, sizes and depths, with lengths chosen
 * so that some decode to the end: the reference decoder picks them. */
Test(tile_simt, random_streams_every_mode)
{
    struct tally t;
    memset(&t, 0, sizeof t);
    uint64_t rng = 0x7e57;
    static const unsigned depths[] = {1, 2, 4, 8, 16};
    uint8_t s[400];
    uint16_t *scratch = malloc(40 * 40 * 2);
    cr_assert(scratch);
    for (unsigned mode = 0; mode < 64; mode++) {
        if (!l3_plane_mode_valid(mode))
            continue;
        for (int trial = 0; trial < 24; trial++) {
            uint32_t w = 1 + tc_splitmix64(&rng) % 40, h = 1 + tc_splitmix64(&rng) % 12;
            unsigned depth = depths[tc_splitmix64(&rng) % 5];
            /* mostly one bits: short unary codes, small symbols */
            for (size_t i = 0; i < sizeof s; i++) {
                uint64_t r = tc_splitmix64(&rng);
                s[i] = (uint8_t)(r | (r >> 8) | (trial & 1 ? r >> 16 : 0));
            }
            /* the length at which the reference decodes to the end, if any */
            size_t good = 0;
            for (size_t len = 1; len <= sizeof s && !good; len++)
                if (l3_tile_plane_decode(s, len, mode, w, h, depth, scratch) == L3_OK)
                    good = len;
            compare(s, good ? good : sizeof s, mode, w, h, depth, &t);
            compare(s, 1 + tc_splitmix64(&rng) % sizeof s, mode, w, h, depth, &t);
            if (good > 1)
                compare(s, good - 1, mode, w, h, depth, &t);
        }
    }
    free(scratch);
    cr_log_info("%lu random streams, %lu good", t.streams, t.ok);
    cr_assert_gt(t.ok, 100, "too few random streams decode to the end: %lu", t.ok);
}

/* l3_tile_parse_plane: the statuses of l3_tile_parse, and the fields of
 * the plane it was asked for, on intact and mutated tile headers. */
Test(tile_simt, parse_plane_matches_parse)
{
    uint64_t rng = 0x9a45;
    unsigned long bad = 0, good = 0;
    for (size_t m = 0; m < NMODELS; m++) {
        struct gen g;
        gen_image(&g, MODELS[m].color, MODELS[m].depth, 70, 45, 500 + m, 32, MODELS[m].trns);
        struct l3_info info;
        struct l3_layout lay;
        cr_assert_eq(l3_read_layout(g.l3, g.l3_size, &info, &lay, NULL), L3_OK);
        const uint8_t *payload = (const uint8_t *)g.l3 + lay.header_size;
        const uint8_t *table = (const uint8_t *)g.l3 + lay.table_offset;
        for (uint32_t i = 0; i < lay.tile_count; i++) {
            uint64_t b, e;
            l3_tile_span(table, i, &b, &e);
            size_t size = e - b;
            uint8_t *tile = malloc(size + 4);
            cr_assert(tile);
            for (int k = 0; k < 12; k++) {
                memcpy(tile, payload + b, size);
                size_t sz = size;
                if (k > 0) {
                    uint64_t r = tc_splitmix64(&rng);
                    size_t hb = L3_TILE_HEADER_BYTES(lay.planes);
                    if (k % 4 == 1)
                        tile[r % hb] = (uint8_t)(r >> 16);
                    else if (k % 4 == 2)
                        tile[r % hb] ^= (uint8_t)(1u << (r >> 32) % 8);
                    else if (k % 4 == 3)
                        sz = r % (size + 4);
                    else
                        tile[1 + 5 * (r % lay.planes)] = (uint8_t)(r >> 8) & 0x3f;
                }
                struct l3_tile_header th;
                int st = l3_tile_parse(tile, sz, lay.planes, &th);
                for (unsigned p = 0; p < lay.planes; p++) {
                    uint32_t fl = 99, off = 99, len = 99, mode = 99;
                    int sp = simt_parse_plane(tile, sz, lay.planes, p, &fl, &off, &len, &mode);
                    cr_assert_eq(sp, st, "tile %u plane %u mutation %d", i, p, k);
                    if (st == L3_OK) {
                        cr_assert_eq(fl, th.flags);
                        cr_assert_eq(off, th.off[p]);
                        cr_assert_eq(len, th.len[p]);
                        cr_assert_eq(mode, th.mode[p]);
                    }
                }
                if (st == L3_OK)
                    good++;
                else
                    bad++;
            }
            free(tile);
        }
        gen_free(&g);
    }
    cr_assert_gt(good, 0);
    cr_assert_gt(bad, 0);
}
