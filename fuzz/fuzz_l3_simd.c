/* fuzz_l3_simd.c — libFuzzer harness: the SIMD lane decoder and the fast LZ
 * plane decoder against the reference decoder (codec/l3_tile.h).
 *
 * Every input is decoded with L3_DECODE_SCALAR, with the default decoder (the
 * SIMD lane decoder where the CPU has it, its AVX-512 build where there is
 * AVX-512) and with L3_DECODE_NO_AVX512 (the AVX2 build), each with 1 and 2
 * threads. All must return the same status, and on success the same samples:
 * any difference aborts. As in fuzz_l3_decode, an input that starts with the L3
 * magic is tried again with its header checksum recomputed, so that mutations
 * reach the tile data.
 *
 * Every input is also taken as one LEFT + LZ plane stream (its first 3 bytes
 * choose the plane's size, depth and group size, and the 8 bytes the file
 * would hold behind the stream): the fast decoder (codec/dec_lz.c) must
 * accept it exactly when the reference decoder does, with the same samples,
 * and write nothing outside the plane. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "l3.h"
#include "l3_internal.h"
#include "resealed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void compare(const uint8_t *data, size_t size)
{
    struct l3_info info;
    if (l3_read_info(data, size, &info, NULL) != L3_OK)
        return;
    if ((uint64_t)info.width * info.height > (1u << 20))
        return; /* the limits below refuse it on every path */
    size_t raw = l3_decoded_size(&info, 0);
    uint8_t *ref = malloc(raw), *got = malloc(raw);
    if (!ref || !got) {
        free(ref);
        free(got);
        return;
    }
    static const uint32_t modes[] = {0, L3_DECODE_NO_AVX512};
    for (unsigned threads = 1; threads <= 2; threads++) {
        struct l3_decode_options o;
        memset(&o, 0, sizeof o);
        o.threads = threads;
        o.limits.max_pixels = 1u << 20;
        o.limits.max_memory = 256u << 20;
        o.flags = L3_DECODE_SCALAR;
        memset(ref, 0, raw);
        int want = l3_decode(data, size, ref, raw, 0, &o);
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            o.flags = modes[m];
            memset(got, 0xa5, raw);
            int st = l3_decode(data, size, got, raw, 0, &o);
            if (st != want)
                abort(); /* SIMD and reference disagree on the status */
            if (st == L3_OK && memcmp(ref, got, raw) != 0)
                abort(); /* ... or on the samples */
        }
    }
    free(ref);
    free(got);
}

static void compare_lz_plane(const uint8_t *data, size_t size)
{
    if (size < 3)
        return;
    static const unsigned depths[4] = {1, 2, 4, 8};
    const uint32_t w = 1 + data[0] % 96, h = 1 + data[1] % 96;
    const unsigned depth = depths[data[2] & 3];
    const uint32_t mode = L3_PLANE_LEFT | L3_PLANE_LZ | (data[2] & 4 ? L3_PLANE_SHORT : 0);
    const size_t len = size - 3, n = (size_t)w * h;
    uint8_t *s = malloc(len + 8), *got = malloc(n + 16);
    uint16_t *ref = malloc(n * sizeof *ref);
    if (!s || !got || !ref)
        abort();
    memcpy(s, data + 3, len);
    memset(s + len, data[2] >> 3, 8);
    memset(got, 0x5a, n + 16);
    int st = l3_tile_plane_decode(s, len, mode, w, h, depth, ref);
    int ok = l3_lz_decode_u8(s, (uint32_t)len, mode, w, h, depth, got);
    if (ok != (st == L3_OK))
        abort(); /* the fast decoder accepts what the reference rejects, or the reverse */
    for (size_t i = n; i < n + 16; i++)
        if (got[i] != 0x5a)
            abort(); /* it wrote past the plane */
    for (size_t i = 0; ok && i < n; i++)
        if (got[i] != ref[i])
            abort(); /* ... or decoded other samples */
    free(s);
    free(got);
    free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    compare(data, size);
    compare_lz_plane(data, size);
    /* the same bytes with a valid header checksum */
    uint8_t *copy = fuzz_resealed(data, size);
    if (copy != NULL)
        compare(copy, size);
    free(copy);
    return 0;
}
