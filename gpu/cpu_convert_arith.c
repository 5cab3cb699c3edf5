/* cpu_convert_arith.c — 16-bit and float outputs computed in AVX2 vectors
 * instead of looked up in the channels' tables: uint16 as v * m,
 * float32 and float16 as the reference's arithmetic (l3cv_float: v / srcmax,
 * then * scale, - mean, / std, each rounded to float; float16 by the F16C
 * conversion, rounding to nearest even).
 *
 * Why: AMD's AVX2 gathers are microcoded (Zen 3: 1.15-1.48 TSC cycles an
 * element for a float32 table, against 0.31 for one vector division and 0.62
 * for two, docs/BENCHMARKS.md), and these outputs have a lookup per element.
 * The AVX-512 levels use these loops too (256-bit vectors): on Zen 5 a
 * float32 NCHW output by 16-lane gathers took 2.75 ms of a 2048x1024 photo's
 * decode, these loops 0.9 ms (1.4 ms with mean and std; perf samples).
 * They also beat the VBMI byte-plane lookups for uint16 and float16 there
 * (0.99-1.02 of plain uint8 decode against 0.94-0.96 for uint16), so
 * cpu_convert.c takes them first wherever they are exact.
 *
 * Same bytes by check, not by argument: a channel's output has 256 possible
 * inputs, so l3cv_arith_prepare() runs these very loops over every sample
 * value 0..255 of every channel, as rows and as interleaved pixels, and turns
 * them on only when every result equals the table's to the bit (a palette's
 * table, or any other that is not this arithmetic, keeps the gathers). That
 * also lets it try cheaper forms of each division first, kept only where
 * they give the same 256 results: a multiplication by the rounded reciprocal
 * r; the reciprocal as two floats, r + rlo, in one multiplication and one FMA
 * (q = x r + round(x rlo); for v / 255 and ImageNet's mean/std this is the
 * form that holds, docs/BENCHMARKS.md); the product x r corrected once with
 * two FMAs (q = x r, q += (x - q d) r); then the division itself. The union of the channels' operations is applied
 * to every channel, with 1 and 0 where a channel has none (x * 1, x - 0 and
 * x / 1 are exact; the check covers it). Built with -ffp-contract=off like
 * the rest of the converters: no operation is fused but the FMAs written. */
#include <string.h>

#include "cpu_convert.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#include <immintrin.h>

#define ARITH __attribute__((target("avx2,f16c,fma")))

enum { OP_MUL = 1, OP_SUB = 2, OP_DIV = 4 };
/* how a division x / d is done (struct l3cv_fast.ar_how), cheapest first */
enum { HOW_RCP, HOW_TWO, HOW_FMA, HOW_DIV };
/* the parameters of a channel (ar_row[c][k], ar_hwc[j][k]) */
enum { P_D, P_RD, P_RDLO, P_M, P_S, P_Q, P_RQ, P_RQLO, P_N };

struct par8 {
    __m256 v[P_N]; /* v / d * m - s / q; rd, rq: 1 / d, 1 / q; rdlo, rqlo: what they miss */
};

/* Every helper below is inlined into the loops, whose output type, set of
 * operations, division form and store kind are constants of each instance:
 * a tile row is 64 samples or so, and a call that branches on them per
 * block (or broadcasts its parameters through an outlined helper) spends
 * more on that than on the arithmetic. */
#define INLINE ARITH static inline __attribute__((always_inline))

/* x / d with r = 1 / d rounded and rlo = 1 / d - r (the next 24 bits) */
INLINE __m256 quot(__m256 x, __m256 d, __m256 r, __m256 rlo, const int how)
{
    if (how == HOW_DIV)
        return _mm256_div_ps(x, d);
    if (how == HOW_TWO) /* x rlo rounded, then x r + that in one FMA: two operations */
        return _mm256_fmadd_ps(x, r, _mm256_mul_ps(x, rlo));
    __m256 q = _mm256_mul_ps(x, r);
    if (how == HOW_FMA) /* the product corrected by its residual: three */
        q = _mm256_fmadd_ps(_mm256_fnmadd_ps(q, d, x), r, q);
    return q;
}

/* ops: 0 v / srcmax only; 1 then - mean, / std (no channel scales: the usual
 * mean/std normalisation); 2 every operation. Within a class the channels'
 * union is applied to each channel, with 0 and 1 where a channel has none
 * (exact, and the check covers it). */
INLINE __m256 value8(__m128i u8x8, const struct par8 *p, const int ops, const int how)
{
    __m256 t = quot(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(u8x8)), p->v[P_D], p->v[P_RD],
                    p->v[P_RDLO], how);
    if (ops == 2)
        t = _mm256_mul_ps(t, p->v[P_M]);
    if (ops) {
        t = _mm256_sub_ps(t, p->v[P_S]);
        t = quot(t, p->v[P_Q], p->v[P_RQ], p->v[P_RQLO], how);
    }
    return t;
}

/* stream: 0 ordinary stores, 1 non-temporal (o 32-byte aligned), 2 non-temporal
 * in 16-byte halves (o 16-byte aligned: the plane rows of a 16-bit CHW output
 * whose width is an odd multiple of 8, such as 3640; measured on those:
 * NCHW float16 of a 3640x2400 RGBA image 8.4 -> 7.1 ms, against gathers
 * streamed 16 bytes at a time for every other row) */
INLINE void put32(void *o, __m256i v, const int stream)
{
    if (stream == 2) {
        _mm_stream_si128((__m128i *)o, _mm256_castsi256_si128(v));
        _mm_stream_si128((__m128i *)o + 1, _mm256_extracti128_si256(v, 1));
    } else if (stream)
        _mm256_stream_si256((__m256i *)o, v);
    else
        _mm256_storeu_si256((__m256i *)o, v);
}

INLINE __m128i load16(const uint8_t *u)
{
    return _mm_loadu_si128((const __m128i *)(const void *)u);
}

/* 16 samples v (bytes) with lane parameters p[0] (first 8) and p[1], m16 (uint16
 * multipliers of the 16 lanes), into 16 elements at o. */
INLINE void block16(const unsigned dtype, const int ops, const int how, const __m128i v,
                    const struct par8 p[2], __m256i m16, uint8_t *o, const int stream)
{
    if (dtype == L3GPU_U16) {
        put32(o, _mm256_mullo_epi16(_mm256_cvtepu8_epi16(v), m16), stream);
    } else if (dtype == L3GPU_F32) {
        put32(o, _mm256_castps_si256(value8(v, &p[0], ops, how)), stream);
        put32(o + 32, _mm256_castps_si256(value8(_mm_srli_si128(v, 8), &p[1], ops, how)),
              stream);
    } else { /* float16 */
        __m128i h0 = _mm256_cvtps_ph(value8(v, &p[0], ops, how), _MM_FROUND_TO_NEAREST_INT);
        __m128i h1 = _mm256_cvtps_ph(value8(_mm_srli_si128(v, 8), &p[1], ops, how),
                                     _MM_FROUND_TO_NEAREST_INT);
        put32(o, _mm256_set_m128i(h1, h0), stream);
    }
}

static inline size_t elem_size(unsigned dtype)
{
    return dtype == L3GPU_F32 ? 4 : 2;
}

INLINE void par_of(const float (*a)[16], unsigned half, struct par8 *p)
{
    for (unsigned k = 0; k < P_N; k++)
        p->v[k] = _mm256_loadu_ps(a[k] + 8 * half);
}

INLINE void row_loop(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                     void *dst, const int stream, const unsigned dt, const int ops, const int how)
{
    struct par8 p[2];
    for (unsigned k = 0; k < P_N; k++)
        p[0].v[k] = _mm256_set1_ps(fc->ar_row[c][k]);
    p[1] = p[0];
    const __m256i m16 = _mm256_set1_epi16((short)fc->ar_m16[c]);
    const size_t es = elem_size(dt);
    for (uint32_t x = 0; x < w; x += 16)
        block16(dt, ops, how, load16(u + x), p, m16, (uint8_t *)dst + (size_t)x * es, stream);
}

/* Block j's lane parameters, read where they are used: three blocks' worth
 * (up to 48 vectors) do not fit in the 16 registers, and a copy made at
 * each call (a tile row) costs more than the loads it saves. The stores
 * may alias fc, so the compiler keeps these loads in the loop, as memory
 * operands. */
INLINE void hwc_block(const struct l3cv_fast *fc, unsigned j, const unsigned dt, const int ops,
                      const int how, const __m128i v, uint8_t *o, const int stream)
{
    struct par8 p[2];
    par_of(fc->ar_hwc[j], 0, &p[0]);
    par_of(fc->ar_hwc[j], 1, &p[1]);
    block16(dt, ops, how, v, p,
            _mm256_loadu_si256((const __m256i *)(const void *)fc->ar_hwc16[j]), o, stream);
}

INLINE void hwc_loop(const struct l3cv_fast *fc, const uint8_t *ilv, unsigned C, uint32_t w,
                     void *dst, const int stream, const unsigned dt, const int ops, const int how)
{
    const size_t n = (size_t)w * C, es = elem_size(dt);
    uint8_t *o = dst;
    if (C == 3) /* element i of block j (of 16) is channel (16 j + i) mod 3 */
        for (size_t k = 0; k < n; k += 48) {
            hwc_block(fc, 0, dt, ops, how, load16(ilv + k), o + k * es, stream);
            if (k + 16 < n)
                hwc_block(fc, 1, dt, ops, how, load16(ilv + k + 16), o + (k + 16) * es, stream);
            if (k + 32 < n)
                hwc_block(fc, 2, dt, ops, how, load16(ilv + k + 32), o + (k + 32) * es, stream);
        }
    else /* 1, 2, 4 channels: the same 16 lanes in every block */
        for (size_t k = 0; k < n; k += 16)
            hwc_block(fc, 0, dt, ops, how, load16(ilv + k), o + k * es, stream);
}

/* Three rows of w samples (a multiple of 16), interleaved 16 pixels at a
 * time in registers (the shuffles of l3cv_interleave_simd) and converted as
 * hwc_loop converts them: no interleaved copy stored and loaded again. */
INLINE __m128i ilv3(__m128i a, __m128i b, __m128i c, const int8_t (*m)[16])
{
    const __m128i *mv = (const __m128i *)(const void *)m;
    return _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, _mm_loadu_si128(mv)),
                                     _mm_shuffle_epi8(b, _mm_loadu_si128(mv + 1))),
                        _mm_shuffle_epi8(c, _mm_loadu_si128(mv + 2)));
}

INLINE void hwc3_loop(const struct l3cv_fast *fc, const uint8_t *const rows[3], uint32_t w,
                      void *dst, const int stream, const unsigned dt, const int ops, const int how)
{
    const size_t es = elem_size(dt);
    const int8_t(*m)[3][16] = l3cv_shuf3[0];
    /* Vector k (of 8 elements) of 48 starts at channel 8 k mod 3 = 0, 2, 1,
     * 0, 2, 1: three distinct parameter vectors, which fit in registers
     * (the divisor of v and its reciprocal are the same in every lane). */
    struct par8 p[3];
    par_of(fc->ar_hwc[0], 0, &p[0]);
    par_of(fc->ar_hwc[0], 1, &p[1]);
    par_of(fc->ar_hwc[1], 0, &p[2]);
    const struct par8 pj[3][2] = {{p[0], p[1]}, {p[2], p[0]}, {p[1], p[2]}};
    __m256i m16[3];
    for (unsigned j = 0; j < 3; j++)
        m16[j] = _mm256_loadu_si256((const __m256i *)(const void *)fc->ar_hwc16[j]);
    uint8_t *o = dst;
    for (uint32_t x = 0; x < w; x += 16, o += 48 * es) {
        const __m128i a = load16(rows[0] + x), b = load16(rows[1] + x), c = load16(rows[2] + x);
        for (unsigned j = 0; j < 3; j++)
            block16(dt, ops, how, ilv3(a, b, c, m[j]), pj[j], m16[j], o + 16 * j * es, stream);
    }
}

/* One instance per output type, operation set and division form; each
 * chooses its store kind once. */
typedef void row_fn(const struct l3cv_fast *, unsigned, const uint8_t *, uint32_t, void *, int);
typedef void hwc_fn(const struct l3cv_fast *, const uint8_t *, unsigned, uint32_t, void *, int);
typedef void hwc3_fn(const struct l3cv_fast *, const uint8_t *const[3], uint32_t, void *, int);

#define INSTANCE(name, DT, OPS, HOW)                                                          \
    ARITH static void row_##name(const struct l3cv_fast *fc, unsigned c, const uint8_t *u,    \
                                 uint32_t w, void *dst, int stream)                          \
    {                                                                                        \
        if (stream && !((uintptr_t)dst & 31))                                                \
            row_loop(fc, c, u, w, dst, 1, DT, OPS, HOW);                                     \
        else if (stream && !((uintptr_t)dst & 15))                                           \
            row_loop(fc, c, u, w, dst, 2, DT, OPS, HOW);                                     \
        else                                                                                 \
            row_loop(fc, c, u, w, dst, 0, DT, OPS, HOW);                                     \
    }                                                                                        \
    ARITH static void hwc3_##name(const struct l3cv_fast *fc, const uint8_t *const rows[3],    \
                                  uint32_t w, void *dst, int stream)                          \
    {                                                                                        \
        if (stream && !((uintptr_t)dst & (16 * elem_size(DT) - 1)))                          \
            hwc3_loop(fc, rows, w, dst, 1, DT, OPS, HOW);                                    \
        else if (stream && !((uintptr_t)dst & 15))                                           \
            hwc3_loop(fc, rows, w, dst, 2, DT, OPS, HOW);                                    \
        else                                                                                 \
            hwc3_loop(fc, rows, w, dst, 0, DT, OPS, HOW);                                    \
    }                                                                                        \
    ARITH static void hwc_##name(const struct l3cv_fast *fc, const uint8_t *ilv, unsigned C, \
                                 uint32_t w, void *dst, int stream)                          \
    {                                                                                        \
        if (stream && !((uintptr_t)dst & (16 * elem_size(DT) - 1)))                          \
            hwc_loop(fc, ilv, C, w, dst, 1, DT, OPS, HOW); /* whole blocks aligned */        \
        else if (stream && !((uintptr_t)dst & 15))                                           \
            hwc_loop(fc, ilv, C, w, dst, 2, DT, OPS, HOW);                                   \
        else                                                                                 \
            hwc_loop(fc, ilv, C, w, dst, 0, DT, OPS, HOW);                                   \
    }

#define FORMS(name, DT, OPS)                  \
    INSTANCE(name##_rcp, DT, OPS, HOW_RCP)    \
    INSTANCE(name##_two, DT, OPS, HOW_TWO)    \
    INSTANCE(name##_fma, DT, OPS, HOW_FMA)    \
    INSTANCE(name##_div, DT, OPS, HOW_DIV)

INSTANCE(u16, L3GPU_U16, 0, HOW_DIV) /* v * m: no division */
FORMS(f32, L3GPU_F32, 0)
FORMS(f32n, L3GPU_F32, 1)
FORMS(f32s, L3GPU_F32, 2)
FORMS(f16, L3GPU_F16, 0)
FORMS(f16n, L3GPU_F16, 1)
FORMS(f16s, L3GPU_F16, 2)

/* [kind][how], kind = 3 * (float16) + the class of operations (value8) */
#define ROW4(name) {row_##name##_rcp, row_##name##_two, row_##name##_fma, row_##name##_div}
#define HWC4(name) {hwc_##name##_rcp, hwc_##name##_two, hwc_##name##_fma, hwc_##name##_div}
static row_fn *const row_fns[6][4] = {ROW4(f32), ROW4(f32n), ROW4(f32s),
                                      ROW4(f16), ROW4(f16n), ROW4(f16s)};
static hwc_fn *const hwc_fns[6][4] = {HWC4(f32), HWC4(f32n), HWC4(f32s),
                                      HWC4(f16), HWC4(f16n), HWC4(f16s)};
#define HWC34(name) {hwc3_##name##_rcp, hwc3_##name##_two, hwc3_##name##_fma, hwc3_##name##_div}
static hwc3_fn *const hwc3_fns[6][4] = {HWC34(f32), HWC34(f32n), HWC34(f32s),
                                        HWC34(f16), HWC34(f16n), HWC34(f16s)};

static unsigned kind_of(const struct l3cv_fast *fc)
{
    const unsigned ops = fc->ar_ops;
    return (fc->im->dtype == L3GPU_F32 ? 0 : 3) + (ops & OP_MUL ? 2 : ops ? 1 : 0);
}

void l3cv_row_arith(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                    void *dst, int stream)
{
    if (fc->im->dtype == L3GPU_U16)
        row_u16(fc, c, u, w, dst, stream);
    else
        row_fns[kind_of(fc)][fc->ar_how](fc, c, u, w, dst, stream);
}

void l3cv_hwc_arith(const struct l3cv_fast *fc, const uint8_t *ilv, unsigned C, uint32_t w,
                    void *dst, int stream)
{
    if (fc->im->dtype == L3GPU_U16)
        hwc_u16(fc, ilv, C, w, dst, stream);
    else
        hwc_fns[kind_of(fc)][fc->ar_how](fc, ilv, C, w, dst, stream);
}

void l3cv_hwc3_arith(const struct l3cv_fast *fc, const uint8_t *const rows[3], uint32_t w,
                     void *dst, int stream)
{
    if (fc->im->dtype == L3GPU_U16)
        hwc3_u16(fc, rows, w, dst, stream);
    else
        hwc3_fns[kind_of(fc)][fc->ar_how](fc, rows, w, dst, stream);
}

/* Channel c's table as bytes (uint16 / float16 bits / float32). */
static const void *table_of(const struct l3cv_fast *fc, unsigned c)
{
    return fc->im->dtype == L3GPU_F32 ? (const void *)fc->t.f32[c] : (const void *)fc->t.u16[c];
}

/* Whether the computed outputs (fc->ar_how's form) equal the tables for
 * every sample value of every channel, as rows and interleaved (and, for
 * three channels, interleaved in registers). */
static int arith_exact(struct l3cv_fast *fc)
{
    const unsigned C = fc->im->out_channels;
    const size_t es = elem_size(fc->im->dtype);
    uint8_t ramp[256], ilv[256 * 4];
    _Alignas(64) uint8_t got[256 * 4 * 4];
    for (unsigned v = 0; v < 256; v++) {
        ramp[v] = (uint8_t)v;
        for (unsigned c = 0; c < C; c++)
            ilv[v * C + c] = (uint8_t)v;
    }
    for (unsigned c = 0; c < C; c++) {
        l3cv_row_arith(fc, c, ramp, 256, got, 0);
        if (memcmp(got, table_of(fc, c), 256 * es) != 0)
            return 0;
    }
    l3cv_hwc_arith(fc, ilv, C, 256, got, 0);
    for (unsigned v = 0; v < 256; v++)
        for (unsigned c = 0; c < C; c++)
            if (memcmp(got + (v * C + c) * es, (const uint8_t *)table_of(fc, c) + v * es, es))
                return 0;
    if (C == 3) { /* from three rows, each a different rotation of the ramp */
        uint8_t rot[3][256];
        for (unsigned c = 0; c < 3; c++)
            for (unsigned x = 0; x < 256; x++)
                rot[c][x] = (uint8_t)(x + 85 * c);
        const uint8_t *const rows[3] = {rot[0], rot[1], rot[2]};
        l3cv_hwc3_arith(fc, rows, 256, got, 0);
        for (unsigned x = 0; x < 256; x++)
            for (unsigned c = 0; c < 3; c++)
                if (memcmp(got + (x * 3 + c) * es,
                           (const uint8_t *)table_of(fc, c) + rot[c][x] * es, es))
                    return 0;
    }
    return 1;
}

/* F16C (CPUID leaf 1, ECX bit 29): clang's __builtin_cpu_supports does not
 * know it. */
static int has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* 1 / d as a rounded float *r and the float nearest the remainder, *lo */
static void recip(float d, float *r, float *lo)
{
    *r = 1.0f / d;
    *lo = (float)(1.0 / (double)d - (double)*r);
}

void l3cv_arith_prepare(struct l3cv_fast *fc)
{
    const struct l3cv_image *im = fc->im;
    const unsigned C = im->out_channels, dt = im->dtype;
    fc->arith = 0;
    if (fc->simd < 1 || !fc->tabled || dt == L3GPU_U8 || C < 1 || C > 4 ||
        !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
        (dt == L3GPU_F16 && !has_f16c()))
        return;
    unsigned ops = 0;
    for (unsigned c = 0; c < C; c++) {
        /* l3cv_float's operations */
        const int mul = im->normalize && im->scale[c] != 1.0f;
        const int sub = im->normalize && im->mean[c] != 0.0f;
        const int div = im->normalize && im->std[c] != 1.0f;
        float *a = fc->ar_row[c];
        a[P_D] = (float)im->srcmax;
        a[P_M] = mul ? im->scale[c] : 1.0f;
        a[P_S] = sub ? im->mean[c] : 0.0f;
        a[P_Q] = div ? im->std[c] : 1.0f;
        recip(a[P_D], &a[P_RD], &a[P_RDLO]);
        recip(a[P_Q], &a[P_RQ], &a[P_RQLO]);
        ops |= (mul ? OP_MUL : 0) | (sub ? OP_SUB : 0) | (div ? OP_DIV : 0);
        fc->ar_m16[c] = fc->t.u16[c][1]; /* uint16: entry v must be v * entry 1 */
    }
    fc->ar_ops = (uint8_t)ops;
    for (unsigned j = 0; j < 3; j++)
        for (unsigned i = 0; i < 16; i++) {
            unsigned c = (16 * j + i) % C;
            for (unsigned k = 0; k < P_N; k++)
                fc->ar_hwc[j][k][i] = fc->ar_row[c][k];
            fc->ar_hwc16[j][i] = fc->ar_m16[c];
        }
    /* the cheapest form of the divisions that gives the tables' bytes */
    static const uint8_t forms[4] = {HOW_RCP, HOW_TWO, HOW_FMA, HOW_DIV};
    for (unsigned f = 0; f < 4; f++) {
        fc->ar_how = forms[f];
        if (arith_exact(fc)) {
            fc->arith = 1;
            return;
        }
    }
}

#else /* no x86 SIMD build: the tables serve */

void l3cv_arith_prepare(struct l3cv_fast *fc)
{
    fc->arith = 0;
}

void l3cv_row_arith(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                    void *dst, int stream)
{
    (void)fc, (void)c, (void)u, (void)w, (void)dst, (void)stream; /* never called: arith 0 */
}

void l3cv_hwc_arith(const struct l3cv_fast *fc, const uint8_t *ilv, unsigned C, uint32_t w,
                    void *dst, int stream)
{
    (void)fc, (void)ilv, (void)C, (void)w, (void)dst, (void)stream; /* never called */
}

void l3cv_hwc3_arith(const struct l3cv_fast *fc, const uint8_t *const rows[3], uint32_t w,
                     void *dst, int stream)
{
    (void)fc, (void)rows, (void)w, (void)dst, (void)stream; /* never called */
}

#endif
