/* cpu_convert_vbmi.c — the AVX-512 VBMI steps of the fused converters
 * (l3cv_simd_level 3): tables looked up as byte planes by two-table byte
 * permutes instead of gathers, and 3-channel HWC rows interleaved by byte
 * permutes. The tables are the portable loops' own (cpu_convert.c), so the
 * bytes are the same. Compiled with function attributes; elsewhere (other
 * compilers, other CPUs) never called. */
#include <string.h>

#include "cpu_convert.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#define VBMI __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vbmi")))

/* ---------------- VBMI: tables as byte planes ---------------- */

/* A table of 256 entries of es bytes is es planes of 256 bytes (fc->tb); a
 * byte plane is four 64-byte vectors, and two two-table byte permutes
 * (entries 0-127 and 128-255, by the low 7 bits of the sample) plus a blend
 * on its top bit look 64 samples up at once: 3 instructions per 64 output
 * bytes, where a gather fetches 16 elements. The es byte planes of 64
 * samples are then interleaved into elements with byte unpacks; the samples
 * are permuted first (vpermb) so that the in-lane unpacks come out in order. */

void l3cv_vbmi_prepare(struct l3cv_fast *fc)
{
    const struct l3cv_image *im = fc->im;
    const unsigned C = im->out_channels;
    const size_t es = l3gpu_dtype_size(im->dtype);
    fc->same = 1;
    for (unsigned c = 0; c < C; c++)
        for (unsigned v = 0; v < 256; v++) {
            uint8_t e[4];
            if (im->dtype == L3GPU_U8)
                e[0] = fc->t.u8[c][v];
            else if (im->dtype == L3GPU_F32)
                memcpy(e, &fc->t.f32[c][v], 4);
            else
                memcpy(e, &fc->t.u16[c][v], 2);
            for (size_t k = 0; k < es; k++) fc->tb[c][k][v] = e[k]; /* little-endian bytes */
        }
    for (unsigned c = 1; c < C; c++)
        if (memcmp(fc->tb[c], fc->tb[0], sizeof fc->tb[0]))
            fc->same = 0;
    /* byte p of interleaved block j is sample q = (64 j + p) / 3 of row
     * (64 j + p) % 3: rows 0 and 1 by the first permute, row 2 by the second
     * (p itself: keep the first's) */
    for (unsigned j = 0; j < 3; j++)
        for (unsigned p = 0; p < 64; p++) {
            unsigned e = 64 * j + p, q = e / 3, ch = e % 3;
            fc->ilv3[j][0][p] = (uint8_t)(ch == 0 ? q : ch == 1 ? 64 + q : 0);
            fc->ilv3[j][1][p] = (uint8_t)(ch == 2 ? 64 + q : p);
        }
}

#define LD64(p) _mm512_loadu_si512((const void *)(p))

/* 64 entries of byte plane T (256 bytes) for the samples in idx. */
VBMI static inline __m512i lut64(const uint8_t *T, __m512i idx)
{
    __m512i lo = _mm512_permutex2var_epi8(LD64(T), idx, LD64(T + 64));
    __m512i hi = _mm512_permutex2var_epi8(LD64(T + 128), idx, LD64(T + 192));
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
}

/* Stores the first n bytes (n > 0) of v at d. */
VBMI static inline void put64(uint8_t *d, __m512i v, size_t n, int stream)
{
    if (n >= 64) {
        if (stream)
            _mm512_stream_si512((void *)d, v);
        else
            _mm512_storeu_si512((void *)d, v);
    } else {
        _mm512_mask_storeu_epi8(d, _cvtu64_mask64(((uint64_t)1 << n) - 1), v);
    }
}

/* Sample order that makes the unpacks of 2-byte (4-byte) elements come out in
 * order: position 16 L + 8 q + r holds sample 32 q + 8 L + r (16 L + 4 q + r:
 * sample 16 q + 4 L + r), L the 128-bit lane. */
VBMI static inline __m512i unpack_order(size_t es)
{
    uint8_t o[64];
    for (unsigned p = 0; p < 64; p++) {
        unsigned L = p / 16, k = p % 16;
        o[p] = (uint8_t)(es == 2 ? 32 * (k / 8) + 8 * L + k % 8 : 16 * (k / 4) + 4 * L + k % 4);
    }
    return LD64(o);
}

/* Channel c of the 64 samples at u (n of them valid, 1..64) through its
 * table: es vectors of output bytes, in element order, into v[]. */
VBMI static inline void look64(const struct l3cv_fast *fc, unsigned c, const uint8_t *u,
                               size_t n, size_t es, __m512i ord, __m512i v[4])
{
    __m512i idx = n >= 64 ? LD64(u) : _mm512_maskz_loadu_epi8(_cvtu64_mask64(((uint64_t)1 << n) - 1), u);
    const uint8_t(*T)[256] = fc->tb[c];
    if (es == 1) {
        v[0] = lut64(T[0], idx);
        return;
    }
    idx = _mm512_permutexvar_epi8(ord, idx);
    if (es == 2) {
        __m512i lo = lut64(T[0], idx), hi = lut64(T[1], idx);
        v[0] = _mm512_unpacklo_epi8(lo, hi);
        v[1] = _mm512_unpackhi_epi8(lo, hi);
        return;
    }
    __m512i b0 = lut64(T[0], idx), b1 = lut64(T[1], idx);
    __m512i b2 = lut64(T[2], idx), b3 = lut64(T[3], idx);
    __m512i w01l = _mm512_unpacklo_epi8(b0, b1), w01h = _mm512_unpackhi_epi8(b0, b1);
    __m512i w23l = _mm512_unpacklo_epi8(b2, b3), w23h = _mm512_unpackhi_epi8(b2, b3);
    v[0] = _mm512_unpacklo_epi16(w01l, w23l);
    v[1] = _mm512_unpackhi_epi16(w01l, w23l);
    v[2] = _mm512_unpacklo_epi16(w01h, w23h);
    v[3] = _mm512_unpackhi_epi16(w01h, w23h);
}

VBMI void l3cv_row_vbmi(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                        void *dst, int stream)
{
    const size_t es = l3gpu_dtype_size(fc->im->dtype);
    const __m512i ord = es == 1 ? _mm512_setzero_si512() : unpack_order(es);
    uint8_t *o = dst;
    stream = stream && !((uintptr_t)o & 63);
    for (uint32_t x = 0; x < w; x += 64) {
        size_t n = w - x < 64 ? w - x : 64;
        __m512i v[4];
        look64(fc, c, u + x, n, es, ord, v);
        size_t left = n * es;
        for (size_t k = 0; k * 64 < left; k++)
            put64(o + x * es + 64 * k, v[k], left - 64 * k, stream);
    }
}

VBMI void l3cv_interleave3_vbmi(const struct l3cv_fast *fc, const uint8_t *const rows[3],
                                uint32_t w, uint8_t *dst)
{
    const __m512i a0 = LD64(fc->ilv3[0][0]), b0 = LD64(fc->ilv3[0][1]);
    const __m512i a1 = LD64(fc->ilv3[1][0]), b1 = LD64(fc->ilv3[1][1]);
    const __m512i a2 = LD64(fc->ilv3[2][0]), b2 = LD64(fc->ilv3[2][1]);
    for (uint32_t x = 0; x < w; x += 64) {
        size_t n = w - x < 64 ? w - x : 64;
        __mmask64 m = _cvtu64_mask64(n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1);
        __m512i r = _mm512_maskz_loadu_epi8(m, rows[0] + x);
        __m512i g = _mm512_maskz_loadu_epi8(m, rows[1] + x);
        __m512i b = _mm512_maskz_loadu_epi8(m, rows[2] + x);
        uint8_t *o = dst + 3 * (size_t)x;
        size_t left = 3 * n;
        put64(o, _mm512_permutex2var_epi8(_mm512_permutex2var_epi8(r, a0, g), b0, b), left, 0);
        if (left > 64)
            put64(o + 64, _mm512_permutex2var_epi8(_mm512_permutex2var_epi8(r, a1, g), b1, b),
                  left - 64, 0);
        if (left > 128)
            put64(o + 128, _mm512_permutex2var_epi8(_mm512_permutex2var_epi8(r, a2, g), b2, b),
                  left - 128, 0);
    }
}

#else /* no x86 SIMD build */

void l3cv_vbmi_prepare(struct l3cv_fast *fc)
{
    (void)fc; /* level 0: nothing to prepare */
}

void l3cv_row_vbmi(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                   void *dst, int stream)
{
    (void)fc, (void)c, (void)u, (void)w, (void)dst, (void)stream; /* level 0: never called */
}

void l3cv_interleave3_vbmi(const struct l3cv_fast *fc, const uint8_t *const rows[3],
                           uint32_t w, uint8_t *dst)
{
    (void)fc, (void)rows, (void)w, (void)dst; /* level 0: never called */
}

#endif
