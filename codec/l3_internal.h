/* l3_internal.h — shared by l3.c, encode.c, decode.c (not installed). */
#ifndef L3_INTERNAL_H
#define L3_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "l3.h"
#include "l3_tile.h"

/* Hot encoder loops are compiled twice, for AVX2 and for the baseline, and
 * the dynamic loader picks one for the CPU (GNU ifunc; x86-64 ELF only).
 * Integer code only: both give the same bytes. */
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(L3_NO_CLONES)
#define L3_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define L3_CLONES
#endif

#define L3_MAGIC "L3IM"
#define L3_FIXED_HEADER 48u  /* bytes before the palette */
#define L3_MAX_TILE_DIM 1024u
#define L3_MAX_TILE_AREA 65536u
#define L3_HDR_FLAG_TRNS 0x01u

/* A parsed and validated header. */
struct l3_hdr {
    struct l3_info info;
    struct l3_layout layout;
    const uint8_t *table; /* tile table inside the caller's buffer */
};

/* Fixed-header offsets */
enum {
    L3_OFF_MAGIC = 0,
    L3_OFF_VERSION = 4,
    L3_OFF_COLOR = 5,
    L3_OFF_CHANNELS = 6,
    L3_OFF_DEPTH = 7,
    L3_OFF_WIDTH = 8,
    L3_OFF_HEIGHT = 12,
    L3_OFF_TILE_W = 16,
    L3_OFF_TILE_H = 18,
    L3_OFF_FLAGS = 20,
    L3_OFF_CODING = 21,
    L3_OFF_PAL_LEN = 22,
    L3_OFF_PAL_ALPHA_LEN = 24,
    L3_OFF_TRNS = 26,
    L3_OFF_PAYLOAD_SIZE = 32,
    L3_OFF_PAYLOAD_HASH = 40,
};

/* Validates the image description fields (shared by encoder and parser). */
int l3_check_info(const struct l3_info *info);
/* Tile count and header size for a description + tile geometry. */
int l3_geometry(const struct l3_info *info, uint32_t tw, uint32_t th,
                uint64_t *tiles_ret, uint64_t *header_size_ret);
/* Largest valid byte size of one plane stream of a tile of w x h samples. */
uint64_t l3_plane_max_bytes(uint32_t w, uint32_t h, unsigned depth);
/* Parses the header of data[0..size). */
int l3_parse_header(const uint8_t *data, size_t size, struct l3_hdr *hdr,
                    size_t *needed_ret);
/* Writes the fixed header, palette and header checksum; the tile table
 * (tiles u64 end offsets) must already be at data + table_offset. */
void l3_write_header(uint8_t *data, const struct l3_info *info,
                     const struct l3_layout *layout);
/* Applies default limits. */
void l3_limits_resolve(const struct l3_limits *in, uint64_t *max_pixels,
                       size_t *max_memory);

/* Runs fn(arg, tile_index) for every tile on up to `threads` threads (tiles
 * handed out one at a time). Returns the first non-zero status. */
typedef int (*l3_tile_fn)(void *arg, unsigned worker, uint64_t tile);
int l3_parallel_tiles(uint64_t tiles, unsigned threads, l3_tile_fn fn, void *arg);

/* ---- streaming encoder (encode.c): l3_encode in three steps, so that tiles
 * can be encoded while the pixels below them are still being produced. ---- */
struct l3_enc;
/* Validates and allocates exactly as l3_encode does (same checks, same
 * errors, same limits for `threads` workers; threads is clamped as there).
 * `pixels` must stay valid until l3_enc_finish; its rows may be filled in
 * later, as long as a tile's rows are written before l3_enc_tile(tile). */
int l3_enc_begin(const struct l3_info *info, const void *pixels, size_t stride,
                 const struct l3_encode_options *opts, struct l3_enc **enc_ret);
/* The image description as written (tile geometry filled in), worker count. */
const struct l3_info *l3_enc_info(const struct l3_enc *enc);
unsigned l3_enc_threads(const struct l3_enc *enc);
uint64_t l3_enc_tiles(const struct l3_enc *enc);
/* Encodes one tile with worker `worker`'s scratch (< l3_enc_threads). */
int l3_enc_tile(struct l3_enc *enc, unsigned worker, uint64_t tile);
/* After every tile: assembles the file (tile table, payload, checksums). */
int l3_enc_finish(struct l3_enc *enc, void **out_ret, size_t *size_ret);
void l3_enc_free(struct l3_enc *enc);

/* ---- PNG row reader (png.c): l3_png_decode's reading, row by row ---- */
struct l3_png_reader;
/* From memory (fd < 0) or from fd. Reads up to the image data, checks the
 * limits (before any pixel memory exists) and sets the same transforms as
 * l3_png_decode. */
int l3_png_reader_open(const void *png, size_t png_size, int fd,
                       const struct l3_limits *limits, struct l3_png_reader **reader_ret);
const struct l3_info *l3_png_reader_info(const struct l3_png_reader *r);
int l3_png_reader_interlaced(const struct l3_png_reader *r);
/* Next n rows (non-interlaced images only). */
int l3_png_reader_rows(struct l3_png_reader *r, unsigned char **rows, uint32_t n);
/* The whole image, any interlacing. */
int l3_png_reader_image(struct l3_png_reader *r, unsigned char **rows);
/* Reads the trailing chunks; for palette images extends the palette over
 * indices past PLTE as l3_png_decode does (pixels = the whole image). */
int l3_png_reader_finish(struct l3_png_reader *r, const unsigned char *pixels, size_t size);
void l3_png_reader_close(struct l3_png_reader *r);

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

#endif
