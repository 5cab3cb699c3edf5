/* l3_le.h — fixed-width little-endian fields: the one set of byte-order
 * helpers for the L3 format (codec/) and the cache's keys and index records
 * (cache/). The readers are in l3_tile.h, which the GPU kernels share. */
#ifndef L3_LE_H
#define L3_LE_H

#include <stdint.h>

#include "l3_tile.h" /* l3_rd_u32le, l3_rd_u64le */

static inline void l3_wr_u16le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void l3_wr_u32le(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void l3_wr_u64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t l3_rd_u16le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
}

#endif /* L3_LE_H */
