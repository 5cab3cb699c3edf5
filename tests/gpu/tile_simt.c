/* tile_simt.c — codec/l3_tile.h's SIMT variant (the code the CUDA kernel
 * runs: word-wise bit reader, one loop for MED/GRAD of either group size)
 * compiled as plain C, for test_tile_simt.c to compare with the CPU variant
 * that its own translation unit includes. */
#define L3_TILE_SIMT 1
#include "l3_tile.h"
#include "tile_simt.h"

int simt_plane_decode(const uint8_t *s, size_t len, unsigned mode, uint32_t w, uint32_t h,
                      unsigned depth, uint16_t *dst)
{
    return l3_tile_plane_decode(s, len, mode, w, h, depth, dst);
}

int simt_parse_plane(const uint8_t *tile, size_t size, unsigned planes, unsigned plane,
                     uint32_t *flags, uint32_t *off, uint32_t *len, uint32_t *mode)
{
    return l3_tile_parse_plane(tile, size, planes, plane, flags, off, len, mode);
}
