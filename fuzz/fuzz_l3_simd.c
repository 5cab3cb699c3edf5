/* fuzz_l3_simd.c — libFuzzer harness: the SIMD lane decoder against the
 * reference decoder (codec/l3_tile.h).
 *
 * Every input is decoded with L3_DECODE_SCALAR, with the default decoder (the
 * SIMD lane decoder where the CPU has it, its AVX-512 build where there is
 * AVX-512) and with L3_DECODE_NO_AVX512 (the AVX2 build), each with 1 and 2
 * threads. All must return the same status, and on success the same samples:
 * any difference aborts. As in fuzz_l3_decode, an input that starts with the L3
 * magic is tried again with its header checksum recomputed, so that mutations
 * reach the tile data. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    compare(data, size);
    /* the same bytes with a valid header checksum */
    uint8_t *copy = fuzz_resealed(data, size);
    if (copy != NULL)
        compare(copy, size);
    free(copy);
    return 0;
}
