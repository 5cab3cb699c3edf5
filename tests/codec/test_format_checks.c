/* test_format_checks.c — what the L3 format refuses: bad encoder input,
 * pixel and memory limits, decompression bombs, header prefixes, magic and
 * version, every header bit flip and out-of-range field, payload bit flips;
 * and the shared tile routine against the decoder and the spec's example.
 * Deterministic (seeded) inputs only. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "helpers.h"
#include "l3.h"
#include "l3_internal.h"
#include "l3_le.h"
#include "l3_tile.h"
#include "format_shared.h"

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
