/* enc_tile.h — encoding one tile (enc_tile.c): the state shared by the
 * workers of one encode and the per-worker scratch it needs. encode.c owns
 * the buffers; enc_tile.c fills one tile slot. Not installed. */
#ifndef L3_ENC_TILE_H
#define L3_ENC_TILE_H

#include <stddef.h>
#include <stdint.h>

#include "enc_lz.h"
#include "l3_internal.h"

/* One encode: read-only for the workers except for their own scratch and
 * their own tile slots and tile_bytes entries. */
struct enc {
    const struct l3_info *info; /* tile geometry filled in */
    const uint8_t *pixels;
    size_t stride;
    unsigned planes;
    uint8_t *slots;       /* tile t's bytes start at slots + t * slot_size */
    size_t slot_size;
    uint64_t *tile_bytes; /* actual size of each tile */
    uint16_t *scratch;    /* per worker: l3_tile_scratch_elems() */
    size_t scratch_per;   /* uint16_t elements */
    size_t area;          /* tile_w * tile_h */
    int exact;            /* effort >= 2: exact per-group parameter search */
    int simd;             /* the AVX2 kernels of enc_simd.h (same bytes) */
    unsigned grad_bias;   /* take the gradient predictor unless MED is this
                             many 32nds smaller */
    unsigned short_bias;  /* groups of 8 only when this many 32nds smaller */
    uint8_t *wbuf;        /* per worker: L3_TILE_STREAM_BUFS buffers of wbuf_per bytes */
    size_t wbuf_per;
    int lz;               /* try LZ planes */
    unsigned lz_bias;     /* LZ only when this many 32nds smaller */
    struct lz_state *lzs; /* per worker */
    uint32_t *lzmem;
};

/* Stream buffers a worker needs (enc.wbuf). */
#define L3_TILE_STREAM_BUFS 4u

/* Rice groups of a tile_w x tile_h tile: groups of 16 and groups of 8. */
size_t l3_tile_groups(uint32_t tile_w, uint32_t tile_h);
/* uint16_t elements of one worker's scratch. */
size_t l3_tile_scratch_elems(uint32_t tile_w, uint32_t tile_h);
/* Bytes of one of a worker's stream buffers (the largest predicted or LZ
 * stream of a plane, with the writers' 8 bytes of slack). */
size_t l3_tile_stream_bytes(uint32_t tile_w, uint32_t tile_h, unsigned depth);

/* The w x h pixels at (x0, y0) into planes[0 .. channels-1] (w * h samples
 * each), checking sample ranges (a palette index must be below
 * palette_len). L3_ERR_INVALID_ARG when one is out of range. */
int l3_gather_planes(const struct enc *e, uint32_t x0, uint32_t y0, uint32_t w, uint32_t h,
                     uint16_t *const *planes);

/* Asks the CPU to bring tile `tile`'s pixels into its caches (nothing when
 * there is no such tile). */
void l3_prefetch_tile(const struct enc *e, uint64_t tile);

/* Encodes tile `tile` into its slot with worker `worker`'s scratch.
 * L3_ERR_INVALID_ARG when a sample exceeds the colour model's range. */
int l3_encode_tile(struct enc *e, unsigned worker, uint64_t tile);

#endif
