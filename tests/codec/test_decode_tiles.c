/* test_decode_tiles.c — l3_decode_tiles() (decoded tiles handed to a sink) and
 * the agreement of the SIMD and the reference (L3_DECODE_SCALAR) decoders:
 * same status and same samples on valid and on corrupted files. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "helpers.h"
#include "l3.h"
#include "l3_internal.h"
#include "l3_tile.h"
#include "tc_file.h"

static const unsigned depths_of[5][5] = {
    {1, 2, 4, 8, 16}, {8, 16}, {8, 16}, {8, 16}, {1, 2, 4, 8}};
static const unsigned ndepths[5] = {5, 2, 2, 2, 4};

/* A sink that assembles the tiles into an interleaved image (l3_decode's
 * layout) and counts how often each tile arrives. */
struct assemble {
    pthread_mutex_t lock;
    const struct l3_info *info;
    uint8_t *img;
    unsigned *seen; /* per tile */
    unsigned max_worker;
    int bad; /* a field of struct l3_tile_out was wrong */
};

static int assemble_tile(void *arg, unsigned worker, const struct l3_tile_out *t)
{
    struct assemble *a = arg;
    const struct l3_info *in = a->info;
    size_t sb = in->bit_depth > 8 ? 2 : 1;
    size_t row = l3_row_bytes(in);
    uint32_t tx = t->x0 / in->tile_width, ty = t->y0 / in->tile_height;
    uint32_t ew = in->width - t->x0 < in->tile_width ? in->width - t->x0 : in->tile_width;
    uint32_t eh = in->height - t->y0 < in->tile_height ? in->height - t->y0 : in->tile_height;
    pthread_mutex_lock(&a->lock);
    if (t->index != ty * in->tiles_x + tx || t->x0 % in->tile_width || t->y0 % in->tile_height ||
        t->w != ew || t->h != eh || t->channels != in->channels ||
        t->bit_depth != in->bit_depth || t->stride < t->w)
        a->bad = 1;
    for (unsigned c = 0; c < 4; c++)
        if ((c < t->channels) != (t->plane[c] != NULL))
            a->bad = 1;
    if (worker > a->max_worker)
        a->max_worker = worker;
    if (!a->bad) {
        a->seen[t->index]++;
        for (uint32_t y = 0; y < t->h; y++)
            for (uint32_t x = 0; x < t->w; x++)
                for (unsigned c = 0; c < t->channels; c++) {
                    uint8_t *o = a->img + (size_t)(t->y0 + y) * row +
                                 ((size_t)(t->x0 + x) * in->channels + c) * sb;
                    size_t i = (size_t)y * t->stride + x;
                    if (sb == 1)
                        *o = ((const uint8_t *)t->plane[c])[i];
                    else
                        memcpy(o, (const uint16_t *)t->plane[c] + i, 2);
                }
    }
    pthread_mutex_unlock(&a->lock);
    return 0;
}

/* l3_decode_tiles on f with the given threads and flags must give exactly
 * l3_decode's image, every tile once. */
static void check_tiles(const void *f, size_t n, unsigned threads, uint32_t flags)
{
    struct l3_info info;
    cr_assert_eq(l3_read_info(f, n, &info, NULL), L3_OK);
    size_t raw = l3_decoded_size(&info, 0);
    uint8_t *want = malloc(raw), *got = calloc(1, raw);
    struct l3_decode_options o = {0};
    o.flags = flags;
    cr_assert_eq(l3_decode(f, n, want, raw, 0, &o), L3_OK);
    struct assemble a;
    memset(&a, 0, sizeof a);
    pthread_mutex_init(&a.lock, NULL);
    a.info = &info;
    a.img = got;
    a.seen = calloc((size_t)info.tiles_x * info.tiles_y, sizeof *a.seen);
    o.threads = threads;
    cr_assert_eq(l3_decode_tiles(f, n, &o, assemble_tile, &a), L3_OK);
    cr_assert_eq(a.bad, 0, "a tile description was wrong (%ux%u color %u depth %u)",
                 info.width, info.height, info.color, info.bit_depth);
    cr_assert_lt(a.max_worker, threads ? threads : 1);
    for (size_t t = 0; t < (size_t)info.tiles_x * info.tiles_y; t++)
        cr_assert_eq(a.seen[t], 1, "tile %zu handed over %u times", t, a.seen[t]);
    cr_assert_eq(memcmp(want, got, raw), 0, "tiles differ from l3_decode (%ux%u color %u)",
                 info.width, info.height, info.color);
    pthread_mutex_destroy(&a.lock);
    free(a.seen);
    free(want);
    free(got);
}

static void *encode_or_fail(const struct l3_info *info, const void *px, uint32_t tile,
                            int effort, size_t *n)
{
    void *out;
    int st = th_encode(info, px, tile, effort, &out, n);
    cr_assert_eq(st, L3_OK, "encode: %s", l3_strerror(st));
    return out;
}

Test(decode_tiles, every_model_depth_and_edge)
{
    static const uint32_t sizes[][2] = {{1, 1}, {29, 3}, {64, 64}, {130, 67}, {200, 129}};
    for (unsigned color = 0; color < 5; color++)
        for (unsigned di = 0; di < ndepths[color]; di++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                struct l3_info info;
                th_info(&info, color, depths_of[color][di], sizes[si][0], sizes[si][1]);
                void *px = th_image(&info, TH_MIXED, si + 3 * color, NULL);
                size_t n;
                void *f = encode_or_fail(&info, px, si == 4 ? 32 : 0, 0, &n);
                check_tiles(f, n, 1, 0);
                check_tiles(f, n, 3, 0);
                check_tiles(f, n, 2, L3_DECODE_SCALAR);
                free(px);
                l3_free(f);
            }
}

/* With several threads the full tiles are cut into whole batches and a tail
 * of small ones, the edge tiles in between (dec_tiles.c): images with all
 * three, for 1, 2 and 4 planes (24 to 48 tiles per whole batch). */
Test(decode_tiles, batches_head_edges_and_tail)
{
    static const struct {
        unsigned color;
        uint32_t w, h, tile;
    } cases[] = {
        {L3_COLOR_GRAY, 300, 290, 16}, /* 18 x 18 full tiles, 48 a batch */
        {L3_COLOR_RGB, 520, 330, 32},  /* 16 x 10, 24 a batch */
        {L3_COLOR_RGBA, 333, 200, 16}, /* 20 x 12, 24 a batch */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct l3_info info;
        th_info(&info, cases[c].color, 8, cases[c].w, cases[c].h);
        void *px = th_image(&info, TH_MIXED, 40 + c, NULL);
        size_t n;
        void *f = encode_or_fail(&info, px, cases[c].tile, 0, &n);
        for (unsigned threads = 1; threads <= 4; threads++)
            check_tiles(f, n, threads, 0);
        free(px);
        l3_free(f);
    }
}

static int stop_at_third(void *arg, unsigned worker, const struct l3_tile_out *t)
{
    (void)worker, (void)t;
    int *calls = arg;
    return __atomic_add_fetch(calls, 1, __ATOMIC_SEQ_CST) == 3 ? 4242 : 0;
}

Test(decode_tiles, sink_status_and_bad_arguments)
{
    struct l3_info info;
    th_info(&info, L3_COLOR_RGB, 8, 300, 200);
    void *px = th_image(&info, TH_NOISE, 1, NULL);
    size_t n;
    void *f = encode_or_fail(&info, px, 32, 0, &n);
    int calls = 0;
    cr_assert_eq(l3_decode_tiles(f, n, NULL, stop_at_third, &calls), 4242);
    cr_assert_eq(calls, 3, "the decode went on after the sink said stop");
    cr_assert_eq(l3_decode_tiles(f, n, NULL, NULL, NULL), L3_ERR_INVALID_ARG);
    cr_assert_eq(l3_decode_tiles(NULL, n, NULL, stop_at_third, &calls), L3_ERR_INVALID_ARG);
    cr_assert_eq(l3_decode_tiles(f, n - 1, NULL, stop_at_third, &calls), L3_ERR_TRUNCATED);
    struct l3_decode_options o = {0};
    o.limits.max_pixels = 300 * 200 - 1;
    cr_assert_eq(l3_decode_tiles(f, n, &o, stop_at_third, &calls), L3_ERR_LIMIT);
    o.limits.max_pixels = 0;
    o.flags = 0x80;
    cr_assert_eq(l3_decode_tiles(f, n, &o, stop_at_third, &calls), L3_ERR_INVALID_ARG);
    /* a corrupt payload is caught by VERIFY before any tile is handed over */
    uint8_t *g = malloc(n);
    memcpy(g, f, n);
    g[n - 1] ^= 1;
    o.flags = L3_DECODE_VERIFY;
    calls = 0;
    cr_assert_eq(l3_decode_tiles(g, n, &o, stop_at_third, &calls), L3_ERR_PAYLOAD_CHECKSUM);
    cr_assert_eq(calls, 0);
    free(g);
    free(px);
    l3_free(f);
}

/* ---------------------------------------------------------------- SIMD vs reference */

/* Decodes with both decoders (1 and 2 threads): same status; same samples on
 * success. */
static void parity(const uint8_t *f, size_t n, size_t raw, const char *what)
{
    uint8_t *a = malloc(raw ? raw : 1), *b = malloc(raw ? raw : 1);
    for (unsigned threads = 1; threads <= 2; threads++) {
        struct l3_decode_options o = {0};
        o.threads = threads;
        o.flags = L3_DECODE_SCALAR;
        memset(a, 0, raw);
        memset(b, 0, raw);
        int sa = l3_decode(f, n, a, raw, 0, &o);
        o.flags = 0;
        int sb = l3_decode(f, n, b, raw, 0, &o);
        cr_assert_eq(sa, sb, "%s: reference %s, SIMD %s", what, l3_strerror(sa),
                     l3_strerror(sb));
        if (sa == L3_OK)
            cr_assert_eq(memcmp(a, b, raw), 0, "%s: samples differ", what);
        o.flags = L3_DECODE_NO_AVX512;
        memset(b, 0, raw);
        sb = l3_decode(f, n, b, raw, 0, &o);
        cr_assert_eq(sa, sb, "%s: reference %s, SIMD (AVX2) %s", what, l3_strerror(sa),
                     l3_strerror(sb));
        if (sa == L3_OK)
            cr_assert_eq(memcmp(a, b, raw), 0, "%s: samples differ (AVX2)", what);
    }
    free(a);
    free(b);
}

Test(decode_tiles, simd_matches_reference_on_valid_files)
{
    static const uint32_t sizes[][2] = {{64, 64}, {512, 128}, {333, 197}, {8, 300}};
    for (unsigned color = 0; color < 5; color++)
        for (unsigned di = 0; di < ndepths[color]; di++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
                for (int pat = TH_NOISE; pat <= TH_MIXED; pat++) {
                    struct l3_info info;
                    th_info(&info, color, depths_of[color][di], sizes[si][0], sizes[si][1]);
                    void *px = th_image(&info, (enum th_pattern)pat, si * 7 + pat, NULL);
                    size_t n;
                    uint8_t *f = encode_or_fail(&info, px, si == 2 ? 48 : 0, pat == TH_MAX ? -1 : 0, &n);
                    char what[96];
                    snprintf(what, sizeof what, "color %u depth %u %ux%u pattern %d", color,
                             info.bit_depth, info.width, info.height, pat);
                    parity(f, n, l3_decoded_size(&info, 0), what);
                    free(px);
                    l3_free(f);
                }
}

Test(decode_tiles, simd_matches_reference_on_corrupt_files)
{
    /* bit flips, byte changes and zeroed runs in the payload, header resealed */
    for (unsigned color = 0; color < 5; color++) {
        unsigned depth = color == L3_COLOR_PALETTE ? 4 : 8;
        struct l3_info info;
        th_info(&info, color, depth, 200, 130);
        void *px = th_image(&info, TH_MIXED, 11 + color, NULL);
        size_t n;
        uint8_t *f = encode_or_fail(&info, px, 0, 0, &n);
        struct l3_layout lay;
        cr_assert_eq(l3_read_layout(f, n, NULL, &lay, NULL), L3_OK);
        size_t raw = l3_decoded_size(&info, 0);
        uint8_t *g = malloc(n);
        uint64_t s = 99 + color;
        for (int trial = 0; trial < 400; trial++) {
            memcpy(g, f, n);
            size_t pos = lay.header_size + tc_splitmix64(&s) % lay.payload_size;
            switch (trial % 3) {
            case 0: g[pos] ^= (uint8_t)(1u << (tc_splitmix64(&s) % 8)); break;
            case 1: g[pos] = (uint8_t)tc_splitmix64(&s); break;
            default: {
                size_t len = 1 + tc_splitmix64(&s) % 24;
                if (len > n - pos)
                    len = n - pos;
                memset(g + pos, trial & 4 ? 0xff : 0, len);
            }
            }
            /* l3_decode does not check the payload checksum: the change
             * reaches the tile decoders */
            char what[64];
            snprintf(what, sizeof what, "color %u trial %d at %zu", color, trial, pos);
            parity(g, n, raw, what);
        }
        free(g);
        free(px);
        l3_free(f);
    }
}

/* The repository's sample images (real photos, label maps, RGBA art, 16-bit):
 * both decoders on the files and on corrupted copies. */
Test(decode_tiles, simd_matches_reference_on_sample_images)
{
    static const char *const files[] = {
        "leftImg8bit/train/meadow/meadow_000000_000019_leftImg8bit.png",
        "leftImg8bit/train/meadow/meadow_000001_000019_leftImg8bit.png",
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
        size_t pn, n;
        uint8_t *png = tc_slurp(path, &pn);
        cr_assert_not_null(png, "%s: %s", path, strerror(errno));
        void *f = NULL;
        cr_assert_eq(l3_transcode_png(png, pn, NULL, &f, &n), L3_OK, "%s", path);
        struct l3_info info;
        struct l3_layout lay;
        cr_assert_eq(l3_read_layout(f, n, &info, &lay, NULL), L3_OK);
        size_t raw = l3_decoded_size(&info, 0);
        parity(f, n, raw, files[i]);
        uint8_t *g = malloc(n);
        uint64_t s = 5 + i;
        for (int trial = 0; trial < 60; trial++) {
            memcpy(g, f, n);
            for (int k = 0; k <= trial % 3; k++) {
                size_t pos = lay.header_size + tc_splitmix64(&s) % lay.payload_size;
                g[pos] ^= (uint8_t)(1u << (tc_splitmix64(&s) % 8));
            }
            char what[128];
            snprintf(what, sizeof what, "%s trial %d", files[i], trial);
            parity(g, n, raw, what);
        }
        free(g);
        free(png);
        l3_free(f);
    }
}

/* LEFT2 planes (period-2 dithers) in the SIMD lanes, next to MED and GRAD
 * lanes of the same vectors: valid files and corrupted copies. */
Test(decode_tiles, simd_left2_lanes_match_reference)
{
    for (unsigned color = L3_COLOR_GRAY; color <= L3_COLOR_RGBA; color++) {
        struct l3_info info;
        th_info(&info, color, 8, 300, 140);
        const unsigned C = info.channels;
        uint8_t *px = malloc((size_t)300 * 140 * C);
        uint64_t s = 31 + color;
        for (uint32_t y = 0; y < 140; y++)
            for (uint32_t x = 0; x < 300; x++)
                for (unsigned c = 0; c < C; c++) {
                    uint32_t v;
                    if ((x / 64 + y / 64) % 2 == 0) /* dither, amplitude per row: LEFT2 */
                        v = (x & 1) * (40 + 30 * c + ((y * 2654435761u) >> 26) % 60) + x / 8 +
                            (uint32_t)(tc_splitmix64(&s) % 3);
                    else /* smooth with noise: MED / GRAD */
                        v = x + 2 * y + (uint32_t)(tc_splitmix64(&s) % 9);
                    px[((size_t)y * 300 + x) * C + c] = (uint8_t)v;
                }
        size_t n;
        uint8_t *f = encode_or_fail(&info, px, 0, -1, &n);
        unsigned counts[256] = {0};
        cr_assert_eq(th_plane_modes(f, n, counts), 0);
        cr_assert_gt(counts[L3_PLANE_LEFT2] + counts[L3_PLANE_LEFT2 | L3_PLANE_SHORT], 0,
                     "color %u: no LEFT2 plane", color);
        size_t raw = l3_decoded_size(&info, 0);
        parity(f, n, raw, "LEFT2 image");
        struct l3_layout lay;
        cr_assert_eq(l3_read_layout(f, n, NULL, &lay, NULL), L3_OK);
        uint8_t *g = malloc(n);
        for (int trial = 0; trial < 150; trial++) {
            memcpy(g, f, n);
            size_t pos = lay.header_size + tc_splitmix64(&s) % lay.payload_size;
            g[pos] ^= (uint8_t)(1u << (tc_splitmix64(&s) % 8));
            char what[64];
            snprintf(what, sizeof what, "LEFT2 color %u trial %d at %zu", color, trial, pos);
            parity(g, n, raw, what);
        }
        free(g);
        free(px);
        l3_free(f);
    }
}

/* The plane of an 8-bit gray 64 x 64 gradient with noise, as the lane decoder
 * gets it: its stream (copied to dst + at), length and mode, and the samples
 * the reference decoder gives. */
static uint32_t plane_stream(uint8_t *dst, size_t at, uint32_t *mode, uint8_t ref[64 * 64])
{
    struct l3_info info;
    th_info(&info, L3_COLOR_GRAY, 8, 64, 64);
    uint8_t *px = th_image(&info, TH_GRADIENT, 5, NULL);
    uint64_t seed = 5;
    for (int i = 0; i < 64 * 64; i++)
        px[i] = (uint8_t)(px[i] + tc_splitmix64(&seed) % 7);
    size_t n;
    uint8_t *f = encode_or_fail(&info, px, 0, -1, &n);
    struct l3_tile_header th;
    const uint8_t *tile = th_tile(f, n, 0, &th);
    cr_assert_not_null(tile);
    *mode = th.mode[0];
    uint32_t kind = L3_PLANE_KIND(*mode);
    cr_assert((kind == L3_PLANE_MED || kind == L3_PLANE_GRAD) && !(*mode & L3_PLANE_LZ),
              "mode %u is not a lane decoder's", *mode);
    uint16_t wide[64 * 64];
    cr_assert_eq(l3_tile_plane_decode(tile + th.off[0], th.len[0], *mode, 64, 64, 8, wide), 0);
    for (int i = 0; i < 64 * 64; i++)
        ref[i] = (uint8_t)wide[i];
    uint32_t len = th.len[0];
    memcpy(dst + at, tile + th.off[0], len);
    free(px);
    l3_free(f);
    return len;
}

Test(decode_tiles, simd_lanes_need_slack_behind_their_stream)
{
    /* a lane may read L3_SIMD_SLACK bytes past its stream: one byte less in
     * the buffer and the stream goes to the reference decoder */
    static uint8_t buf[4096];
    cr_assert(l3_simd_lane_ok(L3_PLANE_GRAD, buf + 100, 1000, buf, 1100 + L3_SIMD_SLACK));
    cr_assert_not(l3_simd_lane_ok(L3_PLANE_GRAD, buf + 100, 1000, buf, 1099 + L3_SIMD_SLACK));
    cr_assert_not(l3_simd_lane_ok(L3_PLANE_GRAD, buf + 100, 1000, buf, 50));
    cr_assert(l3_simd_lane_ok(L3_PLANE_MED | L3_PLANE_SHORT, buf, 0, buf, L3_SIMD_SLACK));
    cr_assert_not(l3_simd_lane_ok(L3_PLANE_RAW, buf, 10, buf, sizeof buf));
    cr_assert_not(l3_simd_lane_ok(L3_PLANE_LEFT | L3_PLANE_LZ, buf, 10, buf, sizeof buf));
}

Test(decode_tiles, simd_call_with_streams_too_far_apart_is_left_to_reference)
{
    if (!l3_simd_available())
        cr_skip_test("no SIMD lane decoder on this CPU");
    /* two copies of one stream, L3_SIMD_SPAN apart: bit positions from the
     * lower one would not fit in 32 bits, so the call decodes neither (the
     * caller then uses the reference decoder); each alone decodes */
    const size_t span = (size_t)L3_SIMD_SPAN, size = span + 65536;
    uint8_t *big = mmap(NULL, size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    cr_assert_neq(big, MAP_FAILED);
    uint8_t ref[64 * 64];
    uint32_t mode;
    uint32_t len = plane_stream(big, 0, &mode, ref);
    memcpy(big + span, big, len);
    size_t scr_n = l3_simd_scratch_size(64);
    void *scr = aligned_alloc(64, scr_n);
    static uint8_t out[2][64 * 64];
    struct l3_simd_lane lanes[2] = {{big, len, mode, out[0], 0}, {big + span, len, mode, out[1], 1}};
    for (int far = 0; far < 2; far++) {
        uint32_t ok[L3_SIMD_MAX_LANES / 32];
        memset(out, 0, sizeof out);
        l3_simd_decode_planes(far ? lanes : lanes + 1, far ? 2 : 1, 64, 64, 8, scr, 1, ok);
        if (far) {
            cr_assert_eq(ok[0], 0u, "lanes %u apart decoded", (unsigned)span);
        } else {
            cr_assert_eq(ok[0], 1u, "a lone lane did not decode");
            cr_assert_eq(memcmp(out[1], ref, sizeof ref), 0);
        }
    }
    lanes[1].stream = big + 4096; /* near each other: both decode, both right */
    memcpy(big + 4096, big, len);
    uint32_t ok[L3_SIMD_MAX_LANES / 32];
    l3_simd_decode_planes(lanes, 2, 64, 64, 8, scr, 1, ok);
    cr_assert_eq(ok[0], 3u);
    cr_assert_eq(memcmp(out[0], ref, sizeof ref), 0);
    cr_assert_eq(memcmp(out[1], ref, sizeof ref), 0);
    free(scr);
    munmap(big, size);
}

/* l3_decode stores a batch's tiles row by row across them and undoes the
 * colour transform (R - G, B - G) as it interleaves 8-bit RGB and RGBA
 * (dec_store.c); the SIMD path, the reference path and several threads must
 * all give the source pixels, also on edge tiles whose rows end in the scalar
 * part of the interleave. */
Test(decode_tiles, rows_stored_with_colour_transform_undone)
{
    static const uint32_t sizes[][2] = {{203, 77}, {2048, 130}, {64, 64}, {17, 200}};
    for (unsigned color = L3_COLOR_RGB; color <= L3_COLOR_RGBA; color++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            struct l3_info info;
            const uint32_t W = sizes[si][0], H = sizes[si][1];
            th_info(&info, color, 8, W, H);
            const unsigned C = info.channels;
            uint8_t *px = malloc((size_t)W * H * C);
            uint64_t s = 77 + si + color;
            for (uint32_t y = 0; y < H; y++)
                for (uint32_t x = 0; x < W; x++) { /* channels that follow G: the transform pays */
                    uint8_t *p = px + ((size_t)y * W + x) * C;
                    uint32_t g = (x * 3 + y * 5 + (uint32_t)(tc_splitmix64(&s) % 23)) & 255;
                    p[0] = (uint8_t)(g + 40 + tc_splitmix64(&s) % 3);
                    p[1] = (uint8_t)g;
                    p[2] = (uint8_t)(g + 200 + tc_splitmix64(&s) % 3);
                    if (C == 4)
                        p[3] = (uint8_t)(x ^ y);
                }
            size_t n;
            uint8_t *f = encode_or_fail(&info, px, 0, 0, &n);
            unsigned xf = 0;
            cr_assert_eq(l3_read_info(f, n, &info, NULL), L3_OK);
            for (uint32_t t = 0; t < info.tiles_x * info.tiles_y; t++) {
                struct l3_tile_header th;
                cr_assert_not_null(th_tile(f, n, t, &th));
                xf += (th.flags & L3_TILE_XFORM_G) != 0;
            }
            cr_assert_gt(xf, 0, "%ux%u colour %u: no tile with the colour transform", W, H,
                         color);
            size_t raw = l3_decoded_size(&info, 0);
            uint8_t *got = malloc(raw);
            static const struct {
                unsigned threads;
                uint32_t flags;
            } runs[] = {{1, 0}, {2, 0}, {1, L3_DECODE_SCALAR}, {3, L3_DECODE_SCALAR}};
            for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
                struct l3_decode_options o = {0};
                o.threads = runs[r].threads;
                o.flags = runs[r].flags;
                memset(got, 0x5a, raw);
                cr_assert_eq(l3_decode(f, n, got, raw, 0, &o), L3_OK);
                cr_assert_eq(memcmp(got, px, raw), 0,
                             "%ux%u colour %u, %u threads, flags %u: pixels differ", W, H, color,
                             runs[r].threads, runs[r].flags);
            }
            check_tiles(f, n, 2, 0);
            free(got);
            free(px);
            l3_free(f);
        }
}
