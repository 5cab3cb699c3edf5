/* fuzz_l3_decode.c — libFuzzer harness for the L3 reader and CPU decoder.
 *
 * Each input is tried as is, then (when it starts with the L3 magic) with its
 * header checksum recomputed, so that mutations get past the header check
 * and reach the tile table and the tile decoder. Decoding runs without the
 * payload checksum so corrupt tile data is decoded, under small limits.
 * Every call must return a status; crashes, hangs, leaks and sanitizer
 * reports are the findings.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "l3.h"
#include "l3_internal.h"
#include "resealed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(const uint8_t *data, size_t size, unsigned threads)
{
    struct l3_info info;
    struct l3_layout layout;
    size_t needed = 0;
    int st = l3_read_info(data, size, &info, &needed);
    if (st == L3_ERR_TRUNCATED && needed <= size)
        abort(); /* "truncated" must name a larger size */
    (void)l3_read_layout(data, size, &info, &layout, NULL);
    int vst = l3_verify(data, size);
    if (st != L3_OK) {
        if (vst == L3_OK)
            abort(); /* verify accepted what read_info refused */
        return;
    }
    struct l3_decode_options o;
    memset(&o, 0, sizeof o);
    o.threads = threads;
    o.limits.max_pixels = 1u << 20;
    o.limits.max_memory = 64u << 20;
    void *px = NULL;
    size_t n = 0;
    struct l3_info di;
    st = l3_decode_alloc(data, size, &o, &px, &n, &di);
    if (st == L3_OK) {
        if (n != l3_decoded_size(&di, 0))
            abort();
        /* A valid file (checksums included) decodes the same with VERIFY. */
        if (vst == L3_OK) {
            void *px2 = NULL;
            size_t n2 = 0;
            o.flags = L3_DECODE_VERIFY;
            if (l3_decode_alloc(data, size, &o, &px2, &n2, NULL) != L3_OK || n2 != n ||
                memcmp(px, px2, n) != 0)
                abort();
            l3_free(px2);
        }
    }
    l3_free(px);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned threads = size > 0 && (data[size - 1] & 1) ? 2 : 1;
    exercise(data, size, threads);

    /* the same bytes with a valid header checksum */
    uint8_t *copy = fuzz_resealed(data, size);
    if (copy != NULL)
        exercise(copy, size, threads);
    free(copy);
    return 0;
}
