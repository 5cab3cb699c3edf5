/* resealed.h — for the L3 fuzz harnesses: an input with its header checksum
 * made valid, so that mutations get past the header check and reach the tile
 * table and the tile data. Header-only: each harness is one program. */
#ifndef L3_FUZZ_RESEALED_H
#define L3_FUZZ_RESEALED_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "l3.h"
#include "l3_internal.h"
#include "l3_le.h"

/* A copy of data[0..size) whose header checksum is recomputed, or NULL: when
 * data does not start with the L3 magic, when its header fields give no valid
 * geometry or a header longer than size, when the checksum was already right
 * (the copy would be the same bytes) or when memory runs out. The caller frees
 * the copy. */
static inline uint8_t *fuzz_resealed(const uint8_t *data, size_t size)
{
    if (size < L3_FIXED_HEADER || memcmp(data, L3_MAGIC, 4) != 0)
        return NULL;
    struct l3_info info;
    memset(&info, 0, sizeof info);
    info.color = data[L3_OFF_COLOR];
    info.channels = data[L3_OFF_CHANNELS];
    info.bit_depth = data[L3_OFF_DEPTH];
    info.width = l3_rd_u32le(data + L3_OFF_WIDTH);
    info.height = l3_rd_u32le(data + L3_OFF_HEIGHT);
    uint32_t tw = l3_rd_u16le(data + L3_OFF_TILE_W);
    uint32_t th = l3_rd_u16le(data + L3_OFF_TILE_H);
    uint16_t pl = (uint16_t)l3_rd_u16le(data + L3_OFF_PAL_LEN);
    info.palette_len = info.color == L3_COLOR_PALETTE ? pl : 0;
    uint64_t tiles = 0, hsize = 0;
    if (l3_geometry(&info, tw, th, &tiles, &hsize) != L3_OK || hsize < 8 || hsize > size)
        return NULL;
    uint8_t *copy = malloc(size);
    if (copy == NULL)
        return NULL;
    memcpy(copy, data, size);
    l3_wr_u64le(copy + hsize - 8, XXH3_64bits(copy, (size_t)hsize - 8));
    if (memcmp(copy, data, size) == 0) {
        free(copy);
        return NULL;
    }
    return copy;
}

#endif /* L3_FUZZ_RESEALED_H */
