/* cpu_convert_avx2.c — the table lookups of the fused converters with AVX2
 * gathers: 8 samples per gather from the channel's table, packed to the
 * output type and stored (or streamed) 16 or 32 bytes at a time. The same
 * tables as the portable loops, so the same bytes. Compiled for AVX2 with a
 * function attribute and chosen at run time (l3cv_avx2_available); on other
 * compilers or CPUs the portable loops of cpu_convert.c run. */
#include "cpu_convert.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

int l3cv_avx2_available(void)
{
    return __builtin_cpu_supports("avx2") != 0;
}

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

AVX2 void l3cv_row_avx2(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
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

#else /* no AVX2 build */

int l3cv_avx2_available(void)
{
    return 0;
}

void l3cv_row_avx2(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                   void *dst, int stream)
{
    (void)fc, (void)c, (void)u, (void)w, (void)dst, (void)stream; /* never called */
}
#endif
