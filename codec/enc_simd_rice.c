/* enc_simd_rice.c — the AVX2 Rice writer of the encoder (enc_simd.h:
 * l3_simd_write_rice, l3_simd_rice_group): 8 codes at a time in 32-bit lanes
 * (variable shifts), joined pairwise into 64-bit words (two codes of a
 * depth <= 8 plane are at most 48 bits) and, where they fit in 56 bits, a
 * half group (or a group's symbol and its first 8 codes) as one word, which
 * the bit writer appends; the same bits as enc_rice.c's reference, which
 * groups that are not whole go through. */
#include "enc_simd.h"
#include "enc_simd_target.h"

#include "enc_rice.h"
#include "l3_internal.h"

#if L3_ENC_AVX2

/* The Rice codes of 8 values v as 4 pairs (64-bit lanes: even code | odd
 * code << even length) and their lengths into *pl. */
AVX2_INLINE __m256i rice_pairs(__m256i v, __m128i kc, __m256i k1, __m256i mk, __m256i esclen,
                               __m256i *pl)
{
    const __m256i one = _mm256_set1_epi32(1), lo32 = _mm256_set1_epi64x(0xffffffff);
    __m256i q = _mm256_srl_epi32(v, kc);
    __m256i esc = _mm256_cmpgt_epi32(q, _mm256_set1_epi32(L3_ESCAPE - 1));
    __m256i len = _mm256_blendv_epi8(_mm256_add_epi32(q, k1), esclen, esc);
    /* 1 << q | low k bits << (q + 1), as (low << 1 | 1) << q */
    __m256i code = _mm256_sllv_epi32(
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(v, mk), 1), one), q);
    code = _mm256_blendv_epi8(code, _mm256_slli_epi32(v, L3_ESCAPE), esc);
    __m256i le = _mm256_and_si256(len, lo32);
    *pl = _mm256_add_epi64(le, _mm256_srli_epi64(len, 32));
    return _mm256_or_si256(_mm256_and_si256(code, lo32),
                           _mm256_sllv_epi64(_mm256_srli_epi64(code, 32), le));
}

/* Appends the Rice codes (parameter k, kc = k as a shift count) of the 8
 * values in v (32-bit lanes). */
/* rice8 behind the sn bits of sc (a group symbol; sn <= 8). */
AVX2_INLINE void rice8_after(struct bw *bw, uint64_t sc, unsigned sn, __m256i v, __m128i kc,
                             __m256i k1, __m256i mk, __m256i esclen)
{
    __m256i pl, pc = rice_pairs(v, kc, k1, mk, esclen, &pl);
    /* quads: pair 0 | pair 1 << its length, and pairs 2, 3, when both fit the
     * writer's 56 bits (short codes: most groups of most images) */
    __m256i qc = _mm256_or_si256(pc, _mm256_sllv_epi64(_mm256_srli_si256(pc, 8), pl));
    __m256i ql = _mm256_add_epi64(pl, _mm256_srli_si256(pl, 8));
    uint64_t c[4], l[4];
    if (_mm256_movemask_epi8(_mm256_cmpgt_epi64(ql, _mm256_set1_epi64x(56))) == 0) {
        memcpy(c, &qc, sizeof c);
        memcpy(l, &ql, sizeof l);
        /* the symbol and all 8 in one word when they fit (one append on
         * the writer's serial chain instead of three) */
        if (sn + l[0] + l[2] <= 56) {
            bwf_put64(bw, sc | (c[0] | c[2] << l[0]) << sn, (unsigned)(sn + l[0] + l[2]));
            return;
        }
        if (sn + l[0] <= 56) {
            bwf_put64(bw, sc | c[0] << sn, (unsigned)(sn + l[0]));
        } else {
            bwf_put64(bw, sc, sn);
            bwf_put64(bw, c[0], (unsigned)l[0]);
        }
        bwf_put64(bw, c[2], (unsigned)l[2]);
        return;
    }
    bwf_put64(bw, sc, sn);
    memcpy(c, &pc, sizeof c);
    memcpy(l, &pl, sizeof l);
    bwf_put64(bw, c[0], (unsigned)l[0]);
    bwf_put64(bw, c[1], (unsigned)l[1]);
    bwf_put64(bw, c[2], (unsigned)l[2]);
    bwf_put64(bw, c[3], (unsigned)l[3]);
}

AVX2_INLINE void rice8(struct bw *bw, __m256i v, __m128i kc, __m256i k1, __m256i mk,
                       __m256i esclen)
{
    rice8_after(bw, 0, 0, v, kc, k1, mk, esclen);
}

/* A whole group of 16: both halves' 8 codes joined into one word each
 * (pairs, then quads in lanes 0 and 2, then the two quads), appended with
 * two appends when both fit in 56 bits; else code by code as rice8. */
AVX2_INLINE void rice16(struct bw *bw, uint64_t sc, unsigned sn, const uint16_t *z, unsigned k,
                        unsigned depth)
{
    const __m128i kc = _mm_cvtsi32_si128((int)k);
    const __m256i k1 = _mm256_set1_epi32((int)k + 1);
    const __m256i mk = _mm256_set1_epi32((1 << k) - 1);
    const __m256i esclen = _mm256_set1_epi32(L3_ESCAPE + (int)depth);
    __m256i v0 = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)z));
    __m256i v1 = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(z + 8)));
    __m256i l0, l1;
    __m256i c0 = rice_pairs(v0, kc, k1, mk, esclen, &l0);
    __m256i c1 = rice_pairs(v1, kc, k1, mk, esclen, &l1);
    c0 = _mm256_or_si256(c0, _mm256_sllv_epi64(_mm256_srli_si256(c0, 8), l0));
    l0 = _mm256_add_epi64(l0, _mm256_srli_si256(l0, 8));
    c1 = _mm256_or_si256(c1, _mm256_sllv_epi64(_mm256_srli_si256(c1, 8), l1));
    l1 = _mm256_add_epi64(l1, _mm256_srli_si256(l1, 8));
    /* [half 0 quad 0, half 1 quad 0 | half 0 quad 1, half 1 quad 1] */
    __m256i qc = _mm256_unpacklo_epi64(c0, c1), ql = _mm256_unpacklo_epi64(l0, l1);
    __m128i lq = _mm256_castsi256_si128(ql), hq = _mm256_extracti128_si256(ql, 1);
    __m128i oc = _mm_or_si128(_mm256_castsi256_si128(qc),
                              _mm_sllv_epi64(_mm256_extracti128_si256(qc, 1), lq));
    __m128i ol = _mm_add_epi64(lq, hq);
    if (_mm_movemask_epi8(_mm_cmpgt_epi64(ol, _mm_set1_epi64x(56))) == 0) {
        const uint64_t o0 = (uint64_t)_mm_cvtsi128_si64(oc);
        const unsigned n0 = (unsigned)_mm_cvtsi128_si64(ol);
        if (sn + n0 <= 56) {
            bwf_put64(bw, sc | o0 << sn, sn + n0);
        } else {
            bwf_put64(bw, sc, sn);
            bwf_put64(bw, o0, n0);
        }
        bwf_put64(bw, (uint64_t)_mm_extract_epi64(oc, 1), (unsigned)_mm_extract_epi64(ol, 1));
        return;
    }
    rice8_after(bw, sc, sn, v0, kc, k1, mk, esclen);
    rice8(bw, v1, kc, k1, mk, esclen);
}

AVX2_INLINE void rice_group(struct bw *bw, const uint16_t *z, uint32_t n, unsigned k,
                            unsigned depth)
{
    if (n == 16) {
        rice16(bw, 0, 0, z, k, depth);
        return;
    }
    if (n < 8) {
        bw_rice_group(bw, z, n, k, depth);
        return;
    }
    /* 8 at once, and the rest of a partial group (an LZ literal run's
     * last) one by one */
    const __m128i kc = _mm_cvtsi32_si128((int)k);
    const __m256i k1 = _mm256_set1_epi32((int)k + 1);
    const __m256i mk = _mm256_set1_epi32((1 << k) - 1);
    const __m256i esclen = _mm256_set1_epi32(L3_ESCAPE + (int)depth);
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)z);
    rice8(bw, _mm256_cvtepu16_epi32(a), kc, k1, mk, esclen);
    if (n > 8)
        bw_rice_group(bw, z + 8, n - 8, k, depth);
}

AVX2 void l3_simd_rice_group(struct bw *bw, const uint16_t *z, uint32_t n, unsigned k,
                             unsigned depth)
{
    rice_group(bw, z, n, k, depth);
}

AVX2 uint8_t *l3_simd_write_rice(const uint16_t *z, const uint8_t *syms, uint32_t w, uint32_t h,
                                 unsigned depth, uint8_t *out, uint32_t gs)
{
    struct bw bw = {out, 0, 0};
    unsigned prev = 0;
    size_t g = 0;
    for (uint32_t y = 0; y < h; y++) {
        const uint16_t *zr = z + (size_t)y * w;
        for (uint32_t x0 = 0; x0 < w; x0 += gs) {
            uint32_t n = w - x0 < gs ? w - x0 : gs;
            unsigned s = syms[g++], sn;
            const uint32_t sc = symbol_code(s, prev, &sn);
            prev = s;
            if (s == 0) {
                bwf_put(&bw, sc, sn);
            } else if (n == 16) {
                rice16(&bw, sc, sn, zr + x0, s - 1, depth);
            } else if (n == 8) {
                const unsigned k = s - 1;
                rice8_after(&bw, sc, sn,
                            _mm256_cvtepu16_epi32(
                                _mm_loadu_si128((const __m128i *)(const void *)(zr + x0))),
                            _mm_cvtsi32_si128((int)k), _mm256_set1_epi32((int)k + 1),
                            _mm256_set1_epi32((1 << k) - 1),
                            _mm256_set1_epi32(L3_ESCAPE + (int)depth));
            } else {
                bwf_put(&bw, sc, sn);
                bw_rice_group(&bw, zr + x0, n, s - 1, depth);
            }
        }
    }
    return bwf_flush(&bw);
}

#else /* no AVX2 kernels in this build: never called (l3_enc_simd_available) */

uint8_t *l3_simd_write_rice(const uint16_t *z, const uint8_t *syms, uint32_t w, uint32_t h,
                            unsigned depth, uint8_t *out, uint32_t gs)
{
    return l3_plane_write_rice(z, syms, w, h, depth, out, gs);
}

void l3_simd_rice_group(struct bw *bw, const uint16_t *z, uint32_t n, unsigned k,
                        unsigned depth)
{
    bw_rice_group(bw, z, n, k, depth);
}

#endif
