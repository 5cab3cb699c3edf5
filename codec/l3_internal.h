/* l3_internal.h — shared by l3.c, encode.c, decode.c (not installed). */
#ifndef L3_INTERNAL_H
#define L3_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "l3.h"
#include "l3_le.h"
#include "l3_tile.h"

/* Hot encoder loops are compiled twice, for AVX2 and for the baseline, and
 * the dynamic loader picks one for the CPU (GNU ifunc; x86-64 ELF only).
 * Integer code only: both give the same bytes. */
/* Not under clang (the fuzz build): clang names a cloned function's dispatcher
 * after the attribute, so calls from other files, which see a plain
 * declaration, do not link. */
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(L3_NO_CLONES)
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

/* Worker threads for `work` independent items: the request, at least 1, at
 * most L3_MAX_THREADS and never more than the items. */
#define L3_MAX_THREADS 256u
static inline unsigned l3_thread_count(unsigned requested, uint64_t work)
{
    unsigned t = requested ? requested : 1;
    if (t > L3_MAX_THREADS)
        t = L3_MAX_THREADS;
    if (work && t > work)
        t = (unsigned)work;
    return t;
}

/* Runs fn(arg, tile_index) for every tile on up to `threads` threads (tiles
 * handed out one at a time). Returns the first non-zero status. */
typedef int (*l3_tile_fn)(void *arg, unsigned worker, uint64_t tile);
int l3_parallel_tiles(uint64_t tiles, unsigned threads, l3_tile_fn fn, void *arg);

/* ---- tile decoding (dec_tiles.c): every tile of a validated file (hdr, parsed
 * from data[0..size)) decoded and handed to sink (NULL: decode and check only).
 * flags: L3_DECODE_SCALAR, L3_DECODE_NO_AVX512 or 0. mem_left: bytes of scratch allowed. ---- */
int l3_dec_tiles(const uint8_t *data, size_t size, const struct l3_hdr *hdr, uint32_t flags,
                 unsigned threads, size_t mem_left, l3_tile_sink sink, void *arg);

/* ---- l3_decode's sink (dec_store.c): a decoded tile into the interleaved
 * image at out, rows stride bytes apart. ---- */
struct l3_store {
    uint8_t *out;
    size_t stride;
    size_t row_bytes; /* bytes of one image row's samples (l3_row_bytes) */
};
int l3_store_tile(void *arg, unsigned worker, const struct l3_tile_out *tile);
/* The n (<= L3_SIMD_BATCH_TILES) tiles of one batch, all of bit depth <= 8 and
 * of the same height, as l3_store_tile stores each, but row by row across
 * them: the tiles of a batch of full tiles lie side by side in the image, so
 * their rows make one run of memory, where a tile's rows alone are far apart
 * (the right column's tiles lie one below the other). addg[i]: tile i
 * (8-bit, 3 or 4 channels) still has R - G and B - G in planes 0 and 2 (the
 * colour transform is undone as the pixels are stored). */
void l3_store_tiles(const struct l3_store *s, const struct l3_tile_out *t, const uint8_t *addg,
                    unsigned n);

/* ---- SIMD lane decoder (dec_simd.c): up to L3_SIMD_MAX_LANES predicted plane
 * streams of the same tile size decoded in lock-step, 8 per vector. ---- */
#define L3_SIMD_MAX_LANES 32
struct l3_simd_lane {
    const uint8_t *stream; /* plane stream inside the file buffer */
    uint32_t len;          /* its length in bytes */
    uint32_t mode;         /* L3_PLANE_MED, _GRAD or _LEFT2, optionally | L3_PLANE_SHORT */
    uint8_t *out;          /* w * h samples, stride w */
    uint32_t tag;          /* the caller's */
};
/* Whether this CPU runs the SIMD decoder (AVX2). */
int l3_simd_available(void);
/* Tiles per batch for images of `planes` planes (at most L3_SIMD_BATCH_TILES;
 * planes * tiles <= L3_SIMD_BATCH_LANES: the caller splits a batch's lanes
 * into calls of at most L3_SIMD_MAX_LANES). */
#define L3_SIMD_BATCH_TILES 48
#define L3_SIMD_BATCH_LANES 96
uint32_t l3_simd_tiles_per_batch(uint32_t planes, int avx512);
/* Scratch bytes l3_simd_decode_planes needs for tiles `tile_width` wide (a
 * multiple of 64). */
size_t l3_simd_scratch_size(uint32_t tile_width);
/* Whether a plane stream may go to the SIMD decoder: a mode it handles, and
 * L3_SIMD_SLACK readable bytes past the stream's end inside data[0..size)
 * (the last streams of a file go to the reference decoder). */
#define L3_SIMD_SLACK 64u
/* Most bytes from the lowest stream start of one call to the end of any of
 * its streams plus L3_SIMD_SLACK (32-bit bit positions); a call past it is
 * left to the reference decoder. */
#define L3_SIMD_SPAN ((uint64_t)1 << 29)
int l3_simd_lane_ok(uint32_t mode, const uint8_t *stream, uint32_t len, const uint8_t *data,
                    size_t size);
/* Decodes lanes[0..n) (n <= L3_SIMD_MAX_LANES), planes of w x h samples of
 * `depth` <= 8 bits, reading only inside the buffer the lanes' streams lie in
 * (every lane passed l3_simd_lane_ok on it). Sets bit l of ok[] when lane l decoded with no anomaly (its
 * output then equals the reference decoder's); any other lane must be decoded
 * again by l3_tile_plane_decode(), which gives its status. scratch: 64-byte
 * aligned, l3_simd_scratch_size(w) bytes. avx512: the AVX-512VL build may be used
 * where the CPU has it. */
void l3_simd_decode_planes(const struct l3_simd_lane *lanes, unsigned n, uint32_t w, uint32_t h,
                           unsigned depth, void *scratch, int avx512,
                           uint32_t ok[L3_SIMD_MAX_LANES / 32]);

/* ---- LZ planes with the LEFT predictor at depth <= 8 (dec_lz.c), decoded
 * straight into bytes ---- */
/* Whether a plane stream may go to l3_lz_decode_u8: its mode (LEFT | LZ,
 * optionally | SHORT), depth <= 8, and 8 readable bytes past the stream's end
 * inside data[0..size). */
int l3_lz_fast_ok(uint32_t mode, unsigned depth, const uint8_t *stream, uint32_t len,
                  const uint8_t *data, size_t size);
/* Decodes the plane (w x h samples, stride w) into dst. Returns 1 when it
 * decoded with no anomaly (dst then holds the reference decoder's samples),
 * 0 otherwise: the plane must be decoded again by l3_tile_plane_decode(),
 * which gives its status. Reads stay below stream + len + 8 (the stream
 * passed l3_lz_fast_ok), writes inside dst[0 .. w*h). */
int l3_lz_decode_u8(const uint8_t *stream, uint32_t len, uint32_t mode, uint32_t w, uint32_t h,
                    unsigned depth, uint8_t *dst);

/* ---- streaming encoder (encode.c): l3_encode in three steps, so that tiles
 * can be encoded while the pixels below them are still being produced. ---- */
struct l3_enc;
/* Validates and allocates exactly as l3_encode does (same checks, same
 * errors, same limits for `threads` workers; threads is clamped as there).
 * `pixels` must stay valid until l3_enc_finish; its rows may be filled in
 * later, as long as a tile's rows are written before l3_enc_tile(tile). */
int l3_enc_begin(const struct l3_info *info, const void *pixels, size_t stride,
                 const struct l3_encode_options *opts, struct l3_enc **enc_ret);
/* Makes enc use the portable reference code of the encoder instead of the
 * AVX2 kernels that l3_enc_begin picks where the CPU has them (enc_simd.h):
 * the same bytes, slower; for tests. Before the first l3_enc_tile. */
void l3_enc_use_portable(struct l3_enc *enc);
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

#endif
