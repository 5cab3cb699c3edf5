/* enc_gather.c — a tile's pixels into planes (enc_tile.h), one plane of
 * uint16_t samples per channel. */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "enc_simd.h"
#include "enc_tile.h"

/* One row of 3- or 4-channel 8-bit pixels into planes (restrict: the
 * planes never overlap the pixels, which lets the loops vectorise). */
static void gather3(const uint8_t *restrict r8, uint32_t w, uint16_t *restrict p0,
                    uint16_t *restrict p1, uint16_t *restrict p2)
{
    for (uint32_t x = 0; x < w; x++) {
        p0[x] = r8[3 * x];
        p1[x] = r8[3 * x + 1];
        p2[x] = r8[3 * x + 2];
    }
}

static void gather4(const uint8_t *restrict r8, uint32_t w, uint16_t *restrict p0,
                    uint16_t *restrict p1, uint16_t *restrict p2, uint16_t *restrict p3)
{
    uint32_t x = 0;
#if defined(__SSE2__)
    /* 8 pixels = two vectors of four 32-bit words; channel c = byte c */
    const __m128i m = _mm_set1_epi32(0xff);
    for (; x + 8 <= w; x += 8) {
        __m128i a = _mm_loadu_si128((const __m128i *)(r8 + 4 * x));
        __m128i b = _mm_loadu_si128((const __m128i *)(r8 + 4 * x + 16));
        _mm_storeu_si128((__m128i *)(p0 + x),
                         _mm_packs_epi32(_mm_and_si128(a, m), _mm_and_si128(b, m)));
        _mm_storeu_si128((__m128i *)(p1 + x),
                         _mm_packs_epi32(_mm_and_si128(_mm_srli_epi32(a, 8), m),
                                         _mm_and_si128(_mm_srli_epi32(b, 8), m)));
        _mm_storeu_si128((__m128i *)(p2 + x),
                         _mm_packs_epi32(_mm_and_si128(_mm_srli_epi32(a, 16), m),
                                         _mm_and_si128(_mm_srli_epi32(b, 16), m)));
        _mm_storeu_si128((__m128i *)(p3 + x),
                         _mm_packs_epi32(_mm_srli_epi32(a, 24), _mm_srli_epi32(b, 24)));
    }
#endif
    for (; x < w; x++) {
        p0[x] = r8[4 * x];
        p1[x] = r8[4 * x + 1];
        p2[x] = r8[4 * x + 2];
        p3[x] = r8[4 * x + 3];
    }
}

void l3_prefetch_tile(const struct enc *e, uint64_t tile)
{
    const struct l3_info *info = e->info;
    if (tile >= (uint64_t)info->tiles_x * info->tiles_y)
        return;
    uint32_t x0, y0, w, h;
    l3_tile_rect(info->width, info->height, info->tile_width, info->tile_height, tile, &x0,
                 &y0, &w, &h);
    const size_t px = (size_t)e->planes * l3_sample_bytes(info);
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *r = e->pixels + (size_t)(y0 + y) * e->stride + (size_t)x0 * px;
        for (size_t b = 0; b < (size_t)w * px; b += 64)
            __builtin_prefetch(r + b);
        __builtin_prefetch(r + (size_t)w * px - 1);
    }
}

L3_CLONES int l3_gather_planes(const struct enc *e, uint32_t x0, uint32_t y0, uint32_t w,
                               uint32_t h, uint16_t *const *pl)
{
    const struct l3_info *info = e->info;
    const unsigned P = e->planes, depth = info->bit_depth;
    const uint32_t maxv = info->color == L3_COLOR_PALETTE ? info->palette_len - 1u
                                                          : (1u << depth) - 1;
    uint32_t over = 0;
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *r = e->pixels + (size_t)(y0 + y) * e->stride;
        size_t o = (size_t)y * w;
        if (depth == 16) {
            const uint16_t *r16 = (const uint16_t *)r + (size_t)x0 * P;
            for (uint32_t x = 0; x < w; x++)
                for (unsigned c = 0; c < P; c++)
                    pl[c][o + x] = r16[x * P + c];
        } else {
            const uint8_t *r8 = r + (size_t)x0 * P;
            if (P == 3 && e->simd) {
                l3_simd_gather3(r8, w, pl[0] + o, pl[1] + o, pl[2] + o);
            } else if (P == 3) {
                gather3(r8, w, pl[0] + o, pl[1] + o, pl[2] + o);
            } else if (maxv >= 255 && P == 4 && e->simd) {
                /* 8-bit samples cannot exceed maxv: no range check */
                l3_simd_gather4(r8, w, pl[0] + o, pl[1] + o, pl[2] + o, pl[3] + o);
            } else if (maxv >= 255 && P == 4) {
                gather4(r8, w, pl[0] + o, pl[1] + o, pl[2] + o, pl[3] + o);
            } else if (maxv >= 255 && P == 2) {
                uint16_t *p0 = pl[0] + o, *p1 = pl[1] + o;
                for (uint32_t x = 0; x < w; x++) {
                    p0[x] = r8[2 * x];
                    p1[x] = r8[2 * x + 1];
                }
            } else if (P == 1) {
                uint16_t *p0 = pl[0] + o;
                uint8_t m = 0;
                for (uint32_t x = 0; x < w; x++) {
                    p0[x] = r8[x];
                    m = r8[x] > m ? r8[x] : m;
                }
                over |= m > maxv;
            } else {
                for (uint32_t x = 0; x < w; x++)
                    for (unsigned c = 0; c < P; c++) {
                        uint32_t v = r8[x * P + c];
                        over |= v > maxv;
                        pl[c][o + x] = (uint16_t)v;
                    }
            }
        }
    }
    return over ? L3_ERR_INVALID_ARG : L3_OK;
}
