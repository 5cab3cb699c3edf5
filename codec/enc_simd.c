/* enc_simd.c — AVX2 kernels of the encoder (enc_simd.h). Each one computes
 * exactly what its portable reference computes:
 *   residuals  16 samples a step in 16-bit lanes: MED as clamp(a + b - c,
 *              min(a, b), max(a, b)), the zigzag map as (e << 1) ^ (e >> 15)
 *              of the residual sign-extended from `depth` bits
 *   plans      group sums of 8 and 16 (madd, two horizontal adds), then the
 *              fast rule and the symbol costs 8 groups at a time: k from the
 *              float exponent of ceil(sum / n) - 1, symbol costs from the
 *              symbol bytes and their predecessors (a byte shuffle)
 *   Rice codes in enc_simd_rice.c
 *   LZ costs   the literal cost of 16 residuals and its prefix sum in lanes
 * Groups that are not whole (the end of a row, an LZ run) go through the
 * reference code. */
#include "enc_simd.h"
#include "enc_simd_target.h"

#include <string.h>

#include "enc_lz.h"
#include "enc_predict.h"
#include "enc_rice.h"
#include "l3_internal.h"

/* The code bits (without symbols) and the symbols of the groups of 16 and
 * of 8 of z[0 .. n), n a multiple of 16. */
static inline void plan_groups(const uint16_t *z, size_t n, unsigned depth, uint8_t *syms16,
                               uint8_t *syms8, uint64_t *b16, uint64_t *b8)
{
    for (size_t i = 0; i < n; i += 16) {
        uint32_t sa = 0, sb = 0;
        for (unsigned j = 0; j < 8; j++) {
            sa += z[i + j];
            sb += z[i + 8 + j];
        }
        unsigned k = fast_k(sa + sb, 16, depth);
        *b16 += sa + sb ? 16 * (k + 1) + ((sa + sb) >> k) : 0;
        *syms16++ = (uint8_t)(sa + sb ? k + 1 : 0);
        k = fast_k(sa, 8, depth);
        *b8 += sa ? 8 * (k + 1) + (sa >> k) : 0;
        *syms8++ = (uint8_t)(sa ? k + 1 : 0);
        k = fast_k(sb, 8, depth);
        *b8 += sb ? 8 * (k + 1) + (sb >> k) : 0;
        *syms8++ = (uint8_t)(sb ? k + 1 : 0);
    }
}

#if L3_ENC_AVX2


int l3_enc_simd_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2");
}

/* ---- gather ---- */

AVX2 void l3_simd_gather3(const uint8_t *r8, uint32_t w, uint16_t *p0, uint16_t *p1,
                          uint16_t *p2)
{
    /* 16 pixels = 48 bytes in three vectors; channel c of pixel i is byte 3i + c */
    const __m128i m00 = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i m01 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
    const __m128i m02 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
    const __m128i m10 = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i m11 = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
    const __m128i m12 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
    const __m128i m20 = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i m21 = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
    const __m128i m22 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
    uint32_t x = 0;
    for (; x + 16 <= w; x += 16) {
        const uint8_t *s = r8 + 3 * x;
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
        __m128i c0 = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, m00), _mm_shuffle_epi8(b, m01)),
                                  _mm_shuffle_epi8(c, m02));
        __m128i c1 = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, m10), _mm_shuffle_epi8(b, m11)),
                                  _mm_shuffle_epi8(c, m12));
        __m128i c2 = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, m20), _mm_shuffle_epi8(b, m21)),
                                  _mm_shuffle_epi8(c, m22));
        _mm256_storeu_si256((__m256i *)(void *)(p0 + x), _mm256_cvtepu8_epi16(c0));
        _mm256_storeu_si256((__m256i *)(void *)(p1 + x), _mm256_cvtepu8_epi16(c1));
        _mm256_storeu_si256((__m256i *)(void *)(p2 + x), _mm256_cvtepu8_epi16(c2));
    }
    for (; x < w; x++) {
        p0[x] = r8[3 * x];
        p1[x] = r8[3 * x + 1];
        p2[x] = r8[3 * x + 2];
    }
}

AVX2 void l3_simd_gather4(const uint8_t *r8, uint32_t w, uint16_t *p0, uint16_t *p1,
                          uint16_t *p2, uint16_t *p3)
{
    /* 8 pixels = 32 bytes: bytes to channel order within each 128-bit lane
     * (4 pixels), lanes' words interleaved, so that each 64-bit word holds
     * one channel of 8 pixels */
    const __m256i byc = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                         0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m256i wds = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    uint32_t x = 0;
    for (; x + 16 <= w; x += 16) {
        const uint8_t *s = r8 + 4 * x;
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)s);
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s + 32));
        a = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(a, byc), wds); /* R G B A */
        b = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(b, byc), wds);
        __m256i rb = _mm256_unpacklo_epi64(a, b), ga = _mm256_unpackhi_epi64(a, b);
        _mm256_storeu_si256((__m256i *)(void *)(p0 + x),
                            _mm256_cvtepu8_epi16(_mm256_castsi256_si128(rb)));
        _mm256_storeu_si256((__m256i *)(void *)(p1 + x),
                            _mm256_cvtepu8_epi16(_mm256_castsi256_si128(ga)));
        _mm256_storeu_si256((__m256i *)(void *)(p2 + x),
                            _mm256_cvtepu8_epi16(_mm256_extracti128_si256(rb, 1)));
        _mm256_storeu_si256((__m256i *)(void *)(p3 + x),
                            _mm256_cvtepu8_epi16(_mm256_extracti128_si256(ga, 1)));
    }
    for (; x < w; x++) {
        p0[x] = r8[4 * x];
        p1[x] = r8[4 * x + 1];
        p2[x] = r8[4 * x + 2];
        p3[x] = r8[4 * x + 3];
    }
}

/* ---- residuals ---- */

AVX2_INLINE __m256i ld16(const uint16_t *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* Zigzag values of the residuals d (mod 2^depth); sh = 16 - depth. */
AVX2_INLINE __m256i zz16(__m256i d, __m128i sh)
{
    __m256i e = _mm256_sra_epi16(_mm256_sll_epi16(d, sh), sh);
    return _mm256_xor_si256(_mm256_slli_epi16(e, 1), _mm256_srai_epi16(e, 15));
}

/* Residuals of row[x .. x+16) of a row y > 0. */
AVX2_INLINE __m256i res16(const uint16_t *row, const uint16_t *up, uint32_t x, unsigned pred,
                          __m128i sh)
{
    __m256i v = ld16(row + x), p;
    if (pred == L3_PLANE_LEFT) {
        p = ld16(row + x - 1);
    } else if (pred == L3_PLANE_LEFT2) {
        p = ld16(row + x - 2);
    } else {
        __m256i a = ld16(row + x - 1), b = ld16(up + x), c = ld16(up + x - 1);
        p = _mm256_sub_epi16(_mm256_add_epi16(a, b), c);
        if (pred == L3_PLANE_MED)
            p = _mm256_min_epi16(_mm256_max_epi16(p, _mm256_min_epi16(a, b)),
                                 _mm256_max_epi16(a, b));
    }
    return zz16(_mm256_sub_epi16(v, p), sh);
}

/* Columns x0 .. w-1 of a row with 16-sample steps; the last step overlaps
 * the one before it (w - x0 >= 16: the values are recomputed, not carried). */
AVX2_INLINE void res_row(const uint16_t *row, const uint16_t *up, uint32_t x0, uint32_t w,
                         uint16_t *zr, unsigned pred, __m128i sh)
{
    uint32_t x = x0;
    for (; x + 16 <= w; x += 16)
        _mm256_storeu_si256((__m256i *)(void *)(zr + x), res16(row, up, x, pred, sh));
    if (x < w)
        _mm256_storeu_si256((__m256i *)(void *)(zr + w - 16), res16(row, up, w - 16, pred, sh));
}

AVX2_INLINE void row_res(const uint16_t *row, const uint16_t *up, uint32_t w, unsigned depth,
                         uint16_t *zr, unsigned pred)
{
    const uint32_t mask = (1u << depth) - 1, half = 1u << (depth - 1);
    const __m128i sh = _mm_cvtsi32_si128(16 - (int)depth);
    zr[0] = zigzag((uint32_t)(row[0] - up[0]) & mask, mask, half);
    if (pred == L3_PLANE_LEFT2) {
        zr[1] = zigzag((uint32_t)(row[1] - up[0]) & mask, mask, half);
        res_row(row, up, 2, w, zr, L3_PLANE_LEFT2, sh);
    } else if (pred == L3_PLANE_LEFT) {
        res_row(row, up, 1, w, zr, L3_PLANE_LEFT, sh);
    } else if (pred == L3_PLANE_GRAD) {
        res_row(row, up, 1, w, zr, L3_PLANE_GRAD, sh);
    } else {
        res_row(row, up, 1, w, zr, L3_PLANE_MED, sh);
    }
}

AVX2 void l3_simd_row_residuals(const uint16_t *row, const uint16_t *up, uint32_t w,
                                unsigned depth, uint16_t *zr, unsigned pred)
{
    if (depth > 8 || w < 18) {
        row_residuals(row, up, w, depth, zr, pred);
        return;
    }
    row_res(row, up, w, depth, zr, pred);
}

AVX2 void l3_simd_plane_residuals(const uint16_t *src, uint32_t w, uint32_t h, unsigned depth,
                                  uint16_t *z, unsigned pred)
{
    if (depth > 8 || w < 18) {
        l3_plane_residuals(src, w, h, depth, z, pred);
        return;
    }
    const uint32_t mask = (1u << depth) - 1, half = 1u << (depth - 1);
    const __m128i sh = _mm_cvtsi32_si128(16 - (int)depth);
    /* row 0: the left neighbour (two to the left for LEFT2), 0 before the row */
    z[0] = zigzag(src[0], mask, half);
    if (pred == L3_PLANE_LEFT2) {
        z[1] = zigzag(src[1], mask, half);
        res_row(src, NULL, 2, w, z, L3_PLANE_LEFT2, sh);
    } else {
        res_row(src, NULL, 1, w, z, L3_PLANE_LEFT, sh);
    }
    for (uint32_t y = 1; y < h; y++)
        row_res(src + (size_t)y * w, src + (size_t)(y - 1) * w, w, depth, z + (size_t)y * w,
                pred);
}

/* ---- plans ---- */

/* Sums of the 8 groups of 8 in z[0 .. 64). */
AVX2_INLINE __m256i sums8x8(const uint16_t *z)
{
    const __m256i one = _mm256_set1_epi16(1);
    __m256i a = _mm256_madd_epi16(ld16(z), one), b = _mm256_madd_epi16(ld16(z + 16), one);
    __m256i c = _mm256_madd_epi16(ld16(z + 32), one), d = _mm256_madd_epi16(ld16(z + 48), one);
    /* [a0 b0 c0 d0 | a1 b1 c1 d1]: the halves of each vector's two groups */
    __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* The fast rule for 8 groups of 1 << log2n residuals with sums s: symbols
 * into sym (8 bytes), the Rice codes' bits returned per lane. */
AVX2_INLINE __m256i fast8(__m256i s, __m128i log2n, __m256i nm1, __m256i maxk, uint8_t *sym)
{
    const __m256i one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
    __m256i m = _mm256_srl_epi32(_mm256_add_epi32(s, nm1), log2n); /* ceil(s / n) */
    __m256i x = _mm256_or_si256(_mm256_max_epi32(_mm256_sub_epi32(m, one), zero), one);
    __m256i k = _mm256_sub_epi32(
        _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(x)), 23), _mm256_set1_epi32(127));
    k = _mm256_min_epi32(k, maxk);
    __m256i nz = _mm256_xor_si256(_mm256_cmpeq_epi32(s, zero), _mm256_set1_epi32(-1));
    __m256i k1 = _mm256_add_epi32(k, one);
    __m256i bits = _mm256_add_epi32(_mm256_sll_epi32(k1, log2n), _mm256_srlv_epi32(s, k));
    __m256i sy = _mm256_and_si256(k1, nz);
    __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(sy, zero), zero);
    uint32_t lo = (uint32_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(p));
    uint32_t hi = (uint32_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(p, 1));
    memcpy(sym, &lo, 4);
    memcpy(sym + 4, &hi, 4);
    return _mm256_and_si256(bits, nz);
}

AVX2_INLINE uint64_t hsum32(__m256i v)
{
    uint32_t t[8];
    memcpy(t, &v, sizeof t);
    uint64_t s = 0;
    for (int i = 0; i < 8; i++)
        s += t[i];
    return s;
}

/* Bits of the symbols sym[0 .. n), each after its predecessor (prev before
 * the first): enc_rice.h's sym_cost_nb. */
AVX2_INLINE uint64_t sym_bits(const uint8_t *sym, size_t n, unsigned prev)
{
    const __m256i tab = _mm256_setr_epi8(3, 1, 2, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 3, 1, 2,
                                         8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8);
    const __m256i one = _mm256_set1_epi8(1), three = _mm256_set1_epi8(3);
    uint64_t bits = 0;
    size_t i = 0;
    if (n >= 33) {
        bits += sym_cost_nb(sym[0], prev);
        __m256i acc = _mm256_setzero_si256();
        for (i = 1; i + 32 <= n; i += 32) {
            __m256i s = _mm256_loadu_si256((const __m256i *)(const void *)(sym + i));
            __m256i p = _mm256_loadu_si256((const __m256i *)(const void *)(sym + i - 1));
            __m256i t = _mm256_min_epu8(_mm256_sub_epi8(_mm256_add_epi8(s, one), p), three);
            acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_shuffle_epi8(tab, t),
                                                        _mm256_setzero_si256()));
        }
        uint64_t t[4];
        memcpy(t, &acc, sizeof t);
        bits += t[0] + t[1] + t[2] + t[3];
        prev = sym[i - 1];
    }
    for (; i < n; i++) {
        bits += sym_cost_nb(sym[i], prev);
        prev = sym[i];
    }
    return bits;
}

AVX2 void l3_simd_plan_both(const uint16_t *z, size_t n, unsigned depth, uint8_t *syms16,
                            uint8_t *syms8, uint64_t *bits16, uint64_t *bits8)
{
    const __m256i maxk = _mm256_set1_epi32((int)depth);
    const __m128i l3 = _mm_cvtsi32_si128(3), l4 = _mm_cvtsi32_si128(4);
    const __m256i n7 = _mm256_set1_epi32(7), n15 = _mm256_set1_epi32(15);
    __m256i c8 = _mm256_setzero_si256(), c16 = _mm256_setzero_si256();
    size_t i = 0, g8 = 0, g16 = 0;
    for (; i + 128 <= n; i += 128) {
        __m256i s0 = sums8x8(z + i), s1 = sums8x8(z + i + 64);
        c8 = _mm256_add_epi32(c8, fast8(s0, l3, n7, maxk, syms8 + g8));
        c8 = _mm256_add_epi32(c8, fast8(s1, l3, n7, maxk, syms8 + g8 + 8));
        /* groups of 16: pairs of groups of 8, [s0 01 23 | s1 01 23 | s0 45 67 | s1 45 67] */
        __m256i s16 = _mm256_permute4x64_epi64(_mm256_hadd_epi32(s0, s1), 0xd8);
        c16 = _mm256_add_epi32(c16, fast8(s16, l4, n15, maxk, syms16 + g16));
        g8 += 16;
        g16 += 8;
    }
    uint64_t b8 = hsum32(c8), b16 = hsum32(c16);
    /* the rest (fewer than 128 residuals) as in plane_plan_both */
    plan_groups(z + i, n - i, depth, syms16 + g16, syms8 + g8, &b16, &b8);
    g16 += (n - i) / 16;
    g8 += (n - i) / 8;
    *bits16 = b16 + sym_bits(syms16, g16, 0);
    *bits8 = b8 + sym_bits(syms8, g8, 0);
}

/* ---- estimates ---- */

AVX2 uint64_t l3_simd_estimate(const uint16_t *src, uint32_t w, uint32_t h, unsigned depth,
                               unsigned pred, uint16_t *zrow, uint32_t step)
{
    if (depth > 8 || w < 18 || w % 16)
        return l3_plane_estimate(src, w, h, depth, pred, zrow, step);
    const __m256i maxk = _mm256_set1_epi32((int)depth);
    const __m128i l4 = _mm_cvtsi32_si128(4);
    const __m256i n15 = _mm256_set1_epi32(15), one = _mm256_set1_epi16(1);
    /* group sums of the sampled rows, costed 8 at a time; the symbols
     * (after their predecessors across rows) at the end */
    uint8_t syms[512 + 8];
    uint32_t sums[8];
    uint64_t bits = 0;
    unsigned ns = 0, ng = 0, prev = 0;
    __m256i acc = _mm256_setzero_si256();
    for (uint32_t y = 1; y < h; y += step) {
        row_res(src + (size_t)y * w, src + (size_t)(y - 1) * w, w, depth, zrow, pred);
        for (uint32_t x = 0; x < w; x += 16) {
            __m256i p = _mm256_madd_epi16(ld16(zrow + x), one);
            __m128i q = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
            q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4e));
            q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xb1));
            sums[ns++] = (uint32_t)_mm_cvtsi128_si32(q);
            if (ns == 8) {
                acc = _mm256_add_epi32(
                    acc, fast8(_mm256_loadu_si256((const __m256i *)(const void *)sums), l4, n15,
                               maxk, syms + ng));
                ns = 0;
                ng += 8;
                if (ng == 512) {
                    bits += sym_bits(syms, ng, prev);
                    prev = syms[ng - 1];
                    ng = 0;
                }
            }
        }
    }
    for (unsigned i = 0; i < ns; i++) {
        unsigned sym;
        bits += fast_cost(sums[i], 16, depth, 0, &sym) - sym_cost_nb(sym, 0);
        syms[ng++] = (uint8_t)sym;
    }
    return bits + hsum32(acc) + sym_bits(syms, ng, prev);
}

/* ---- LZ literal costs ---- */

/* Inclusive prefix sums of the 8 lanes of x. */
AVX2_INLINE __m256i prefix8(__m256i x)
{
    x = _mm256_add_epi32(x, _mm256_slli_si256(x, 4));
    x = _mm256_add_epi32(x, _mm256_slli_si256(x, 8));
    __m256i t = _mm256_shuffle_epi32(x, 0xff);
    return _mm256_add_epi32(x, _mm256_permute2x128_si256(t, t, 0x08));
}

AVX2 void l3_simd_lz_costs(uint32_t *cost, const uint16_t *z, uint32_t w, uint32_t y0,
                           uint32_t y1, unsigned depth)
{
    const __m256i seven = _mm256_set1_epi32(7);
    const __m256i escc = _mm256_set1_epi32(16 * (L3_ESCAPE + (int)depth) + 2);
    cost[0] = 0;
    for (uint32_t y = y0; y < y1; y++) {
        const uint16_t *zr = z + (size_t)y * w;
        uint32_t *cr = cost + (size_t)y * w + 1;
        for (uint32_t x0 = 0; x0 < w; x0 += L3_GROUP) {
            uint32_t g = w - x0 < L3_GROUP ? w - x0 : L3_GROUP, sum = 0;
            uint32_t base = cr[(ptrdiff_t)x0 - 1];
            if (g < L3_GROUP) {
                lz_cost_group(cr + x0, zr + x0, g, base, depth);
                continue;
            }
            __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(zr + x0)));
            __m256i b = _mm256_cvtepu16_epi32(
                _mm_loadu_si128((const __m128i *)(const void *)(zr + x0 + 8)));
            __m256i s = _mm256_add_epi32(a, b);
            s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0x4e));
            s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0xb1));
            sum = (uint32_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(s)) +
                  (uint32_t)_mm256_extract_epi32(s, 4);
            if (sum == 0) { /* 1/16 bit each: base + 1 .. base + 16 */
                const __m256i bv = _mm256_set1_epi32((int)base);
                _mm256_storeu_si256((__m256i *)(void *)(cr + x0),
                                    _mm256_add_epi32(bv, _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8)));
                _mm256_storeu_si256((__m256i *)(void *)(cr + x0 + 8),
                                    _mm256_add_epi32(bv, _mm256_setr_epi32(9, 10, 11, 12, 13, 14,
                                                                           15, 16)));
                continue;
            }
            const unsigned k = fast_k(sum, L3_GROUP, depth);
            const __m128i kc = _mm_cvtsi32_si128((int)k);
            /* 16 * (q + 1 + k) + 2, or the escape's 16 * (16 + depth) + 2 */
            const __m256i off = _mm256_set1_epi32(16 * (1 + (int)k) + 2);
            __m256i qa = _mm256_srl_epi32(a, kc), qb = _mm256_srl_epi32(b, kc);
            const __m256i lim = _mm256_set1_epi32(L3_ESCAPE - 1);
            __m256i ca = _mm256_blendv_epi8(_mm256_add_epi32(_mm256_slli_epi32(qa, 4), off), escc,
                                            _mm256_cmpgt_epi32(qa, lim));
            __m256i cb = _mm256_blendv_epi8(_mm256_add_epi32(_mm256_slli_epi32(qb, 4), off), escc,
                                            _mm256_cmpgt_epi32(qb, lim));
            ca = _mm256_add_epi32(prefix8(ca), _mm256_set1_epi32((int)base));
            _mm256_storeu_si256((__m256i *)(void *)(cr + x0), ca);
            cb = _mm256_add_epi32(prefix8(cb), _mm256_permutevar8x32_epi32(ca, seven));
            _mm256_storeu_si256((__m256i *)(void *)(cr + x0 + 8), cb);
        }
    }
}

#else /* no AVX2 kernels in this build: never called (l3_enc_simd_available) */

int l3_enc_simd_available(void)
{
    return 0;
}

void l3_simd_gather3(const uint8_t *r8, uint32_t w, uint16_t *p0, uint16_t *p1, uint16_t *p2)
{
    for (uint32_t x = 0; x < w; x++) {
        p0[x] = r8[3 * x];
        p1[x] = r8[3 * x + 1];
        p2[x] = r8[3 * x + 2];
    }
}

void l3_simd_gather4(const uint8_t *r8, uint32_t w, uint16_t *p0, uint16_t *p1, uint16_t *p2,
                     uint16_t *p3)
{
    for (uint32_t x = 0; x < w; x++) {
        p0[x] = r8[4 * x];
        p1[x] = r8[4 * x + 1];
        p2[x] = r8[4 * x + 2];
        p3[x] = r8[4 * x + 3];
    }
}

void l3_simd_row_residuals(const uint16_t *row, const uint16_t *up, uint32_t w, unsigned depth,
                           uint16_t *zr, unsigned pred)
{
    row_residuals(row, up, w, depth, zr, pred);
}

void l3_simd_plane_residuals(const uint16_t *src, uint32_t w, uint32_t h, unsigned depth,
                             uint16_t *z, unsigned pred)
{
    l3_plane_residuals(src, w, h, depth, z, pred);
}

uint64_t l3_simd_estimate(const uint16_t *src, uint32_t w, uint32_t h, unsigned depth,
                          unsigned pred, uint16_t *zrow, uint32_t step)
{
    return l3_plane_estimate(src, w, h, depth, pred, zrow, step);
}

void l3_simd_plan_both(const uint16_t *z, size_t n, unsigned depth, uint8_t *syms16,
                       uint8_t *syms8, uint64_t *bits16, uint64_t *bits8)
{
    uint64_t b16 = 0, b8 = 0;
    plan_groups(z, n, depth, syms16, syms8, &b16, &b8);
    unsigned p16 = 0, p8 = 0;
    for (size_t g = 0; g < n / 16; p16 = syms16[g++])
        b16 += sym_cost_nb(syms16[g], p16);
    for (size_t g = 0; g < n / 8; p8 = syms8[g++])
        b8 += sym_cost_nb(syms8[g], p8);
    *bits16 = b16;
    *bits8 = b8;
}

void l3_simd_lz_costs(uint32_t *cost, const uint16_t *z, uint32_t w, uint32_t y0, uint32_t y1,
                      unsigned depth)
{
    cost[0] = 0;
    for (uint32_t y = y0; y < y1; y++)
        for (uint32_t x0 = 0; x0 < w; x0 += L3_GROUP) {
            uint32_t *cr = cost + (size_t)y * w + 1 + x0;
            uint32_t g = w - x0 < L3_GROUP ? w - x0 : L3_GROUP;
            lz_cost_group(cr, z + (size_t)y * w + x0, g, cr[-1], depth);
        }
}

#endif
