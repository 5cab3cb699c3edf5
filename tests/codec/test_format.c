/* test_format.c — L3 format core: round trips, header validation, corruption,
 * limits, strides, threads, the shared tile routine. Deterministic (seeded)
 * inputs only. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "helpers.h"
#include "l3.h"
#include "l3_internal.h"
#include "l3_le.h"
#include "l3_tile.h"

static const unsigned depths_of[5][5] = {
    {1, 2, 4, 8, 16}, {8, 16}, {8, 16}, {8, 16}, {1, 2, 4, 8}};
static const unsigned ndepths[5] = {5, 2, 2, 2, 4};

static void *encode_or_fail(const struct l3_info *info, const void *px,
                            const struct l3_encode_options *eo, size_t *n)
{
    void *out = NULL;
    int st = l3_encode(info, px, 0, eo, &out, n);
    cr_assert_eq(st, L3_OK, "encode: %s", l3_strerror(st));
    return out;
}

/* A small RGB test file used by the corruption tests. */
static void *sample_file(unsigned color, unsigned depth, uint32_t w, uint32_t h,
                         size_t *n, struct l3_info *info_ret)
{
    struct l3_info info;
    th_info(&info, color, depth, w, h);
    void *px = th_image(&info, TH_MIXED, 7, NULL);
    struct l3_encode_options eo = {0};
    eo.tile_width = 16;
    eo.tile_height = 8;
    void *f = encode_or_fail(&info, px, &eo, n);
    free(px);
    if (info_ret)
        *info_ret = info;
    return f;
}

/* ---------------------------------------------------------------- round trips */

Test(format, roundtrip_models_depths_sizes)
{
    static const uint32_t sizes[][2] = {{1, 1}, {1, 37}, {29, 1}, {65, 33}, {4097, 3},
                                        {64, 64}, {130, 67}};
    char msg[256];
    for (unsigned color = 0; color < 5; color++)
        for (unsigned di = 0; di < ndepths[color]; di++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
                for (int pat = TH_NOISE; pat <= TH_MIXED; pat++) {
                    struct l3_info info;
                    th_info(&info, color, depths_of[color][di], sizes[si][0], sizes[si][1]);
                    void *px = th_image(&info, (enum th_pattern)pat, si * 31 + pat, NULL);
                    int r = th_roundtrip(&info, px, NULL, 3, msg, sizeof msg, NULL, NULL);
                    cr_assert_eq(r, 0, "color %u depth %u %ux%u pattern %d: %s", color,
                                 info.bit_depth, info.width, info.height, pat, msg);
                    free(px);
                }
}

Test(format, roundtrip_tile_sizes)
{
    static const uint32_t tiles[][2] = {{1, 1},   {3, 5},    {8, 8},   {16, 64}, {64, 16},
                                        {100, 7}, {256, 256}, {1024, 64}, {7, 1024}};
    char msg[256];
    for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++)
        for (unsigned color = 0; color < 5; color++) {
            struct l3_info info;
            unsigned depth = depths_of[color][ndepths[color] - 1];
            th_info(&info, color, depth, 97, 45);
            void *px = th_image(&info, TH_MIXED, ti + color, NULL);
            struct l3_encode_options eo = {0};
            eo.tile_width = tiles[ti][0];
            eo.tile_height = tiles[ti][1];
            void *f = NULL;
            size_t n = 0;
            int r = th_roundtrip(&info, px, &eo, 4, msg, sizeof msg, &f, &n);
            cr_assert_eq(r, 0, "tile %ux%u color %u: %s", eo.tile_width, eo.tile_height,
                         color, msg);
            struct l3_info ri;
            cr_assert_eq(l3_read_info(f, n, &ri, NULL), L3_OK);
            cr_assert_eq(ri.tile_width, eo.tile_width);
            cr_assert_eq(ri.tile_height, eo.tile_height);
            cr_assert_eq(ri.tiles_x, (97 + eo.tile_width - 1) / eo.tile_width);
            cr_assert_eq(ri.tiles_y, (45 + eo.tile_height - 1) / eo.tile_height);
            l3_free(f);
            free(px);
        }
}

Test(format, roundtrip_effort_and_trns)
{
    char msg[256];
    struct l3_info info;
    th_info(&info, L3_COLOR_RGB, 16, 77, 70);
    info.has_trns_key = 1;
    info.trns_key[0] = 65535;
    info.trns_key[1] = 12;
    info.trns_key[2] = 0;
    void *px = th_image(&info, TH_GRADIENT, 3, NULL);
    struct l3_encode_options eo = {0};
    eo.effort = 2;
    cr_assert_eq(th_roundtrip(&info, px, &eo, 2, msg, sizeof msg, NULL, NULL), 0, "%s", msg);
    free(px);
    th_info(&info, L3_COLOR_GRAY, 4, 33, 9);
    info.has_trns_key = 1;
    info.trns_key[0] = 15;
    px = th_image(&info, TH_NOISE, 4, NULL);
    cr_assert_eq(th_roundtrip(&info, px, NULL, 1, msg, sizeof msg, NULL, NULL), 0, "%s", msg);
    free(px);
}

Test(format, roundtrip_long_thin)
{
    char msg[256];
    struct l3_info info;
    th_info(&info, L3_COLOR_GRAY, 8, 65535, 2);
    void *px = th_image(&info, TH_MIXED, 5, NULL);
    cr_assert_eq(th_roundtrip(&info, px, NULL, 2, msg, sizeof msg, NULL, NULL), 0, "%s", msg);
    free(px);
    th_info(&info, L3_COLOR_GRAY_ALPHA, 16, 2, 65535);
    px = th_image(&info, TH_MIXED, 6, NULL);
    cr_assert_eq(th_roundtrip(&info, px, NULL, 2, msg, sizeof msg, NULL, NULL), 0, "%s", msg);
    free(px);
}

/* Without LZ planes (effort -1) every legacy mode appears and round-trips;
 * with the default effort the repeats inside the dither and the flat areas
 * make LZ planes win, and the file still round-trips bit for bit. */
Test(format, roundtrip_all_plane_modes)
{
    struct l3_info info;
    th_info(&info, L3_COLOR_RGB, 8, 128, 64);
    uint8_t *px = th_all_modes_image();
    struct l3_encode_options eo = {0};
    eo.tile_width = 32;
    eo.tile_height = 32;
    eo.effort = -1;
    void *f = NULL;
    size_t n = 0;
    char msg[256];
    cr_assert_eq(th_roundtrip(&info, px, &eo, 2, msg, sizeof msg, &f, &n), 0, "%s", msg);
    struct l3_layout lay;
    cr_assert_eq(l3_read_layout(f, n, NULL, &lay, NULL), L3_OK);
    const uint8_t *d = f, *table = d + lay.table_offset, *payload = d + lay.header_size;
    unsigned seen = 0, xform = 0, lz = 0;
    for (uint32_t t = 0; t < lay.tile_count; t++) {
        uint64_t b, e;
        l3_tile_span(table, t, &b, &e);
        struct l3_tile_header th;
        cr_assert_eq(l3_tile_parse(payload + b, e - b, 3, &th), L3_OK);
        xform |= th.flags;
        for (int p = 0; p < 3; p++) {
            seen |= 1u << (L3_PLANE_KIND(th.mode[p]) + ((th.mode[p] & L3_PLANE_SHORT) ? 8 : 0));
            lz |= th.mode[p] & L3_PLANE_LZ;
        }
    }
    cr_assert_eq(lz, 0, "effort -1 wrote an LZ plane");
    cr_assert(seen & (1u << L3_PLANE_RAW), "no RAW plane (modes seen %#x)", seen);
    cr_assert(seen & ((1u << L3_PLANE_LEFT2) | (1u << (L3_PLANE_LEFT2 + 8))),
              "no LEFT2 plane (modes seen %#x)", seen);
    cr_assert(seen & (0x1cu << 8), "no short-group plane (modes seen %#x)", seen);
    cr_assert(xform & L3_TILE_XFORM_G, "colour transform never used");
    l3_free(f);

    /* default effort: LZ planes, smaller file, same pixels */
    eo.effort = 0;
    void *f0 = NULL;
    size_t n0 = 0;
    cr_assert_eq(th_roundtrip(&info, px, &eo, 2, msg, sizeof msg, &f0, &n0), 0, "%s", msg);
    unsigned counts[256] = {0};
    cr_assert_eq(th_plane_modes(f0, n0, counts), 0);
    cr_assert_gt(th_lz_planes(counts, 0), 0, "default effort wrote no LZ plane");
    cr_assert_lt(n0, n, "LZ planes made the file larger (%zu vs %zu bytes)", n0, n);
    l3_free(f0);
    free(px);
}

Test(format, threads_give_identical_bytes)
{
    struct l3_info info;
    th_info(&info, L3_COLOR_RGBA, 8, 300, 200);
    void *px = th_image(&info, TH_MIXED, 11, NULL);
    struct l3_encode_options eo = {0};
    size_t n1, n4;
    void *f1 = encode_or_fail(&info, px, &eo, &n1);
    eo.threads = 4;
    void *f4 = encode_or_fail(&info, px, &eo, &n4);
    cr_assert_eq(n1, n4);
    cr_assert(memcmp(f1, f4, n1) == 0, "threaded encode differs");
    size_t raw = l3_decoded_size(&info, 0);
    uint8_t *a = malloc(raw), *b = malloc(raw);
    struct l3_decode_options o = {0};
    o.threads = 1;
    cr_assert_eq(l3_decode(f1, n1, a, raw, 0, &o), L3_OK);
    o.threads = 7;
    cr_assert_eq(l3_decode(f1, n1, b, raw, 0, &o), L3_OK);
    cr_assert(memcmp(a, b, raw) == 0 && memcmp(a, px, raw) == 0);
    free(a);
    free(b);
    free(px);
    l3_free(f1);
    l3_free(f4);
}

/* ---------------------------------------------------------------- strides */

Test(format, decode_with_stride_and_buffer_checks)
{
    struct l3_info info;
    th_info(&info, L3_COLOR_RGB, 16, 37, 21);
    size_t pxn;
    uint8_t *px = th_image(&info, TH_NOISE, 2, &pxn);
    size_t n;
    void *f = encode_or_fail(&info, px, NULL, &n);
    size_t row = l3_row_bytes(&info);
    cr_assert_eq(row, 37 * 3 * 2);
    size_t stride = row + 10;
    size_t need = l3_decoded_size(&info, stride);
    cr_assert_eq(need, stride * 20 + row);
    uint8_t *out = malloc(need + 16);
    memset(out, 0xee, need + 16);
    cr_assert_eq(l3_decode(f, n, out, need, stride, NULL), L3_OK);
    for (uint32_t y = 0; y < info.height; y++) {
        cr_assert(memcmp(out + y * stride, px + y * row, row) == 0, "row %u", y);
        if (y + 1 < info.height)
            for (size_t i = row; i < stride; i++)
                cr_assert_eq(out[y * stride + i], 0xee, "padding written");
    }
    for (size_t i = need; i < need + 16; i++)
        cr_assert_eq(out[i], 0xee, "wrote past the end");
    cr_assert_eq(l3_decode(f, n, out, need - 1, stride, NULL), L3_ERR_BUFFER_TOO_SMALL);
    cr_assert_eq(l3_decode(f, n, out, need, row - 1, NULL), L3_ERR_BUFFER_TOO_SMALL);
    cr_assert_eq(l3_decode(f, n, NULL, need, 0, NULL), L3_ERR_INVALID_ARG);
    /* 16-bit output must be 2-byte aligned: an odd stride or pointer is refused */
    cr_assert_eq(l3_decode(f, n, out, need + 16, stride + 1, NULL), L3_ERR_INVALID_ARG);
    cr_assert_eq(l3_decode(f, n, out + 1, need, stride, NULL), L3_ERR_INVALID_ARG);

    /* encode from a strided buffer */
    uint8_t *strided = malloc(stride * info.height);
    for (uint32_t y = 0; y < info.height; y++)
        memcpy(strided + y * stride, px + y * row, row);
    void *f2 = NULL;
    size_t n2;
    cr_assert_eq(l3_encode(&info, strided, stride, NULL, &f2, &n2), L3_OK);
    cr_assert(n2 == n && memcmp(f, f2, n) == 0, "strided encode differs");
    l3_free(f2);
    f2 = NULL;
    cr_assert_eq(l3_encode(&info, strided, row - 2, NULL, &f2, &n2), L3_ERR_INVALID_ARG);
    cr_assert_eq(l3_encode(&info, strided, row + 1, NULL, &f2, &n2), L3_ERR_INVALID_ARG,
                 "odd stride with 16-bit samples");
    l3_free(f2);
    free(strided);
    free(out);
    free(px);
    l3_free(f);
}

Test(format, size_helpers)
{
    struct l3_info info;
    th_info(&info, L3_COLOR_GRAY_ALPHA, 16, 10, 3);
    cr_assert_eq(l3_sample_bytes(&info), 2);
    cr_assert_eq(l3_row_bytes(&info), 40);
    cr_assert_eq(l3_decoded_size(&info, 0), 120);
    cr_assert_eq(l3_decoded_size(&info, 50), 140);
    cr_assert_eq(l3_decoded_size(&info, 39), 0);
    th_info(&info, L3_COLOR_PALETTE, 2, 10, 3);
    cr_assert_eq(l3_sample_bytes(&info), 1);
    cr_assert_eq(l3_row_bytes(&info), 10);
    th_info(&info, L3_COLOR_RGBA, 16, L3_MAX_DIM, L3_MAX_DIM);
    cr_assert_eq(l3_decoded_size(&info, SIZE_MAX / 2), 0, "overflow must give 0");
    cr_assert_eq(l3_sample_bytes(NULL), 0);
}

Test(format, strerror_names_every_status)
{
    for (int s = 0; s <= L3_ERR_THREAD; s++) {
        const char *m = l3_strerror(s);
        cr_assert(m && *m);
        for (int t = 0; t < s; t++)
            cr_assert_str_neq(m, l3_strerror(t), "status %d and %d share a message", s, t);
    }
    cr_assert_str_eq(l3_strerror(999), "unknown status");
    cr_assert_str_eq(l3_strerror(-1), "unknown status");
}

/* ---------------------------------------------------------------- encoder input */

Test(format, encode_rejects_bad_input)
{
    struct l3_info info;
    void *f = NULL;
    size_t n;
    uint8_t px[64 * 4 * 2] = {0};
    th_info(&info, L3_COLOR_GRAY, 2, 8, 8);
    px[5] = 4; /* > 3 */
    cr_assert_eq(l3_encode(&info, px, 0, NULL, &f, &n), L3_ERR_INVALID_ARG);
    px[5] = 3;
    cr_assert_eq(l3_encode(&info, px, 0, NULL, &f, &n), L3_OK);
    l3_free(f);
    th_info(&info, L3_COLOR_PALETTE, 8, 8, 8); /* 200 entries */
    px[5] = 200;
    cr_assert_eq(l3_encode(&info, px, 0, NULL, &f, &n), L3_ERR_INVALID_ARG);
    px[5] = 199;
    cr_assert_eq(l3_encode(&info, px, 0, NULL, &f, &n), L3_OK);
    l3_free(f);
    info.palette[150][3] = 10; /* alpha beyond palette_alpha_len must be 255 */
    cr_assert_eq(l3_encode(&info, px, 0, NULL, &f, &n), L3_ERR_INVALID_ARG);
    th_info(&info, L3_COLOR_PALETTE, 1, 8, 8);
    info.palette_len = 0;
    cr_assert_eq(l3_encode(&info, px, 0, NULL, &f, &n), L3_ERR_INVALID_ARG);
    /* field combinations */
    struct { unsigned color, channels, depth; uint32_t w, h; } bad[] = {
        {L3_COLOR_RGB, 3, 4, 8, 8},  {L3_COLOR_RGB, 4, 8, 8, 8},   {L3_COLOR_GRAY, 1, 3, 8, 8},
        {L3_COLOR_GRAY_ALPHA, 2, 2, 8, 8}, {L3_COLOR_PALETTE, 1, 16, 8, 8},
        {5, 1, 8, 8, 8},             {L3_COLOR_GRAY, 1, 8, 0, 8}, {L3_COLOR_GRAY, 1, 8, 8, 0},
        {L3_COLOR_GRAY, 1, 8, L3_MAX_DIM + 1, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&info, 0, sizeof info);
        info.color = (uint8_t)bad[i].color;
        info.channels = (uint8_t)bad[i].channels;
        info.bit_depth = (uint8_t)bad[i].depth;
        info.width = bad[i].w;
        info.height = bad[i].h;
        cr_assert_eq(l3_encode(&info, px, 0, NULL, &f, &n), L3_ERR_INVALID_ARG, "case %zu", i);
    }
    th_info(&info, L3_COLOR_RGBA, 8, 8, 8);
    info.has_trns_key = 1; /* no tRNS key with alpha */
    cr_assert_eq(l3_encode(&info, px, 0, NULL, &f, &n), L3_ERR_INVALID_ARG);
    th_info(&info, L3_COLOR_GRAY, 4, 8, 8);
    info.has_trns_key = 1;
    info.trns_key[0] = 16; /* does not fit 4 bits */
    cr_assert_eq(l3_encode(&info, px, 0, NULL, &f, &n), L3_ERR_INVALID_ARG);
    th_info(&info, L3_COLOR_GRAY, 8, 8, 8);
    cr_assert_eq(l3_encode(NULL, px, 0, NULL, &f, &n), L3_ERR_INVALID_ARG);
    cr_assert_eq(l3_encode(&info, NULL, 0, NULL, &f, &n), L3_ERR_INVALID_ARG);
    cr_assert_eq(l3_encode(&info, px, 0, NULL, NULL, &n), L3_ERR_INVALID_ARG);
    struct l3_encode_options eo = {0};
    eo.tile_width = 1025;
    cr_assert_eq(l3_encode(&info, px, 0, &eo, &f, &n), L3_ERR_INVALID_ARG);
    eo.tile_width = 512;
    eo.tile_height = 512; /* area over 65536 */
    cr_assert_eq(l3_encode(&info, px, 0, &eo, &f, &n), L3_ERR_INVALID_ARG);
}

/* ---------------------------------------------------------------- limits */

Test(format, limits_are_enforced)
{
    struct l3_info info;
    th_info(&info, L3_COLOR_RGB, 8, 100, 50);
    void *px = th_image(&info, TH_GRADIENT, 1, NULL);
    struct l3_encode_options eo = {0};
    eo.limits.max_pixels = 4999;
    void *f = NULL;
    size_t n;
    cr_assert_eq(l3_encode(&info, px, 0, &eo, &f, &n), L3_ERR_LIMIT);
    eo.limits.max_pixels = 0;
    eo.limits.max_memory = 1000;
    cr_assert_eq(l3_encode(&info, px, 0, &eo, &f, &n), L3_ERR_LIMIT);
    eo.limits.max_memory = 0;
    f = encode_or_fail(&info, px, &eo, &n);
    struct l3_decode_options o = {0};
    o.limits.max_pixels = 4999;
    void *out = NULL;
    size_t on;
    cr_assert_eq(l3_decode_alloc(f, n, &o, &out, &on, NULL), L3_ERR_LIMIT);
    cr_assert_null(out);
    uint8_t *buf = malloc(15000);
    cr_assert_eq(l3_decode(f, n, buf, 15000, 0, &o), L3_ERR_LIMIT);
    o.limits.max_pixels = 5000;
    cr_assert_eq(l3_decode(f, n, buf, 15000, 0, &o), L3_OK);
    o.limits.max_memory = 14999; /* the output alone is 15000 bytes */
    cr_assert_eq(l3_decode_alloc(f, n, &o, &out, &on, NULL), L3_ERR_LIMIT);
    /* the output plus the decoder's scratch (a batch of tiles: well under 1 MiB
     * for 64 x 64 tiles) */
    o.limits.max_memory = 15000 + (1u << 20);
    cr_assert_eq(l3_decode_alloc(f, n, &o, &out, &on, NULL), L3_OK);
    cr_assert_eq(on, 15000);
    free(out);
    o.flags = 0x80; /* unknown flag */
    cr_assert_eq(l3_decode(f, n, buf, 15000, 0, &o), L3_ERR_INVALID_ARG);
    free(buf);
    free(px);
    l3_free(f);
}

/* A hand-made header claiming a huge image: rejected by the pixel limit
 * before any allocation (and by the header checksum when it is wrong). */
Test(format, decompression_bomb_header)
{
    size_t n;
    struct l3_info info;
    uint8_t *f = sample_file(L3_COLOR_GRAY, 8, 16, 8, &n, &info);
    /* rewrite to 1048576 x 1048576 with 1024x64 tiles: 16M tiles -> huge
     * table; the file is far too short, so it must be TRUNCATED, never a crash
     * or an allocation of the image */
    uint8_t hdr[48];
    memcpy(hdr, f, 48);
    l3_wr_u32le(hdr + 8, L3_MAX_DIM);
    l3_wr_u32le(hdr + 12, L3_MAX_DIM);
    size_t need = 0;
    int st = l3_read_info(hdr, sizeof hdr, NULL, &need);
    cr_assert(st == L3_ERR_BAD_HEADER || st == L3_ERR_TRUNCATED, "%s", l3_strerror(st));
    void *out = NULL;
    size_t on;
    cr_assert_neq(l3_decode_alloc(hdr, sizeof hdr, NULL, &out, &on, NULL), L3_OK);
    cr_assert_null(out);
    l3_free(f);
}

/* ---------------------------------------------------------------- header */

Test(format, read_info_prefix_and_needed)
{
    size_t n;
    struct l3_info info;
    uint8_t *f = sample_file(L3_COLOR_PALETTE, 4, 50, 20, &n, &info);
    struct l3_layout lay;
    cr_assert_eq(l3_read_layout(f, n, NULL, &lay, NULL), L3_OK);
    cr_assert_eq(lay.tile_count, 4 * 3);
    cr_assert_eq(lay.planes, 1);
    cr_assert_eq(lay.header_size + lay.payload_size, n);
    cr_assert_eq(lay.table_offset, 48 + 4 * info.palette_len);
    /* tile spans tile the payload exactly */
    uint64_t prev = 0;
    for (uint32_t t = 0; t < lay.tile_count; t++) {
        uint64_t b, e;
        l3_tile_span(f + lay.table_offset, t, &b, &e);
        cr_assert_eq(b, prev);
        cr_assert_gt(e, b);
        prev = e;
    }
    cr_assert_eq(prev, lay.payload_size);
    /* every prefix shorter than the header: TRUNCATED with a growing need */
    for (size_t len = 0; len < lay.header_size; len++) {
        size_t need = 0;
        struct l3_info ri;
        int st = l3_read_info(f, len, &ri, &need);
        cr_assert_eq(st, L3_ERR_TRUNCATED, "prefix %zu: %s", len, l3_strerror(st));
        cr_assert(need > len && need <= lay.header_size, "prefix %zu: need %zu", len, need);
        void *out = NULL;
        size_t on;
        cr_assert_eq(l3_decode_alloc(f, len, NULL, &out, &on, NULL), L3_ERR_TRUNCATED);
    }
    /* header-only prefix is enough for read_info, not for decoding */
    size_t need = 1;
    cr_assert_eq(l3_read_info(f, lay.header_size, NULL, &need), L3_OK);
    cr_assert_eq(need, 0);
    for (size_t len = lay.header_size; len < n; len += 7) {
        void *out = NULL;
        size_t on;
        cr_assert_eq(l3_decode_alloc(f, len, NULL, &out, &on, NULL), L3_ERR_TRUNCATED);
        cr_assert_eq(l3_verify(f, len), L3_ERR_TRUNCATED);
    }
    /* trailing garbage */
    uint8_t *g = malloc(n + 1);
    memcpy(g, f, n);
    g[n] = 0;
    cr_assert_eq(l3_verify(g, n + 1), L3_ERR_CORRUPT);
    free(g);
    cr_assert_eq(l3_read_info(NULL, 10, NULL, NULL), L3_ERR_INVALID_ARG);
    l3_free(f);
}

Test(format, magic_and_version)
{
    size_t n;
    uint8_t *f = sample_file(L3_COLOR_GRAY, 8, 8, 8, &n, NULL);
    uint8_t c = f[0];
    f[0] = 'X';
    cr_assert_eq(l3_read_info(f, n, NULL, NULL), L3_ERR_BAD_MAGIC);
    cr_assert_eq(l3_read_info(f, 1, NULL, NULL), L3_ERR_BAD_MAGIC);
    f[0] = c;
    f[4] = 2;
    cr_assert_eq(l3_read_info(f, n, NULL, NULL), L3_ERR_VERSION);
    cr_assert_eq(l3_read_info(f, 5, NULL, NULL), L3_ERR_VERSION);
    uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    cr_assert_eq(l3_read_info(png, 8, NULL, NULL), L3_ERR_BAD_MAGIC);
    l3_free(f);
}

/* Every single-bit flip anywhere in the header (fixed part, palette, tile
 * table, checksum) is reported: never L3_OK, never a crash. */
Test(format, header_bit_flips_are_detected)
{
    for (unsigned color = 0; color < 5; color++) {
        size_t n;
        struct l3_info info;
        uint8_t *f = sample_file(color, color == L3_COLOR_PALETTE ? 8 : 8, 40, 20, &n, &info);
        struct l3_layout lay;
        cr_assert_eq(l3_read_layout(f, n, NULL, &lay, NULL), L3_OK);
        uint8_t *pix = malloc(l3_decoded_size(&info, 0));
        for (size_t i = 0; i < lay.header_size; i++)
            for (int b = 0; b < 8; b++) {
                f[i] ^= (uint8_t)(1u << b);
                size_t need;
                int st = l3_read_info(f, n, NULL, &need);
                cr_assert_neq(st, L3_OK, "color %u: flip of byte %zu bit %d not detected",
                              color, i, b);
                cr_assert_neq(l3_decode(f, n, pix, l3_decoded_size(&info, 0), 0, NULL), L3_OK);
                f[i] ^= (uint8_t)(1u << b);
            }
        cr_assert_eq(l3_verify(f, n), L3_OK);
        free(pix);
        l3_free(f);
    }
}

/* Rewrites the header and payload checksums after tampering, so that only the
 * structural checks stand between hostile bytes and the decoder. */
static void reseal(uint8_t *f, size_t n)
{
    size_t hs = 48;
    uint32_t tw = l3_rd_u16le(f + 16), th = l3_rd_u16le(f + 18);
    uint32_t w = l3_rd_u32le(f + 8), h = l3_rd_u32le(f + 12);
    if (!tw || !th || !w || !h)
        return;
    uint64_t tiles = (uint64_t)((w + tw - 1) / tw) * ((h + th - 1) / th);
    if (f[5] == L3_COLOR_PALETTE)
        hs += 4u * l3_rd_u16le(f + 22);
    hs += 8 * tiles + 8;
    if (hs > n)
        return;
    l3_wr_u64le(f + 40, XXH3_64bits(f + hs, n - hs));
    l3_wr_u64le(f + hs - 8, XXH3_64bits(f, hs - 8));
}

Test(format, header_fields_out_of_range_are_rejected)
{
    size_t n;
    struct l3_info info;
    uint8_t *f = sample_file(L3_COLOR_RGB, 8, 40, 20, &n, &info);
    uint8_t *g = malloc(n);
    struct { size_t off; uint8_t val; } cases[] = {
        {5, 5},    /* colour */
        {6, 4},    /* channels vs colour */
        {7, 4},    /* depth for RGB */
        {7, 0},    /* depth */
        {16, 0},   /* tile width 0 (the high byte is zeroed below) */
        {20, 2},   /* unknown header flag */
        {20, 1},   /* tRNS key flag (key zero is valid, so fine) */
        {21, 1},   /* coding */
        {22, 1},   /* palette_len on RGB */
        {24, 1},   /* palette_alpha_len on RGB */
        {26, 1},   /* tRNS key without the flag */
        {32, 0xff}, /* payload size */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(g, f, n);
        g[cases[i].off] = cases[i].val;
        if (cases[i].off == 16)
            g[17] = 0;
        reseal(g, n);
        int st = l3_read_info(g, n, NULL, NULL);
        if (cases[i].off == 20 && cases[i].val == 1) {
            cr_assert_eq(st, L3_OK, "a zero tRNS key is valid for RGB");
            continue;
        }
        cr_assert(st == L3_ERR_BAD_HEADER || st == L3_ERR_TRUNCATED,
                  "case %zu (offset %zu): %s", i, cases[i].off, l3_strerror(st));
    }
    /* tile table: non-monotonic, and last entry != payload size */
    struct l3_layout lay;
    cr_assert_eq(l3_read_layout(f, n, NULL, &lay, NULL), L3_OK);
    memcpy(g, f, n);
    uint8_t *t = g + lay.table_offset;
    uint8_t tmp[8];
    memcpy(tmp, t, 8);
    memcpy(t, t + 8, 8);
    memcpy(t + 8, tmp, 8);
    reseal(g, n);
    cr_assert_eq(l3_read_info(g, n, NULL, NULL), L3_ERR_BAD_HEADER);
    memcpy(g, f, n);
    g[lay.table_offset + 8 * (lay.tile_count - 1)] ^= 1;
    reseal(g, n);
    cr_assert_eq(l3_read_info(g, n, NULL, NULL), L3_ERR_BAD_HEADER);
    /* a resealed, otherwise untouched file is fine */
    memcpy(g, f, n);
    reseal(g, n);
    cr_assert_eq(l3_verify(g, n), L3_OK);
    free(g);
    l3_free(f);
}

/* ---------------------------------------------------------------- payload */

Test(format, payload_bit_flips)
{
    for (unsigned color = 0; color < 5; color++) {
        size_t n;
        struct l3_info info;
        uint8_t *f = sample_file(color, color == L3_COLOR_GRAY ? 16 : 8, 61, 23, &n, &info);
        struct l3_layout lay;
        cr_assert_eq(l3_read_layout(f, n, NULL, &lay, NULL), L3_OK);
        size_t raw = l3_decoded_size(&info, 0);
        uint8_t *pix = malloc(raw);
        uint8_t *g = malloc(n);
        uint64_t s = color + 1;
        for (int trial = 0; trial < 300; trial++) {
            memcpy(g, f, n);
            size_t pos = lay.header_size + tc_splitmix64(&s) % lay.payload_size;
            g[pos] ^= (uint8_t)(1u << (tc_splitmix64(&s) % 8));
            cr_assert_eq(l3_verify(g, n), L3_ERR_PAYLOAD_CHECKSUM);
            struct l3_decode_options o = {0};
            o.flags = L3_DECODE_VERIFY;
            cr_assert_eq(l3_decode(g, n, pix, raw, 0, &o), L3_ERR_PAYLOAD_CHECKSUM);
            /* without verify: any outcome but a crash; resealed: the tile
             * framing checks alone must hold */
            o.flags = 0;
            int st = l3_decode(g, n, pix, raw, 0, &o);
            cr_assert(st == L3_OK || st == L3_ERR_CORRUPT, "%s", l3_strerror(st));
            reseal(g, n);
            st = l3_verify(g, n);
            cr_assert(st == L3_OK || st == L3_ERR_CORRUPT, "%s", l3_strerror(st));
            o.threads = 3;
            st = l3_decode(g, n, pix, raw, 0, &o);
            cr_assert(st == L3_OK || st == L3_ERR_CORRUPT, "%s", l3_strerror(st));
        }
        free(g);
        free(pix);
        l3_free(f);
    }
}

/* ---------------------------------------------------------------- tile routine */

/* The per-plane entry point (one GPU thread per plane) and the whole-tile
 * entry point give the same samples; the store step matches l3_decode. */
Test(format, tile_routine_matches_decoder)
{
    size_t n;
    struct l3_info info;
    uint8_t *f = sample_file(L3_COLOR_RGBA, 16, 45, 19, &n, &info);
    struct l3_layout lay;
    cr_assert_eq(l3_read_layout(f, n, &info, &lay, NULL), L3_OK);
    size_t raw = l3_decoded_size(&info, 0);
    uint16_t *ref = malloc(raw), *mine = malloc(raw);
    cr_assert_eq(l3_decode(f, n, ref, raw, 0, NULL), L3_OK);
    size_t row = l3_row_bytes(&info);
    for (uint32_t t = 0; t < lay.tile_count; t++) {
        uint64_t b, e;
        l3_tile_span(f + lay.table_offset, t, &b, &e);
        const uint8_t *tile = f + lay.header_size + b;
        uint32_t x0, y0, w, h;
        l3_tile_rect(info.width, info.height, info.tile_width, info.tile_height, t, &x0, &y0,
                     &w, &h);
        uint16_t buf[4 * 16 * 8], buf2[4 * 16 * 8];
        uint32_t flags;
        cr_assert_eq(l3_tile_decode(tile, e - b, 4, w, h, 16, buf, &flags), L3_OK);
        struct l3_tile_header th;
        cr_assert_eq(l3_tile_parse(tile, e - b, 4, &th), L3_OK);
        cr_assert_eq(th.flags, flags);
        for (int p = 3; p >= 0; p--) /* any order */
            cr_assert_eq(l3_tile_plane_decode(tile + th.off[p], th.len[p], th.mode[p], w, h, 16,
                                              buf2 + p * w * h),
                         L3_OK);
        cr_assert(memcmp(buf, buf2, 4 * w * h * 2) == 0);
        l3_tile_store(buf, 4, w, h, 16, flags, (uint8_t *)mine + y0 * row + x0 * 8, row);
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < w; x++) {
                uint32_t px[4];
                l3_tile_pixel(buf, w * h, y * w + x, 4, 16, flags, px);
                for (int c = 0; c < 4; c++)
                    cr_assert_eq(px[c], ref[((y0 + y) * info.width + x0 + x) * 4 + c]);
            }
    }
    cr_assert(memcmp(ref, mine, raw) == 0);
    free(ref);
    free(mine);
    l3_free(f);
}

/* The worked example of docs/FORMAT.md section 6.4, bit for bit. */
Test(format, spec_example_plane)
{
    /* arrays padded to 8 bytes: only the given length is read */
    const uint8_t stream[8] = {0x10, 0x59, 0x30};
    uint16_t out[4];
    cr_assert_eq(l3_tile_plane_decode(stream, 3, L3_PLANE_MED, 4, 1, 8, out), L3_OK);
    cr_assert_eq(out[0], 0);
    cr_assert_eq(out[1], 254);
    cr_assert_eq(out[2], 255);
    cr_assert_eq(out[3], 250);
    /* one byte more or less: the stream end rule */
    const uint8_t longer[8] = {0x10, 0x59, 0x30, 0};
    cr_assert_eq(l3_tile_plane_decode(longer, 4, L3_PLANE_MED, 4, 1, 8, out), L3_ERR_CORRUPT);
    cr_assert_eq(l3_tile_plane_decode(stream, 2, L3_PLANE_MED, 4, 1, 8, out), L3_ERR_CORRUPT);
    /* the same codes as GRAD and as LEFT2 predict the same on row 0 for GRAD */
    cr_assert_eq(l3_tile_plane_decode(stream, 3, L3_PLANE_GRAD, 4, 1, 8, out), L3_OK);
    cr_assert_eq(out[3], 250);
    /* LEFT2 on row 0: predictions 0, 0, x0, x1 */
    cr_assert_eq(l3_tile_plane_decode(stream, 3, L3_PLANE_LEFT2, 4, 1, 8, out), L3_OK);
    cr_assert_eq(out[0], 0);
    cr_assert_eq(out[1], 254);
    cr_assert_eq(out[2], 1);
    cr_assert_eq(out[3], 249);
    /* CONST and RAW */
    const uint8_t c16[2] = {0x34, 0x12};
    cr_assert_eq(l3_tile_plane_decode(c16, 2, L3_PLANE_CONST, 2, 2, 16, out), L3_OK);
    cr_assert_eq(out[3], 0x1234);
    const uint8_t raw2[8] = {0xe4}; /* 2-bit samples 0, 1, 2, 3 LSB first */
    cr_assert_eq(l3_tile_plane_decode(raw2, 1, L3_PLANE_RAW, 4, 1, 2, out), L3_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(out[i], i);
}

/* ---------------------------------------------------------------- LZ planes */

/* A bit writer for hand-built plane streams: LSB first, as the format reads
 * them. */
struct tbits {
    uint8_t b[1024];
    size_t n; /* bits written */
};

static void tb_put(struct tbits *t, uint32_t v, unsigned bits)
{
    for (unsigned i = 0; i < bits; i++, t->n++) {
        cr_assert_lt(t->n, 8 * sizeof t->b);
        if ((v >> i) & 1)
            t->b[t->n / 8] |= (uint8_t)(1u << (t->n % 8));
    }
}

static void tb_zeros(struct tbits *t, unsigned k)
{
    for (unsigned i = 0; i < k; i++)
        tb_put(t, 0, 1);
}

static size_t tb_bytes(const struct tbits *t)
{
    return (t->n + 7) / 8;
}

/* Exp-Golomb order k: q zeros, a one, q + k bits of v - (2^q - 1) * 2^k. */
static void tb_eg(struct tbits *t, uint32_t v, unsigned k)
{
    unsigned q = 0;
    while ((((uint64_t)2 << q) - 1) << k <= v)
        q++;
    tb_zeros(t, q);
    tb_put(t, 1, 1);
    uint32_t low = v - (uint32_t)((((uint64_t)1 << q) - 1) << k);
    tb_put(t, low, q + k);
}

/* Group symbol s after prev: "1" same, "01" +1, "001" -1, "000" + 5 bits. */
static void tb_symbol(struct tbits *t, unsigned s, unsigned *prev)
{
    if (s == *prev)
        tb_put(t, 1, 1);
    else if (s == *prev + 1)
        tb_put(t, 2, 2);
    else if (s + 1 == *prev)
        tb_put(t, 4, 3);
    else
        tb_put(t, s << 3, 8);
    *prev = s;
}

/* Rice code of zigzag value v with parameter k; escape after 16 zeros. */
static void tb_rice(struct tbits *t, uint32_t v, unsigned k, unsigned depth)
{
    uint32_t q = v >> k;
    if (q < 16) {
        tb_zeros(t, q);
        tb_put(t, 1, 1);
        tb_put(t, v & ((1u << k) - 1), k);
    } else {
        tb_zeros(t, 16);
        tb_put(t, v, depth);
    }
}

static uint32_t zz(int r)
{
    return r >= 0 ? 2u * (uint32_t)r : 2u * (uint32_t)(-(r + 1)) + 1;
}

/* GRAD planes of 64 x 4 built by hand, one per lane of two vectors: small
 * residuals and escaped ones (16 zeros, then 8 raw bits) at every position of
 * a group, alone and side by side, somewhere else in every lane. The AVX2
 * lane decoder reads two codes from each 64-bit window, so an escape is the
 * first code of a pair in some lanes and the second in others; every lane
 * must be accepted and give the reference decoder's samples. */
Test(format, simd_lanes_decode_escapes_in_pairs)
{
    if (!l3_simd_available())
        cr_skip_test("no SIMD lane decoder on this CPU");
    enum { W = 64, H = 4, LANES = 16, STRIDE = 1024 + L3_SIMD_SLACK };
    static struct tbits t[LANES];
    static uint16_t want[LANES][W * H];
    static uint8_t out[LANES][W * H];
    uint8_t *buf = calloc(LANES, STRIDE);
    struct l3_simd_lane lanes[LANES];
    unsigned escapes = 0, first = 0;
    for (unsigned l = 0; l < LANES; l++) {
        memset(&t[l], 0, sizeof t[l]);
        unsigned prev = 0;
        uint64_t s = 100 + l;
        for (uint32_t y = 0; y < H; y++)
            for (uint32_t x0 = 0; x0 < W; x0 += L3_GROUP) {
                const unsigned k = 2;
                tb_symbol(&t[l], k + 1, &prev);
                for (uint32_t x = x0; x < x0 + L3_GROUP; x++) {
                    int esc = (x + 3 * y + l) % 7 == 0 || (x + l) % 13 == 5 || (x + l) % 13 == 6;
                    uint32_t v = esc ? 64 + (uint32_t)(tc_splitmix64(&s) % 190)
                                     : (uint32_t)(tc_splitmix64(&s) % 12);
                    tb_rice(&t[l], v, k, 8);
                    escapes += esc;
                    first += esc && x % 2 == 0;
                }
            }
        size_t len = tb_bytes(&t[l]);
        cr_assert_lt(len + L3_SIMD_SLACK, (size_t)STRIDE);
        cr_assert_eq(l3_tile_plane_decode(t[l].b, len, L3_PLANE_GRAD, W, H, 8, want[l]), L3_OK,
                     "lane %u: the reference decoder refuses the stream", l);
        memcpy(buf + (size_t)l * STRIDE, t[l].b, len);
        lanes[l].stream = buf + (size_t)l * STRIDE;
        lanes[l].len = (uint32_t)len;
        lanes[l].mode = L3_PLANE_GRAD;
        lanes[l].out = out[l];
        lanes[l].tag = l;
    }
    cr_assert(first > 0 && first < escapes, "escapes %u, first of a pair %u", escapes, first);
    void *scr = aligned_alloc(64, l3_simd_scratch_size(W));
    uint32_t ok[L3_SIMD_MAX_LANES / 32];
    l3_simd_decode_planes(lanes, LANES, W, H, 8, scr, 0, ok);
    cr_assert_eq(ok[0] & 0xffffu, 0xffffu, "lanes left to the reference: %#x",
                 ~ok[0] & 0xffffu);
    for (unsigned l = 0; l < LANES; l++)
        for (int i = 0; i < W * H; i++)
            cr_assert_eq(out[l][i], want[l][i], "lane %u sample %d: %u, expected %u", l, i,
                         out[l][i], want[l][i]);
    free(scr);
    free(buf);
}

/* A token list: a literal run of `run` residuals, then (when count > 0) a copy
 * of `count` residuals from `dist` back. k: Rice parameter of the run's
 * non-zero groups, or -1 for the smallest one that needs no escape. */
struct ltok {
    unsigned run;
    int res[24];
    int k;
    unsigned count, dist;
};

/* Writes the LZ stream of a token list with groups of gs. */
static size_t lz_stream(const struct ltok *tok, size_t ntok, unsigned depth, unsigned gs,
                        struct tbits *t)
{
    memset(t, 0, sizeof *t);
    unsigned prev = 0;
    for (size_t i = 0; i < ntok; i++) {
        tb_eg(t, tok[i].run, L3_LZ_RUN_K);
        for (unsigned g0 = 0; g0 < tok[i].run; g0 += gs) {
            unsigned g = tok[i].run - g0 < gs ? tok[i].run - g0 : gs;
            uint32_t mx = 0;
            for (unsigned j = 0; j < g; j++)
                mx |= zz(tok[i].res[g0 + j]);
            if (!mx) {
                tb_symbol(t, 0, &prev);
                continue;
            }
            unsigned k = 0;
            if (tok[i].k >= 0)
                k = (unsigned)tok[i].k;
            else
                while ((mx >> k) >= 16)
                    k++;
            tb_symbol(t, k + 1, &prev);
            for (unsigned j = 0; j < g; j++)
                tb_rice(t, zz(tok[i].res[g0 + j]), k, depth);
        }
        if (tok[i].count) {
            tb_eg(t, tok[i].count - 3, 4);
            unsigned nb = 0;
            while ((tok[i].dist >> nb) > 1)
                nb++;
            tb_put(t, nb + 1, 5);
            tb_put(t, tok[i].dist, nb); /* the bits below the leading one */
        }
    }
    return tb_bytes(t);
}

/* The prediction of sample (x, y) for a predictor kind, from the samples
 * above and to the left (written out from the format's definitions). */
static uint32_t ref_pred(const uint32_t *s, uint32_t w, uint32_t x, uint32_t y, unsigned kind,
                         uint32_t mask)
{
#define S(xx, yy) s[(yy) * w + (xx)]
    uint32_t first_above = y ? S(0, y - 1) : 0;
    if (kind == L3_PLANE_LEFT2)
        return x >= 2 ? S(x - 2, y) : first_above;
    if (x == 0)
        return first_above;
    if (kind == L3_PLANE_LEFT || y == 0)
        return S(x - 1, y);
    uint32_t a = S(x - 1, y), b = S(x, y - 1), c = S(x - 1, y - 1);
#undef S
    if (kind == L3_PLANE_GRAD)
        return (a + b - c) & mask;
    uint32_t lo = a < b ? a : b, hi = a < b ? b : a;
    if (c >= hi)
        return lo;
    if (c <= lo)
        return hi;
    return a + b - c;
}

/* Expected samples of a token list: residuals in raster order (a copy
 * repeats the residuals `dist` back, one by one), then each sample is its
 * prediction plus its residual modulo 2^depth. */
static void lz_expect(const struct ltok *tok, size_t ntok, uint32_t w, uint32_t h,
                      unsigned depth, unsigned kind, uint32_t *out)
{
    const uint32_t n = w * h, mask = (1u << depth) - 1;
    int res[256];
    uint32_t pos = 0;
    for (size_t i = 0; i < ntok; i++) {
        for (unsigned j = 0; j < tok[i].run; j++)
            res[pos++] = tok[i].res[j];
        for (unsigned j = 0; j < tok[i].count; j++, pos++)
            res[pos] = res[pos - tok[i].dist];
    }
    cr_assert_eq(pos, n, "token list covers %u of %u samples", pos, n);
    for (uint32_t i = 0; i < n; i++)
        out[i] = (ref_pred(out, w, i % w, i / w, kind, mask) + (uint32_t)res[i]) & mask;
}

/* Decodes a token list's stream as every LZ mode (4 kinds, both group
 * sizes, where the tokens do not depend on them) and compares with the
 * expectation. */
static void lz_check(const char *name, const struct ltok *tok, size_t ntok, uint32_t w,
                     uint32_t h, unsigned depth)
{
    static const unsigned kinds[] = {L3_PLANE_MED, L3_PLANE_GRAD, L3_PLANE_LEFT2,
                                     L3_PLANE_LEFT};
    for (unsigned sh = 0; sh < 2; sh++) {
        struct tbits t;
        size_t len = lz_stream(tok, ntok, depth, sh ? L3_GROUP_SHORT : L3_GROUP, &t);
        uint8_t *heap = malloc(len); /* exact size: ASan sees overreads */
        memcpy(heap, t.b, len);
        for (size_t k = 0; k < 4; k++) {
            unsigned mode = kinds[k] | L3_PLANE_LZ | (sh ? L3_PLANE_SHORT : 0);
            uint32_t exp[256] = {0};
            uint16_t got[257];
            lz_expect(tok, ntok, w, h, depth, kinds[k], exp);
            got[w * h] = 0xbeef;
            int st = l3_tile_plane_decode(heap, len, mode, w, h, depth, got);
            cr_assert_eq(st, L3_OK, "%s mode %#x: %s", name, mode, l3_strerror(st));
            for (uint32_t i = 0; i < w * h; i++)
                cr_assert_eq(got[i], exp[i], "%s mode %#x: sample %u (%u,%u) is %u, expected %u",
                             name, mode, i, i % w, i / w, got[i], exp[i]);
            cr_assert_eq(got[w * h], 0xbeef, "%s: wrote past w*h", name);
            /* one byte more or less: the stream end rule */
            uint8_t *longer = calloc(1, len + 1);
            memcpy(longer, heap, len);
            cr_assert_eq(l3_tile_plane_decode(longer, len + 1, mode, w, h, depth, got),
                         L3_ERR_CORRUPT, "%s mode %#x: a byte too many", name, mode);
            cr_assert_eq(l3_tile_plane_decode(heap, len - 1, mode, w, h, depth, got),
                         L3_ERR_CORRUPT, "%s mode %#x: a byte too few", name, mode);
            free(longer);
        }
        free(heap);
    }
}

/* The worked example of docs/FORMAT.md section 6.7: a literal run of 2 and a
 * copy at distance 1 that fills the plane (nothing follows it). */
Test(format, spec_example_lz_plane)
{
    const uint8_t stream[8] = {0x06, 0x21, 0x73, 0x04};
    uint16_t out[6];
    cr_assert_eq(l3_tile_plane_decode(stream, 4, L3_PLANE_LEFT | L3_PLANE_LZ, 6, 1, 8, out),
                 L3_OK);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(out[i], 10 + 2 * i, "sample %d: %u", i, out[i]);
    /* the same bits from the test's writer */
    const struct ltok tok[] = {{2, {10, 2}, 3, 4, 1}};
    struct tbits t;
    cr_assert_eq(lz_stream(tok, 1, 8, L3_GROUP, &t), 4);
    cr_assert_eq(t.n, 31);
    cr_assert(memcmp(t.b, stream, 4) == 0, "writer: %02x %02x %02x %02x", t.b[0], t.b[1],
              t.b[2], t.b[3]);
    /* a fifth byte, or only three */
    const uint8_t longer[8] = {0x06, 0x21, 0x73, 0x04, 0x01};
    cr_assert_eq(l3_tile_plane_decode(longer, 5, L3_PLANE_LEFT | L3_PLANE_LZ, 6, 1, 8, out),
                 L3_ERR_CORRUPT);
    cr_assert_eq(l3_tile_plane_decode(stream, 3, L3_PLANE_LEFT | L3_PLANE_LZ, 6, 1, 8, out),
                 L3_ERR_CORRUPT);
}

/* An 8x2 plane with the left predictor, worked out by hand: a literal run,
 * an overlapping copy (dist 2 < count 7) that crosses into the second row
 * (where x = 0 predicts from the sample above), a final literal run with an
 * escaped value and a wrap modulo 256. */
Test(format, lz_plane_by_hand)
{
    const struct ltok tok[] = {
        {3, {5, 3, -2}, -1, 7, 2},
        {6, {0, 1, -1, 2, 0, -128}, 2, 0, 0}, /* k = 2: 255 >> 2 >= 16, escaped */
    };
    struct tbits t;
    size_t len = lz_stream(tok, 2, 8, L3_GROUP, &t);
    uint16_t out[16];
    cr_assert_eq(l3_tile_plane_decode(t.b, len, L3_PLANE_LEFT | L3_PLANE_LZ, 8, 2, 8, out),
                 L3_OK);
    static const uint16_t want[16] = {5, 8, 6, 9, 7, 10, 8, 11, 3, 6, 6, 7, 6, 8, 8, 136};
    for (int i = 0; i < 16; i++)
        cr_assert_eq(out[i], want[i], "sample %d: %u, expected %u", i, out[i], want[i]);
    /* the independent expectation agrees with the hand-worked values */
    uint32_t exp[16] = {0};
    lz_expect(tok, 2, 8, 2, 8, L3_PLANE_LEFT, exp);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(exp[i], want[i]);
    lz_check("8x2", tok, 2, 8, 2, 8);
}

/* MED/GRAD/LEFT2/LEFT on a 6x3 plane: copies that cross rows (so copied
 * residuals land on x = 0, predicted from above), an empty literal run
 * between two copies, a copy that reaches back to sample 0, and a stream
 * that ends with a copy. */
Test(format, lz_planes_every_kind)
{
    const struct ltok b[] = {
        {4, {100, -3, 7, 0}, -1, 5, 3},   /* copy of samples 1..5 to 4..8 */
        {0, {0}, -1, 3, 9},               /* copy of 0..2 to 9..11 */
        {2, {-50, 12}, -1, 4, 7},         /* copy of 7..10 to 14..17: the end */
    };
    lz_check("6x3 copies", b, 3, 6, 3, 8);
    /* one long run over a row boundary: groups of 16 vs 8 + 3, dist 1 copy,
     * an all-zero group (symbol 0) at the end */
    const struct ltok d[] = {
        {11, {3, -1, 4, 1, -5, 9, -2, 6, 5, -3, 5}, -1, 4, 1},
        {3, {0, 0, 0}, -1, 0, 0},
    };
    lz_check("6x3 long run", d, 2, 6, 3, 8);
    /* 16 bits: residuals at both ends of the range (escapes), a copy of 20
     * (length code with a longer prefix) */
    const struct ltok e[] = {
        {5, {30000, -20000, 1, -1, -32768}, -1, 20, 4},
        {7, {0, 5, -5, 32767, 2, 2, 2}, 1, 0, 0},
    };
    lz_check("8x4 depth 16", e, 2, 8, 4, 16);
    /* sub-byte depths: every residual of the range */
    const struct ltok f[] = {
        {4, {1, -1, -2, 1}, -1, 6, 3},
        {5, {0, 1, -2, 0, -1}, -1, 0, 0},
    };
    lz_check("5x3 depth 2", f, 2, 5, 3, 2);
    const struct ltok g[] = {
        {5, {-1, 0, -1, -1, 0}, -1, 8, 5},
        {3, {0, -1, 0}, 0, 0, 0},
    };
    lz_check("4x4 depth 1", g, 2, 4, 4, 1);
    /* a copy distance with a long bit-length field (dist 37 = nb 6) */
    const struct ltok l[] = {
        {20, {9, -8, 7, -6, 5, -4, 3, -2, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, -1, 20, 20},
        {0, {0}, -1, 3, 37},
        {5, {-7, 7, -7, 7, -7}, 3, 0, 0},
    };
    lz_check("16x3 far copy", l, 3, 16, 3, 8);
}

/* Every way an LZ stream can break gives L3_ERR_CORRUPT. */
Test(format, lz_plane_corruption)
{
    const unsigned LZL = L3_PLANE_LEFT | L3_PLANE_LZ;
    struct tbits t;
    uint16_t out[64];
    size_t len;
#define DECODES(mode, w, h, depth) \
    l3_tile_plane_decode(t.b, tb_bytes(&t), (mode), (w), (h), (depth), out)
    /* copy distance: dist == pos is the first sample, dist > pos is not there */
    const struct ltok ok[] = {{3, {1, 2, 3}, -1, 7, 3}, {6, {0}, -1, 0, 0}};
    lz_stream(ok, 2, 8, L3_GROUP, &t);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_OK);
    const struct ltok far[] = {{3, {1, 2, 3}, -1, 7, 4}, {6, {0}, -1, 0, 0}};
    lz_stream(far, 2, 8, L3_GROUP, &t);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "dist > pos");
    const struct ltok first[] = {{0, {0}, -1, 3, 1}, {13, {0}, -1, 0, 0}};
    lz_stream(first, 2, 8, L3_GROUP, &t);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "copy at position 0");
    /* copy and run lengths: up to the end of the plane, not past it */
    const struct ltok to_end[] = {{3, {1, 2, 3}, -1, 13, 1}};
    lz_stream(to_end, 1, 8, L3_GROUP, &t);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_OK);
    const struct ltok past[] = {{3, {1, 2, 3}, -1, 14, 1}};
    lz_stream(past, 1, 8, L3_GROUP, &t);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "count > n - pos");
    memset(&t, 0, sizeof t);
    tb_eg(&t, 17, 0); /* a literal run of 17 in a plane of 16 */
    tb_put(&t, 1, 1);
    tb_zeros(&t, 17 * 8);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "run > n - pos");
    /* Exp-Golomb prefixes: 18 zeros are invalid (in a run and in a copy length) */
    memset(&t, 0, sizeof t);
    tb_zeros(&t, 18);
    tb_put(&t, 1, 1);
    tb_zeros(&t, 40);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "run prefix of 18 zeros");
    memset(&t, 0, sizeof t);
    tb_eg(&t, 0, 0);
    tb_zeros(&t, 18);
    tb_put(&t, 1, 1);
    tb_zeros(&t, 22);
    tb_put(&t, 2, 5);
    tb_put(&t, 0, 1);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "length prefix of 18 zeros");
    /* distance bit-length field: 0 and 18 are invalid; 17 reaches past any
     * tile (dist >= 65536); 2 bits for dist 3 with a first sample is fine */
    for (unsigned nb = 0; nb < 32; nb++) {
        memset(&t, 0, sizeof t);
        tb_eg(&t, 3, 0);
        unsigned prev = 0;
        tb_symbol(&t, 1, &prev); /* k = 0: three zero residuals */
        tb_put(&t, 7, 3);
        tb_eg(&t, 0, 4); /* count 3 */
        tb_put(&t, nb, 5);
        tb_zeros(&t, nb ? nb - 1 : 0); /* dist = 2^(nb-1) */
        tb_eg(&t, 10, 0);
        tb_symbol(&t, 0, &prev);
        int st = DECODES(LZL, 8, 2, 8);
        if (nb >= 1 && nb <= 2)
            cr_assert_eq(st, L3_OK, "nb %u", nb);
        else
            cr_assert_eq(st, L3_ERR_CORRUPT, "nb %u", nb);
    }
    /* stream end: the valid stream with a byte more, a byte less, empty */
    len = lz_stream(ok, 2, 8, L3_GROUP, &t);
    cr_assert_eq(l3_tile_plane_decode(t.b, len + 1, LZL, 8, 2, 8, out), L3_ERR_CORRUPT);
    cr_assert_eq(l3_tile_plane_decode(t.b, len - 1, LZL, 8, 2, 8, out), L3_ERR_CORRUPT);
    cr_assert_eq(l3_tile_plane_decode(t.b, 0, LZL, 8, 2, 8, out), L3_ERR_CORRUPT);
    /* a Rice value >= 2^depth inside a run (k = 7, q = 2: 256 at depth 8; k = 2,
     * q = 1: 4 at depth 2) */
    for (int depth = 2; depth <= 8; depth += 6) {
        unsigned k = depth == 8 ? 7 : 2;
        for (uint32_t v = (1u << depth) - 2; v <= (1u << depth); v++) {
            memset(&t, 0, sizeof t);
            unsigned prev = 0;
            tb_eg(&t, 16, 0);
            tb_symbol(&t, k + 1, &prev);
            for (int i = 0; i < 16; i++)
                tb_rice(&t, i == 9 ? v : 0, k, (unsigned)depth);
            int st = DECODES(LZL, 8, 2, (unsigned)depth);
            cr_assert_eq(st, v >> depth ? L3_ERR_CORRUPT : L3_OK, "depth %d value %u", depth, v);
        }
    }
    /* group symbols: above depth + 1, and one below 0 */
    memset(&t, 0, sizeof t);
    tb_eg(&t, 16, 0);
    tb_put(&t, 10u << 3, 8);
    tb_zeros(&t, 16 * 10);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "symbol 10 at depth 8");
    memset(&t, 0, sizeof t);
    tb_eg(&t, 16, 0);
    tb_put(&t, 4, 3); /* prev - 1 with prev = 0 */
    tb_zeros(&t, 8);
    cr_assert_eq(DECODES(LZL, 8, 2, 8), L3_ERR_CORRUPT, "symbol below 0");
    /* an LZ plane of one sample per tile row in a 1x1 plane: a run of 1 */
    memset(&t, 0, sizeof t);
    tb_eg(&t, 1, 0);
    {
        unsigned prev = 0;
        tb_symbol(&t, 3, &prev);
        tb_rice(&t, zz(-9), 2, 8);
    }
    cr_assert_eq(DECODES(LZL, 1, 1, 8), L3_OK);
    cr_assert_eq(out[0], 247);
#undef DECODES
}

/* Which mode bytes are valid: CONST and RAW without flags; MED, GRAD, LEFT2
 * with any of SHORT and LZ; LEFT only with LZ; nothing else. The tile header
 * parser and the plane decoder agree. */
static int spec_mode_valid(unsigned m)
{
    unsigned kind = m & 0x0f, fl = m & 0xf0;
    if (fl & ~0x30u)
        return 0;
    if (kind <= 1)
        return fl == 0;
    if (kind <= 4)
        return 1;
    return kind == 5 && (fl & 0x20);
}

Test(format, lz_mode_bytes)
{
    /* a 1-plane tile: flags byte, mode byte, stream length 0 */
    for (unsigned m = 0; m < 256; m++) {
        uint8_t tile[6] = {0, (uint8_t)m, 0, 0, 0, 0};
        struct l3_tile_header th;
        int st = l3_tile_parse(tile, sizeof tile, 1, &th);
        cr_assert_eq(st, spec_mode_valid(m) ? L3_OK : L3_ERR_CORRUPT, "mode byte %#x", m);
        cr_assert_eq(l3_plane_mode_valid(m), spec_mode_valid(m), "mode byte %#x", m);
    }
    /* invalid modes are refused by the plane decoder even on streams that
     * are valid for the mode without the offending bits */
    const uint8_t med[8] = {0x10, 0x59, 0x30};     /* section 6.4: MED 4x1 */
    const uint8_t raw[16] = {1, 2, 3, 4, 5, 6, 7, 8}; /* 8x1 depth 8 RAW */
    const uint8_t cst[8] = {7};
    struct tbits t;
    const struct ltok ok[] = {{3, {1, 2, 3}, -1, 7, 3}, {6, {0}, -1, 0, 0}};
    size_t len = lz_stream(ok, 2, 8, L3_GROUP, &t);
    uint16_t out[16];
    cr_assert_eq(l3_tile_plane_decode(med, 3, L3_PLANE_MED, 4, 1, 8, out), L3_OK);
    cr_assert_eq(l3_tile_plane_decode(raw, 8, L3_PLANE_RAW, 8, 1, 8, out), L3_OK);
    cr_assert_eq(l3_tile_plane_decode(cst, 1, L3_PLANE_CONST, 8, 1, 8, out), L3_OK);
    cr_assert_eq(l3_tile_plane_decode(t.b, len, L3_PLANE_LEFT | L3_PLANE_LZ, 8, 2, 8, out),
                 L3_OK);
    static const unsigned bad[] = {
        L3_PLANE_LEFT, L3_PLANE_LEFT | L3_PLANE_SHORT,     /* LEFT without LZ */
        L3_PLANE_RAW | L3_PLANE_LZ, L3_PLANE_RAW | L3_PLANE_SHORT,
        L3_PLANE_CONST | L3_PLANE_LZ | L3_PLANE_SHORT, L3_PLANE_CONST | L3_PLANE_LZ,
        0x40 | L3_PLANE_MED, 0x80 | L3_PLANE_MED, 0x40 | L3_PLANE_LZ | L3_PLANE_LEFT,
        0x80 | L3_PLANE_LZ | L3_PLANE_GRAD, L3_PLANE_LZ | 6, L3_PLANE_LZ | 15, 6, 0xff};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned m = bad[i], kind = L3_PLANE_KIND(m);
        int st;
        if (kind == L3_PLANE_RAW)
            st = l3_tile_plane_decode(raw, 8, m, 8, 1, 8, out);
        else if (kind == L3_PLANE_CONST)
            st = l3_tile_plane_decode(cst, 1, m, 8, 1, 8, out);
        else if (m & L3_PLANE_LZ)
            st = l3_tile_plane_decode(t.b, len, m, 8, 2, 8, out);
        else if (kind == L3_PLANE_LEFT)
            st = l3_tile_plane_decode(t.b, len, m, 8, 2, 8, out);
        else
            st = l3_tile_plane_decode(med, 3, m, 4, 1, 8, out);
        cr_assert_eq(st, L3_ERR_CORRUPT, "mode %#x accepted by the plane decoder", m);
        /* and in a tile header, with the stream that went with it */
        uint8_t tile[64] = {0, (uint8_t)m, 8, 0, 0, 0};
        cr_assert_eq(l3_tile_parse(tile, 6 + 8, 1, &(struct l3_tile_header){0}),
                     L3_ERR_CORRUPT, "mode %#x accepted by the tile parser", m);
        uint32_t flags;
        uint16_t buf[16];
        cr_assert_eq(l3_tile_decode(tile, 6 + 8, 1, 8, 1, 8, buf, &flags), L3_ERR_CORRUPT,
                     "mode %#x accepted by the tile decoder", m);
    }
}

/* ---------------------------------------------------------------- LZ from the encoder */

/* Every colour model and depth (16-bit and sub-byte included): effort 2
 * writes LZ planes on repeated content and the file decodes to the source
 * bit for bit; the default effort round-trips too; effort -1 writes none. */
Test(format, lz_roundtrip_models_depths)
{
    char msg[256];
    for (unsigned color = 0; color < 5; color++)
        for (unsigned di = 0; di < ndepths[color]; di++) {
            struct l3_info info;
            th_info(&info, color, depths_of[color][di], 80, 48);
            void *px = th_lz_image(&info, 100 + color * 7 + di);
            for (int effort = -1; effort <= 2; effort++) {
                if (effort == 1)
                    continue;
                struct l3_encode_options eo = {
                    .effort = effort, .tile_width = 32, .tile_height = 32};
                void *f = NULL;
                size_t n = 0;
                int r = th_roundtrip(&info, px, &eo, 3, msg, sizeof msg, &f, &n);
                cr_assert_eq(r, 0, "color %u depth %u effort %d: %s", color, info.bit_depth,
                             effort, msg);
                unsigned counts[256] = {0};
                cr_assert_eq(th_plane_modes(f, n, counts), 0);
                unsigned lz = th_lz_planes(counts, 0);
                if (effort < 0)
                    cr_assert_eq(lz, 0, "color %u depth %u: LZ plane at effort -1", color,
                                 info.bit_depth);
                if (effort == 2)
                    cr_assert_gt(lz, 0, "color %u depth %u: no LZ plane at effort 2", color,
                                 info.bit_depth);
                l3_free(f);
            }
            free(px);
        }
}

Test(format, lz_every_predictor_from_the_encoder)
{
    static const unsigned kinds[3] = {L3_PLANE_MED, L3_PLANE_GRAD, L3_PLANE_LEFT2};
    static const char *names[3] = {"MED", "GRAD", "LEFT2"};
    unsigned total[256] = {0};
    char msg[256];
    for (int which = 0; which < 3; which++) {
        struct l3_info info;
        th_info(&info, L3_COLOR_GRAY, 8, 64, 32);
        uint8_t px[64 * 32];
        th_kind_image(which, px);
        for (int effort = -1; effort <= 2; effort += 3) {
            struct l3_encode_options eo = {.effort = effort, .tile_width = 32, .tile_height = 32};
            void *f = NULL;
            size_t n = 0;
            cr_assert_eq(th_roundtrip(&info, px, &eo, 2, msg, sizeof msg, &f, &n), 0,
                         "image %d effort %d: %s", which, effort, msg);
            unsigned counts[256] = {0};
            cr_assert_eq(th_plane_modes(f, n, counts), 0);
            if (effort < 0) {
                cr_assert_eq(th_lz_planes(counts, 0), 0, "image %d: LZ at effort -1", which);
            } else {
                for (int m = 0; m < 256; m++)
                    total[m] += counts[m];
                /* the tile buffers of the decoder's plane entry point agree */
                cr_assert_gt(th_lz_planes(counts, kinds[which]), 0,
                             "image %d: no %s LZ plane at effort 2", which, names[which]);
            }
            l3_free(f);
        }
    }
    unsigned other = 0;
    for (int k = 0; k < 3; k++)
        other += th_lz_planes(total, kinds[k]);
    cr_assert_gt(other, 0, "effort 2 wrote no LZ plane with a predictor other than LEFT");
}

/* Bit flips and truncations of real LZ plane streams: an error or samples in
 * range, never a read or write out of bounds (ASan) nor a hang. */
Test(format, lz_plane_bit_flips)
{
    for (unsigned depth = 2; depth <= 16; depth += 14) {
        struct l3_info info;
        th_info(&info, L3_COLOR_GRAY, depth, 48, 24);
        void *px = th_lz_image(&info, depth);
        struct l3_encode_options eo = {0};
        eo.effort = 2;
        size_t n;
        uint8_t *f = encode_or_fail(&info, px, &eo, &n);
        struct l3_tile_header th;
        const uint8_t *tile = th_tile(f, n, 0, &th);
        cr_assert_not_null(tile);
        cr_assert(th.mode[0] & L3_PLANE_LZ, "depth %u: the plane is mode %#x", depth,
                  th.mode[0]);
        size_t len = th.len[0];
        uint16_t buf[48 * 24 + 1];
        uint8_t *s = malloc(len);
        unsigned ok = 0;
        for (size_t bit = 0; bit < 8 * len; bit++) {
            memcpy(s, tile + th.off[0], len);
            s[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            buf[48 * 24] = 0xbeef;
            int st = l3_tile_plane_decode(s, len, th.mode[0], 48, 24, depth, buf);
            cr_assert(st == L3_OK || st == L3_ERR_CORRUPT);
            cr_assert_eq(buf[48 * 24], 0xbeef, "wrote past w*h");
            if (st == L3_OK) {
                ok++;
                for (int i = 0; i < 48 * 24; i++)
                    cr_assert_lt(buf[i], 1u << depth);
            }
        }
        cr_assert_lt(ok, 8 * len, "depth %u: no flip detected", depth);
        for (size_t l = 0; l < len; l++) {
            uint8_t *cut = malloc(l ? l : 1);
            memcpy(cut, tile + th.off[0], l);
            cr_assert_eq(l3_tile_plane_decode(cut, l, th.mode[0], 48, 24, depth, buf),
                         L3_ERR_CORRUPT, "depth %u: truncated to %zu of %zu bytes", depth, l,
                         len);
            free(cut);
        }
        free(s);
        free(px);
        l3_free(f);
    }
}

/* Random bytes as plane streams and tiles: errors or values, never a read
 * outside the given length (ASan checks the bounds) or a write outside w*h. */
Test(format, tile_routine_hostile_streams)
{
    uint64_t s = 12345;
    uint8_t stream[300];
    uint16_t buf[4 * 24 * 9 + 8];
    for (int trial = 0; trial < 4000; trial++) {
        size_t len = tc_splitmix64(&s) % sizeof stream;
        for (size_t i = 0; i < len; i++)
            stream[i] = (uint8_t)tc_splitmix64(&s);
        if (trial & 1) /* mostly valid-looking prefixes: small symbols */
            for (size_t i = 0; i < len; i++)
                stream[i] |= 0x11;
        unsigned depths[] = {1, 2, 4, 8, 16};
        unsigned depth = depths[tc_splitmix64(&s) % 5];
        uint32_t w = 1 + tc_splitmix64(&s) % 24, h = 1 + tc_splitmix64(&s) % 9;
        unsigned mode = (unsigned)(tc_splitmix64(&s) % 64); /* LZ modes too */
        uint8_t *heap = malloc(len ? len : 1); /* exact size: ASan sees overreads */
        memcpy(heap, stream, len);
        buf[w * h] = 0xbeef;
        int st = l3_tile_plane_decode(heap, len, mode, w, h, depth, buf);
        cr_assert(st == L3_OK || st == L3_ERR_CORRUPT);
        cr_assert_eq(buf[w * h], 0xbeef, "wrote past w*h");
        if (st == L3_OK)
            for (uint32_t i = 0; i < w * h; i++)
                cr_assert_lt(buf[i], 1u << depth, "sample out of range");
        unsigned planes = 1 + tc_splitmix64(&s) % 4;
        uint32_t flags;
        buf[planes * w * h] = 0xbeef;
        st = l3_tile_decode(heap, len, planes, w, h, depth, buf, &flags);
        cr_assert(st == L3_OK || st == L3_ERR_CORRUPT);
        cr_assert_eq(buf[planes * w * h], 0xbeef, "wrote past planes*w*h");
        free(heap);
    }
}
