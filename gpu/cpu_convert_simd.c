/* cpu_convert_simd.c — the SIMD steps of the fused converters, chosen at run
 * time (l3cv_simd_level):
 *   - table lookups by gathers, 8 samples per AVX2 gather or 16 per AVX-512
 *     gather from the channel's table, packed to the output type and stored
 *     (or streamed) 16-64 bytes at a time;
 *   - interleaving channel rows into HWC pixels with byte shuffles (3
 *     channels) and unpacks (2 and 4 channels), for 1-, 2- and 4-byte
 *     samples;
 *   - HWC output through the tables in one pass: the samples interleaved
 *     first (bytes), then one gather per 16 (AVX-512) or 8 (AVX2) output
 *     elements from the tables of the channels the lanes hold, stored (or
 *     streamed) in place, with no converted channel rows in between.
 * The tables are the portable loops' own, so the bytes are the same. The
 * AVX-512 VBMI byte-plane lookups are in cpu_convert_vbmi.c.
 * Compiled for AVX2 / AVX-512 with function attributes; elsewhere (other
 * compilers, other CPUs) level 0 and the portable loops of cpu_convert.c. */
#include <string.h>

#include "cpu_convert.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))
#define AVX512 __attribute__((target("avx2,avx512f,avx512bw,avx512vl")))

int l3cv_simd_level(void)
{
    if (!__builtin_cpu_supports("avx2"))
        return 0;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        return __builtin_cpu_supports("avx512vbmi") ? 3 : 2;
    return 1;
}

int l3cv_whole_lines(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u) /* "Auth"enticAMD */
        return 1;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 1;
    unsigned family = (a >> 8) & 15u;
    if (family == 15u)
        family += (a >> 20) & 255u;
    return family < 0x1Au;
}

/* ---------------- lookups ---------------- */

/* 8 table entries (32-bit) for samples u[0..7]. */
AVX2 static inline __m256i gather8(const uint32_t *T, const uint8_t *u)
{
    __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)u));
    return _mm256_i32gather_epi32((const int *)(const void *)T, idx, 4);
}

/* 16 entries, packed to 16 unsigned 16-bit values in order. */
AVX2 static inline __m256i gather16_u16(const uint32_t *T, const uint8_t *u)
{
    __m256i p = _mm256_packus_epi32(gather8(T, u), gather8(T, u + 8)); /* a0-3 b0-3 a4-7 b4-7 */
    return _mm256_permute4x64_epi64(p, 0xD8);
}

AVX2 static void row_avx2(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                          void *dst, int stream)
{
    switch (fc->im->dtype) {
    case L3GPU_F32: {
        const float *T = fc->t.f32[c];
        float *o = dst;
        for (uint32_t x = 0; x < w; x += 8) {
            __m256i idx =
                _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(u + x)));
            __m256 v = _mm256_i32gather_ps(T, idx, 4);
            if (stream)
                _mm256_stream_ps(o + x, v);
            else
                _mm256_storeu_ps(o + x, v);
        }
        break;
    }
    case L3GPU_U8: {
        const uint32_t *T = fc->w32[c];
        uint8_t *o = dst;
        for (uint32_t x = 0; x < w; x += 16) {
            __m256i h = gather16_u16(T, u + x);
            __m128i b = _mm_packus_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            if (stream)
                _mm_stream_si128((__m128i *)(void *)(o + x), b);
            else
                _mm_storeu_si128((__m128i *)(void *)(o + x), b);
        }
        break;
    }
    default: { /* uint16, float16 bits */
        const uint32_t *T = fc->w32[c];
        uint16_t *o = dst;
        for (uint32_t x = 0; x < w; x += 16) {
            __m256i h = gather16_u16(T, u + x);
            if (stream)
                _mm256_stream_si256((__m256i *)(void *)(o + x), h);
            else
                _mm256_storeu_si256((__m256i *)(void *)(o + x), h);
        }
        break;
    }
    }
}

AVX512 static void row_avx512(const struct l3cv_fast *fc, unsigned c, const uint8_t *u,
                              uint32_t w, void *dst, int stream)
{
    for (uint32_t x = 0; x < w; x += 16) {
        __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(u + x)));
        switch (fc->im->dtype) {
        case L3GPU_F32: {
            __m512 v = _mm512_i32gather_ps(idx, fc->t.f32[c], 4);
            float *o = (float *)dst + x;
            if (!stream) {
                _mm512_storeu_ps(o, v);
            } else if (!((uintptr_t)o & 63)) {
                _mm512_stream_ps(o, v);
            } else { /* rows 32-byte aligned: two streamed halves */
                _mm256_stream_ps(o, _mm512_castps512_ps256(v));
                _mm256_stream_ps(o + 8, _mm256_castpd_ps(
                                            _mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
            }
            break;
        }
        case L3GPU_U8: {
            __m128i b = _mm512_cvtepi32_epi8(_mm512_i32gather_epi32(idx, fc->w32[c], 4));
            __m128i *o = (__m128i *)(void *)((uint8_t *)dst + x);
            if (stream)
                _mm_stream_si128(o, b);
            else
                _mm_storeu_si128(o, b);
            break;
        }
        default: {
            __m256i h = _mm512_cvtepi32_epi16(_mm512_i32gather_epi32(idx, fc->w32[c], 4));
            __m256i *o = (__m256i *)(void *)((uint16_t *)dst + x);
            if (stream)
                _mm256_stream_si256(o, h);
            else
                _mm256_storeu_si256(o, h);
            break;
        }
        }
    }
}

void l3cv_row_simd(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                   void *dst, int stream)
{
    if (fc->arith)
        l3cv_row_arith(fc, c, u, w, dst, stream);
    else if (fc->simd >= 3 && fc->im->dtype != L3GPU_F32)
        l3cv_row_vbmi(fc, c, u, w, dst, stream);
    else if (fc->simd >= 2)
        row_avx512(fc, c, u, w, dst, stream);
    else
        row_avx2(fc, c, u, w, dst, stream);
}

/* ---------------- interleaved lookups ---------------- */

/* The channels' tables are rows of 256 entries one after the other, so
 * element e of an interleaved (HWC) row of C channels, sample v, has its
 * output at entry (e mod C) * 256 + v of the first: fc->hwc_off (see
 * l3cv_fast_prepare) holds those offsets for 3 blocks of 16 elements. */

#define LD16(p) _mm_loadu_si128((const __m128i *)(const void *)(p))

AVX2 static void hwc_avx2(const struct l3cv_fast *fc, const uint8_t *ilv, size_t n,
                          unsigned C, void *dst, int stream)
{
    const int32_t(*pat)[16] = fc->hwc_off;
    const int dt = fc->im->dtype;
    const size_t es = dt == L3GPU_U8 ? 1 : dt == L3GPU_F32 ? 4 : 2;
    stream = stream && !((uintptr_t)dst & (16 * es - 1)); /* whole blocks aligned */
    const int *T = dt == L3GPU_F32 ? (const int *)(const void *)fc->t.f32
                                   : (const int *)(const void *)fc->w32;
    for (size_t k = 0, j = 0; k < n; k += 16, j = j == 2 ? 0 : j + 1) {
        if (C != 3)
            j = 0;
        __m128i v = LD16(ilv + k);
        __m256i i0 = _mm256_add_epi32(_mm256_cvtepu8_epi32(v),
                                      _mm256_loadu_si256((const __m256i *)(const void *)pat[j]));
        __m256i i1 = _mm256_add_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)),
                                      _mm256_loadu_si256((const __m256i *)(const void *)(pat[j] + 8)));
        __m256i g0 = _mm256_i32gather_epi32(T, i0, 4), g1 = _mm256_i32gather_epi32(T, i1, 4);
        uint8_t *o = (uint8_t *)dst + k * es;
        if (dt == L3GPU_F32) {
            if (stream) {
                _mm256_stream_si256((__m256i *)(void *)o, g0);
                _mm256_stream_si256((__m256i *)(void *)(o + 32), g1);
            } else {
                _mm256_storeu_si256((__m256i *)(void *)o, g0);
                _mm256_storeu_si256((__m256i *)(void *)(o + 32), g1);
            }
            continue;
        }
        __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(g0, g1), 0xD8);
        if (dt == L3GPU_U8) {
            __m128i b = _mm_packus_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            if (stream)
                _mm_stream_si128((__m128i *)(void *)o, b);
            else
                _mm_storeu_si128((__m128i *)(void *)o, b);
        } else if (stream) {
            _mm256_stream_si256((__m256i *)(void *)o, h);
        } else {
            _mm256_storeu_si256((__m256i *)(void *)o, h);
        }
    }
}

AVX512 static void hwc_avx512(const struct l3cv_fast *fc, const uint8_t *ilv, size_t n,
                              unsigned C, void *dst, int stream)
{
    __m512i p0 = _mm512_loadu_si512(fc->hwc_off[0]), p1 = _mm512_loadu_si512(fc->hwc_off[1]);
    __m512i p2 = _mm512_loadu_si512(fc->hwc_off[2]);
    const int dt = fc->im->dtype;
    const size_t es = dt == L3GPU_U8 ? 1 : dt == L3GPU_F32 ? 4 : 2;
    stream = stream && !((uintptr_t)dst & (16 * es - 1));
    const void *T = dt == L3GPU_F32 ? (const void *)fc->t.f32 : (const void *)fc->w32;
    for (size_t k = 0; k < n; k += 16) {
        __m512i idx = _mm512_add_epi32(_mm512_cvtepu8_epi32(LD16(ilv + k)), p0);
        if (C == 3) { /* the next block's offsets */
            __m512i t = p0;
            p0 = p1, p1 = p2, p2 = t;
        }
        __m512i g = _mm512_i32gather_epi32(idx, T, 4);
        uint8_t *o = (uint8_t *)dst + k * es;
        if (dt == L3GPU_F32) {
            if (stream)
                _mm512_stream_si512((void *)o, g);
            else
                _mm512_storeu_si512((void *)o, g);
        } else if (dt == L3GPU_U8) {
            __m128i b = _mm512_cvtepi32_epi8(g);
            if (stream)
                _mm_stream_si128((__m128i *)(void *)o, b);
            else
                _mm_storeu_si128((__m128i *)(void *)o, b);
        } else {
            __m256i h = _mm512_cvtepi32_epi16(g);
            if (stream)
                _mm256_stream_si256((__m256i *)(void *)o, h);
            else
                _mm256_storeu_si256((__m256i *)(void *)o, h);
        }
    }
}

void l3cv_hwc_simd(const struct l3cv_fast *fc, const uint8_t *ilv, unsigned C, uint32_t w,
                   void *dst, int stream)
{
    if (fc->arith)
        l3cv_hwc_arith(fc, ilv, C, w, dst, stream);
    else if (fc->simd >= 2)
        hwc_avx512(fc, ilv, (size_t)w * C, C, dst, stream);
    else
        hwc_avx2(fc, ilv, (size_t)w * C, C, dst, stream);
}

/* ---------------- interleave ---------------- */

#define Z (-128)
const int8_t l3cv_shuf3[3][3][3][16] = {
    {{{0, Z, Z, 1, Z, Z, 2, Z, Z, 3, Z, Z, 4, Z, Z, 5},
      {Z, 0, Z, Z, 1, Z, Z, 2, Z, Z, 3, Z, Z, 4, Z, Z},
      {Z, Z, 0, Z, Z, 1, Z, Z, 2, Z, Z, 3, Z, Z, 4, Z}},
     {{Z, Z, 6, Z, Z, 7, Z, Z, 8, Z, Z, 9, Z, Z, 10, Z},
      {5, Z, Z, 6, Z, Z, 7, Z, Z, 8, Z, Z, 9, Z, Z, 10},
      {Z, 5, Z, Z, 6, Z, Z, 7, Z, Z, 8, Z, Z, 9, Z, Z}},
     {{Z, 11, Z, Z, 12, Z, Z, 13, Z, Z, 14, Z, Z, 15, Z, Z},
      {Z, Z, 11, Z, Z, 12, Z, Z, 13, Z, Z, 14, Z, Z, 15, Z},
      {10, Z, Z, 11, Z, Z, 12, Z, Z, 13, Z, Z, 14, Z, Z, 15}}},
    {{{0, 1, Z, Z, Z, Z, 2, 3, Z, Z, Z, Z, 4, 5, Z, Z},
      {Z, Z, 0, 1, Z, Z, Z, Z, 2, 3, Z, Z, Z, Z, 4, 5},
      {Z, Z, Z, Z, 0, 1, Z, Z, Z, Z, 2, 3, Z, Z, Z, Z}},
     {{Z, Z, 6, 7, Z, Z, Z, Z, 8, 9, Z, Z, Z, Z, 10, 11},
      {Z, Z, Z, Z, 6, 7, Z, Z, Z, Z, 8, 9, Z, Z, Z, Z},
      {4, 5, Z, Z, Z, Z, 6, 7, Z, Z, Z, Z, 8, 9, Z, Z}},
     {{Z, Z, Z, Z, 12, 13, Z, Z, Z, Z, 14, 15, Z, Z, Z, Z},
      {10, 11, Z, Z, Z, Z, 12, 13, Z, Z, Z, Z, 14, 15, Z, Z},
      {Z, Z, 10, 11, Z, Z, Z, Z, 12, 13, Z, Z, Z, Z, 14, 15}}},
    {{{0, 1, 2, 3, Z, Z, Z, Z, Z, Z, Z, Z, 4, 5, 6, 7},
      {Z, Z, Z, Z, 0, 1, 2, 3, Z, Z, Z, Z, Z, Z, Z, Z},
      {Z, Z, Z, Z, Z, Z, Z, Z, 0, 1, 2, 3, Z, Z, Z, Z}},
     {{Z, Z, Z, Z, Z, Z, Z, Z, 8, 9, 10, 11, Z, Z, Z, Z},
      {4, 5, 6, 7, Z, Z, Z, Z, Z, Z, Z, Z, 8, 9, 10, 11},
      {Z, Z, Z, Z, 4, 5, 6, 7, Z, Z, Z, Z, Z, Z, Z, Z}},
     {{Z, Z, Z, Z, 12, 13, 14, 15, Z, Z, Z, Z, Z, Z, Z, Z},
      {Z, Z, Z, Z, Z, Z, Z, Z, 12, 13, 14, 15, Z, Z, Z, Z},
      {8, 9, 10, 11, Z, Z, Z, Z, Z, Z, Z, Z, 12, 13, 14, 15}}},
};
#undef Z

#define LD(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define ST(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))

AVX2 static inline __m128i unpacklo(__m128i a, __m128i b, size_t es)
{
    return es == 1 ? _mm_unpacklo_epi8(a, b) : es == 2 ? _mm_unpacklo_epi16(a, b)
         : es == 4 ? _mm_unpacklo_epi32(a, b) : _mm_unpacklo_epi64(a, b);
}

AVX2 static inline __m128i unpackhi(__m128i a, __m128i b, size_t es)
{
    return es == 1 ? _mm_unpackhi_epi8(a, b) : es == 2 ? _mm_unpackhi_epi16(a, b)
         : es == 4 ? _mm_unpackhi_epi32(a, b) : _mm_unpackhi_epi64(a, b);
}

AVX2 void l3cv_interleave_simd(const void *const rows[4], unsigned C, size_t es, uint32_t w,
                               void *dst)
{
    const size_t bytes = (size_t)w * es; /* per channel row; a multiple of 16 */
    uint8_t *o = dst;
    const uint8_t *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
    if (C == 3) {
        const int8_t(*m)[3][16] = l3cv_shuf3[es == 1 ? 0 : es == 2 ? 1 : 2];
        for (size_t k = 0; k < bytes; k += 16, o += 48) {
            __m128i a = LD(r0 + k), b = LD(r1 + k), c = LD(r2 + k);
            for (int j = 0; j < 3; j++)
                ST(o + 16 * j,
                   _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, LD(m[j][0])),
                                             _mm_shuffle_epi8(b, LD(m[j][1]))),
                                _mm_shuffle_epi8(c, LD(m[j][2]))));
        }
    } else if (C == 4) {
        for (size_t k = 0; k < bytes; k += 16, o += 64) {
            __m128i a = LD(r0 + k), b = LD(r1 + k), c = LD(r2 + k), d = LD(r3 + k);
            __m128i ab0 = unpacklo(a, b, es), ab1 = unpackhi(a, b, es);
            __m128i cd0 = unpacklo(c, d, es), cd1 = unpackhi(c, d, es);
            ST(o, unpacklo(ab0, cd0, 2 * es));
            ST(o + 16, unpackhi(ab0, cd0, 2 * es));
            ST(o + 32, unpacklo(ab1, cd1, 2 * es));
            ST(o + 48, unpackhi(ab1, cd1, 2 * es));
        }
    } else if (C == 2) {
        for (size_t k = 0; k < bytes; k += 16, o += 32) {
            __m128i a = LD(r0 + k), b = LD(r1 + k);
            ST(o, unpacklo(a, b, es));
            ST(o + 16, unpackhi(a, b, es));
        }
    } else {
        memcpy(o, r0, bytes);
    }
}

#else /* no x86 SIMD build */

int l3cv_simd_level(void)
{
    return 0;
}

int l3cv_whole_lines(void)
{
    return 1;
}

void l3cv_row_simd(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                   void *dst, int stream)
{
    (void)fc, (void)c, (void)u, (void)w, (void)dst, (void)stream; /* level 0: never called */
}

void l3cv_interleave_simd(const void *const rows[4], unsigned C, size_t es, uint32_t w,
                          void *dst)
{
    (void)rows, (void)C, (void)es, (void)w, (void)dst; /* level 0: never called */
}

void l3cv_hwc_simd(const struct l3cv_fast *fc, const uint8_t *ilv, unsigned C, uint32_t w,
                   void *dst, int stream)
{
    (void)fc, (void)ilv, (void)C, (void)w, (void)dst, (void)stream; /* level 0: never called */
}

#endif
