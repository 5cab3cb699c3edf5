/* dec_store.c — l3_decode's tile sink: channel planes of a decoded tile into
 * the interleaved image, or (l3_store_tiles, 8-bit) a whole batch of tiles row
 * by row, the colour transform undone on the way. 8-bit RGB, RGBA and
 * gray+alpha interleave 16 pixels at a time with SSSE3 byte shuffles where the
 * CPU has them (x86-64). */
#include <string.h>

#include "l3_internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(L3_NO_SIMD)
#define HAVE_SSSE3_STORE 1
#include <immintrin.h>
#endif

/* addg: as rgb16() (P >= 3) */
static void rows8_scalar(const uint8_t *const s[4], unsigned P, uint32_t x, uint32_t w,
                         uint8_t *o, int addg)
{
    for (; x < w; x++)
        for (unsigned p = 0; p < P; p++)
            o[P * x + p] = (uint8_t)(s[p][x] + (addg && (p == 0 || p == 2) ? s[1][x] : 0));
}

#ifdef HAVE_SSSE3_STORE
#define SSSE3 __attribute__((target("ssse3")))

/* Shuffle masks of the 3-plane interleave: out chunk c (bytes 16c..16c+15)
 * takes from plane p the bytes masks[c][p] names (0x80: none). */
static void rgb_masks(__m128i m[3][3])
{
    uint8_t t[3][3][16];
    for (unsigned c = 0; c < 3; c++)
        for (unsigned i = 0; i < 16; i++) {
            unsigned j = 16 * c + i;
            for (unsigned p = 0; p < 3; p++)
                t[c][p][i] = j % 3 == p ? (uint8_t)(j / 3) : 0x80;
        }
    for (unsigned c = 0; c < 3; c++)
        for (unsigned p = 0; p < 3; p++)
            m[c][p] = _mm_loadu_si128((const __m128i *)(const void *)t[c][p]);
}

/* addg: R and B hold R - G and B - G (8-bit samples): add G back here. */
SSSE3 static inline __attribute__((always_inline)) uint32_t
rgb16_(const uint8_t *const s[4], uint32_t w, uint8_t *o, const __m128i m[3][3], const int addg)
{
    uint32_t x = 0;
    for (; x + 16 <= w; x += 16) {
        __m128i r = _mm_loadu_si128((const __m128i *)(const void *)(s[0] + x));
        __m128i g = _mm_loadu_si128((const __m128i *)(const void *)(s[1] + x));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s[2] + x));
        if (addg) {
            r = _mm_add_epi8(r, g);
            b = _mm_add_epi8(b, g);
        }
        for (unsigned c = 0; c < 3; c++) {
            __m128i v = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(r, m[c][0]),
                                                  _mm_shuffle_epi8(g, m[c][1])),
                                     _mm_shuffle_epi8(b, m[c][2]));
            _mm_storeu_si128((__m128i *)(void *)(o + 3 * x + 16 * c), v);
        }
    }
    return x;
}

SSSE3 static uint32_t rgb16(const uint8_t *const s[4], uint32_t w, uint8_t *o,
                            const __m128i m[3][3], int addg)
{
    return addg ? rgb16_(s, w, o, m, 1) : rgb16_(s, w, o, m, 0);
}

/* SSE2 is the x86-64 baseline */
static uint32_t rgba16(const uint8_t *const s[4], uint32_t w, uint8_t *o, int addg)
{
    uint32_t x = 0;
    for (; x + 16 <= w; x += 16) {
        __m128i r = _mm_loadu_si128((const __m128i *)(const void *)(s[0] + x));
        __m128i g = _mm_loadu_si128((const __m128i *)(const void *)(s[1] + x));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s[2] + x));
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s[3] + x));
        if (addg) {
            r = _mm_add_epi8(r, g);
            b = _mm_add_epi8(b, g);
        }
        __m128i rg0 = _mm_unpacklo_epi8(r, g), rg1 = _mm_unpackhi_epi8(r, g);
        __m128i ba0 = _mm_unpacklo_epi8(b, a), ba1 = _mm_unpackhi_epi8(b, a);
        __m128i *d = (__m128i *)(void *)(o + 4 * x);
        _mm_storeu_si128(d, _mm_unpacklo_epi16(rg0, ba0));
        _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(rg0, ba0));
        _mm_storeu_si128(d + 2, _mm_unpacklo_epi16(rg1, ba1));
        _mm_storeu_si128(d + 3, _mm_unpackhi_epi16(rg1, ba1));
    }
    return x;
}

static uint32_t ga16(const uint8_t *const s[4], uint32_t w, uint8_t *o)
{
    uint32_t x = 0;
    for (; x + 16 <= w; x += 16) {
        __m128i g = _mm_loadu_si128((const __m128i *)(const void *)(s[0] + x));
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s[1] + x));
        __m128i *d = (__m128i *)(void *)(o + 2 * x);
        _mm_storeu_si128(d, _mm_unpacklo_epi8(g, a));
        _mm_storeu_si128(d + 1, _mm_unpackhi_epi8(g, a));
    }
    return x;
}
#endif

/* The interleave of one row: what store8() needs made once. */
struct row8 {
#ifdef HAVE_SSSE3_STORE
    __m128i m[3][3];
    int ssse3;
#else
    int unused;
#endif
};

static void row8_init(struct row8 *r, unsigned P)
{
#ifdef HAVE_SSSE3_STORE
    r->ssse3 = P == 3 && __builtin_cpu_supports("ssse3");
    if (r->ssse3)
        rgb_masks(r->m);
#else
    (void)r, (void)P;
#endif
}

/* Row y of tile t into o; addg: see rgb16(). */
static void row8(const struct row8 *r, const struct l3_tile_out *t, uint32_t y, uint8_t *o,
                 int addg)
{
    const unsigned P = t->channels;
    const uint8_t *s[4] = {NULL, NULL, NULL, NULL};
    for (unsigned p = 0; p < P; p++)
        s[p] = (const uint8_t *)t->plane[p] + (size_t)y * t->stride;
    uint32_t x = 0;
    if (P == 1) {
        memcpy(o, s[0], t->w);
        return;
    }
#ifdef HAVE_SSSE3_STORE
    if (P == 2)
        x = ga16(s, t->w, o);
    else if (P == 4)
        x = rgba16(s, t->w, o, addg);
    else if (r->ssse3)
        x = rgb16(s, t->w, o, (const __m128i(*)[3])r->m, addg);
#else
    (void)r;
#endif
    rows8_scalar(s, P, x, t->w, o, addg);
}

static void store8(const struct l3_tile_out *t, uint8_t *o, size_t stride)
{
    struct row8 r;
    row8_init(&r, t->channels);
    for (uint32_t y = 0; y < t->h; y++, o += stride)
        row8(&r, t, y, o, 0);
}

static void store16(const struct l3_tile_out *t, uint8_t *o, size_t stride)
{
    const unsigned P = t->channels;
    for (uint32_t y = 0; y < t->h; y++, o += stride) {
        uint16_t *r = (uint16_t *)(void *)o;
        for (unsigned p = 0; p < P; p++) {
            const uint16_t *s = (const uint16_t *)t->plane[p] + (size_t)y * t->stride;
            for (uint32_t x = 0; x < t->w; x++)
                r[P * x + p] = s[x];
        }
    }
}

/* Asks for the cache lines of the image rows that the tile to the right of
 * t will be stored into (the next tile of a batch, mostly): a tile's rows
 * are far apart in the image, so the stores would wait for each line in
 * turn. A hint only. */
static void prefetch_right(const struct l3_store *s, const struct l3_tile_out *t, size_t sb)
{
    size_t tb = (size_t)t->w * t->channels * sb, at = (size_t)t->x0 * t->channels * sb + tb;
    if (at >= s->row_bytes)
        return;
    if (tb > s->row_bytes - at)
        tb = s->row_bytes - at;
    const uint8_t *r = s->out + (size_t)t->y0 * s->stride + at;
    for (uint32_t y = 0; y < t->h; y++, r += s->stride)
        for (size_t b = 0; b < tb; b += 64)
            __builtin_prefetch(r + b, 1, 3);
}

int l3_store_tile(void *arg, unsigned worker, const struct l3_tile_out *t)
{
    (void)worker;
    const struct l3_store *s = arg;
    size_t sb = t->bit_depth > 8 ? 2 : 1;
    uint8_t *o = s->out + (size_t)t->y0 * s->stride + (size_t)t->x0 * t->channels * sb;
    prefetch_right(s, t, sb);
    if (sb == 1)
        store8(t, o, s->stride);
    else
        store16(t, o, s->stride);
    return L3_OK;
}

void l3_store_tiles(const struct l3_store *s, const struct l3_tile_out *t, const uint8_t *addg,
                    unsigned n)
{
    if (n == 0)
        return;
    struct row8 r;
    row8_init(&r, t[0].channels);
    uint8_t *o[L3_SIMD_BATCH_TILES];
    for (unsigned i = 0; i < n; i++)
        o[i] = s->out + (size_t)t[i].y0 * s->stride + (size_t)t[i].x0 * t[i].channels;
    for (uint32_t y = 0; y < t[0].h; y++)
        for (unsigned i = 0; i < n; i++)
            row8(&r, &t[i], y, o[i] + (size_t)y * s->stride, addg[i]);
}
