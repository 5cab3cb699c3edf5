/* l3.h — the L3 lossless image format: encoder, CPU decoder, PNG transcoding.
 *
 * One public header for libl3 (codec/). The format itself is specified in
 * docs/FORMAT.md; this header is the programming interface.
 *
 * Conventions
 *  - Functions return an `int` status: L3_OK (0) or a positive `enum l3_status`
 *    value. l3_strerror() names it. Status codes are stable and never renumbered.
 *  - Byte counts are size_t; on-disk fields are fixed-width little-endian.
 *  - Output parameters end in `_ret`. Buffers returned through `void **out_ret`
 *    are allocated with malloc() and released with l3_free() (or free()).
 *  - Decoded pixels: rows of interleaved samples, top row first. A sample is one
 *    byte when bit_depth <= 8 (sub-byte samples are unpacked, keeping their
 *    values: a 2-bit gray pixel decodes to 0..3) and one native-endian uint16_t
 *    when bit_depth == 16. Palette images decode to indices (1 sample/pixel).
 *  - Every function is thread-safe. Multi-threaded encode/decode of one image
 *    is requested with the `threads` option. The one global state is the
 *    worker threads those calls share: started by the first call that wants
 *    them and kept, sleeping, between calls; one call uses them at a time
 *    (calls made meanwhile from other threads start threads of their own).
 *    They block every signal, do not exist in a fork()ed child (which starts
 *    its own when it needs them) and are joined when the process exits or
 *    the library is unloaded (never unload it during a call).
 *  - The library never logs and never aborts on bad input.
 */
#ifndef L3_H
#define L3_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* L3_VERSION_MAJOR, _MINOR, _PATCH and L3_VERSION_STRING: the project's one
 * version (meson.build's project()), generated into l3_version.h. */
#include "l3_version.h"

/* L3_API marks the public functions: the shared library is built with hidden
 * visibility and exports these and nothing else. */
#ifndef L3_API
#if defined(__GNUC__) || defined(__clang__)
#define L3_API __attribute__((visibility("default")))
#else
#define L3_API
#endif
#endif

/* Version of the on-disk format written by this library (header field). */
#define L3_FORMAT_VERSION 1

/* Status codes. Stable: append new codes, never renumber. */
enum l3_status {
    L3_OK = 0,
    L3_ERR_INVALID_ARG = 1,      /* NULL pointer, zero size, bad option value */
    L3_ERR_NOMEM = 2,            /* allocation failed */
    L3_ERR_TRUNCATED = 3,        /* input ends before a structure it declares */
    L3_ERR_BAD_MAGIC = 4,        /* not an L3 file */
    L3_ERR_VERSION = 5,          /* format version not supported by this build */
    L3_ERR_BAD_HEADER = 6,       /* header field out of range or inconsistent */
    L3_ERR_HEADER_CHECKSUM = 7,  /* header checksum mismatch */
    L3_ERR_PAYLOAD_CHECKSUM = 8, /* payload checksum mismatch (verify requested) */
    L3_ERR_CORRUPT = 9,          /* tile data does not decode consistently */
    L3_ERR_LIMIT = 10,           /* image exceeds the pixel or memory limit */
    L3_ERR_BUFFER_TOO_SMALL = 11,/* caller's output buffer or stride too small */
    L3_ERR_PNG = 12,             /* PNG input is corrupt or truncated */
    L3_ERR_IO = 13,              /* read/write on a file descriptor failed */
    L3_ERR_UNSUPPORTED = 14,     /* valid input this build cannot handle */
    L3_ERR_THREAD = 15,          /* could not start worker threads */
};

/* A static English string for a status code; never NULL. */
L3_API const char *l3_strerror(int status);

/* Colour model of an image (header field; values are stable). */
enum l3_color {
    L3_COLOR_GRAY = 0,
    L3_COLOR_GRAY_ALPHA = 1,
    L3_COLOR_RGB = 2,
    L3_COLOR_RGBA = 3,
    L3_COLOR_PALETTE = 4,
};

/* Describes an image: what l3_read_info() returns, and what the encoder takes. */
struct l3_info {
    uint32_t width;          /* 1 .. L3_MAX_DIM */
    uint32_t height;         /* 1 .. L3_MAX_DIM */
    uint8_t color;           /* enum l3_color */
    uint8_t channels;        /* samples per decoded pixel: 1,2,3,4 (palette: 1) */
    uint8_t bit_depth;       /* 1, 2, 4, 8 or 16, as in the source PNG */
    uint8_t has_trns_key;    /* gray/RGB only: trns_key is a transparent colour */
    uint16_t trns_key[3];    /* gray: [0]; RGB: [0..2] (PNG tRNS for non-palette) */
    uint16_t palette_len;    /* palette images: 1..256 entries, else 0 */
    uint8_t palette[256][4]; /* RGBA; alpha is 255 where the PNG had no tRNS entry */
    uint16_t palette_alpha_len; /* number of tRNS entries in the source (0..256) */
    /* Tile geometry (filled by l3_read_info; ignored by the encoder, which takes
     * it from struct l3_encode_options). */
    uint32_t tile_width;
    uint32_t tile_height;
    uint32_t tiles_x;
    uint32_t tiles_y;
};

#define L3_MAX_DIM 1048576u /* largest width or height the format allows */

/* Bytes of one decoded sample (1 or 2) and of one tightly packed row. */
L3_API size_t l3_sample_bytes(const struct l3_info *info);
L3_API size_t l3_row_bytes(const struct l3_info *info);
/* Bytes of the whole decoded image at the given stride (0 = tight). */
L3_API size_t l3_decoded_size(const struct l3_info *info, size_t stride);

/* Limits against decompression bombs and hostile input. Zero fields mean
 * "use the default". */
struct l3_limits {
    uint64_t max_pixels; /* default L3_DEFAULT_MAX_PIXELS */
    size_t max_memory;   /* bytes the codec may allocate for one call;
                            default L3_DEFAULT_MAX_MEMORY */
};
#define L3_DEFAULT_MAX_PIXELS (256ull * 1024 * 1024)      /* 256 Mpixel */
#define L3_DEFAULT_MAX_MEMORY ((size_t)4 << 30)            /* 4 GiB */

/* Flags for struct l3_decode_options.flags */
#define L3_DECODE_VERIFY 0x1u /* check the payload checksum before decoding */
#define L3_DECODE_SCALAR 0x2u /* use only the portable reference decoder (codec/l3_tile.h),
                                 not the SIMD one: same statuses and pixels, slower; for
                                 tests and comparisons */
#define L3_DECODE_NO_AVX512 0x4u /* x86-64: the SIMD decoder's AVX2 build even where
                                    AVX-512 exists (same output; for tests) */

struct l3_decode_options {
    uint32_t flags;          /* L3_DECODE_* */
    unsigned threads;        /* 0 or 1: calling thread only; N: up to N threads */
    struct l3_limits limits;
};

struct l3_encode_options {
    uint32_t tile_width;     /* 0 = default (L3_DEFAULT_TILE) */
    uint32_t tile_height;    /* 0 = default */
    unsigned threads;        /* 0 or 1: calling thread only; N: up to N threads */
    int effort;              /* 0 = default; < 0: fastest, no LZ planes; >= 2:
                                exhaustive (exact Rice parameters, every plane
                                tried with LZ, slow) */
    struct l3_limits limits;
};
#define L3_DEFAULT_TILE 64

/* The encoder parameters that decide the output bytes, canonicalised: tile
 * sizes resolved (0 = L3_DEFAULT_TILE), effort mapped onto the levels that
 * encode differently (-1: every effort < 0; 0: efforts 0 and 1, which give
 * identical bytes; 2: every effort >= 2), threads and limits zeroed (they
 * never change the bytes). Two option sets with equal canonical forms encode
 * any image to identical files, so the cache keys objects on this form.
 * opts may be NULL (defaults). */
L3_API void l3_encode_options_canonical(const struct l3_encode_options *opts,
                                        struct l3_encode_options *canon_ret);

/* Reads and validates the header, header checksum and tile table of an L3
 * buffer without decoding pixels. `size` may be the whole file or only a
 * prefix: with a prefix too short for the header + tile table it returns
 * L3_ERR_TRUNCATED and sets *needed_ret (if not NULL) to the bytes required. */
L3_API int l3_read_info(const void *data, size_t size, struct l3_info *info_ret,
                        size_t *needed_ret);

/* Where the parts of a validated file are: what a batch (GPU) decoder needs
 * next to struct l3_info. The payload starts at header_size; the tile table is
 * tile_count little-endian u64 end offsets (relative to the payload start) at
 * table_offset; tile i spans [end[i-1], end[i]) with end[-1] = 0. See
 * l3_tile.h for decoding one tile. */
struct l3_layout {
    size_t header_size;    /* bytes of header + palette + tile table + checksum */
    size_t table_offset;   /* byte offset of the tile table in the file */
    uint64_t payload_size; /* bytes of tile data after the header */
    uint64_t payload_hash; /* XXH3-64 of the payload */
    uint32_t tile_count;   /* tiles_x * tiles_y */
    uint32_t planes;       /* coded planes per tile (= channels) */
};

/* l3_read_info() plus the layout; same validation and prefix semantics. */
L3_API int l3_read_layout(const void *data, size_t size, struct l3_info *info_ret,
                          struct l3_layout *layout_ret, size_t *needed_ret);

/* Verifies header and payload checksums and every tile's framing, without
 * writing pixels. */
L3_API int l3_verify(const void *data, size_t size);

/* Decodes a whole L3 buffer into `out` (out_size bytes, rows `stride` bytes
 * apart; stride 0 = tight). For 16-bit images `out` and `stride` must be
 * 2-byte aligned (else L3_ERR_INVALID_ARG). `opts` may be NULL for defaults. */
L3_API int l3_decode(const void *data, size_t size, void *out, size_t out_size,
                     size_t stride, const struct l3_decode_options *opts);

/* Same, allocating the output (tight stride); *info_ret optional. */
L3_API int l3_decode_alloc(const void *data, size_t size,
                           const struct l3_decode_options *opts,
                           void **pixels_ret, size_t *pixels_size_ret,
                           struct l3_info *info_ret);

/* ---- per-tile decoding into the caller's own output ---- */

/* One decoded tile, as l3_decode_tiles() hands it to its sink. The planes are
 * the image's channels in channel order (gray / gray, alpha / R, G, B / R, G,
 * B, A / palette index), the tile's colour transform already undone: sample
 * (x, y) of the tile, channel c, is plane[c][y * stride + x] with x < w, y < h,
 * a uint8_t when bit_depth <= 8 (sub-byte samples unpacked) and a uint16_t
 * when bit_depth == 16 -- the values l3_decode() would write for pixel
 * (x0 + x, y0 + y). The memory belongs to the decoder and is valid only
 * during the sink call. */
struct l3_tile_out {
    uint32_t index;       /* tile number, row-major over the tile grid */
    uint32_t x0, y0;      /* top-left pixel of the tile in the image */
    uint32_t w, h;        /* tile size (edge tiles may be smaller) */
    uint32_t channels;    /* planes in plane[] (1..4) */
    uint32_t bit_depth;   /* 1, 2, 4, 8 or 16 */
    size_t stride;        /* samples (not bytes) from one row of a plane to the next */
    const void *plane[4]; /* channel c; NULL for c >= channels */
};

/* Receives one decoded tile. `worker` (< the decode's thread count) names the
 * thread that calls it, for per-thread scratch. Return 0 to go on; any other
 * value stops the decode, which returns that value. */
typedef int (*l3_tile_sink)(void *arg, unsigned worker, const struct l3_tile_out *tile);

/* Decodes every tile of an L3 buffer and hands each one to `sink` instead of
 * writing an image: for callers that convert tiles straight into their own
 * layout or type (planar, float, a tensor...). Same checks, options and
 * statuses as l3_decode (opts may be NULL). The sink is called once per tile,
 * in no particular order; with threads > 1 it is called from up to that many
 * threads at once (different tiles, distinct `worker` values), so it must be
 * thread-safe for distinct workers. Returns L3_OK after every tile was decoded
 * and accepted; on an error, some tiles may already have been handed over. */
L3_API int l3_decode_tiles(const void *data, size_t size,
                           const struct l3_decode_options *opts, l3_tile_sink sink,
                           void *arg);

/* Encodes pixels described by `info` (width, height, color, channels,
 * bit_depth, palette, trns) with rows `stride` bytes apart (0 = tight). Sample
 * values must fit bit_depth (and be < palette_len for palette images), else
 * L3_ERR_INVALID_ARG. */
L3_API int l3_encode(const struct l3_info *info, const void *pixels, size_t stride,
                     const struct l3_encode_options *opts, void **out_ret,
                     size_t *size_ret);

/* ---- PNG side (libpng) ---- */

/* Decodes a PNG (memory or fd) to the same sample layout l3_decode produces:
 * no gamma or colour conversion, 16-bit kept, palette kept as indices,
 * sub-byte samples unpacked, interlacing removed. *info_ret describes it.
 * A PNG over the limits fails with L3_ERR_LIMIT before pixels are allocated. */
L3_API int l3_png_decode(const void *png, size_t png_size, const struct l3_limits *limits,
                         struct l3_info *info_ret, void **pixels_ret, size_t *pixels_size_ret);
L3_API int l3_png_decode_fd(int fd, const struct l3_limits *limits,
                            struct l3_info *info_ret, void **pixels_ret,
                            size_t *pixels_size_ret);

/* Writes pixels as a PNG of the colour type and bit depth `info` names. */
L3_API int l3_png_encode(const struct l3_info *info, const void *pixels, size_t stride,
                         void **png_ret, size_t *png_size_ret);

/* PNG -> L3 in one call. */
L3_API int l3_transcode_png(const void *png, size_t png_size,
                            const struct l3_encode_options *opts, void **out_ret,
                            size_t *size_ret);
L3_API int l3_transcode_png_fd(int fd, const struct l3_encode_options *opts,
                               void **out_ret, size_t *size_ret);

/* True (1) when the buffer starts with the 8-byte PNG signature. */
L3_API int l3_is_png(const void *data, size_t size);

/* Releases a buffer this library returned; NULL is fine. */
L3_API void l3_free(void *p);

#ifdef __cplusplus
}
#endif
#endif /* L3_H */
