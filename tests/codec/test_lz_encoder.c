/* test_lz_encoder.c — the LZ planes the encoder writes, at every colour
 * model and depth and with every predictor, decoded bit for bit; bit flips in
 * them; hostile random streams given to the tile routine. */
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
