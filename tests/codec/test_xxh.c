/* test_xxh.c — the checksums the codec writes are plain XXH3-64, whichever
 * entry points of libxxhash the build calls (codec/l3_xxh.h): a file's
 * payload checksum equals XXH3_64bits of its payload as computed here with
 * the plain functions, and, where the build uses the runtime-dispatched
 * ones, those give the plain hashes for every length class of XXH3 (0-16,
 * 17-128, 129-240 bytes, stripes, blocks) and for streamed input. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
#if L3_XXH_DISPATCH
#define XXH_DISPATCH_DISABLE_REPLACE /* both sets by their own names */
#include <xxh_x86dispatch.h>
#endif

#include "helpers.h"
#include "l3.h"
#include "l3_le.h"

Test(xxh, payload_checksum_is_plain_xxh3)
{
    const uint32_t sizes[][2] = {{1, 1}, {7, 3}, {40, 20}, {300, 200}, {1031, 517}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct l3_info info;
        th_info(&info, L3_COLOR_RGB, 8, sizes[i][0], sizes[i][1]);
        void *px = th_image(&info, TH_NOISE, 7 + i, NULL);
        void *f;
        size_t n;
        cr_assert_eq(th_encode(&info, px, 64, 1, &f, &n), L3_OK);
        struct l3_info got;
        struct l3_layout lay;
        cr_assert_eq(l3_read_layout(f, n, &got, &lay, NULL), L3_OK);
        cr_assert_lt(lay.header_size, n);
        const uint8_t *b = f;
        cr_expect_eq(l3_rd_u64le(b + 40), XXH3_64bits(b + lay.header_size, n - lay.header_size),
                     "%ux%u: stored payload checksum is not XXH3-64 of the payload", sizes[i][0],
                     sizes[i][1]);
        cr_expect_eq(l3_verify(f, n), L3_OK);
        free(f);
        free(px);
    }
}

#if L3_XXH_DISPATCH
Test(xxh, dispatched_hashes_are_the_plain_ones)
{
    size_t max = (size_t)1 << 20;
    uint8_t *b = malloc(max + 64);
    cr_assert(b);
    uint64_t s = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < max + 64; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        b[i] = (uint8_t)(s >> 24);
    }
    size_t lens[600], k = 0;
    for (size_t l = 0; l <= 260; l++)
        lens[k++] = l;
    for (size_t l = 261; l < max && k + 1 < sizeof lens / sizeof lens[0]; l = l * 5 / 4 + 3)
        lens[k++] = l;
    lens[k++] = max;
    for (size_t i = 0; i < k; i++) {
        for (size_t a = 0; a < 2; a++) { /* aligned and not */
            const uint8_t *p = b + a * 3;
            size_t l = lens[i];
            cr_assert_eq(XXH3_64bits_dispatch(p, l), XXH3_64bits(p, l), "64-bit, %zu bytes", l);
            XXH128_hash_t h1 = XXH3_128bits_dispatch(p, l), h2 = XXH3_128bits(p, l);
            cr_assert(XXH128_isEqual(h1, h2), "128-bit, %zu bytes", l);
            /* streamed in uneven pieces, as the cache hashes a source file */
            XXH3_state_t st64, st128;
            XXH3_64bits_reset(&st64);
            XXH3_128bits_reset(&st128);
            for (size_t o = 0, piece = 1; o < l; o += piece, piece = piece * 3 + 1) {
                size_t m = l - o < piece ? l - o : piece;
                XXH3_64bits_update_dispatch(&st64, p + o, m);
                XXH3_128bits_update_dispatch(&st128, p + o, m);
            }
            cr_assert_eq(XXH3_64bits_digest(&st64), XXH3_64bits(p, l), "64-bit streamed, %zu", l);
            cr_assert(XXH128_isEqual(XXH3_128bits_digest(&st128), h2), "128-bit streamed, %zu", l);
        }
    }
    free(b);
}
#endif
