/* dec_simd.c — the SIMD lane decoder: up to 32 predicted plane streams (MED,
 * GRAD or LEFT2, groups of 16 or 8, depth <= 8) of equal-size tiles decoded in
 * lock-step, 8 streams per AVX2 vector, up to 4 vectors interleaved so that
 * the bit-position chains of different vectors overlap.
 *
 * Every stream of one vector is at the same (x, y) at every step, so the
 * group starts line up; per lane there is a bit position, the previous group
 * symbol and its Rice parameter. A step gathers 32 bits at bitpos / 8 for each
 * lane and shifts them by bitpos % 8: 25 valid bits, enough for one code of a
 * depth <= 8 plane (at most 16 + 8 bits) or one group symbol (at most 8). In
 * the AVX2 build a step of two samples loads 64 bits instead (57 valid, two
 * codes): the second code's window is the first's shifted by its length. The
 * Rice prefix is the trailing-zero count, read from the exponent of the
 * isolated lowest set bit converted to float. MED and GRAD share one formula:
 * MED(a, b, c) = clamp(a + b - c, min(a, b), max(a, b)), and a GRAD lane
 * clamps to [INT_MIN, INT_MAX] instead; a LEFT2 lane takes the sample two to
 * its left in their place (a blend; at x = 0 and 1 the first sample of the row
 * above, as the vector's left neighbours start from it). Decoded rows are kept lane-major
 * ([x][vector][lane], 32-bit), so the row above is one vector load; after each
 * row, 8 x 8 blocks are transposed into the lanes' byte planes.
 *
 * The decoder is optimistic: a lane with any anomaly (a symbol out of range, a
 * value that should have been escaped, a stream read past its end or not used
 * to its last byte) is reported and redone by the reference decoder of
 * l3_tile.h, which gives the status. A lane that reports no anomaly consumed
 * only bits inside its stream, and every bit it looked at it consumed, so it
 * decoded exactly what the reference decoder decodes. Where a lane may read
 * past its stream, and why that stays inside the buffer: struct vec.
 */
#include <stdint.h>
#include <string.h>

#include "l3_internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(L3_NO_SIMD)
#define HAVE_AVX2_KERNEL 1
#include <immintrin.h>
#endif

#define ROWS 3 /* lane-major row buffers: zero row, two alternating rows */
#define MAX_VEC (L3_SIMD_MAX_LANES / 8)

/* Whether the AVX-512VL build runs (avx512: the caller allows it). */
static int l3_simd_wide(int avx512)
{
#ifdef HAVE_AVX2_KERNEL
    return avx512 && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
#else
    (void)avx512;
    return 0;
#endif
}

uint32_t l3_simd_tiles_per_batch(uint32_t planes, int avx512)
{
    /* planes * tiles <= L3_SIMD_BATCH_LANES: up to 3 calls of 3 or 4
     * vectors, so that a batch fills its vectors also when many of its
     * planes are not predicted ones (CONST alpha, LZ planes) */
    switch (planes) {
    case 1: return 48;
    case 2: return 32;
    case 3: return l3_simd_wide(avx512) ? 24 : 32; /* AVX2: 4 vectors a call, see run() */
    default: return 24;
    }
}

size_t l3_simd_scratch_size(uint32_t tile_width)
{
    /* ROWS rows of tile_width x MAX_VEC vectors of 32 bytes, a dummy output row */
    size_t s = (size_t)ROWS * tile_width * MAX_VEC * 32 + tile_width + 64;
    return (s + 63) & ~(size_t)63;
}

int l3_simd_lane_ok(uint32_t mode, const uint8_t *stream, uint32_t len, const uint8_t *data,
                    size_t size)
{
    uint32_t m = mode & ~L3_PLANE_SHORT;
    if (m != L3_PLANE_MED && m != L3_PLANE_GRAD && m != L3_PLANE_LEFT2)
        return 0;
    size_t off = (size_t)(stream - data);
    /* a lane reads up to L3_SIMD_SLACK bytes past its stream (struct vec) */
    return off <= size && size - off >= (size_t)len + L3_SIMD_SLACK;
}

#ifdef HAVE_AVX2_KERNEL

#define AVX2 __attribute__((target("avx2")))
#define AVX2_INLINE static inline __attribute__((target("avx2"), always_inline))

int l3_simd_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

/* Per-vector state (8 lanes). Bit positions count from the call's base (the
 * lowest stream start of its lanes), so one add less per sample than a
 * position inside the stream; no clamp per sample either: a lane may read
 * past its stream's end (a padding lane: past the base stream's) for the rest
 * of a group of 16 samples (at most 16 codes of 24 bits, k being at most depth
 * also on a flagged lane, and two symbols of 8: 50 bytes, plus 8 for a read),
 * l3_simd_lane_ok() admits only streams with L3_SIMD_SLACK bytes behind them
 * inside the buffer, and bound() stops such a lane at its end and flags it
 * at every group of 16. */
struct vec {
    __m256i bp;     /* bits from the base: stream offset * 8 + bits consumed */
    __m256i endbit; /* (stream offset + length) * 8 */
    __m256i sym;    /* previous group symbol */
    __m256i k;      /* Rice parameter of the current group (0 when sym = 0) */
    __m256i kp1;    /* k + 1 - 127, or -127 when sym = 0 (a code's bits after its prefix) */
    __m256i kmask;  /* (1 << k) - 1 */
    __m256i qor;    /* 1 << L3_ESCAPE, or 1 when sym = 0 (no code: prefix 0, length 0) */
    __m256i bad;    /* all ones where an anomaly was seen */
    __m256i badv;   /* OR of every decoded value (>= 2^depth: anomaly) */
    __m256i lo, hi; /* clamp selectors: MED lanes (INT_MAX, INT_MIN), GRAD lanes the reverse */
    __m256i a;      /* left neighbour */
    __m256i a2;     /* the sample two to the left (LEFT2 lanes) */
    __m256i l2;     /* all ones on LEFT2 lanes */
    __m256i g8;     /* all ones on lanes with groups of 8 */
    int has_med, has_l2, has_g8;
    int mixed;      /* MED lanes next to others: the clamp takes lo, hi */
};

/* The constants of the sample loop, hidden from the compiler once made
 * (kon_make): it keeps them in registers or in memory operands instead of
 * building each again from an immediate at every use (3 instructions each,
 * 15 per sample, with AVX2's 16 registers). */
struct kon {
    __m256i one, seven, bias, esc; /* 1, 7, 127, L3_ESCAPE */
    __m256i dmask, esclen;         /* 2^depth - 1, L3_ESCAPE + depth */
    __m256i n32;                   /* 32 */
};

AVX2_INLINE void kon_make(struct kon *K, unsigned depth)
{
    __m256i one = _mm256_set1_epi32(1), seven = _mm256_set1_epi32(7);
    __m256i bias = _mm256_set1_epi32(127), esc = _mm256_set1_epi32(L3_ESCAPE);
    __m256i dmask = _mm256_set1_epi32((1 << depth) - 1);
    __m256i esclen = _mm256_set1_epi32((int)(L3_ESCAPE + depth));
    __m256i n32 = _mm256_set1_epi32(32);
    __asm__("" : "+x"(one), "+x"(seven), "+x"(bias), "+x"(esc), "+x"(dmask), "+x"(esclen),
            "+x"(n32));
    K->n32 = n32;
    K->one = one;
    K->seven = seven;
    K->bias = bias;
    K->esc = esc;
    K->dmask = dmask;
    K->esclen = esclen;
}

/* Each lane's `bytes` (4 or 8, a constant) at base + its bit position / 8, in
 * x (lane l at x + l * bytes). */
AVX2_INLINE void lane_loads(const uint8_t *base, __m256i bp, void *x, const size_t bytes)
{
    __m256i o = _mm256_srli_epi32(bp, 3);
    __m128i ol = _mm256_castsi256_si128(o), oh = _mm256_extracti128_si256(o, 1);
    const uint64_t pair[4] = {(uint64_t)_mm_cvtsi128_si64(ol), (uint64_t)_mm_extract_epi64(ol, 1),
                              (uint64_t)_mm_cvtsi128_si64(oh), (uint64_t)_mm_extract_epi64(oh, 1)};
    for (unsigned l = 0; l < 8; l++)
        memcpy((uint8_t *)x + l * bytes, base + (uint32_t)(pair[l / 2] >> (l % 2 * 32)), bytes);
}

/* 25 valid bits at each lane's bit position. loads (a constant): eight
 * scalar loads instead of a gather. AMD's AVX2 gathers are microcoded (Zen 3:
 * one each 12-13 cycles, against 9 for eight loads and the inserts, in a
 * loop of three independent chains); the AVX-512 build keeps the gather. */
AVX2_INLINE __m256i window(const uint8_t *base, __m256i bp, const struct kon *K, const int loads)
{
    __m256i g;
    if (loads) {
        uint32_t x[8];
        lane_loads(base, bp, x, 4);
        g = _mm256_setr_epi32((int)x[0], (int)x[1], (int)x[2], (int)x[3], (int)x[4], (int)x[5],
                              (int)x[6], (int)x[7]);
    } else {
        g = _mm256_i32gather_epi32((const int *)(const void *)base, _mm256_srli_epi32(bp, 3), 1);
    }
    return _mm256_srlv_epi32(g, _mm256_and_si256(bp, K->seven));
}

/* 57 or more valid bits at each lane's bit position, for two codes (at most
 * 48 bits): the low 32 in *lo, the next 32 in *hi. Eight 64-bit loads; the
 * vectors are filled in the order (0 1 4 5) (2 3 6 7), so that one shuffle
 * of 32-bit halves per vector puts the lanes back in order. */
AVX2_INLINE void window2(const uint8_t *base, __m256i bp, const struct kon *K, __m256i *lo,
                         __m256i *hi)
{
    long long x[8];
    lane_loads(base, bp, x, 8);
    __m256 a = _mm256_castsi256_ps(_mm256_setr_epi64x(x[0], x[1], x[4], x[5]));
    __m256 b = _mm256_castsi256_ps(_mm256_setr_epi64x(x[2], x[3], x[6], x[7]));
    __m256i l = _mm256_castps_si256(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    __m256i h = _mm256_castps_si256(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    __m256i sh = _mm256_and_si256(bp, K->seven);
    *lo = _mm256_or_si256(_mm256_srlv_epi32(l, sh),
                          _mm256_sllv_epi32(h, _mm256_sub_epi32(K->n32, sh)));
    *hi = _mm256_srlv_epi32(h, sh);
}

/* At a group of 16: a lane past its stream's end is flagged and held at it. */
AVX2_INLINE void bound(struct vec *v)
{
    __m256i in = _mm256_cmpeq_epi32(_mm256_max_epu32(v->bp, v->endbit), v->endbit);
    v->bad = _mm256_or_si256(v->bad, _mm256_andnot_si256(in, _mm256_set1_epi32(-1)));
    v->bp = _mm256_min_epu32(v->bp, v->endbit);
}

/* Every AHEAD_EVERY samples, each lane asks for the bytes AHEAD_BYTES past its
 * position: a call reads 32 streams at once, each a few bytes per sample
 * forward, which the hardware prefetchers do not follow, and a window waiting
 * for its line stalls its vector's chain (AVX2 build on Zen 3, photos, the
 * file in L3: 1.14-1.22x the decode speed; 64-192 bytes ahead within 2.5 %). */
#define AHEAD_EVERY 32
#define AHEAD_BYTES 128

AVX2_INLINE void ahead(const uint8_t *base, const struct vec *v)
{
    uint32_t at[8];
    _mm256_storeu_si256((__m256i *)(void *)at, _mm256_srli_epi32(v->bp, 3));
    for (unsigned l = 0; l < 8; l++) /* a hint: no fault, also past the buffer */
        __builtin_prefetch((const void *)((uintptr_t)base + at[l] + AHEAD_BYTES), 0, 3);
}

/* Trailing zeros of x (x != 0, x < 2^24), from the float exponent of x & -x. */
AVX2_INLINE __m256i ctz_biased(__m256i x)
{
    __m256i lb = _mm256_and_si256(x, _mm256_sub_epi32(_mm256_setzero_si256(), x));
    return _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(lb)), 23); /* + 127 */
}

AVX2_INLINE __m256i ctz(__m256i x, const struct kon *K)
{
    return _mm256_sub_epi32(ctz_biased(x), K->bias);
}

/* Group symbol on the lanes of `sm` (FORMAT.md 6.2). */
AVX2_INLINE void symbol(const uint8_t *data, struct vec *v, __m256i sm, __m256i maxsym,
                        const struct kon *K, const int loads)
{
    const __m256i one = K->one;
    __m256i w = window(data, v->bp, K, loads);
    __m256i t = ctz(_mm256_or_si256(w, _mm256_set1_epi32(8)), K);
    __m256i t1 = _mm256_cmpeq_epi32(t, one);
    __m256i t2 = _mm256_cmpeq_epi32(t, _mm256_set1_epi32(2));
    __m256i t3 = _mm256_cmpeq_epi32(t, _mm256_set1_epi32(3));
    __m256i srel = _mm256_add_epi32(_mm256_sub_epi32(v->sym, t1), t2);
    __m256i sabs = _mm256_and_si256(_mm256_srli_epi32(w, 3), _mm256_set1_epi32(31));
    __m256i s = _mm256_blendv_epi8(srel, sabs, t3);
    __m256i ln = _mm256_blendv_epi8(_mm256_add_epi32(t, one), _mm256_set1_epi32(8), t3);
    s = _mm256_blendv_epi8(v->sym, s, sm);
    v->bp = _mm256_add_epi32(v->bp, _mm256_and_si256(ln, sm));
    /* s > maxsym, unsigned (prev - 1 below 0 wraps to a huge value) */
    __m256i inrange = _mm256_cmpeq_epi32(_mm256_min_epu32(s, maxsym), s);
    v->bad = _mm256_or_si256(v->bad, _mm256_andnot_si256(inrange, _mm256_set1_epi32(-1)));
    v->sym = s;
    __m256i z = _mm256_cmpeq_epi32(s, _mm256_setzero_si256());
    /* k = s - 1, at most depth: a lane with a symbol out of range (flagged
     * above) or a padding lane still reads at most 24 bits a code, which
     * the slack behind every stream allows for (struct vec) */
    v->k = _mm256_min_epi32(_mm256_max_epi32(_mm256_sub_epi32(s, one), _mm256_setzero_si256()),
                            _mm256_sub_epi32(maxsym, one));
    v->kmask = _mm256_sub_epi32(_mm256_sllv_epi32(one, v->k), one);
    v->kp1 = _mm256_sub_epi32(_mm256_andnot_si256(z, _mm256_add_epi32(v->k, one)), K->bias);
    v->qor = _mm256_blendv_epi8(_mm256_set1_epi32(1 << L3_ESCAPE), one, z);
}

/* What a call's lanes predict with (kind, a constant): anything (the flags of
 * struct vec say), or GRAD alone (no clamp, no tests of the flags). */
enum { KIND_ANY, KIND_GRAD };

/* One sample of every lane: Rice code (with escape), residual, prediction;
 * b and c are the samples above and above-left. A lane whose group is all
 * zero reads a prefix of 0 (qor) with no bits after it (kp1, kmask 0). */
AVX2_INLINE __m256i code(struct vec *v, __m256i w, __m256i b, __m256i c, const struct kon *K,
                         const int kind, __m256i *len)
{
    const __m256i one = K->one, dmask = K->dmask;
    __m256i e = ctz_biased(_mm256_or_si256(w, v->qor)); /* prefix + 127 */
    __m256i q = _mm256_sub_epi32(e, K->bias);
    __m256i low = _mm256_and_si256(_mm256_srlv_epi32(w, _mm256_add_epi32(q, one)), v->kmask);
    __m256i val = _mm256_or_si256(_mm256_sllv_epi32(q, v->k), low);
    __m256i ln = _mm256_add_epi32(e, v->kp1); /* the bias cancels, one add less on the chain */
    __m256i esc = _mm256_cmpeq_epi32(q, K->esc);
    if (__builtin_expect(!_mm256_testz_si256(esc, esc), 0)) { /* rare: depth bits follow */
        val =
            _mm256_blendv_epi8(val, _mm256_and_si256(_mm256_srli_epi32(w, L3_ESCAPE), dmask), esc);
        ln = _mm256_blendv_epi8(ln, K->esclen, esc);
    }
    *len = ln;
    v->badv = _mm256_or_si256(v->badv, val);
    __m256i r =
        _mm256_xor_si256(_mm256_srli_epi32(val, 1),
                         _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_and_si256(val, one)));
    __m256i g = _mm256_sub_epi32(_mm256_add_epi32(v->a, b), c);
    if (kind == KIND_ANY && v->has_med) {
        /* MED lanes alone clamp to [min(a, b), max(a, b)] */
        __m256i lo = _mm256_min_epi32(v->a, b), hi = _mm256_max_epi32(v->a, b);
        if (v->mixed) {
            lo = _mm256_min_epi32(lo, v->lo);
            hi = _mm256_max_epi32(hi, v->hi);
        }
        g = _mm256_min_epi32(_mm256_max_epi32(g, lo), hi);
    }
    if (kind == KIND_ANY && v->has_l2) { /* LEFT2 lanes: the sample two to the left */
        g = _mm256_blendv_epi8(g, v->a2, v->l2);
        v->a2 = v->a;
    }
    v->a = _mm256_and_si256(_mm256_add_epi32(g, r), dmask);
    return v->a;
}

AVX2_INLINE __m256i sample(const uint8_t *data, struct vec *v, __m256i b, __m256i c,
                           const struct kon *K, const int kind, const int loads)
{
    __m256i ln, a = code(v, window(data, v->bp, K, loads), b, c, K, kind, &ln);
    v->bp = _mm256_add_epi32(v->bp, ln);
    return a;
}

/* Two samples along the row from one window2(): the second code's window is
 * the first's shifted by the first's length (at most 24 bits: k <= depth). */
AVX2_INLINE void sample2(const uint8_t *data, struct vec *v, __m256i b0, __m256i c0, __m256i b1,
                         const struct kon *K, const int kind, __m256i *a0, __m256i *a1)
{
    __m256i lo, hi, l0, l1;
    window2(data, v->bp, K, &lo, &hi);
    *a0 = code(v, lo, b0, c0, K, kind, &l0);
    __m256i w = _mm256_or_si256(_mm256_srlv_epi32(lo, l0),
                                _mm256_sllv_epi32(hi, _mm256_sub_epi32(K->n32, l0)));
    *a1 = code(v, w, b1, b0, K, kind, &l1);
    v->bp = _mm256_add_epi32(v->bp, _mm256_add_epi32(l0, l1));
}

AVX2_INLINE void put8(uint8_t *p, long long v)
{
    memcpy(p, &v, 8);
}

/* Row y of every lane of vector `vi` from the lane-major row into the byte
 * planes. */
AVX2_INLINE void transpose_row(const __m256i *row, unsigned nv, unsigned vi, uint32_t w,
                               uint8_t *const out[8], const size_t ostride[8], uint32_t y)
{
    const __m256i T = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                       0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    uint8_t *o[8];
    for (unsigned l = 0; l < 8; l++)
        o[l] = out[l] + ostride[l] * y;
    uint32_t x = 0;
    for (; x + 8 <= w; x += 8) {
        const __m256i *r = row + (size_t)x * nv + vi;
        __m256i p0 = _mm256_packus_epi32(_mm256_load_si256(r), _mm256_load_si256(r + nv));
        __m256i p1 = _mm256_packus_epi32(_mm256_load_si256(r + 2 * nv),
                                         _mm256_load_si256(r + 3 * nv));
        __m256i p2 = _mm256_packus_epi32(_mm256_load_si256(r + 4 * nv),
                                         _mm256_load_si256(r + 5 * nv));
        __m256i p3 = _mm256_packus_epi32(_mm256_load_si256(r + 6 * nv),
                                         _mm256_load_si256(r + 7 * nv));
        __m256i b0 = _mm256_shuffle_epi8(_mm256_packus_epi16(p0, p1), T);
        __m256i b1 = _mm256_shuffle_epi8(_mm256_packus_epi16(p2, p3), T);
        __m256i u0 = _mm256_unpacklo_epi32(b0, b1); /* lanes 0, 1 | 4, 5 */
        __m256i u1 = _mm256_unpackhi_epi32(b0, b1); /* lanes 2, 3 | 6, 7 */
        __m128i u0l = _mm256_castsi256_si128(u0), u0h = _mm256_extracti128_si256(u0, 1);
        __m128i u1l = _mm256_castsi256_si128(u1), u1h = _mm256_extracti128_si256(u1, 1);
        put8(o[0] + x, _mm_cvtsi128_si64(u0l));
        put8(o[1] + x, _mm_extract_epi64(u0l, 1));
        put8(o[2] + x, _mm_cvtsi128_si64(u1l));
        put8(o[3] + x, _mm_extract_epi64(u1l, 1));
        put8(o[4] + x, _mm_cvtsi128_si64(u0h));
        put8(o[5] + x, _mm_extract_epi64(u0h, 1));
        put8(o[6] + x, _mm_cvtsi128_si64(u1h));
        put8(o[7] + x, _mm_extract_epi64(u1h, 1));
    }
    for (; x < w; x++) {
        uint32_t s[8];
        memcpy(s, row + (size_t)x * nv + vi, sizeof s);
        for (unsigned l = 0; l < 8; l++)
            o[l][x] = (uint8_t)s[l];
    }
}

/* The lock-step decode of nv vectors (nv is a constant in each instance). */
/* kind, loads: constants (KIND_*; window()). The lanes are sorted by
 * predictor, so most calls hold only GRAD lanes. */
AVX2_INLINE void run(struct vec *vs, const unsigned nv, const int kind, const int loads,
                     const uint8_t *data, uint32_t w, uint32_t h, unsigned depth, __m256i *rows,
                     uint8_t *const out[][8], const size_t ostride[][8])
{
    /* a local copy, so that the compiler keeps the state in registers */
    struct vec v[MAX_VEC];
    for (unsigned i = 0; i < nv; i++)
        v[i] = vs[i];
    struct kon K;
    kon_make(&K, depth);
    const __m256i maxsym = _mm256_set1_epi32(depth + 1);
    const __m256i all = _mm256_set1_epi32(-1);
    const size_t rs = (size_t)w * nv; /* vectors per row */
    __m256i *zero = rows;
    for (size_t i = 0; i < rs; i++)
        zero[i] = _mm256_setzero_si256();
    for (uint32_t y = 0; y < h; y++) {
        const __m256i *up = y ? rows + rs * (1 + ((y - 1) & 1)) : zero;
        __m256i *cur = rows + rs * (1 + (y & 1));
        for (unsigned i = 0; i < nv; i++) /* LEFT2: x = 0, 1 predict from up[0] */
            v[i].a = v[i].a2 = up[i];
        for (uint32_t x0 = 0; x0 < w; x0 += L3_GROUP_SHORT) {
            const int full = (x0 % L3_GROUP) == 0;
            for (unsigned i = 0; i < nv; i++) {
                if (full) {
                    bound(&v[i]);
                    if (loads && x0 % AHEAD_EVERY == 0)
                        ahead(data, &v[i]);
                }
                if (full || v[i].has_g8)
                    symbol(data, &v[i], full ? all : v[i].g8, maxsym, &K, loads);
            }
            const uint32_t n = w - x0 < L3_GROUP_SHORT ? w - x0 : L3_GROUP_SHORT;
            const __m256i *u = up + (size_t)x0 * nv;
            const __m256i *ul = x0 ? u - nv : u; /* above-left of the first (x = 0: above) */
            __m256i *o = cur + (size_t)x0 * nv;
            if (n == L3_GROUP_SHORT && loads) {
#if defined(__clang__)
#pragma clang loop unroll(full)
#else
#pragma GCC unroll 4
#endif
                for (uint32_t j = 0; j < L3_GROUP_SHORT; j += 2)
                    for (unsigned i = 0; i < nv; i++) {
                        __m256i b0 = _mm256_load_si256(u + j * nv + i), a0, a1;
                        sample2(data, &v[i], b0,
                                _mm256_load_si256((j ? u + (j - 1) * nv : ul) + i),
                                _mm256_load_si256(u + (j + 1) * nv + i), &K, kind, &a0, &a1);
                        _mm256_store_si256(o + j * nv + i, a0);
                        _mm256_store_si256(o + (j + 1) * nv + i, a1);
                    }
            } else if (n == L3_GROUP_SHORT) {
#if defined(__clang__)
#pragma clang loop unroll(full)
#else
#pragma GCC unroll 8
#endif
                for (uint32_t j = 0; j < L3_GROUP_SHORT; j++)
                    for (unsigned i = 0; i < nv; i++)
                        _mm256_store_si256(
                            o + j * nv + i,
                            sample(data, &v[i], _mm256_load_si256(u + j * nv + i),
                                   _mm256_load_si256((j ? u + (j - 1) * nv : ul) + i), &K, kind,
                                   loads));
            } else {
                for (uint32_t j = 0; j < n; j++)
                    for (unsigned i = 0; i < nv; i++)
                        _mm256_store_si256(
                            o + j * nv + i,
                            sample(data, &v[i], _mm256_load_si256(u + j * nv + i),
                                   _mm256_load_si256((j ? u + (j - 1) * nv : ul) + i), &K, kind,
                                   loads));
            }
        }
        for (unsigned i = 0; i < nv; i++)
            transpose_row(cur, nv, i, w, out[i], ostride[i], y);
    }
    for (unsigned i = 0; i < nv; i++)
        vs[i] = v[i];
}

/* One instance per vector count; compiled for AVX2 and again for AVX-512VL,
 * whose 32 vector registers hold the state of 3-4 vectors without spills
 * (same instructions otherwise, same results). */
#define AVX512 __attribute__((target("avx2,avx512f,avx512vl,avx512bw")))
#define RUN_INSTANCE(name, TGT, NV, KIND, LOADS)                                           \
    TGT static void name(struct vec *v, const uint8_t *data, uint32_t w, uint32_t h,       \
                         unsigned depth, __m256i *rows, uint8_t *const out[][8],           \
                         const size_t ostride[][8])                                        \
    {                                                                                      \
        run(v, NV, KIND, LOADS, data, w, h, depth, rows, out, ostride);                    \
    }
RUN_INSTANCE(any1_avx2, AVX2, 1, KIND_ANY, 1)
RUN_INSTANCE(any2_avx2, AVX2, 2, KIND_ANY, 1)
RUN_INSTANCE(any3_avx2, AVX2, 3, KIND_ANY, 1)
RUN_INSTANCE(any4_avx2, AVX2, 4, KIND_ANY, 1)
RUN_INSTANCE(grad1_avx2, AVX2, 1, KIND_GRAD, 1)
RUN_INSTANCE(grad2_avx2, AVX2, 2, KIND_GRAD, 1)
RUN_INSTANCE(grad3_avx2, AVX2, 3, KIND_GRAD, 1)
RUN_INSTANCE(grad4_avx2, AVX2, 4, KIND_GRAD, 1)
RUN_INSTANCE(any1_avx512, AVX512, 1, KIND_ANY, 0)
RUN_INSTANCE(any2_avx512, AVX512, 2, KIND_ANY, 0)
RUN_INSTANCE(any3_avx512, AVX512, 3, KIND_ANY, 0)
RUN_INSTANCE(any4_avx512, AVX512, 4, KIND_ANY, 0)
RUN_INSTANCE(grad1_avx512, AVX512, 1, KIND_GRAD, 0)
RUN_INSTANCE(grad2_avx512, AVX512, 2, KIND_GRAD, 0)
RUN_INSTANCE(grad3_avx512, AVX512, 3, KIND_GRAD, 0)
RUN_INSTANCE(grad4_avx512, AVX512, 4, KIND_GRAD, 0)

typedef void (*run_fn)(struct vec *, const uint8_t *, uint32_t, uint32_t, unsigned, __m256i *,
                       uint8_t *const[][8], const size_t[][8]);

AVX2 void l3_simd_decode_planes(const struct l3_simd_lane *lanes, unsigned n, uint32_t w,
                                uint32_t h, unsigned depth, void *scratch, int avx512,
                                uint32_t ok[L3_SIMD_MAX_LANES / 32])
{
    for (unsigned i = 0; i < L3_SIMD_MAX_LANES / 32; i++)
        ok[i] = 0;
    if (n == 0 || n > L3_SIMD_MAX_LANES || depth < 1 || depth > 8)
        return;
    const unsigned nv = (n + 7) / 8;
    /* bit positions count from the lowest stream start (the lanes of a call
     * come from a few neighbouring tiles); a call whose streams lie too far
     * apart for 32-bit bit positions is left to the reference decoder */
    const uint8_t *base = lanes[0].stream;
    for (unsigned l = 1; l < n; l++)
        if (lanes[l].stream < base)
            base = lanes[l].stream;
    for (unsigned l = 0; l < n; l++)
        if ((uint64_t)(lanes[l].stream - base) + lanes[l].len + L3_SIMD_SLACK > L3_SIMD_SPAN)
            return;
    __m256i *rows = scratch;
    uint8_t *dummy = (uint8_t *)scratch + (size_t)ROWS * w * MAX_VEC * 32;
    struct vec v[MAX_VEC];
    uint8_t *out[MAX_VEC][8];
    size_t ostride[MAX_VEC][8];
    for (unsigned i = 0; i < nv; i++) {
        uint32_t bp[8], endbit[8];
        int32_t lo[8], hi[8], g8[8], l2[8];
        int has_med = 0, has_l2 = 0, has_g8 = 0, all_med = 1;
        for (unsigned l = 0; l < 8; l++) {
            unsigned li = i * 8 + l;
            if (li < n) {
                const struct l3_simd_lane *ln = &lanes[li];
                bp[l] = (uint32_t)(ln->stream - base) * 8;
                endbit[l] = bp[l] + ln->len * 8;
                int med = L3_PLANE_KIND(ln->mode) == L3_PLANE_MED;
                lo[l] = med ? INT32_MAX : INT32_MIN;
                hi[l] = med ? INT32_MIN : INT32_MAX;
                g8[l] = (ln->mode & L3_PLANE_SHORT) ? -1 : 0;
                l2[l] = L3_PLANE_KIND(ln->mode) == L3_PLANE_LEFT2 ? -1 : 0;
                has_med |= med;
                all_med &= med;
                has_l2 |= l2[l] != 0;
                has_g8 |= g8[l] != 0;
                out[i][l] = ln->out;
                ostride[i][l] = w;
            } else { /* padding lane: decodes the bytes at base, output dropped */
                bp[l] = endbit[l] = 0;
                lo[l] = INT32_MIN;
                hi[l] = INT32_MAX;
                g8[l] = l2[l] = 0;
                out[i][l] = dummy;
                ostride[i][l] = 0;
            }
        }
        memset(&v[i], 0, sizeof v[i]);
        v[i].bp = _mm256_loadu_si256((const __m256i *)(const void *)bp);
        v[i].endbit = _mm256_loadu_si256((const __m256i *)(const void *)endbit);
        v[i].lo = _mm256_loadu_si256((const __m256i *)(const void *)lo);
        v[i].hi = _mm256_loadu_si256((const __m256i *)(const void *)hi);
        v[i].g8 = _mm256_loadu_si256((const __m256i *)(const void *)g8);
        v[i].l2 = _mm256_loadu_si256((const __m256i *)(const void *)l2);
        /* sym, k, kp1, kmask, qor: symbol() sets them at x = 0 */
        v[i].bad = v[i].badv = _mm256_setzero_si256();
        v[i].has_med = has_med;
        v[i].has_l2 = has_l2;
        v[i].has_g8 = has_g8;
        v[i].mixed = has_med && !all_med; /* padding lanes' values are dropped */
    }
    static const run_fn fns[2][2][MAX_VEC] = {
        {{any1_avx2, any2_avx2, any3_avx2, any4_avx2},
         {grad1_avx2, grad2_avx2, grad3_avx2, grad4_avx2}},
        {{any1_avx512, any2_avx512, any3_avx512, any4_avx512},
         {grad1_avx512, grad2_avx512, grad3_avx512, grad4_avx512}}};
    int grad = 1;
    for (unsigned i = 0; i < nv; i++)
        grad &= !v[i].has_med && !v[i].has_l2;
    run_fn fn = fns[l3_simd_wide(avx512)][grad][nv - 1];
    fn(v, base, w, h, depth, rows, out, ostride);
    for (unsigned i = 0; i < nv; i++) {
        /* ok: no anomaly, no value >= 2^depth, ceil(bits / 8) == length,
         * that is 0 <= endbit - bp < 8 */
        __m256i left = _mm256_sub_epi32(v[i].endbit, v[i].bp);
        __m256i good = _mm256_cmpeq_epi32(_mm256_min_epu32(left, _mm256_set1_epi32(7)), left);
        good = _mm256_andnot_si256(v[i].bad, good);
        __m256i over = _mm256_srli_epi32(v[i].badv, depth);
        good = _mm256_and_si256(good, _mm256_cmpeq_epi32(over, _mm256_setzero_si256()));
        unsigned mk = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(good));
        for (unsigned l = 0; l < 8; l++) {
            unsigned li = i * 8 + l;
            if (li < n && (mk >> l & 1))
                ok[li / 32] |= 1u << (li % 32);
        }
    }
}

#else /* no SIMD kernel in this build */

int l3_simd_available(void) { return 0; }

void l3_simd_decode_planes(const struct l3_simd_lane *lanes, unsigned n, uint32_t w, uint32_t h,
                           unsigned depth, void *scratch, int avx512,
                           uint32_t ok[L3_SIMD_MAX_LANES / 32])
{
    (void)lanes, (void)n, (void)w, (void)h, (void)depth, (void)scratch, (void)avx512;
    for (unsigned i = 0; i < L3_SIMD_MAX_LANES / 32; i++)
        ok[i] = 0;
}

#endif
