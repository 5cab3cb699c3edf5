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

#include <xxhash.h>

#include "l3.h"
#include "l3_internal.h"

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

    /* Same bytes with a valid header checksum. */
    if (size < L3_FIXED_HEADER || memcmp(data, L3_MAGIC, 4) != 0)
        return 0;
    struct l3_info info;
    memset(&info, 0, sizeof info);
    info.color = data[L3_OFF_COLOR];
    info.channels = data[L3_OFF_CHANNELS];
    info.bit_depth = data[L3_OFF_DEPTH];
    memcpy(&info.width, data + L3_OFF_WIDTH, 4); /* little-endian hosts only */
    memcpy(&info.height, data + L3_OFF_HEIGHT, 4);
    uint16_t tw, th, pl;
    memcpy(&tw, data + L3_OFF_TILE_W, 2);
    memcpy(&th, data + L3_OFF_TILE_H, 2);
    memcpy(&pl, data + L3_OFF_PAL_LEN, 2);
    info.palette_len = info.color == L3_COLOR_PALETTE ? pl : 0;
    uint64_t tiles = 0, hsize = 0;
    if (l3_geometry(&info, tw, th, &tiles, &hsize) != L3_OK || hsize < 8 || hsize > size)
        return 0;
    uint8_t *copy = malloc(size);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    uint64_t h = XXH3_64bits(copy, (size_t)hsize - 8);
    for (int i = 0; i < 8; i++)
        copy[hsize - 8 + (uint64_t)i] = (uint8_t)(h >> (8 * i));
    if (memcmp(copy, data, size) != 0)
        exercise(copy, size, threads);
    free(copy);
    return 0;
}
