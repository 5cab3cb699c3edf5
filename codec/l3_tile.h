/* l3_tile.h — decoding one L3 tile: the routine shared by the CPU decoder and
 * the CUDA kernel. Header-only; every function is `static inline` and marked
 * L3_TILE_FN, which is `__host__ __device__` under nvcc. The code uses no libc,
 * no allocation, no globals and no recursion, and every read is checked
 * against the end of the stream: hostile bytes give L3_ERR_CORRUPT, never an
 * out-of-bounds access. The format is specified in docs/FORMAT.md.
 *
 * How to use it (CPU decoder and GPU kernel alike)
 * ------------------------------------------------
 * 0. On the host, validate the file first: l3_read_layout() (l3.h) checks the
 *    header checksum, every field and the tile table. After that, for tile i
 *    (row-major: tx = i % tiles_x, ty = i / tiles_x):
 *        l3_tile_span(table, i, &begin, &end)   byte range inside the payload
 *        l3_tile_rect(width, height, tile_w, tile_h, i, &x0, &y0, &w, &h)
 *                                               the tile's rectangle (edge tiles
 *                                               are smaller)
 *    The payload starts at layout.header_size; table = data + layout.table_offset.
 * 1. l3_tile_parse(tile, tile_size, planes, &th)
 *        reads the small tile header: a flags byte (colour transform) and, per
 *        plane, a mode byte and a u32 stream length; checks that the lengths add
 *        up to tile_size exactly. th.off[p]/th.len[p]/th.mode[p] locate each
 *        plane's independent bitstream. planes = 1..4 (l3_planes(color)).
 * 2. l3_tile_plane_decode(tile + th.off[p], th.len[p], th.mode[p], w, h, depth,
 *                         dst)
 *        decodes one plane of the tile into dst[y*w + x] (uint16_t, values
 *        0..2^depth-1). One thread per (tile, plane) is the natural GPU mapping;
 *        planes of one tile are independent. Returns L3_OK or L3_ERR_CORRUPT.
 *        Modes (th.mode[p]): L3_PLANE_CONST, L3_PLANE_RAW, and the predicted
 *        L3_PLANE_MED / _GRAD / _LEFT2, each optionally | L3_PLANE_SHORT (Rice
 *        groups of 8) and | L3_PLANE_LZ (literal runs and copies of earlier
 *        residuals; L3_PLANE_LEFT exists only with it). The work per plane
 *        varies with the mode: MED has a serial chain per sample, GRAD/LEFT2
 *        are cheaper, LZ copies cost two predictions per sample, CONST/RAW
 *        are trivial.
 *        (l3_tile_decode() does steps 1-2 for all planes into buf[p*w*h + ...].)
 * 3. Inverse colour transform + store: planes are in channel order (R, G, B,
 *    A / gray, alpha / index). When th.flags & L3_TILE_XFORM_G, planes 0 and 2
 *    of an RGB/RGBA tile hold R-G and B-G modulo 2^depth (plane 1 is G); the
 *    planes can be decoded in any order, the transform is undone afterwards.
 *    l3_tile_pixel() returns the output channels of one pixel in channel
 *    order (R, G, B, A); l3_tile_store() writes
 *    a whole tile into an interleaved 8- or 16-bit image with a row stride,
 *    which is what the CPU decoder does. A GPU kernel with its own output
 *    layout/dtype calls l3_tile_pixel() per pixel from its shared-memory tile.
 *
 * Scratch per tile: planes * w * h uint16_t (64x64 RGB: 24 KiB). The stack
 * use of a plane decode is a few dozen bytes; reads of a plane stream stay in
 * [stream, stream + len), writes in dst[0 .. w*h). Stable entry points:
 * l3_tile_span, l3_tile_rect, l3_planes, l3_tile_parse, l3_tile_parse_plane,
 * l3_tile_plane_decode,
 * l3_tile_decode, l3_tile_pixel, l3_tile_store (the others are helpers).
 * Palette images decode to indices; expanding them through the palette is the
 * caller's job (l3_info.palette has 256 entries, zero beyond palette_len, so
 * palette[idx] is always in bounds for idx < 256).
 */
#ifndef L3_TILE_H
#define L3_TILE_H

#include <stddef.h>
#include <stdint.h>
#include "l3.h"

/* L3_TILE_SIMT selects the decoder variant for SIMT devices (set under
 * __CUDA_ARCH__, also when the CUDA code is compiled for the host against the
 * test runtime; a test may define it to run the variant in plain C): a bit
 * reader of aligned 32-bit words and one loop for the MED and GRAD planes of
 * either group size. Both variants decode the same bits to the same samples
 * and statuses; the CPU decoder uses the other one. */
#if defined(__CUDA_ARCH__) && !defined(L3_TILE_SIMT)
#define L3_TILE_SIMT 1
#endif

#if defined(__CUDACC__)
#define L3_TILE_FN static inline __host__ __device__
#define L3_TILE_FORCE static __forceinline__ __host__ __device__
#elif defined(__GNUC__)
#define L3_TILE_FN static inline
#define L3_TILE_FORCE static inline __attribute__((always_inline))
#else
#define L3_TILE_FN static inline
#define L3_TILE_FORCE static inline
#endif

/* Tile flags byte */
#define L3_TILE_XFORM_G 0x01u /* R and B planes hold R-G, B-G (mod 2^depth) */

/* Plane coding modes */
#define L3_PLANE_CONST 0u /* every sample equals one value (depth bits) */
#define L3_PLANE_RAW 1u   /* w*h samples of depth bits each */
#define L3_PLANE_MED 2u   /* MED prediction + grouped Rice codes */
#define L3_PLANE_GRAD 3u  /* gradient a+b-c prediction + grouped Rice codes */
#define L3_PLANE_LEFT2 4u /* sample two to the left + grouped Rice codes */
#define L3_PLANE_LEFT 5u  /* sample to the left (only with L3_PLANE_LZ) */
#define L3_PLANE_SHORT 0x10u /* flag on modes 2-5: Rice groups of 8, not 16 */
#define L3_PLANE_LZ 0x20u    /* flag on modes 2-5: literal runs + residual copies */
#define L3_PLANE_KIND(m) ((m) & 0x0fu)

/* LZ planes (L3_PLANE_LZ): Exp-Golomb orders and the shortest copy */
#define L3_LZ_RUN_K 0u     /* literal run lengths */
#define L3_LZ_LEN_K 4u     /* copy lengths minus L3_LZ_MIN_COPY */
#define L3_LZ_MIN_COPY 3u
#define L3_LZ_DIST_BITS 5u /* width of the copy distance's bit-length field */
#define L3_LZ_EG_MAXQ 17u  /* longest Exp-Golomb prefix */

#define L3_GROUP 16u      /* samples per Rice group (along a row) */
#define L3_GROUP_SHORT 8u /* ... with L3_PLANE_SHORT */
#define L3_ESCAPE 16u     /* unary length that signals an escaped sample */

#define L3_TILE_MAX_PLANES 4u

/* Bytes before the first plane stream in a tile with `planes` planes. */
#define L3_TILE_HEADER_BYTES(planes) (1u + 5u * (planes))

struct l3_tile_header {
    uint32_t flags;
    uint32_t off[L3_TILE_MAX_PLANES];  /* byte offset of the plane stream in the tile */
    uint32_t len[L3_TILE_MAX_PLANES];  /* its length in bytes */
    uint32_t mode[L3_TILE_MAX_PLANES]; /* L3_PLANE_* */
};

/* ---- small helpers ---- */

L3_TILE_FN uint32_t l3_rd_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

L3_TILE_FN uint64_t l3_rd_u64le(const uint8_t *p)
{
#if !defined(__CUDA_ARCH__) && defined(__GNUC__) && defined(__BYTE_ORDER__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return v;
#else
    return (uint64_t)l3_rd_u32le(p) | ((uint64_t)l3_rd_u32le(p + 4) << 32);
#endif
}

/* Count trailing zeros of a non-zero 64-bit value. */
L3_TILE_FN unsigned l3_ctz64(uint64_t x)
{
#if defined(__CUDA_ARCH__)
    return (unsigned)(__ffsll((long long)x) - 1);
#elif defined(__GNUC__)
    return (unsigned)__builtin_ctzll(x);
#else
    unsigned n = 0;
    while (!(x & 1)) { x >>= 1; n++; }
    return n;
#endif
}

/* Count trailing zeros of a non-zero 32-bit value. */
L3_TILE_FN unsigned l3_ctz32(uint32_t x)
{
#if defined(__CUDA_ARCH__)
    return (unsigned)(__ffs((int)x) - 1);
#elif defined(__GNUC__)
    return (unsigned)__builtin_ctz(x);
#else
    unsigned n = 0;
    while (!(x & 1)) { x >>= 1; n++; }
    return n;
#endif
}

/* Trailing zeros of the window's low bits up to the sentinel bit `s` (< 32),
 * which is set: 32-bit arithmetic in the SIMT variant. */
#if L3_TILE_SIMT
#define L3_CTZ_TO(bits, s) l3_ctz32((uint32_t)(bits) | (1u << (s)))
#else
#define L3_CTZ_TO(bits, s) l3_ctz64((bits) | (1ull << (s)))
#endif

/* Number of planes (= channels) of a colour model; 0 when invalid. */
L3_TILE_FN unsigned l3_planes(unsigned color)
{
    switch (color) {
    case L3_COLOR_GRAY: return 1;
    case L3_COLOR_GRAY_ALPHA: return 2;
    case L3_COLOR_RGB: return 3;
    case L3_COLOR_RGBA: return 4;
    case L3_COLOR_PALETTE: return 1;
    default: return 0;
    }
}

/* Byte range [*begin, *end) of tile i inside the payload, from the tile table
 * (u64 little-endian end offsets). Only valid after the table was validated. */
L3_TILE_FN void l3_tile_span(const uint8_t *table, uint64_t i, uint64_t *begin,
                             uint64_t *end)
{
    *begin = i ? l3_rd_u64le(table + 8 * (i - 1)) : 0;
    *end = l3_rd_u64le(table + 8 * i);
}

/* Pixel rectangle of tile i. */
L3_TILE_FN void l3_tile_rect(uint32_t width, uint32_t height, uint32_t tile_w,
                             uint32_t tile_h, uint64_t i, uint32_t *x0, uint32_t *y0,
                             uint32_t *w, uint32_t *h)
{
    uint32_t tiles_x = (width + tile_w - 1) / tile_w;
    uint32_t tx = (uint32_t)(i % tiles_x), ty = (uint32_t)(i / tiles_x);
    *x0 = tx * tile_w;
    *y0 = ty * tile_h;
    *w = width - *x0 < tile_w ? width - *x0 : tile_w;
    *h = height - *y0 < tile_h ? height - *y0 : tile_h;
}

/* ---- bit reader: LSB-first, 64-bit window; reads past the end give zero
 * bits, and l3_br_finish() tells a stream that needed them ---- */

#if L3_TILE_SIMT
/* SIMT variant: the window takes one aligned 32-bit word when it holds
 * under 32 bits (a GPU thread reads its stream word by word: one load where
 * the byte-wise 64-bit read took eight). The unaligned first bytes are read
 * at init, and so is the last partial word (its missing bytes zero), so a
 * refill has no branch: a predicated load, or that word, or zeros past the
 * end. `pos` counts the bytes loaded, zero bytes past the end included,
 * exactly as the byte-wise reader counts them. After a refill n >= 32: a
 * Rice code (<= 32 bits), a group symbol (<= 8 bits) or an Exp-Golomb prefix
 * (<= 18 bits) fits; callers refill before each. Every read stays inside
 * [p, p + len). Planes have at most 65536 samples (FORMAT.md's tile limit;
 * l3_tile_plane_decode checks it), so pos stays far below 2^32. */
struct l3_br {
    uint64_t bits;  /* next bits, LSB first; bits above n are zero */
    uint32_t n;     /* valid bits in `bits` */
    uint32_t pos;   /* bytes loaded so far */
    uint32_t wlim;  /* pos < wlim: the aligned word at p + pos lies inside the stream */
    uint32_t tpos;  /* offset of the last partial word (when the stream has one) */
    uint32_t tword; /* its bytes, zero-padded; 0 when there is none */
    uint32_t len;
    const uint8_t *p;
};

/* The aligned 32-bit word at p, little-endian (read-only cache on the device). */
L3_TILE_FORCE uint32_t l3_ld32a(const uint8_t *p)
{
#if defined(__CUDA_ARCH__) && defined(__CUDACC__)
    return __ldg((const unsigned int *)p);
#else
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
#endif
}

L3_TILE_FN void l3_br_init(struct l3_br *br, const uint8_t *p, size_t len)
{
    const uint32_t L = (uint32_t)len;
    uint32_t head = (0u - (uint32_t)(uintptr_t)p) & 3u; /* bytes before the first aligned word */
    if (head > L)
        head = L;
    /* full words at head, head + 4, ..., then `tail` < 4 bytes at wend */
    const uint32_t tail = (L - head) & 3u, wend = L - tail;
    br->wlim = wend >= head + 4 ? wend - 3 : 0;
    br->bits = 0;
    for (uint32_t i = 0; i < head; i++)
        br->bits |= (uint64_t)p[i] << (8 * i);
    br->tword = 0;
    for (uint32_t i = 0; i < tail; i++)
        br->tword |= (uint32_t)p[wend + i] << (8 * i);
    br->tpos = wend;
    br->n = 8 * head;
    br->pos = head;
    br->len = L;
    br->p = p;
}

/* After this, br->n >= 32. No branch: the threads of a warp need their next
 * word at different samples, so a branch would be taken by some thread at
 * nearly every sample anyway. */
L3_TILE_FORCE void l3_br_refill(struct l3_br *br)
{
    const int need = br->n < 32;
    uint32_t word = br->pos == br->tpos ? br->tword : 0u; /* past the end: zeros */
    if (need && br->pos < br->wlim)
        word = l3_ld32a(br->p + br->pos);
    br->bits |= (uint64_t)(need ? word : 0u) << br->n;
    br->pos += need ? 4u : 0u;
    br->n += need ? 32u : 0u;
}
#else

struct l3_br {
    uint64_t bits; /* next bits, LSB first */
    unsigned n;    /* valid bits in `bits` */
    size_t pos;    /* bytes loaded so far (may exceed len: virtual zero bytes) */
    size_t len;
    size_t lim;    /* pos < lim: 8 bytes can be loaded at pos */
    const uint8_t *p;
};

L3_TILE_FN void l3_br_init(struct l3_br *br, const uint8_t *p, size_t len)
{
    br->bits = 0;
    br->n = 0;
    br->pos = 0;
    br->len = len;
    br->lim = len >= 8 ? len - 7 : 0;
    br->p = p;
}

/* After this, br->n >= 56. */
L3_TILE_FN void l3_br_refill(struct l3_br *br)
{
    if (br->pos < br->lim) {
        br->bits |= l3_rd_u64le(br->p + br->pos) << br->n;
        br->pos += (63 - br->n) >> 3;
        br->n |= 56;
    } else {
        while (br->n <= 56) {
            uint64_t b = br->pos < br->len ? br->p[br->pos] : 0;
            br->bits |= b << br->n;
            br->pos++;
            br->n += 8;
        }
    }
}

#endif /* L3_TILE_SIMT */

L3_TILE_FN void l3_br_skip(struct l3_br *br, unsigned k)
{
    br->bits >>= k;
    br->n -= k;
}

/* Reads k <= 32 bits; requires br->n >= k. */
L3_TILE_FN uint32_t l3_br_take(struct l3_br *br, unsigned k)
{
    uint32_t v = (uint32_t)(br->bits & ((1ull << k) - 1));
    br->bits >>= k;
    br->n -= k;
    return v;
}

/* Bits consumed so far. */
L3_TILE_FN uint64_t l3_br_consumed(const struct l3_br *br)
{
    return (uint64_t)br->pos * 8 - br->n;
}

/* The stream must end in the last byte: consumed bits round up to len bytes. */
L3_TILE_FN int l3_br_finish(const struct l3_br *br)
{
    uint64_t c = l3_br_consumed(br);
    if (c > (uint64_t)br->len * 8 || (c + 7) / 8 != br->len)
        return L3_ERR_CORRUPT;
    return L3_OK;
}

/* ---- tile header ---- */

/* Modes 0-1; 2-4 optionally with SHORT and/or LZ; 5 only with LZ. */
L3_TILE_FN int l3_plane_mode_valid(uint32_t mode)
{
    uint32_t kind = L3_PLANE_KIND(mode), fl = mode & ~0x0fu;
    if (fl & ~(L3_PLANE_SHORT | L3_PLANE_LZ))
        return 0;
    if (kind < L3_PLANE_MED)
        return fl == 0;
    if (kind == L3_PLANE_LEFT)
        return (fl & L3_PLANE_LZ) != 0;
    return kind <= L3_PLANE_LEFT;
}

L3_TILE_FN int l3_tile_parse(const uint8_t *tile, size_t size, unsigned planes,
                             struct l3_tile_header *th)
{
    if (planes < 1 || planes > L3_TILE_MAX_PLANES)
        return L3_ERR_CORRUPT;
    size_t hb = L3_TILE_HEADER_BYTES(planes);
    if (size < hb)
        return L3_ERR_CORRUPT;
    th->flags = tile[0];
    if (th->flags & ~L3_TILE_XFORM_G)
        return L3_ERR_CORRUPT;
    if ((th->flags & L3_TILE_XFORM_G) && planes < 3)
        return L3_ERR_CORRUPT;
    uint64_t off = hb;
    for (unsigned p = 0; p < planes; p++) {
        th->mode[p] = tile[1 + 5 * p];
        th->len[p] = l3_rd_u32le(tile + 2 + 5 * p);
        th->off[p] = (uint32_t)off;
        if (!l3_plane_mode_valid(th->mode[p]))
            return L3_ERR_CORRUPT;
        off += th->len[p];
        if (off > size)
            return L3_ERR_CORRUPT;
    }
    for (unsigned p = planes; p < L3_TILE_MAX_PLANES; p++) {
        th->mode[p] = 0;
        th->len[p] = 0;
        th->off[p] = (uint32_t)off;
    }
    if (off != size)
        return L3_ERR_CORRUPT;
    return L3_OK;
}

/* l3_tile_parse's checks, keeping only plane `plane`'s stream (< planes):
 * one GPU thread decodes one plane, and a header struct indexed by a
 * run-time plane number would live in local memory. Same statuses as
 * l3_tile_parse. */
L3_TILE_FN int l3_tile_parse_plane(const uint8_t *tile, size_t size, unsigned planes,
                                   unsigned plane, uint32_t *flags_ret, uint32_t *off_ret,
                                   uint32_t *len_ret, uint32_t *mode_ret)
{
    if (planes < 1 || planes > L3_TILE_MAX_PLANES || plane >= planes)
        return L3_ERR_CORRUPT;
    size_t hb = L3_TILE_HEADER_BYTES(planes);
    if (size < hb)
        return L3_ERR_CORRUPT;
    uint32_t flags = tile[0];
    if (flags & ~L3_TILE_XFORM_G)
        return L3_ERR_CORRUPT;
    if ((flags & L3_TILE_XFORM_G) && planes < 3)
        return L3_ERR_CORRUPT;
    uint64_t off = hb;
    for (unsigned p = 0; p < planes; p++) {
        uint32_t mode = tile[1 + 5 * p], len = l3_rd_u32le(tile + 2 + 5 * p);
        if (p == plane) {
            *off_ret = (uint32_t)off;
            *len_ret = len;
            *mode_ret = mode;
        }
        if (!l3_plane_mode_valid(mode))
            return L3_ERR_CORRUPT;
        off += len;
        if (off > size)
            return L3_ERR_CORRUPT;
    }
    if (off != size)
        return L3_ERR_CORRUPT;
    *flags_ret = flags;
    return L3_OK;
}

/* ---- plane decoders ---- */

/* Median edge detector (LOCO-I): a = left, b = up, c = up-left. */
L3_TILE_FN uint32_t l3_med(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t mx = a > b ? a : b;
    uint32_t mn = a > b ? b : a;
    uint32_t m = a + b - c;
    m = c <= mn ? mx : m;
    m = c >= mx ? mn : m;
    return m;
}

/* Reads a group symbol: 0 = all-zero group, k+1 = Rice parameter k.
 * Requires br->n >= 8. Returns a value > depth+1 on invalid input. */
L3_TILE_FN uint32_t l3_read_symbol(struct l3_br *br, uint32_t prev)
{
    unsigned t = L3_CTZ_TO(br->bits, 3);
    if (t == 0) {
        l3_br_skip(br, 1);
        return prev;
    }
    if (t == 1) {
        l3_br_skip(br, 2);
        return prev + 1;
    }
    if (t == 2) {
        l3_br_skip(br, 3);
        return prev - 1; /* prev == 0 wraps to a huge value: rejected */
    }
    l3_br_skip(br, 3);
    return l3_br_take(br, 5);
}

/* One Rice-coded zigzag value with parameter k (escape: L3_ESCAPE zeros, then
 * `depth` raw bits). Requires br->n >= 32. */
L3_TILE_FN uint32_t l3_read_rice(struct l3_br *br, unsigned k, unsigned depth)
{
    unsigned q = L3_CTZ_TO(br->bits, L3_ESCAPE);
    if (q < L3_ESCAPE) {
        uint64_t b = br->bits >> (q + 1);
        uint32_t v = (q << k) | (uint32_t)(b & ((1ull << k) - 1));
        br->bits = b >> k;
        br->n -= q + 1 + k;
        return v;
    }
    l3_br_skip(br, L3_ESCAPE);
    return l3_br_take(br, depth);
}

L3_TILE_FN uint32_t l3_unzigzag(uint32_t v)
{
    return (v >> 1) ^ (0u - (v & 1u));
}

/* Predicted + Rice-coded plane (MED when grad == 0, else the gradient
 * a+b-c modulo 2^depth). dst: w*h samples, row stride w. Rice codes are at
 * most L3_ESCAPE + depth bits, so for depth <= 8 two codes fit one refill. */
L3_TILE_FORCE int l3_plane_decode_pred(const uint8_t *s, size_t len, uint32_t w,
                                       uint32_t h, unsigned depth, uint16_t *dst,
                                       const int grad, const uint32_t gs)
{
    struct l3_br br;
    l3_br_init(&br, s, len);
    const uint32_t mask = (1u << depth) - 1;
    const uint32_t maxsym = depth + 1;
    const uint32_t pair = depth <= 8 ? 2 : gs + 1; /* pairs only when they fit */
    uint32_t sym = 0, bad = 0;
    for (uint32_t y = 0; y < h; y++) {
        uint16_t *row = dst + (size_t)y * w;
        const uint16_t *up = y ? row - w : row; /* not read on row 0 */
        uint32_t a = y ? up[0] : 0, c = a;
        for (uint32_t x0 = 0; x0 < w; x0 += gs) {
            uint32_t n = w - x0 < gs ? w - x0 : gs;
            l3_br_refill(&br);
            sym = l3_read_symbol(&br, sym);
            if (sym > maxsym)
                return L3_ERR_CORRUPT;
            uint16_t *o = row + x0;
            const uint16_t *u = up + x0;
            if (sym == 0) {
                if (y) {
                    for (uint32_t i = 0; i < n; i++) {
                        uint32_t b = u[i];
                        a = grad ? (a + b - c) & mask : l3_med(a, b, c);
                        c = b;
                        o[i] = (uint16_t)a;
                    }
                } else {
                    for (uint32_t i = 0; i < n; i++)
                        o[i] = (uint16_t)a;
                }
                continue;
            }
            const unsigned k = sym - 1;
            uint32_t i = 0;
            if (y) {
                for (; i + pair <= n; i += 2) {
                    l3_br_refill(&br);
                    uint32_t v0 = l3_read_rice(&br, k, depth);
                    uint32_t v1 = l3_read_rice(&br, k, depth);
                    bad |= v0 | v1;
                    uint32_t b0 = u[i], b1 = u[i + 1];
                    if (grad) {
                        a = (a + (b0 - c) + l3_unzigzag(v0)) & mask;
                        o[i] = (uint16_t)a;
                        a = (a + (b1 - b0) + l3_unzigzag(v1)) & mask;
                    } else {
                        a = (l3_med(a, b0, c) + l3_unzigzag(v0)) & mask;
                        o[i] = (uint16_t)a;
                        a = (l3_med(a, b1, b0) + l3_unzigzag(v1)) & mask;
                    }
                    o[i + 1] = (uint16_t)a;
                    c = b1;
                }
                for (; i < n; i++) {
                    l3_br_refill(&br);
                    uint32_t v = l3_read_rice(&br, k, depth);
                    bad |= v;
                    uint32_t b = u[i];
                    a = ((grad ? a + b - c : l3_med(a, b, c)) + l3_unzigzag(v)) & mask;
                    c = b;
                    o[i] = (uint16_t)a;
                }
            } else {
                for (; i + pair <= n; i += 2) {
                    l3_br_refill(&br);
                    uint32_t v0 = l3_read_rice(&br, k, depth);
                    uint32_t v1 = l3_read_rice(&br, k, depth);
                    bad |= v0 | v1;
                    a = (a + l3_unzigzag(v0)) & mask;
                    o[i] = (uint16_t)a;
                    a = (a + l3_unzigzag(v1)) & mask;
                    o[i + 1] = (uint16_t)a;
                }
                for (; i < n; i++) {
                    l3_br_refill(&br);
                    uint32_t v = l3_read_rice(&br, k, depth);
                    bad |= v;
                    a = (a + l3_unzigzag(v)) & mask;
                    o[i] = (uint16_t)a;
                }
            }
        }
    }
    if (bad >> depth)
        return L3_ERR_CORRUPT; /* a value the encoder would have escaped */
    return l3_br_finish(&br);
}

#if L3_TILE_SIMT
/* l3_read_rice without branches, for the SIMT loop: mk = 2^k - 1, md =
 * 2^depth - 1; on = ~0, or 0 in an all-zero group (no bits, value 0).
 * Requires br->n >= 32: a code is at most 32 bits (q + 1 + k <= 32, escape
 * 16 + depth), so it lies in the window's low word. */
L3_TILE_FORCE uint32_t l3_read_rice_nb(struct l3_br *br, unsigned k, uint32_t mk,
                                       unsigned depth, uint32_t md, uint32_t on)
{
    const uint32_t lo = (uint32_t)br->bits;
    const unsigned q = l3_ctz32(lo | (1u << L3_ESCAPE));
    const int esc = q >= L3_ESCAPE;
    const unsigned s = esc ? L3_ESCAPE : q + 1;
    const uint32_t val = (lo >> s) & (esc ? md : mk);
    const uint32_t v = (esc ? val : (q << k) | val) & on;
    const unsigned len = (esc ? L3_ESCAPE + depth : s + k) & on;
    br->bits >>= len;
    br->n -= len;
    return v;
}

/* 4 samples at an 8-byte aligned address (written by this thread: not
 * through the read-only cache), in memory order (sample 0 in the low bits). */
L3_TILE_FORCE uint64_t l3_ld64(const uint16_t *p)
{
#if defined(__CUDA_ARCH__) && defined(__CUDACC__)
    return *(const uint64_t *)p;
#else
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return v;
#endif
}

L3_TILE_FORCE void l3_st64(uint16_t *p, uint64_t v)
{
#if defined(__CUDA_ARCH__) && defined(__CUDACC__)
    *(uint64_t *)p = v;
#else
    __builtin_memcpy(p, &v, 8);
#endif
}

/* SIMT variant of l3_plane_decode_pred: one loop for MED and GRAD with
 * groups of 8 or 16, the predictor and the group size as data (threads of a
 * warp decoding planes of different modes run the same instructions: both
 * predictions are computed, one is kept), one sample per iteration with the
 * group symbol read at each group's first sample, so that threads with
 * groups of 8 and of 16 stay in step. On the first row the sample above and
 * the one above-left count as 0: both predictors then give the left sample,
 * as l3_plane_decode_pred's first row does. */
L3_TILE_FN int l3_plane_decode_pred_simt(const uint8_t *s, size_t len, uint32_t w,
                                         uint32_t h, unsigned depth, uint16_t *dst,
                                         uint32_t grad, uint32_t gs)
{
    struct l3_br br;
    l3_br_init(&br, s, len);
    const uint32_t mask = (1u << depth) - 1;
    const uint32_t maxsym = depth + 1;
    const uint32_t gm = gs - 1;
    /* rows of a multiple of 4 samples at an 8-byte aligned dst (full 64-wide
     * tiles in the kernel's scratch): the row above is read and the row
     * written 4 samples (8 bytes) at a time, a quarter of the memory
     * instructions; other planes sample by sample */
    const int vec = ((uintptr_t)dst & 7u) == 0 && (w & 3u) == 0;
    uint32_t sym = 0, bad = 0, k = 0, mk = 0, on = 0;
    uint16_t *o = dst;
    for (uint32_t y = 0; y < h; y++, o += w) {
        const uint16_t *u = y ? o - w : o; /* row 0: never read */
        uint32_t a = y ? u[0] : 0, c = a;
        uint64_t up4 = 0, pk = 0; /* 4 samples above; the last 4 decoded */
        for (uint32_t x = 0; x < w; x++) {
            if ((x & gm) == 0) {
                l3_br_refill(&br);
                sym = l3_read_symbol(&br, sym);
                if (sym > maxsym)
                    return L3_ERR_CORRUPT;
                k = sym ? sym - 1 : 0;
                mk = (1u << k) - 1;
                on = sym ? ~0u : 0u;
            }
            l3_br_refill(&br); /* also in an all-zero group: bits stay unread */
            const uint32_t v = l3_read_rice_nb(&br, k, mk, depth, mask, on);
            bad |= v;
            /* straight-line code, loads and stores predicated */
            const uint32_t x3 = x & 3u;
            if (vec && y && x3 == 0)
                up4 = l3_ld64(u + x);
            uint32_t b = (uint32_t)(up4 >> (16 * x3)) & 0xffffu;
            if (!vec && y)
                b = u[x];
            const uint32_t pg = a + b - c, pm = l3_med(a, b, c);
            a = ((grad ? pg : pm) + l3_unzigzag(v)) & mask;
            c = b;
            pk = (pk >> 16) | ((uint64_t)a << 48);
            if (vec && x3 == 3u)
                l3_st64(o + x - 3, pk);
            if (!vec)
                o[x] = (uint16_t)a;
        }
    }
    if (bad >> depth)
        return L3_ERR_CORRUPT;
    return l3_br_finish(&br);
}
#endif

/* LEFT2 plane: each sample is predicted by the sample two to its left in the
 * same row; at x = 0 and 1 the missing neighbours are the first sample of the
 * row above (0 on the first row). Period-2 dither patterns predict well, and
 * the decoder has no one-sample serial chain. */
L3_TILE_FN int l3_plane_decode_left2(const uint8_t *s, size_t len, uint32_t w,
                                     uint32_t h, unsigned depth, uint16_t *dst,
                                     uint32_t gs)
{
    struct l3_br br;
    l3_br_init(&br, s, len);
    const uint32_t mask = (1u << depth) - 1;
    const uint32_t maxsym = depth + 1;
    uint32_t sym = 0, bad = 0;
    for (uint32_t y = 0; y < h; y++) {
        uint16_t *row = dst + (size_t)y * w;
        uint32_t a1 = y ? row[-(ptrdiff_t)w] : 0, a2 = a1;
        for (uint32_t x0 = 0; x0 < w; x0 += gs) {
            uint32_t n = w - x0 < gs ? w - x0 : gs;
            l3_br_refill(&br);
            sym = l3_read_symbol(&br, sym);
            if (sym > maxsym)
                return L3_ERR_CORRUPT;
            uint16_t *o = row + x0;
            for (uint32_t i = 0; i < n; i++) {
                uint32_t v = 0;
                if (sym) {
                    l3_br_refill(&br);
                    v = l3_read_rice(&br, sym - 1, depth);
                    bad |= v;
                }
                uint32_t x = (a2 + l3_unzigzag(v)) & mask;
                a2 = a1;
                a1 = x;
                o[i] = (uint16_t)x;
            }
        }
    }
    if (bad >> depth)
        return L3_ERR_CORRUPT;
    return l3_br_finish(&br);
}

/* Prediction of sample i = (x, y) of a plane from its decoded neighbours, for
 * the predictor kinds of section 5.2 (MED, GRAD, LEFT2, LEFT). */
L3_TILE_FORCE uint32_t l3_pred_at(const uint16_t *dst, uint32_t w, size_t i, uint32_t x,
                                  uint32_t y, unsigned kind, uint32_t mask, uint32_t a)
{
    /* a: the sample at i - 1 when x > 0 (the caller keeps it in a register) */
    if (kind == L3_PLANE_LEFT2) {
        if (x >= 2)
            return dst[i - 2];
        return y ? dst[i - x - w] : 0;
    }
    if (x == 0)
        return y ? dst[i - w] : 0;
    if (kind == L3_PLANE_LEFT || y == 0)
        return a;
    uint32_t b = dst[i - w], c = dst[i - w - 1];
    return kind == L3_PLANE_GRAD ? (a + b - c) & mask : l3_med(a, b, c);
}

/* Next column of a w-wide plane (raster order). */
L3_TILE_FORCE void l3_lz_next(uint32_t *x, uint32_t *y, uint32_t w)
{
    if (++*x == w) {
        *x = 0;
        ++*y;
    }
}

/* Exp-Golomb code of order k: q zero bits, a one bit, then q + k bits `low`;
 * the value is (2^q - 1) * 2^k + low. q > L3_LZ_EG_MAXQ is invalid (sets
 * *bad). Requires br->n >= 2 * L3_LZ_EG_MAXQ + 1 + k (SIMT: 32; it refills
 * between prefix and suffix). */
L3_TILE_FN uint32_t l3_read_eg(struct l3_br *br, unsigned k, uint32_t *bad)
{
    unsigned q = L3_CTZ_TO(br->bits, L3_LZ_EG_MAXQ + 1);
    if (q > L3_LZ_EG_MAXQ) {
        *bad = 1;
        return 0;
    }
    l3_br_skip(br, q + 1);
#if L3_TILE_SIMT
    l3_br_refill(br); /* the window holds 32 bits, not 2 * L3_LZ_EG_MAXQ + 1 + k */
#endif
    return (((1u << q) - 1u) << k) + l3_br_take(br, q + k);
}

/* LZ plane: literal runs (Rice groups inside the run) alternate with copies
 * of earlier residuals of the same plane (FORMAT.md section 6.7). */
L3_TILE_FORCE int l3_plane_decode_lz(const uint8_t *s, size_t len, uint32_t w,
                                     uint32_t h, unsigned depth, uint16_t *dst,
                                     const unsigned kind, const uint32_t gs)
{
    struct l3_br br;
    l3_br_init(&br, s, len);
    const uint32_t mask = (1u << depth) - 1;
    const uint32_t maxsym = depth + 1;
    const size_t n = (size_t)w * h;
    size_t pos = 0;
    uint32_t x = 0, y = 0, sym = 0, bad = 0, ebad = 0;
    uint32_t last = 0; /* the sample at pos - 1 */
    for (;;) {
        l3_br_refill(&br);
        uint32_t run = l3_read_eg(&br, L3_LZ_RUN_K, &ebad);
        if (ebad || run > n - pos)
            return L3_ERR_CORRUPT;
        const size_t end = pos + run;
        while (pos < end) {
            uint32_t g = end - pos < gs ? (uint32_t)(end - pos) : gs;
            l3_br_refill(&br);
            sym = l3_read_symbol(&br, sym);
            if (sym > maxsym)
                return L3_ERR_CORRUPT;
            for (uint32_t i = 0; i < g; i++) {
                uint32_t v = 0;
                if (sym) {
                    l3_br_refill(&br);
                    v = l3_read_rice(&br, sym - 1, depth);
                    bad |= v;
                }
                last = (l3_pred_at(dst, w, pos, x, y, kind, mask, last) + l3_unzigzag(v)) &
                       mask;
                dst[pos++] = (uint16_t)last;
                l3_lz_next(&x, &y, w);
            }
        }
        if (pos == n)
            break;
        l3_br_refill(&br);
        uint32_t count = l3_read_eg(&br, L3_LZ_LEN_K, &ebad) + L3_LZ_MIN_COPY;
        l3_br_refill(&br);
        uint32_t nb = l3_br_take(&br, L3_LZ_DIST_BITS);
        if (ebad || nb == 0 || nb > 17)
            return L3_ERR_CORRUPT;
        uint32_t dist = (1u << (nb - 1)) | l3_br_take(&br, nb - 1);
        if (dist > pos || count > n - pos)
            return L3_ERR_CORRUPT;
        size_t j = pos - dist;
        uint32_t ys = (uint32_t)(j / w), xs = (uint32_t)(j - (size_t)ys * w);
        for (uint32_t i = 0; i < count; i++) {
            uint32_t r = dst[j] - l3_pred_at(dst, w, j, xs, ys, kind, mask, xs ? dst[j - 1] : 0);
            last = (l3_pred_at(dst, w, pos, x, y, kind, mask, last) + r) & mask;
            dst[pos++] = (uint16_t)last;
            j++;
            l3_lz_next(&xs, &ys, w);
            l3_lz_next(&x, &y, w);
        }
        if (pos == n)
            break;
    }
    if (bad >> depth)
        return L3_ERR_CORRUPT;
    return l3_br_finish(&br);
}

L3_TILE_FN int l3_plane_decode_raw(const uint8_t *s, size_t len, uint32_t w,
                                   uint32_t h, unsigned depth, uint16_t *dst)
{
    uint64_t n = (uint64_t)w * h;
    if ((uint64_t)len != (n * depth + 7) / 8)
        return L3_ERR_CORRUPT;
    if (depth == 8) {
        for (uint64_t i = 0; i < n; i++)
            dst[i] = s[i];
        return L3_OK;
    }
    if (depth == 16) {
        for (uint64_t i = 0; i < n; i++)
            dst[i] = (uint16_t)(s[2 * i] | (s[2 * i + 1] << 8));
        return L3_OK;
    }
    struct l3_br br;
    l3_br_init(&br, s, len);
    for (uint64_t i = 0; i < n; i++) {
        if (br.n < depth)
            l3_br_refill(&br);
        dst[i] = (uint16_t)l3_br_take(&br, depth);
    }
    return l3_br_finish(&br);
}

L3_TILE_FN int l3_plane_decode_const(const uint8_t *s, size_t len, uint32_t w,
                                     uint32_t h, unsigned depth, uint16_t *dst)
{
    if (len != (depth + 7) / 8)
        return L3_ERR_CORRUPT;
    uint32_t v = s[0];
    if (depth == 16)
        v |= (uint32_t)s[1] << 8;
    if (v >> depth)
        return L3_ERR_CORRUPT;
    uint64_t n = (uint64_t)w * h;
    for (uint64_t i = 0; i < n; i++)
        dst[i] = (uint16_t)v;
    return L3_OK;
}

/* Decodes one plane stream of a w x h tile into dst (w*h samples, stride w).
 * depth: 1, 2, 4, 8 or 16. */
L3_TILE_FN int l3_tile_plane_decode(const uint8_t *s, size_t len, unsigned mode,
                                    uint32_t w, uint32_t h, unsigned depth,
                                    uint16_t *dst)
{
    if (w == 0 || h == 0 || depth == 0 || depth > 16)
        return L3_ERR_CORRUPT;
#if L3_TILE_SIMT
    /* one loop per kind of work, its parameters as data (fewer divergent
     * loops in a warp, fewer inlined copies in the kernel) */
    if (len > 0x7fffffffu || (uint64_t)w * h > 65536u)
        return L3_ERR_CORRUPT;
    const uint32_t gs = (mode & L3_PLANE_SHORT) ? L3_GROUP_SHORT : L3_GROUP;
    if (mode == L3_PLANE_MED || mode == L3_PLANE_GRAD || mode == (L3_PLANE_MED | L3_PLANE_SHORT) ||
        mode == (L3_PLANE_GRAD | L3_PLANE_SHORT))
        return l3_plane_decode_pred_simt(s, len, w, h, depth, dst,
                                         L3_PLANE_KIND(mode) == L3_PLANE_GRAD, gs);
    if (mode == L3_PLANE_LEFT2 || mode == (L3_PLANE_LEFT2 | L3_PLANE_SHORT))
        return l3_plane_decode_left2(s, len, w, h, depth, dst, gs);
    if ((mode & L3_PLANE_LZ) && l3_plane_mode_valid(mode))
        return l3_plane_decode_lz(s, len, w, h, depth, dst, L3_PLANE_KIND(mode), gs);
    if (mode == L3_PLANE_CONST)
        return l3_plane_decode_const(s, len, w, h, depth, dst);
    if (mode == L3_PLANE_RAW)
        return l3_plane_decode_raw(s, len, w, h, depth, dst);
    return L3_ERR_CORRUPT;
#else
    switch (mode) {
    case L3_PLANE_CONST: return l3_plane_decode_const(s, len, w, h, depth, dst);
    case L3_PLANE_RAW: return l3_plane_decode_raw(s, len, w, h, depth, dst);
    case L3_PLANE_MED:
        return l3_plane_decode_pred(s, len, w, h, depth, dst, 0, L3_GROUP);
    case L3_PLANE_MED | L3_PLANE_SHORT:
        return l3_plane_decode_pred(s, len, w, h, depth, dst, 0, L3_GROUP_SHORT);
    case L3_PLANE_GRAD:
        return l3_plane_decode_pred(s, len, w, h, depth, dst, 1, L3_GROUP);
    case L3_PLANE_GRAD | L3_PLANE_SHORT:
        return l3_plane_decode_pred(s, len, w, h, depth, dst, 1, L3_GROUP_SHORT);
    case L3_PLANE_LEFT2:
        return l3_plane_decode_left2(s, len, w, h, depth, dst, L3_GROUP);
    case L3_PLANE_LEFT2 | L3_PLANE_SHORT:
        return l3_plane_decode_left2(s, len, w, h, depth, dst, L3_GROUP_SHORT);
    default:
        if ((mode & L3_PLANE_LZ) && l3_plane_mode_valid(mode)) {
            /* one specialised loop per predictor */
            const uint32_t gs = (mode & L3_PLANE_SHORT) ? L3_GROUP_SHORT : L3_GROUP;
            switch (L3_PLANE_KIND(mode)) {
            case L3_PLANE_MED:
                return l3_plane_decode_lz(s, len, w, h, depth, dst, L3_PLANE_MED, gs);
            case L3_PLANE_GRAD:
                return l3_plane_decode_lz(s, len, w, h, depth, dst, L3_PLANE_GRAD, gs);
            case L3_PLANE_LEFT2:
                return l3_plane_decode_lz(s, len, w, h, depth, dst, L3_PLANE_LEFT2, gs);
            default:
                return l3_plane_decode_lz(s, len, w, h, depth, dst, L3_PLANE_LEFT, gs);
            }
        }
        return L3_ERR_CORRUPT;
    }
#endif
}

/* Decodes all planes of one tile into buf (plane p at buf + p*w*h). */
L3_TILE_FN int l3_tile_decode(const uint8_t *tile, size_t size, unsigned planes,
                              uint32_t w, uint32_t h, unsigned depth, uint16_t *buf,
                              uint32_t *flags_ret)
{
    struct l3_tile_header th;
    *flags_ret = 0;
    int st = l3_tile_parse(tile, size, planes, &th);
    if (st)
        return st;
    for (unsigned p = 0; p < planes; p++) {
        st = l3_tile_plane_decode(tile + th.off[p], th.len[p], th.mode[p], w, h,
                                  depth, buf + (size_t)p * w * h);
        if (st)
            return st;
    }
    *flags_ret = th.flags;
    return L3_OK;
}

/* Output channels of pixel i (= y*w + x) of a decoded tile buffer, in channel
 * order; plane_stride = w*h. */
L3_TILE_FN void l3_tile_pixel(const uint16_t *buf, size_t plane_stride, size_t i,
                              unsigned planes, unsigned depth, uint32_t flags,
                              uint32_t px[4])
{
    if (planes >= 3) {
        uint32_t mask = (1u << depth) - 1;
        uint32_t g = buf[i + plane_stride];
        uint32_t r = buf[i], b = buf[i + 2 * plane_stride];
        if (flags & L3_TILE_XFORM_G) {
            r = (r + g) & mask;
            b = (b + g) & mask;
        }
        px[0] = r;
        px[1] = g;
        px[2] = b;
        px[3] = planes == 4 ? buf[i + 3 * plane_stride] : 0;
    } else {
        px[0] = buf[i];
        px[1] = planes == 2 ? buf[i + plane_stride] : 0;
        px[2] = px[3] = 0;
    }
}

/* Writes a decoded tile into an interleaved image: `out` points at the tile's
 * top-left sample, rows `stride` bytes apart, samples uint8_t (depth <= 8) or
 * native uint16_t (depth 16). */
L3_TILE_FN void l3_tile_store(const uint16_t *buf, unsigned planes, uint32_t w,
                              uint32_t h, unsigned depth, uint32_t flags, void *out,
                              size_t stride)
{
    const size_t ps = (size_t)w * h;
    const uint32_t mask = (1u << depth) - 1;
    for (uint32_t y = 0; y < h; y++) {
        const uint16_t *s0 = buf + (size_t)y * w;
        if (depth <= 8) {
            uint8_t *o = (uint8_t *)out + (size_t)y * stride;
            if (planes == 1) {
                for (uint32_t x = 0; x < w; x++) o[x] = (uint8_t)s0[x];
            } else if (planes == 2) {
                for (uint32_t x = 0; x < w; x++) {
                    o[2 * x] = (uint8_t)s0[x];
                    o[2 * x + 1] = (uint8_t)s0[x + ps];
                }
            } else {
                const uint16_t *sr = s0, *sg = s0 + ps, *sb = s0 + 2 * ps;
                uint32_t add = (flags & L3_TILE_XFORM_G) ? 0xffffu : 0;
                if (planes == 3) {
                    for (uint32_t x = 0; x < w; x++) {
                        uint32_t g = sg[x], ga = g & add;
                        o[3 * x] = (uint8_t)((sr[x] + ga) & mask);
                        o[3 * x + 1] = (uint8_t)g;
                        o[3 * x + 2] = (uint8_t)((sb[x] + ga) & mask);
                    }
                } else {
                    const uint16_t *sa = s0 + 3 * ps;
                    for (uint32_t x = 0; x < w; x++) {
                        uint32_t g = sg[x], ga = g & add;
                        o[4 * x] = (uint8_t)((sr[x] + ga) & mask);
                        o[4 * x + 1] = (uint8_t)g;
                        o[4 * x + 2] = (uint8_t)((sb[x] + ga) & mask);
                        o[4 * x + 3] = (uint8_t)sa[x];
                    }
                }
            }
        } else {
            uint16_t *o = (uint16_t *)((uint8_t *)out + (size_t)y * stride);
            for (uint32_t x = 0; x < w; x++) {
                uint32_t px[4];
                l3_tile_pixel(buf, ps, (size_t)y * w + x, planes, depth, flags, px);
                for (unsigned c = 0; c < planes; c++)
                    o[planes * x + c] = (uint16_t)px[c];
            }
        }
    }
}

#endif /* L3_TILE_H */
