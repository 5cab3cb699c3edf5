/* dec_lz.c — the fast decoder of LZ planes with the LEFT predictor (mode
 * L3_PLANE_LEFT | L3_PLANE_LZ, groups of 16 or 8) at depth <= 8, straight
 * into bytes: the planes of rendered art and flat wallpapers.
 *
 * Under LEFT a copy has a closed form. Inside one row of the destination,
 * away from column 0 of both the destination and the source, every sample
 * is its left neighbour plus the source's horizontal residual, so
 *     dst[pos + i] - dst[j + i] = dst[pos] - dst[j]        (mod 2^depth)
 * for the whole stretch: the copy is a byte copy plus a constant D. A copy
 * is cut at the columns 0 of its destination and its source; the first
 * sample of each piece is computed as the reference does (its prediction and
 * the source's residual), the rest as src + D, 16 bytes at a time (SSE2) when
 * the distance is 16 or more. A shorter distance d repeats a pattern that
 * grows by D per period, so dst[i] = dst[i - t*d] + t*D with t*d >= 16:
 * the first t*d - d samples are written one by one, the rest 16 at a time
 * (a piece of up to 64 samples as 64 bytes, so that its varying length is
 * no branch to predict). Stores may run past the end of a piece into samples
 * that are decoded later (never past the plane). Literal runs are Rice-decoded into
 * the plane first (two codes per refill), then turned into samples 16 at a
 * time inside a row: unzigzag and a prefix sum on the sample before.
 *
 * As the lane decoder does, this one is optimistic: any anomaly (a check of
 * docs/FORMAT.md 6.6 failing, bits read past the stream's end) makes it
 * return 0, and the caller decodes the plane again with the reference
 * routine of l3_tile.h, which gives the status. Every bit it looks at it
 * consumes, so when it returns 1 it consumed only bits of its stream, the
 * same the reference reads, and wrote the reference's samples. Its 8-byte
 * loads read up to 8 bytes past the stream's end: the caller passes only
 * streams with that much of the file behind them (l3_lz_fast_ok).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "l3_internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(L3_NO_SIMD)
#define HAVE_SSE2_COPY 1
#include <emmintrin.h>
#endif

/* The Rice loop once more for CPUs with BMI2 (shifts by a register without
 * the CL register, tzcnt), chosen at load time (GNU ifunc, as L3_CLONES). */
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(L3_NO_CLONES)
#define BMI2_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define BMI2_CLONES
#endif

int l3_lz_fast_ok(uint32_t mode, unsigned depth, const uint8_t *stream, uint32_t len,
                  const uint8_t *data, size_t size)
{
    if ((mode & ~L3_PLANE_SHORT) != (L3_PLANE_LEFT | L3_PLANE_LZ) || depth > 8)
        return 0;
    return (size_t)(stream - data) + len + 8 <= size;
}

/* Bit reader: l3_br's refill without its end-of-buffer branch. Loads clamp
 * at the stream's end (bits past it are whatever the file holds there: a
 * stream that consumes them fails the final length check). */
struct rd {
    uint64_t bits;
    unsigned n;
    uint32_t pos, len;
    const uint8_t *p;
};

static inline void refill(struct rd *r)
{
    uint64_t v;
    memcpy(&v, r->p + (r->pos < r->len ? r->pos : r->len), 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    r->bits |= v << r->n;
    r->pos += (63 - r->n) >> 3;
    r->n |= 56;
}

static inline void skip(struct rd *r, unsigned k)
{
    r->bits >>= k;
    r->n -= k;
}

static inline uint32_t take(struct rd *r, unsigned k)
{
    uint32_t v = (uint32_t)(r->bits & ((1ull << k) - 1));
    skip(r, k);
    return v;
}

/* FORMAT.md 6.2; needs 8 bits. A result above depth + 1 is invalid. */
static inline uint32_t symbol(struct rd *r, uint32_t prev)
{
    /* without branches: the symbol changes from group to group */
    const unsigned t = l3_ctz64(r->bits | 8);
    const uint32_t lit = (uint32_t)(r->bits >> 3) & 31;
    const uint32_t near = prev + (t == 1) - (t == 2);
    const int small = t < 3;
    skip(r, small ? t + 1 : 8);
    return small ? near : lit;
}

/* FORMAT.md 6.3 with mk = 2^k - 1; needs 16 + depth bits. The window moves
 * once per code (q + 1 + k bits), off the value's own shifts. */
static inline uint32_t rice(struct rd *r, unsigned k, uint32_t mk, unsigned depth)
{
    unsigned q = l3_ctz64(r->bits | (1u << L3_ESCAPE));
    if (__builtin_expect(q < L3_ESCAPE, 1)) { /* escapes are rare */
        uint32_t v = (q << k) | ((uint32_t)(r->bits >> (q + 1)) & mk);
        skip(r, q + 1 + k);
        return v;
    }
    skip(r, L3_ESCAPE);
    return take(r, depth);
}

/* Exp-Golomb of order k (FORMAT.md 6.7); needs 2 * 17 + 1 + k bits. Sets
 * *bad on a prefix above L3_LZ_EG_MAXQ. */
static inline uint32_t eg(struct rd *r, unsigned k, uint32_t *bad)
{
    unsigned q = l3_ctz64(r->bits | (1u << (L3_LZ_EG_MAXQ + 1)));
    *bad |= q > L3_LZ_EG_MAXQ;
    q &= 31;
    skip(r, q + 1);
    return (((1u << q) - 1u) << k) + take(r, q + k);
}

/* o[i] = (s[i] + D) & mask for i < L, in order (o = s + dist, dist >= 16,
 * so every 16 source bytes are final before they are read); stores may
 * write up to 63 bytes past o + L, which must lie before lim. */
static inline void copy_add_far(uint8_t *o, const uint8_t *s, uint32_t L, uint32_t D,
                                uint32_t mask, const uint8_t *lim)
{
    uint32_t i = 0;
#ifdef HAVE_SSE2_COPY
    const __m128i d = _mm_set1_epi8((char)D), m = _mm_set1_epi8((char)mask);
    if (L <= 64 && o + 64 <= lim) {
        /* a piece of a row of a 64-wide tile, mostly: 64 bytes, with no
         * loop exit to predict (the piece lengths vary) */
        for (; i < 64; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
            v = _mm_and_si128(_mm_add_epi8(v, d), m);
            _mm_storeu_si128((__m128i *)(void *)(o + i), v);
        }
        return;
    }
    if (o + ((L + 15) & ~15u) <= lim) {
        for (; i < L; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
            v = _mm_and_si128(_mm_add_epi8(v, d), m);
            _mm_storeu_si128((__m128i *)(void *)(o + i), v);
        }
        return;
    }
#else
    (void)lim;
#endif
    for (; i < L; i++)
        o[i] = (uint8_t)((s[i] + D) & mask);
}

/* The same for any distance: a distance d < 16 becomes t*d >= 16 with
 * increment t*D after the first t*d - d samples. */
static inline void copy_add(uint8_t *o, uint32_t dist, uint32_t L, uint32_t D, uint32_t mask,
                            const uint8_t *lim)
{
    if (dist >= 16) {
        copy_add_far(o, o - dist, L, D, mask, lim);
        return;
    }
    uint32_t t = (16 + dist - 1) / dist, pro = t * dist - dist;
    if (pro > L)
        pro = L;
    /* o[i] = o[i mod dist - dist] + (i / dist + 1) * D: no chain through memory */
    const uint8_t *s = o - dist;
    uint32_t si = 0, add = D;
    for (uint32_t i = 0; i < pro; i++) {
        o[i] = (uint8_t)((s[si] + add) & mask);
        if (++si == dist) {
            si = 0;
            add += D;
        }
    }
    if (pro < L) /* (a piece shorter than that has no source at t * dist) */
        copy_add_far(o + pro, o + pro - t * dist, L - pro, (t * D) & mask, mask, lim);
}

/* A literal run's Rice-coded values (FORMAT.md 6.7: groups of gs, the
 * symbol carried in *sym) into o[0 .. run), as bytes; *bad collects every
 * value (one >= 2^depth is invalid). 0 on a symbol out of range. */
BMI2_CLONES
static int lit_values(struct rd *r, uint8_t *o, uint32_t run, uint32_t gs, unsigned depth,
                      uint32_t *sym, uint32_t *bad, const uint8_t *lim)
{
    const uint32_t maxsym = depth + 1;
    struct rd rr = *r; /* in registers: the byte stores below may alias *r */
    uint32_t s = *sym, b = 0;
    for (uint32_t i0 = 0; i0 < run; i0 += gs) {
        const uint32_t g = run - i0 < gs ? run - i0 : gs;
        uint8_t *q = o + i0;
        refill(&rr);
        s = symbol(&rr, s);
        if (s > maxsym)
            return 0;
        if (s == 0) { /* 16 bytes where the plane has them: past g is decoded later */
            static const uint8_t zero[16];
            if (q + 16 <= lim)
                memcpy(q, zero, 16);
            else
                memset(q, 0, g);
            continue;
        }
        const unsigned k = s - 1;
        const uint32_t mk = (1u << k) - 1;
        uint32_t i = 0;
        if (g == L3_GROUP) { /* a whole group: no loop exit to predict */
#pragma GCC unroll 8
            for (unsigned u = 0; u < L3_GROUP; u += 2) {
                refill(&rr);
                uint32_t v0 = rice(&rr, k, mk, depth);
                uint32_t v1 = rice(&rr, k, mk, depth);
                b |= v0 | v1;
                q[u] = (uint8_t)v0;
                q[u + 1] = (uint8_t)v1;
            }
            continue;
        }
        for (; i + 2 <= g; i += 2) { /* two codes of <= 24 bits per refill */
            refill(&rr);
            uint32_t v0 = rice(&rr, k, mk, depth);
            uint32_t v1 = rice(&rr, k, mk, depth);
            b |= v0 | v1;
            q[i] = (uint8_t)v0;
            q[i + 1] = (uint8_t)v1;
        }
        if (i < g) {
            refill(&rr);
            uint32_t v = rice(&rr, k, mk, depth);
            b |= v;
            q[i] = (uint8_t)v;
        }
    }
    *r = rr;
    *sym = s;
    *bad |= b;
    return 1;
}

#ifdef HAVE_SSE2_COPY
/* 16 samples from 16 zigzag values: the prefix sums of the residuals on the
 * sample before them (c, in every byte), modulo 2^depth. */
static inline __m128i prefix16(__m128i v, __m128i c, __m128i m)
{
    const __m128i one = _mm_set1_epi8(1), low7 = _mm_set1_epi8(0x7f);
    __m128i r = _mm_xor_si128(_mm_and_si128(_mm_srli_epi16(v, 1), low7),
                              _mm_sub_epi8(_mm_setzero_si128(), _mm_and_si128(v, one)));
    r = _mm_add_epi8(r, _mm_slli_si128(r, 1));
    r = _mm_add_epi8(r, _mm_slli_si128(r, 2));
    r = _mm_add_epi8(r, _mm_slli_si128(r, 4));
    r = _mm_add_epi8(r, _mm_slli_si128(r, 8));
    return _mm_and_si128(_mm_add_epi8(r, c), m);
}

/* Byte 15 of x in every byte. */
static inline __m128i last_byte(__m128i x)
{
    __m128i t = _mm_shufflehi_epi16(_mm_unpackhi_epi8(x, x), 0xff);
    return _mm_unpackhi_epi64(t, t);
}
#endif

/* The run's values in o[0 .. run) (positions pos .. pos + run of the plane)
 * into samples: LEFT prediction plus the zigzag residual, 16 at a time
 * (prefix sums) inside a row. *x: column of pos; *last: the sample at
 * pos - 1. Stores may run past the run's end up to lim (never into its own
 * values of the next row). */
static void lit_samples(uint8_t *dst, uint32_t pos, uint32_t run, uint32_t w, uint32_t mask,
                        uint32_t *x, uint32_t *last, const uint8_t *lim)
{
    uint32_t c = *x, a = *last;
    uint8_t *o = dst + pos;
    while (run) {
        if (c == 0) /* column 0: the sample above */
            a = (size_t)(o - dst) >= w ? o[-(ptrdiff_t)w] : 0;
        uint32_t m = w - c < run ? w - c : run; /* the rest of this row */
        uint32_t i = 0;
#ifdef HAVE_SSE2_COPY
        /* the last piece of the run may store whole chunks past its end */
        uint32_t vend = m == run && o + ((m + 15) & ~15u) <= lim ? m : m & ~15u;
        if (vend) {
            const __m128i mv = _mm_set1_epi8((char)mask);
            __m128i cv = _mm_set1_epi8((char)a);
            for (; i < vend; i += 16) {
                __m128i y = prefix16(_mm_loadu_si128((const __m128i *)(const void *)(o + i)),
                                     cv, mv);
                _mm_storeu_si128((__m128i *)(void *)(o + i), y);
                cv = last_byte(y);
            }
            a = o[(i < m ? i : m) - 1];
        }
#endif
        for (; i < m; i++) {
            a = (a + l3_unzigzag(o[i])) & mask;
            o[i] = (uint8_t)a;
        }
        o += m, run -= m, c += m;
        if (c == w)
            c = 0;
    }
    *x = c;
    *last = a;
}

int l3_lz_decode_u8(const uint8_t *s, uint32_t len, uint32_t mode, uint32_t w, uint32_t h,
                    unsigned depth, uint8_t *dst)
{
    if (w == 0 || h == 0 || depth == 0 || depth > 8 ||
        (mode & ~L3_PLANE_SHORT) != (L3_PLANE_LEFT | L3_PLANE_LZ) ||
        (uint64_t)w * h > L3_MAX_TILE_AREA)
        return 0;
    struct rd r = {0, 0, 0, len, s};
    const uint32_t gs = (mode & L3_PLANE_SHORT) ? L3_GROUP_SHORT : L3_GROUP;
    const uint32_t mask = (1u << depth) - 1;
    const uint32_t n = w * h;
    const int pow2 = (w & (w - 1)) == 0;
    const uint8_t *const lim = dst + n;
    uint32_t pos = 0, x = 0, sym = 0, bad = 0, ebad = 0, last = 0;
    for (;;) {
        refill(&r);
        uint32_t run = eg(&r, L3_LZ_RUN_K, &ebad);
        if (ebad || run > n - pos)
            return 0;
        if (run) {
            if (!lit_values(&r, dst + pos, run, gs, depth, &sym, &bad, lim))
                return 0;
            lit_samples(dst, pos, run, w, mask, &x, &last, lim);
            pos += run;
        }
        if (pos == n)
            break;
        refill(&r);
        uint32_t count = eg(&r, L3_LZ_LEN_K, &ebad) + L3_LZ_MIN_COPY;
        refill(&r);
        uint32_t nb = take(&r, L3_LZ_DIST_BITS);
        if (ebad || nb == 0 || nb > 17)
            return 0;
        uint32_t dist = (1u << (nb - 1)) | take(&r, nb - 1);
        if (dist > pos || count > n - pos)
            return 0;
        uint32_t j = pos - dist;
        uint32_t xs = pow2 ? (j & (w - 1)) : j % w;
        while (count) {
            /* a piece's first sample: the source's residual on the prediction */
            uint32_t pj = xs ? dst[j - 1] : j >= w ? dst[j - w] : 0;
            if (x == 0)
                last = pos >= w ? dst[pos - w] : 0;
            last = (last + dst[j] - pj) & mask;
            dst[pos] = (uint8_t)last;
            const uint32_t D = (last - dst[j]) & mask;
            pos++, j++, count--;
            if (++x == w)
                x = 0;
            if (++xs == w)
                xs = 0;
            /* then up to the next column 0 of either: src + D */
            uint32_t L = count;
            if (x && w - x < L)
                L = w - x;
            if (xs && w - xs < L)
                L = w - xs;
            if (x == 0 || xs == 0)
                L = 0;
            if (L) {
                copy_add(dst + pos, dist, L, D, mask, lim);
                last = dst[pos + L - 1];
                pos += L, j += L, count -= L;
                x += L;
                if (x == w)
                    x = 0;
                xs += L;
                if (xs == w)
                    xs = 0;
            }
        }
        if (pos == n)
            break;
    }
    if (bad >> depth)
        return 0;
    uint64_t used = (uint64_t)r.pos * 8 - r.n;
    return used <= (uint64_t)len * 8 && (used + 7) / 8 == len;
}
