/* tile_simt.h — entry points of tile_simt.c (l3_tile.h's SIMT variant). */
#ifndef TILE_SIMT_H
#define TILE_SIMT_H

#include <stddef.h>
#include <stdint.h>

int simt_plane_decode(const uint8_t *s, size_t len, unsigned mode, uint32_t w, uint32_t h,
                      unsigned depth, uint16_t *dst);
int simt_parse_plane(const uint8_t *tile, size_t size, unsigned planes, unsigned plane,
                     uint32_t *flags, uint32_t *off, uint32_t *len, uint32_t *mode);

#endif
