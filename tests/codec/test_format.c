/* test_format.c — L3 format core: round trips (every model, depth, tile
 * size, effort and plane mode; threads give the same bytes), strides and
 * buffer checks, size helpers, status names. Deterministic (seeded) inputs
 * only. test_format_checks.c: bad input, limits, header and payload
 * corruption, the shared tile routine; test_lz_planes.c and
 * test_lz_encoder.c: LZ planes. */
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
