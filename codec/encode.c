/* encode.c — L3 encoder: pixels -> tiles (optionally on several threads). */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "l3_internal.h"

/* ---- bit writer (LSB first) ---- */
struct bw {
    uint8_t *p;
    uint64_t acc;
    unsigned n;
};

static inline void bw_put(struct bw *w, uint32_t v, unsigned n)
{
    w->acc |= (uint64_t)v << w->n;
    w->n += n;
    if (w->n >= 32) {
        uint32_t o = (uint32_t)w->acc;
        w->p[0] = (uint8_t)o;
        w->p[1] = (uint8_t)(o >> 8);
        w->p[2] = (uint8_t)(o >> 16);
        w->p[3] = (uint8_t)(o >> 24);
        w->p += 4;
        w->acc >>= 32;
        w->n -= 32;
    }
}

/* The same bit stream without a branch per code: the accumulator is stored
 * (8 bytes) after every code and the pointer advances by its whole bytes.
 * Writes up to 8 bytes past the stream's end, so only for buffers with that
 * much room behind the largest stream (the worker's stream buffers). Codes
 * of up to 57 bits. */
static inline void bwf_put64(struct bw *w, uint64_t v, unsigned n)
{
    w->acc |= v << w->n;
    w->n += n;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(w->p, &w->acc, 8);
#else
    for (int i = 0; i < 8; i++)
        w->p[i] = (uint8_t)(w->acc >> (8 * i));
#endif
    unsigned b = w->n >> 3;
    w->p += b;
    w->acc >>= 8 * b;
    w->n &= 7;
}

static inline void bwf_put(struct bw *w, uint32_t v, unsigned n)
{
    bwf_put64(w, v, n);
}

static inline uint8_t *bwf_flush(struct bw *w)
{
    return w->p + (w->n > 0); /* the partial byte is stored already */
}

static inline uint8_t *bw_flush(struct bw *w)
{
    while (w->n > 0) {
        *w->p++ = (uint8_t)w->acc;
        w->acc >>= 8;
        w->n = w->n > 8 ? w->n - 8 : 0;
    }
    return w->p;
}

/* ---- per-plane analysis ---- */

static inline uint16_t zigzag(uint32_t e, uint32_t mask, uint32_t half)
{
    return (uint16_t)(e < half ? 2 * e : 2 * (mask + 1 - e) - 1);
}

/* Zigzag-mapped MED residuals of a w x h plane (the decoder's rules). The
 * prediction uses only source samples, so the inner loop has no carried
 * dependency and vectorises. */
L3_CLONES static void plane_residuals_left2(const uint16_t *src, uint32_t w, uint32_t h,
                                  unsigned depth, uint16_t *z)
{
    const uint32_t mask = (1u << depth) - 1, half = 1u << (depth - 1);
    for (uint32_t y = 0; y < h; y++) {
        const uint16_t *row = src + (size_t)y * w;
        uint16_t *zr = z + (size_t)y * w;
        uint32_t edge = y ? row[-(ptrdiff_t)w] : 0;
        for (uint32_t x = 0; x < w && x < 2; x++)
            zr[x] = zigzag((uint32_t)(row[x] - edge) & mask, mask, half);
        for (uint32_t x = 2; x < w; x++)
            zr[x] = zigzag((uint32_t)(row[x] - row[x - 2]) & mask, mask, half);
    }
}

/* Residuals of row y > 0 (up = the row above) for MED, GRAD, LEFT or LEFT2. */
static inline void row_residuals(const uint16_t *row, const uint16_t *up, uint32_t w,
                                 unsigned depth, uint16_t *zr, unsigned pred)
{
    const int grad = pred == L3_PLANE_GRAD;
    const uint32_t mask = (1u << depth) - 1, half = 1u << (depth - 1);
    zr[0] = zigzag((uint32_t)(row[0] - up[0]) & mask, mask, half);
    if (pred == L3_PLANE_LEFT2) {
        if (w > 1)
            zr[1] = zigzag((uint32_t)(row[1] - up[0]) & mask, mask, half);
        for (uint32_t x = 2; x < w; x++)
            zr[x] = zigzag((uint32_t)(row[x] - row[x - 2]) & mask, mask, half);
        return;
    }
    if (pred == L3_PLANE_LEFT) {
        for (uint32_t x = 1; x < w; x++)
            zr[x] = zigzag((uint32_t)(row[x] - row[x - 1]) & mask, mask, half);
        return;
    }
    for (uint32_t x = 1; x < w; x++) {
        int32_t a = row[x - 1], b = up[x], c = up[x - 1];
        int32_t mx = a > b ? a : b, mn = a > b ? b : a;
        int32_t pr = grad ? a + b - c : c >= mx ? mn : (c <= mn ? mx : a + b - c);
        uint32_t e = (uint32_t)(row[x] - pr) & mask;
        zr[x] = zigzag(e, mask, half);
    }
}

L3_CLONES static void plane_residuals(const uint16_t *src, uint32_t w, uint32_t h, unsigned depth,
                            uint16_t *z, unsigned pred)
{
    if (pred == L3_PLANE_LEFT2) {
        plane_residuals_left2(src, w, h, depth, z);
        return;
    }
    const uint32_t mask = (1u << depth) - 1, half = 1u << (depth - 1);
    z[0] = zigzag(src[0], mask, half);
    for (uint32_t x = 1; x < w; x++)
        z[x] = zigzag((uint32_t)(src[x] - src[x - 1]) & mask, mask, half);
    for (uint32_t y = 1; y < h; y++)
        row_residuals(src + (size_t)y * w, src + (size_t)(y - 1) * w, w, depth,
                      z + (size_t)y * w, pred);
}

static inline unsigned sym_cost(unsigned s, unsigned prev)
{
    if (s == prev)
        return 1;
    if (s == prev + 1)
        return 2;
    if (s + 1 == prev)
        return 3;
    return 8;
}

static inline uint32_t group_cost(const uint16_t *z, uint32_t n, unsigned k,
                                  unsigned depth)
{
    uint32_t c = n * (k + 1);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t q = (uint32_t)z[i] >> k;
        c += q < L3_ESCAPE ? q : (L3_ESCAPE + depth) - (k + 1);
    }
    return c;
}

/* Chooses each group's symbol; returns the stream length in bits (exact when
 * `exact`, else an estimate). Fast rule (JPEG-LS): the smallest k with
 * n * 2^k >= sum; exact: the best of k0-1..k0+1 by counted bits. */
static uint64_t plane_plan(const uint16_t *z, uint32_t w, uint32_t h, unsigned depth,
                           uint8_t *syms, int exact, const uint32_t gs)
{
    uint64_t bits = 0;
    unsigned prev = 0;
    size_t g = 0;
    for (uint32_t y = 0; y < h; y++) {
        const uint16_t *zr = z + (size_t)y * w;
        for (uint32_t x0 = 0; x0 < w; x0 += gs) {
            uint32_t n = w - x0 < gs ? w - x0 : gs;
            uint32_t s = 0;
            for (uint32_t i = 0; i < n; i++)
                s += zr[x0 + i];
            unsigned best;
            uint32_t bc;
            if (s == 0) {
                best = 0;
                bc = sym_cost(0, prev);
            } else if (!exact) {
                unsigned k = 0;
                while (k < depth && (n << (k + 1)) < s)
                    k++;
                best = k + 1;
                bc = n * (k + 1) + (s >> k) + sym_cost(best, prev);
            } else {
                uint32_t mean = s / n;
                int k0 = mean ? 31 - __builtin_clz(mean) : 0;
                int lo = k0 - 1 < 0 ? 0 : k0 - 1, hi = k0 + 1 > (int)depth ? (int)depth : k0 + 1;
                best = 0;
                bc = UINT32_MAX;
                for (int k = lo; k <= hi; k++) {
                    uint32_t c = group_cost(zr + x0, n, (unsigned)k, depth) +
                                 sym_cost((unsigned)k + 1, prev);
                    if (c < bc) {
                        bc = c;
                        best = (unsigned)k + 1;
                    }
                }
            }
            syms[g++] = (uint8_t)best;
            prev = best;
            bits += bc;
        }
    }
    return bits;
}

/* Fast rule: the smallest k with n * 2^(k+1) >= sum. */
static inline unsigned fast_k(uint32_t s, uint32_t n, unsigned depth)
{
    /* n * 2^(k+1) >= s  <=>  2^(k+1) >= m = ceil(s / n); groups are almost
     * always 16 or 8 long, so the division is a shift */
    uint32_t m = (n & (n - 1)) ? (s + n - 1) / n : (s + n - 1) >> __builtin_ctz(n);
    /* m > 2 ? bitlen(m - 1) - 1 : 0, without a branch (m = 0 gives depth) */
    unsigned k = 31u - (unsigned)__builtin_clz((m - 1) | 1);
    return k < depth ? k : depth;
}

/* sym_cost without branches */
static inline unsigned sym_cost_nb(unsigned s, unsigned prev)
{
    static const uint8_t t[4] = {3, 1, 2, 8}; /* s + 1 - prev: 0, 1, 2, other */
    unsigned i = s + 1 - prev;
    return t[i < 3 ? i : 3];
}

static inline uint32_t fast_cost(uint32_t s, uint32_t n, unsigned depth, unsigned prev,
                                 unsigned *sym)
{
    unsigned k = fast_k(s, n, depth);
    const unsigned nz = 0u - (s != 0); /* s == 0: symbol 0, no codes */
    *sym = (k + 1) & nz;
    return ((n * (k + 1) + (s >> k)) & nz) + sym_cost_nb((k + 1) & nz, prev);
}

/* Both fast plans (groups of 16 into syms16, groups of 8 into syms8) from one
 * pass of group sums; estimated bits into bits16/bits8. */
L3_CLONES static void plane_plan_both(const uint16_t *z, uint32_t w, uint32_t h, unsigned depth,
                            uint8_t *syms16, uint8_t *syms8, uint64_t *bits16,
                            uint64_t *bits8)
{
    uint64_t b16 = 0, b8 = 0;
    unsigned p16 = 0, p8 = 0;
    size_t g16 = 0, g8 = 0;
    for (uint32_t y = 0; y < h; y++) {
        const uint16_t *zr = z + (size_t)y * w;
        for (uint32_t x0 = 0; x0 < w; x0 += 16) {
            uint32_t n = w - x0 < 16 ? w - x0 : 16;
            uint32_t na = n < 8 ? n : 8, nb = n - na;
            uint32_t sa = 0, sb = 0;
            if (n == 16) {
                for (uint32_t i = 0; i < 8; i++) {
                    sa += zr[x0 + i];
                    sb += zr[x0 + 8 + i];
                }
            } else {
                for (uint32_t i = 0; i < na; i++)
                    sa += zr[x0 + i];
                for (uint32_t i = 0; i < nb; i++)
                    sb += zr[x0 + 8 + i];
            }
            unsigned sym;
            b16 += fast_cost(sa + sb, n, depth, p16, &sym);
            syms16[g16++] = (uint8_t)sym;
            p16 = sym;
            b8 += fast_cost(sa, na, depth, p8, &sym);
            syms8[g8++] = (uint8_t)sym;
            p8 = sym;
            if (nb) {
                b8 += fast_cost(sb, nb, depth, p8, &sym);
                syms8[g8++] = (uint8_t)sym;
                p8 = sym;
            }
        }
    }
    *bits16 = b16;
    *bits8 = b8;
}

/* Rows of a tile that plane_estimate looks at: every EST_STEP-th row for the
 * predictor of the reference plane (a noisier choice tips tiles to MED, which
 * decodes more slowly), every EST_STEP_XFORM-th for the colour transform and
 * the other planes (8 rather than 4: 1/8 less encode time, 0.1% larger). */
#define EST_STEP 4u
#define EST_STEP_XFORM 8u

/* Estimated bits of a plane from rows 1, 1 + step, 1 + 2 * step, ... (groups
 * of 16, fast rule): enough to compare predictors or colour transforms of
 * one tile at a fraction of the cost of planning them. */
L3_CLONES static uint64_t plane_estimate(const uint16_t *src, uint32_t w, uint32_t h,
                                         unsigned depth, unsigned pred, uint16_t *zrow,
                                         uint32_t step)
{
    uint64_t bits = 0;
    unsigned prev = 0, sym;
    for (uint32_t y = 1; y < h; y += step) {
        row_residuals(src + (size_t)y * w, src + (size_t)(y - 1) * w, w, depth, zrow, pred);
        for (uint32_t x0 = 0; x0 < w; x0 += L3_GROUP) {
            uint32_t g = w - x0 < L3_GROUP ? w - x0 : L3_GROUP, sum = 0;
            for (uint32_t i = 0; i < g; i++)
                sum += zrow[x0 + i];
            bits += fast_cost(sum, g, depth, prev, &sym);
            prev = sym;
        }
    }
    return bits;
}

/* Writes the group symbol s after prev (codes 1, 01, 001 for the same, one
 * more, one less; else 000 and s in 5 bits), without a branch. */
static inline void bw_symbol(struct bw *bw, unsigned s, unsigned prev)
{
    static const uint8_t code[4] = {4, 1, 2, 0}, len[4] = {3, 1, 2, 8};
    unsigned i = s + 1 - prev;
    i = i < 3 ? i : 3;
    bwf_put(bw, code[i] | (((uint32_t)s << 3) & (0u - (i == 3))), len[i]);
}

/* Rice code of v with parameter k (mk = 2^k - 1); its length into *len. */
static inline uint32_t rice_code(uint32_t v, unsigned k, uint32_t mk, unsigned depth,
                                 unsigned *len)
{
    uint32_t q = v >> k;
    if (q < L3_ESCAPE) {
        *len = q + 1 + k;
        return (1u << q) | ((v & mk) << (q + 1));
    }
    *len = L3_ESCAPE + depth;
    return v << L3_ESCAPE;
}

/* Rice codes of n values with parameter k (symbol s = k + 1). A code is at
 * most L3_ESCAPE + depth bits, so up to depth 12 two codes (<= 56 bits) go
 * into the accumulator (< 8 bits pending) at once. */
static inline void bw_rice_group(struct bw *bw, const uint16_t *z, uint32_t n, unsigned k,
                                 unsigned depth)
{
    const uint32_t mk = (1u << k) - 1;
    uint32_t i = 0;
    if (depth <= 12) {
        for (; i + 2 <= n; i += 2) {
            unsigned l0, l1;
            uint64_t c0 = rice_code(z[i], k, mk, depth, &l0);
            uint64_t c1 = rice_code(z[i + 1], k, mk, depth, &l1);
            bwf_put64(bw, c0 | c1 << l0, l0 + l1);
        }
    }
    for (; i < n; i++) {
        unsigned l;
        uint32_t c = rice_code(z[i], k, mk, depth, &l);
        bwf_put(bw, c, l);
    }
}

L3_CLONES static uint8_t *plane_write_med(const uint16_t *z, const uint8_t *syms, uint32_t w,
                                uint32_t h, unsigned depth, uint8_t *out, const uint32_t gs)
{
    struct bw bw = {out, 0, 0};
    unsigned prev = 0;
    size_t g = 0;
    for (uint32_t y = 0; y < h; y++) {
        const uint16_t *zr = z + (size_t)y * w;
        for (uint32_t x0 = 0; x0 < w; x0 += gs) {
            uint32_t n = w - x0 < gs ? w - x0 : gs;
            unsigned s = syms[g++];
            bw_symbol(&bw, s, prev);
            prev = s;
            if (s == 0)
                continue;
            bw_rice_group(&bw, zr + x0, n, s - 1, depth);
        }
    }
    return bwf_flush(&bw);
}

static uint8_t *plane_write_raw(const uint16_t *src, size_t n, unsigned depth,
                                uint8_t *out)
{
    if (depth == 8) {
        for (size_t i = 0; i < n; i++)
            out[i] = (uint8_t)src[i];
        return out + n;
    }
    if (depth == 16) {
        for (size_t i = 0; i < n; i++) {
            out[2 * i] = (uint8_t)src[i];
            out[2 * i + 1] = (uint8_t)(src[i] >> 8);
        }
        return out + 2 * n;
    }
    struct bw bw = {out, 0, 0};
    for (size_t i = 0; i < n; i++)
        bw_put(&bw, src[i], depth);
    return bw_flush(&bw);
}

/* ---- LZ planes: literal runs and copies of earlier residuals ---- */

/* Per-worker state of the LZ match finder. */
struct lz_state {
    uint32_t *head;   /* hash bucket -> last position + 1 (0: none) */
    uint32_t *chain;  /* position -> previous position + 1 with the same hash */
    uint32_t *cost;   /* prefix sums of the literal cost estimate, 1/16 bit */
    uint32_t *tok;    /* tokens: run, count, dist triples */
    unsigned hash_bits;
    /* the parse so far (lz_start, lz_parse, lz_finish) */
    unsigned hb;      /* hash bits of this plane */
    size_t pos;       /* next residual to parse */
    size_t run0;      /* start of the current literal run */
    size_t nt;        /* tokens so far */
    uint64_t saved;   /* estimated savings of the copies, 1/16 bits */
    uint32_t repd;    /* distance of the last copy */
};

#define LZ_CHAIN 8u      /* candidates examined per position */
#define LZ_CHAIN_MAX 64u  /* ... with effort >= 2 */
#define LZ_MARGIN 4u      /* bits a copy must save over its literals */
#define LZ_REP_LONG 16u   /* a match this long at the last distance is taken */
#define LZ_HASH_LONG 32u  /* of a longer match only the last ... */
#define LZ_HASH_TAIL 8u   /* ... positions are hashed (its inside is found
                             again at its source) */

static inline unsigned bitlen32(uint32_t v)
{
    return v ? 32u - (unsigned)__builtin_clz(v) : 0;
}

/* Bits of the Exp-Golomb code of order k for v. */
static inline unsigned eg_bits(uint32_t v, unsigned k)
{
    unsigned q = bitlen32((v >> k) + 1) - 1;
    return 2 * q + 1 + k;
}

static inline void bw_eg(struct bw *w, uint32_t v, unsigned k)
{
    unsigned q = bitlen32((v >> k) + 1) - 1;
    uint32_t low = v - (((1u << q) - 1u) << k);
    bwf_put(w, 1u << q, q + 1);
    bwf_put(w, low, q + k);
}

/* Length of the common prefix of a and b, at most max. */
static inline uint32_t match_len(const uint16_t *a, const uint16_t *b, uint32_t max)
{
    uint32_t l = 0;
#if defined(__SSE2__)
    while (l + 8 <= max) {
        __m128i x = _mm_loadu_si128((const __m128i *)(a + l));
        __m128i y = _mm_loadu_si128((const __m128i *)(b + l));
        unsigned ne = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(x, y)) ^ 0xffffu;
        if (ne)
            return l + (unsigned)__builtin_ctz(ne) / 2;
        l += 8;
    }
#endif
    while (l + 4 <= max) {
        uint64_t x, y;
        memcpy(&x, a + l, 8);
        memcpy(&y, b + l, 8);
        if (x != y)
            return l + (uint32_t)__builtin_ctzll(x ^ y) / 16;
        l += 4;
    }
    while (l < max && a[l] == b[l])
        l++;
    return l;
}

static inline uint32_t lz_hash(const uint16_t *z, unsigned bits)
{
    uint64_t a, b;
    memcpy(&a, z, 8);
    memcpy(&b, z + 2, 8);
    b >>= 32;
    return (uint32_t)(((a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full)) >> (64 - bits));
}

/* Literal cost estimate of rows y0..y1-1 of the residuals (1/16 bits, from
 * the group-of-16 Rice plan), continuing the prefix sums in cost (cost[i] =
 * the first i residuals; cost[0] = 0). */
L3_CLONES static void lz_costs(uint32_t *cost, const uint16_t *z, uint32_t w, uint32_t y0,
                               uint32_t y1, unsigned depth)
{
    cost[0] = 0;
    for (uint32_t y = y0; y < y1; y++) {
        const uint16_t *zr = z + (size_t)y * w;
        uint32_t *cr = cost + (size_t)y * w + 1;
        for (uint32_t x0 = 0; x0 < w; x0 += L3_GROUP) {
            uint32_t g = w - x0 < L3_GROUP ? w - x0 : L3_GROUP, sum = 0;
            for (uint32_t i = 0; i < g; i++)
                sum += zr[x0 + i];
            uint32_t base = cr[(ptrdiff_t)x0 - 1];
            if (sum == 0) {
                for (uint32_t i = 0; i < g; i++)
                    cr[x0 + i] = base + 1 + i;
                continue;
            }
            unsigned k = fast_k(sum, g, depth);
            for (uint32_t i = 0; i < g; i++) {
                uint32_t q = (uint32_t)zr[x0 + i] >> k;
                base += 16 * (q < L3_ESCAPE ? q + 1 + k : L3_ESCAPE + depth) + 32 / g;
                cr[x0 + i] = base;
            }
        }
    }
}

/* Starts a parse of a plane of n residuals. */
static void lz_start(struct lz_state *lz, size_t n)
{
    unsigned hb = 8; /* table size follows the plane (small tiles) */
    while (hb < lz->hash_bits && ((size_t)1 << hb) < n)
        hb++;
    memset(lz->head, 0, sizeof(uint32_t) << hb);
    lz->hb = hb;
    lz->pos = lz->run0 = lz->nt = 0;
    lz->saved = 0;
    lz->repd = 0;
}

/* Greedy LZ parse of the residuals z[lz->pos .. end) (those known so far;
 * a later call continues up to a larger end). A copy is taken when it is
 * estimated to cost fewer bits than the literals it replaces (lz->cost);
 * lz->saved adds up the estimated savings. */
L3_CLONES static void lz_parse(struct lz_state *lz, const uint16_t *z, size_t end,
                               unsigned max_chain)
{
    const uint32_t *cost = lz->cost;
    const unsigned hb = lz->hb;
    uint32_t *head = lz->head, *chain = lz->chain, *tok = lz->tok;
    size_t nt = lz->nt, pos = lz->pos, run0 = lz->run0;
    uint64_t saved = lz->saved;
    uint32_t repd = lz->repd; /* distance of the last copy */
    const size_t last = end >= 6 ? end - 5 : 0; /* positions with a full hash */
    while (pos < end) {
        uint32_t best = 0, bestd = 0;
        if (pos < last) {
            uint32_t hv = lz_hash(z + pos, hb);
            uint32_t cand = head[hv];
            chain[pos] = cand;
            head[hv] = (uint32_t)pos + 1;
            const size_t room = end - pos;
            /* the last copy's distance first: a long match there ends the
             * search (a repeated pattern repeats at one distance) */
            if (repd && repd <= pos) {
                uint32_t l = match_len(z + pos - repd, z + pos, (uint32_t)room);
                if (l >= LZ_REP_LONG) {
                    best = l;
                    bestd = repd;
                    cand = 0;
                }
            }
            for (unsigned c = 0; cand && c < max_chain; c++, cand = chain[cand - 1]) {
                const uint16_t *a = z + cand - 1, *b = z + pos;
                if (best && (best >= room || a[best] != b[best]))
                    continue;
                uint32_t l = match_len(a, b, (uint32_t)room);
                if (l > best) {
                    best = l;
                    bestd = (uint32_t)(pos - (cand - 1));
                    if (l == room)
                        break;
                }
            }
        }
        if (best >= 4) {
            uint32_t mc = 16 * (eg_bits(best - L3_LZ_MIN_COPY, L3_LZ_LEN_K) + L3_LZ_DIST_BITS +
                                bitlen32(bestd) - 1 + 1 + L3_LZ_RUN_K + LZ_MARGIN);
            const size_t mend = pos + best;
            if (cost[mend] - cost[pos] > mc) {
                saved += cost[mend] - cost[pos] - mc;
                tok[3 * nt] = (uint32_t)(pos - run0);
                tok[3 * nt + 1] = best;
                tok[3 * nt + 2] = bestd;
                repd = bestd;
                nt++;
                run0 = mend;
            }
            /* positions inside the match are only hashed: after a copy they
             * are done, and when the copy is not worth it, its inside would
             * not be either (flat runs would otherwise be compared again at
             * every position) */
            if (best > LZ_HASH_LONG)
                pos = mend - LZ_HASH_TAIL - 1;
            for (pos++; pos < mend; pos++) {
                if (pos < last) {
                    uint32_t hv = lz_hash(z + pos, hb);
                    chain[pos] = head[hv];
                    head[hv] = (uint32_t)pos + 1;
                }
            }
            continue;
        }
        pos++;
    }
    lz->nt = nt;
    lz->pos = pos;
    lz->run0 = run0;
    lz->saved = saved;
    lz->repd = repd;
}

/* Ends the parse of n residuals: the final literal run is the last token
 * (count 0). Returns the number of tokens. */
static size_t lz_finish(struct lz_state *lz, size_t n)
{
    uint32_t *tok = lz->tok + 3 * lz->nt;
    tok[0] = (uint32_t)(n - lz->run0);
    tok[1] = 0;
    tok[2] = 0;
    return lz->nt + 1;
}

L3_CLONES static uint8_t *plane_write_lz(const uint16_t *z, const uint32_t *tok, size_t nt,
                               unsigned depth, uint8_t *out, uint32_t gs)
{
    struct bw bw = {out, 0, 0};
    unsigned prev = 0;
    size_t pos = 0;
    for (size_t t = 0; t < nt; t++) {
        uint32_t run = tok[3 * t], count = tok[3 * t + 1], dist = tok[3 * t + 2];
        if (count == 0 && run == 0 && t > 0)
            break; /* the plane ended with a copy */
        bw_eg(&bw, run, L3_LZ_RUN_K);
        for (uint32_t r = 0; r < run; r += gs) {
            uint32_t g = run - r < gs ? run - r : gs, sum = 0;
            const uint16_t *zg = z + pos + r;
            for (uint32_t i = 0; i < g; i++)
                sum += zg[i];
            unsigned sym = sum ? fast_k(sum, g, depth) + 1 : 0;
            bw_symbol(&bw, sym, prev);
            prev = sym;
            if (sym)
                bw_rice_group(&bw, zg, g, sym - 1, depth);
        }
        pos += run;
        if (count == 0)
            break;
        bw_eg(&bw, count - L3_LZ_MIN_COPY, L3_LZ_LEN_K);
        unsigned nb = bitlen32(dist);
        bwf_put(&bw, nb, L3_LZ_DIST_BITS);
        bwf_put(&bw, dist & ((1u << (nb - 1)) - 1), nb - 1);
        pos += count;
    }
    return bwf_flush(&bw);
}

/* Ends an LZ coding of n residuals parsed in lz: when the estimate is below
 * `limit` bytes, writes the stream into out. Returns its length when it is
 * below limit, else 0. */
static size_t lz_write(struct lz_state *lz, const uint16_t *z, size_t n, unsigned depth,
                       uint64_t limit, uint8_t *out)
{
    size_t nt = lz_finish(lz, n);
    uint64_t est = lz->cost[n] - lz->saved; /* 1/16 bits */
    if (est >= limit * 128)
        return 0;
    size_t l = (size_t)(plane_write_lz(z, lz->tok, nt, depth, out, L3_GROUP) - out);
    return l < limit ? l : 0;
}

/* One LZ coding of a plane with predictor `kind`: residuals of src into z
 * (src NULL: z already holds them), parse, and lz_write. */
static size_t lz_try(struct lz_state *lz, const uint16_t *src, uint16_t *z, unsigned kind,
                     uint32_t w, uint32_t h, unsigned depth, uint64_t limit,
                     unsigned chain, uint8_t *out)
{
    const size_t n = (size_t)w * h;
    if (src)
        plane_residuals(src, w, h, depth, z, kind);
    lz_costs(lz->cost, z, w, 0, h, depth);
    lz_start(lz, n);
    lz_parse(lz, z, n, chain);
    return lz_write(lz, z, n, depth, limit, out);
}

/* LZ coding of plane src (LEFT residuals into z) behind a gate: the parse
 * of its first quarter (the probe) must save 1/32 of its estimated bits,
 * both against the literal cost model and against `plan` bytes (the plane's
 * predicted size) scaled to those rows; the parse then goes on over the other
 * rows, and the stream is written when its estimate is below `limit` bytes.
 * Returns its length when it is below limit, else 0. */
static size_t lz_gated(struct lz_state *lz, const uint16_t *src, uint16_t *z, uint32_t w,
                       uint32_t h, unsigned depth, uint64_t plan, uint64_t limit,
                       uint8_t *out)
{
    const size_t n = (size_t)w * h;
    const uint32_t rows = h >= 16 ? h / 4 : h;
    plane_residuals(src, w, rows, depth, z, L3_PLANE_LEFT);
    lz_costs(lz->cost, z, w, 0, rows, depth);
    lz_start(lz, n);
    lz_parse(lz, z, (size_t)w * rows, LZ_CHAIN);
    /* (the plan can be cheaper than the model: groups of 8) */
    const uint64_t model = lz->cost[(size_t)w * rows], saved = lz->saved;
    if (saved * 32 < model || (model - saved) * 32 >= plan * 128 * rows / h * 31)
        return 0;
    for (uint32_t y = rows; y < h; y++)
        row_residuals(src + (size_t)y * w, src + (size_t)(y - 1) * w, w, depth,
                      z + (size_t)y * w, L3_PLANE_LEFT);
    lz_costs(lz->cost, z, w, rows, h, depth);
    lz_parse(lz, z, n, LZ_CHAIN);
    return lz_write(lz, z, n, depth, limit, out);
}

/* ---- tiles ---- */

struct enc {
    const struct l3_info *info;
    const uint8_t *pixels;
    size_t stride;
    unsigned planes;
    uint8_t *slots;       /* tile t's bytes start at slots + t * slot_size */
    size_t slot_size;
    uint64_t *tile_bytes; /* actual size of each tile */
    uint16_t *scratch;    /* per worker */
    size_t scratch_per;   /* uint16_t elements */
    size_t area;          /* tile_w * tile_h */
    int exact;            /* effort >= 2: exact per-group parameter search */
    unsigned grad_bias;   /* take the gradient predictor unless MED is this
                             many 32nds smaller */
    unsigned short_bias;  /* groups of 8 only when this many 32nds smaller */
    uint8_t *wbuf;        /* per worker: 3 stream buffers of wbuf_per bytes */
    size_t wbuf_per;
    int lz;               /* try LZ planes */
    unsigned lz_bias;     /* LZ only when this many 32nds smaller */
    struct lz_state *lzs; /* per worker */
    uint32_t *lzmem;
};

/* Candidate planes held in scratch: 0..3 channels, 4 = R-G, 5 = B-G, 6 = a
 * second prediction of the reference plane. */
#define NCAND 7

struct plan {
    unsigned mode;
    unsigned kind; /* predictor of the residuals (also for RAW) */
    uint64_t bytes;
};

/* Is every sample of the plane the same? (blocks of 64 without an early
 * exit inside, so that the comparison vectorises) */
static int plane_const(const uint16_t *src, size_t n)
{
    const uint16_t v0 = src[0];
    uint16_t diff = 0;
    size_t i = 0;
    for (; i + 64 <= n && !diff; i += 64)
        for (unsigned j = 0; j < 64; j++)
            diff |= (uint16_t)(src[i + j] ^ v0);
    for (; i < n && !diff; i++)
        diff |= (uint16_t)(src[i] ^ v0);
    return !diff;
}

/* Decide const / raw / MED for one candidate plane (residuals into z, group
 * symbols into syms). */
/* syms holds the group symbols for groups of 16 (first `g16` entries) and
 * then for groups of 8; the plan takes the short groups (L3_PLANE_SHORT) when
 * they save more than short_bias/32. */
L3_CLONES static struct plan plan_plane(const uint16_t *src, uint32_t w, uint32_t h,
                              unsigned depth, uint16_t *z, uint8_t *syms, int exact,
                              unsigned pred, size_t g16, unsigned short_bias)
{
    size_t n = (size_t)w * h;
    struct plan p;
    p.kind = pred;
    if (plane_const(src, n)) {
        p.mode = L3_PLANE_CONST;
        p.bytes = (depth + 7) / 8;
        return p;
    }
    uint64_t raw = ((uint64_t)n * depth + 7) / 8;
    plane_residuals(src, w, h, depth, z, pred);
    uint64_t med, med8;
    if (exact) {
        med = plane_plan(z, w, h, depth, syms, exact, L3_GROUP);
        med8 = plane_plan(z, w, h, depth, syms + g16, exact, L3_GROUP_SHORT);
    } else {
        plane_plan_both(z, w, h, depth, syms, syms + g16, &med, &med8);
    }
    med = (med + 7) / 8;
    med8 = (med8 + 7) / 8;
    if (med8 * 32 < med * (32 - short_bias)) {
        med = med8;
        pred |= L3_PLANE_SHORT;
    }
    if (med < raw) {
        p.mode = pred;
        p.bytes = med;
    } else {
        p.mode = L3_PLANE_RAW;
        p.bytes = raw;
    }
    return p;
}

/* Stands for a plan not yet made (encode_tile makes it only when the plane
 * is not coded with LZ): the size estimated by plane_estimate (every
 * step-th row), scaled to the whole plane, at most the raw size. */
static struct plan plan_estimated(uint64_t bits, unsigned kind, uint32_t w, uint32_t h,
                                  unsigned depth, uint32_t step)
{
    const uint32_t rows = (h + step - 2) / step; /* rows 1, 1 + step, ... below h */
    uint64_t b = (bits * h / rows + 7) / 8, raw = ((uint64_t)w * h * depth + 7) / 8;
    return (struct plan){kind, kind, b < raw ? b : raw};
}

/* A candidate plan was coded into scratch slot 6 (the spare): make it plane
 * c's plan by swapping plane c's residual and symbol buffers with slot 6's. */
static void take_spare(struct plan *plans, uint16_t **zz, uint8_t **syms, unsigned c,
                       struct plan cand)
{
    plans[c] = cand;
    uint16_t *tz = zz[c];
    zz[c] = zz[6];
    zz[6] = tz;
    uint8_t *ts = syms[c];
    syms[c] = syms[6];
    syms[6] = ts;
}


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

L3_CLONES static int encode_tile(void *arg, unsigned worker, uint64_t t)
{
    struct enc *e = arg;
    const struct l3_info *info = e->info;
    const unsigned depth = info->bit_depth, P = e->planes;
    uint32_t x0, y0, w, h;
    l3_tile_rect(info->width, info->height, info->tile_width, info->tile_height, t, &x0,
                 &y0, &w, &h);
    const size_t area = e->area, n = (size_t)w * h;
    const size_t g16 = (size_t)info->tile_height * ((info->tile_width + L3_GROUP - 1) / L3_GROUP);
    const size_t groups = g16 + (size_t)info->tile_height *
                                    ((info->tile_width + L3_GROUP_SHORT - 1) / L3_GROUP_SHORT);
    uint16_t *sc = e->scratch + e->scratch_per * worker;
    uint16_t *pl[NCAND], *zz[NCAND];
    for (int c = 0; c < NCAND; c++) {
        pl[c] = sc + c * area;
        zz[c] = sc + (NCAND + c) * area;
    }
    uint8_t *symbase = (uint8_t *)(sc + 2 * NCAND * area);
    uint8_t *syms[NCAND];
    for (int c = 0; c < NCAND; c++)
        syms[c] = symbase + c * groups;

    /* gather planes, checking sample ranges */
    uint32_t maxv = info->color == L3_COLOR_PALETTE ? info->palette_len - 1u
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
            if (P == 3) {
                gather3(r8, w, pl[0] + o, pl[1] + o, pl[2] + o);
            } else if (maxv >= 255 && P == 4) {
                /* 8-bit samples cannot exceed maxv: no range check */
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
    if (over)
        return L3_ERR_INVALID_ARG;

    struct plan plans[NCAND];
    unsigned use[4] = {0, 1, 2, 3};
    int deferred[NCAND] = {0}; /* plans[c] is an estimate, not yet planned */
    uint64_t est[4];      /* estimated bits of planes 0, 2, R-G, B-G ... */
    unsigned kinds[4];    /* ... with this predictor */
    static const unsigned xc[4] = {0, 2, 4, 5};
    uint32_t flags = 0;
    /* predictor for the tile, decided on the reference plane (G or the first
     * channel): the gradient predictor decodes faster (shorter serial chain)
     * and is taken unless MED saves more than grad_bias/32 */
    const unsigned r = P >= 3 ? 1 : 0;
    unsigned pred = L3_PLANE_MED;
    /* default effort: the predictors and the colour transform below are
     * decided on sampled rows (plane_estimate), and a plane is planned in
     * full only when it is not coded with LZ (the estimate stands in for the
     * plan's size until then) */
    const int sampled = !e->exact && h >= 8;
    if (sampled) {
        uint64_t em = plane_estimate(pl[r], w, h, depth, L3_PLANE_MED, zz[6], EST_STEP);
        uint64_t eg = plane_estimate(pl[r], w, h, depth, L3_PLANE_GRAD, zz[6], EST_STEP);
        uint64_t eb = em;
        if (eg * 32 <= em * (32 + e->grad_bias)) {
            pred = L3_PLANE_GRAD;
            eb = eg;
        }
        if (plane_const(pl[r], n)) {
            plans[r] = (struct plan){L3_PLANE_CONST, pred, (depth + 7) / 8};
        } else {
            /* period-2 patterns (dithered renders): try LEFT2 where coding
             * is costly (over depth/4 bits a sample) */
            if (eb * 4 > (uint64_t)((h + EST_STEP - 2) / EST_STEP) * w * depth) {
                uint64_t el =
                    plane_estimate(pl[r], w, h, depth, L3_PLANE_LEFT2, zz[6], EST_STEP);
                if (el < eb) {
                    pred = L3_PLANE_LEFT2;
                    eb = el;
                }
            }
            deferred[r] = 1;
            plans[r] = plan_estimated(eb, pred, w, h, depth, EST_STEP);
        }
    } else {
        plans[r] = plan_plane(pl[r], w, h, depth, zz[r], syms[r], e->exact, L3_PLANE_MED, g16, e->short_bias);
        if (L3_PLANE_KIND(plans[r].mode) == L3_PLANE_MED) {
            struct plan g = plan_plane(pl[r], w, h, depth, zz[6], syms[6], e->exact,
                                       L3_PLANE_GRAD, g16, e->short_bias);
            if (L3_PLANE_KIND(g.mode) == L3_PLANE_GRAD &&
                g.bytes * 32 <= plans[r].bytes * (32 + e->grad_bias)) {
                pred = L3_PLANE_GRAD;
                take_spare(plans, zz, syms, r, g);
            }
        }
        /* period-2 patterns (dithered renders): try LEFT2 where coding is
         * costly */
        if ((L3_PLANE_KIND(plans[r].mode) == L3_PLANE_MED ||
             L3_PLANE_KIND(plans[r].mode) == L3_PLANE_GRAD) &&
            plans[r].bytes * 4 > (uint64_t)n * depth / 8) {
            struct plan l2 = plan_plane(pl[r], w, h, depth, zz[6], syms[6], e->exact,
                                        L3_PLANE_LEFT2, g16, e->short_bias);
            if (L3_PLANE_KIND(l2.mode) == L3_PLANE_LEFT2 && l2.bytes < plans[r].bytes) {
                pred = L3_PLANE_LEFT2;
                take_spare(plans, zz, syms, r, l2);
            }
        }
    }
    /* the other planes use the tile's predictor; after LEFT2 (a dither
     * pattern seen in the reference plane) MED is tried too, since colour
     * differences of dithered images are often smooth */
#define PLAN_OTHER(c)                                                                   \
    do {                                                                                \
        plans[c] = plan_plane(pl[c], w, h, depth, zz[c], syms[c], e->exact, pred, g16,  \
                              e->short_bias);                                           \
        if (pred == L3_PLANE_LEFT2 && plans[c].mode >= L3_PLANE_MED) {                  \
            struct plan m = plan_plane(pl[c], w, h, depth, zz[6], syms[6], e->exact,    \
                                       L3_PLANE_MED, g16, e->short_bias);               \
            if (m.mode >= L3_PLANE_MED && m.bytes < plans[c].bytes)                     \
                take_spare(plans, zz, syms, c, m);                                   \
        }                                                                               \
    } while (0)
    if (P >= 3) {
        const uint32_t mask = (1u << depth) - 1;
        for (size_t i = 0; i < n; i++) {
            pl[4][i] = (uint16_t)((pl[0][i] - pl[1][i]) & mask);
            pl[5][i] = (uint16_t)((pl[2][i] - pl[1][i]) & mask);
        }
        if (sampled) {
            /* after LEFT2 (a dither pattern seen in the reference plane)
             * MED is tried too: colour differences of dithered images are
             * often smooth */
            for (unsigned c = 0; c < 4; c++) {
                est[c] = plane_estimate(pl[xc[c]], w, h, depth, pred, zz[6], EST_STEP_XFORM);
                kinds[c] = pred;
                if (pred == L3_PLANE_LEFT2) {
                    uint64_t m = plane_estimate(pl[xc[c]], w, h, depth, L3_PLANE_MED, zz[6],
                                                EST_STEP_XFORM);
                    if (m < est[c]) {
                        est[c] = m;
                        kinds[c] = L3_PLANE_MED;
                    }
                }
            }
            if (est[2] + est[3] < est[0] + est[1]) {
                flags = L3_TILE_XFORM_G;
                use[0] = 4;
                use[2] = 5;
            }
            for (unsigned c = 0; c <= 2; c += 2) {
                const unsigned u = use[c];
                const unsigned i = (u == 4 || u == 5 ? 2 : 0) + c / 2;
                if (plane_const(pl[u], n)) {
                    plans[u] = (struct plan){L3_PLANE_CONST, pred, (depth + 7) / 8};
                } else {
                    deferred[u] = 1;
                    plans[u] = plan_estimated(est[i], kinds[i], w, h, depth, EST_STEP_XFORM);
                }
            }
        } else {
            PLAN_OTHER(0);
            PLAN_OTHER(2);
            PLAN_OTHER(4);
            PLAN_OTHER(5);
            if (plans[4].bytes + plans[5].bytes < plans[0].bytes + plans[2].bytes) {
                flags = L3_TILE_XFORM_G;
                use[0] = 4;
                use[2] = 5;
            }
        }
    }
    for (unsigned c = 0; c < P; c++)
        if (c != r && !(P >= 3 && (c == 0 || c == 2)))
            PLAN_OTHER(c);
#undef PLAN_OTHER

    uint8_t *out = e->slots + e->slot_size * t;
    out[0] = (uint8_t)flags;
    uint8_t *p = out + L3_TILE_HEADER_BYTES(P);
    const uint64_t raw = ((uint64_t)n * depth + 7) / 8;
    uint8_t *wb = e->wbuf + 4 * e->wbuf_per * worker;
    uint8_t *wr = wb + e->wbuf_per, *wl = wr + e->wbuf_per, *wl2 = wl + e->wbuf_per;
    struct lz_state *lz = &e->lzs[worker];
    /* LZ planes are tried in stages, so that tiles without repeats (photos,
     * most renders) cost little: the reference plane (or the first plane
     * that is not constant) goes through lz_gated's probe of its first
     * quarter, and its LZ stream must be 1/16 smaller than its plan or
     * estimate; only then are the other planes tried. effort >= 2 tries
     * every plane, with both the left predictor and the plane's own. */
    int try_lz = 0;
    unsigned lz_ref = P; /* plane whose LZ stream is already in wr */
    size_t lz_ref_len = 0;
    if (e->lz && n >= 64) {
        if (e->exact) {
            try_lz = 1;
        } else {
            unsigned cr = r;
            for (unsigned c = 0; c < P && plans[use[cr]].mode == L3_PLANE_CONST; c++)
                cr = c;
            const unsigned u = use[cr];
            if (plans[u].mode != L3_PLANE_CONST) {
                const uint64_t plan = plans[u].mode == L3_PLANE_RAW ? raw : plans[u].bytes;
                lz_ref_len = lz_gated(lz, pl[u], zz[6], w, h, depth, plan,
                                      plan * (32 - e->lz_bias) / 32, wr);
                if (lz_ref_len) {
                    try_lz = 1;
                    lz_ref = cr;
                }
            }
        }
    }
    for (unsigned c = 0; c < P; c++) {
        unsigned u = use[c];
        unsigned mode = plans[u].mode;
        uint8_t *start = p;
        const uint8_t *coded = NULL; /* stream bytes of a predicted mode */
        uint64_t len = mode == L3_PLANE_CONST ? plans[u].bytes : raw;
        int lz_won = 0;
        if (try_lz && mode != L3_PLANE_CONST) {
            /* against the plan's size (an estimate): the predicted stream is
             * only written when LZ loses */
            uint64_t limit = (mode >= L3_PLANE_MED ? plans[u].bytes : raw) *
                             (32 - e->lz_bias) / 32;
            if (c == lz_ref) {
                if (lz_ref_len < limit) {
                    mode = L3_PLANE_LEFT | L3_PLANE_LZ;
                    len = lz_ref_len;
                    coded = wr;
                    lz_won = 1;
                }
            } else {
                size_t l = lz_try(lz, pl[u], zz[6], L3_PLANE_LEFT, w, h, depth, limit,
                                  e->exact ? LZ_CHAIN_MAX : LZ_CHAIN, wl);
                if (l) {
                    mode = L3_PLANE_LEFT | L3_PLANE_LZ;
                    len = l;
                    coded = wl;
                    limit = l;
                    lz_won = 1;
                }
                if (e->exact && plans[u].kind != L3_PLANE_LEFT) {
                    l = lz_try(lz, NULL, zz[u], plans[u].kind, w, h, depth, limit,
                               LZ_CHAIN_MAX, wl2);
                    if (l) {
                        mode = plans[u].kind | L3_PLANE_LZ;
                        len = l;
                        coded = wl2;
                        lz_won = 1;
                    }
                }
            }
        }
        if (!lz_won && deferred[u]) {
            plans[u] = plan_plane(pl[u], w, h, depth, zz[u], syms[u], 0, plans[u].kind, g16,
                                  e->short_bias);
            mode = plans[u].mode;
        }
        if (!lz_won && mode >= L3_PLANE_MED) {
            /* the plan's size is an estimate: write, then keep the smaller */
            int sh = (mode & L3_PLANE_SHORT) != 0;
            size_t l = (size_t)(plane_write_med(zz[u], syms[u] + (sh ? g16 : 0), w, h,
                                                depth, wb,
                                                sh ? L3_GROUP_SHORT : L3_GROUP) - wb);
            if (l < raw) {
                coded = wb;
                len = l;
            } else {
                mode = L3_PLANE_RAW;
            }
        }
        if (mode == L3_PLANE_CONST) {
            *p++ = (uint8_t)pl[u][0];
            if (depth == 16)
                *p++ = (uint8_t)(pl[u][0] >> 8);
        } else if (mode == L3_PLANE_RAW) {
            p = plane_write_raw(pl[u], n, depth, p);
        } else {
            memcpy(p, coded, (size_t)len);
            p += len;
        }
        out[1 + 5 * c] = (uint8_t)mode;
        l3_wr_u32le(out + 2 + 5 * c, (uint32_t)(p - start));
    }
    e->tile_bytes[t] = (uint64_t)(p - out);
    return L3_OK;
}

struct l3_enc {
    struct l3_info info;
    struct enc e;
    uint8_t *buf; /* header + tile slots */
    uint64_t tiles, hsize;
    unsigned threads;
};

void l3_enc_free(struct l3_enc *x)
{
    if (x == NULL)
        return;
    free(x->e.scratch);
    free(x->e.wbuf);
    free(x->e.lzs);
    free(x->e.lzmem);
    free(x->e.tile_bytes);
    free(x->buf);
    free(x);
}

int l3_enc_begin(const struct l3_info *info_in, const void *pixels, size_t stride,
                 const struct l3_encode_options *opts, struct l3_enc **enc_ret)
{
    if (!info_in || !pixels || !enc_ret)
        return L3_ERR_INVALID_ARG;
    *enc_ret = NULL;
    struct l3_info info = *info_in;
    if (l3_check_info(&info))
        return L3_ERR_INVALID_ARG;
    uint32_t tw = opts && opts->tile_width ? opts->tile_width : L3_DEFAULT_TILE;
    uint32_t th = opts && opts->tile_height ? opts->tile_height : L3_DEFAULT_TILE;
    uint64_t tiles, hsize;
    if (l3_geometry(&info, tw, th, &tiles, &hsize))
        return L3_ERR_INVALID_ARG;
    info.tile_width = tw;
    info.tile_height = th;
    info.tiles_x = (info.width + tw - 1) / tw;
    info.tiles_y = (info.height + th - 1) / th;
    if (info.color != L3_COLOR_PALETTE)
        memset(info.palette, 0, sizeof info.palette);
    size_t row = l3_row_bytes(&info);
    if (stride == 0)
        stride = row;
    if (stride < row)
        return L3_ERR_INVALID_ARG;
    if (stride % l3_sample_bytes(&info))
        return L3_ERR_INVALID_ARG;

    uint64_t max_pixels;
    size_t max_memory;
    l3_limits_resolve(opts ? &opts->limits : NULL, &max_pixels, &max_memory);
    if ((uint64_t)info.width * info.height > max_pixels)
        return L3_ERR_LIMIT;

    unsigned threads = opts && opts->threads ? opts->threads : 1;
    if (threads > 256)
        threads = 256;
    if (threads > tiles)
        threads = (unsigned)tiles;
    const unsigned P = info.channels;
    size_t area = (size_t)tw * th;
    size_t groups = (size_t)th * ((tw + L3_GROUP - 1) / L3_GROUP) +
                    (size_t)th * ((tw + L3_GROUP_SHORT - 1) / L3_GROUP_SHORT);
    size_t scratch_per = 2 * NCAND * area + (NCAND * groups + 1) / 2 + 1;
    uint64_t slot = L3_TILE_HEADER_BYTES(P) + (uint64_t)P * l3_plane_max_bytes(tw, th,
                                                                                 info.bit_depth);
    /* memory: header + slots, tile sizes, scratch */
    uint64_t mem = hsize + slot * tiles + 8 * tiles + (uint64_t)scratch_per * 2 * threads;
    if (mem > max_memory || mem > SIZE_MAX)
        return L3_ERR_LIMIT;
    /* worst MED stream: every code escaped, plus group symbols */
    size_t wbuf_per = (area * (L3_ESCAPE + info.bit_depth) + groups * 8) / 8 + 16;
    /* LZ streams: at most area/4 + 1 tokens (copies are >= 4 long), each a
     * literal run length, a copy (length, distance) and one more group
     * symbol than the literals alone: under 104 bits */
    wbuf_per += (area / 4 + 2) * 13;
    unsigned hash_bits = 10;
    while (hash_bits < 16 && ((size_t)1 << hash_bits) < area)
        hash_bits++;
    size_t lz_per = ((size_t)1 << hash_bits) + area + (area + 1) + 3 * (area / 3 + 2);
    mem += (uint64_t)wbuf_per * 4 * threads + (uint64_t)lz_per * 4 * threads;
    if (mem > max_memory || mem > SIZE_MAX)
        return L3_ERR_LIMIT;

    struct l3_enc *x = calloc(1, sizeof *x);
    if (x == NULL)
        return L3_ERR_NOMEM;
    x->info = info;
    x->tiles = tiles;
    x->hsize = hsize;
    x->threads = threads;
    struct enc *e = &x->e;
    e->info = &x->info;
    e->pixels = pixels;
    e->stride = stride;
    e->planes = P;
    e->slot_size = (size_t)slot;
    e->area = area;
    e->scratch_per = scratch_per;
    e->exact = opts && opts->effort >= 2;
    e->grad_bias = e->exact ? 0 : 3;
    e->short_bias = e->exact ? 0 : 1;
    e->wbuf_per = wbuf_per;
    e->lz = !(opts && opts->effort < 0);
    e->lz_bias = 2;
    x->buf = malloc((size_t)(hsize + slot * tiles));
    e->wbuf = malloc(e->wbuf_per * 4 * threads);
    e->lzs = calloc(threads, sizeof *e->lzs);
    e->lzmem = malloc(lz_per * 4 * threads);
    if (e->lzs && e->lzmem)
        for (unsigned i = 0; i < threads; i++) {
            uint32_t *m = e->lzmem + lz_per * i;
            e->lzs[i].hash_bits = hash_bits;
            e->lzs[i].head = m;
            e->lzs[i].chain = m + ((size_t)1 << hash_bits);
            e->lzs[i].cost = e->lzs[i].chain + area;
            e->lzs[i].tok = e->lzs[i].cost + area + 1;
        }
    e->tile_bytes = malloc(8 * (size_t)tiles);
    e->scratch = malloc(scratch_per * 2 * threads);
    if (!x->buf || !e->tile_bytes || !e->scratch || !e->wbuf || !e->lzs || !e->lzmem) {
        l3_enc_free(x);
        return L3_ERR_NOMEM;
    }
    e->slots = x->buf + hsize;
    *enc_ret = x;
    return L3_OK;
}

const struct l3_info *l3_enc_info(const struct l3_enc *x)
{
    return &x->info;
}

unsigned l3_enc_threads(const struct l3_enc *x)
{
    return x->threads;
}

uint64_t l3_enc_tiles(const struct l3_enc *x)
{
    return x->tiles;
}

int l3_enc_tile(struct l3_enc *x, unsigned worker, uint64_t t)
{
    if (worker >= x->threads || t >= x->tiles)
        return L3_ERR_INVALID_ARG;
    return encode_tile(&x->e, worker, t);
}

static int enc_tile_fn(void *arg, unsigned worker, uint64_t t)
{
    struct l3_enc *x = arg;
    return encode_tile(&x->e, worker, t);
}

int l3_enc_finish(struct l3_enc *x, void **out_ret, size_t *size_ret)
{
    struct enc *e = &x->e;
    const struct l3_info *info = &x->info;
    const uint64_t tiles = x->tiles, hsize = x->hsize;
    uint8_t *buf = x->buf;
    free(e->scratch);
    e->scratch = NULL;
    free(e->wbuf);
    e->wbuf = NULL;
    free(e->lzs);
    e->lzs = NULL;
    free(e->lzmem);
    e->lzmem = NULL;
    /* compact the tiles behind the header, fill the table */
    struct l3_layout lay;
    memset(&lay, 0, sizeof lay);
    lay.header_size = (size_t)hsize;
    lay.table_offset = L3_FIXED_HEADER +
                       (info->color == L3_COLOR_PALETTE ? 4u * info->palette_len : 0);
    lay.tile_count = (uint32_t)tiles;
    lay.planes = e->planes;
    uint64_t end = 0;
    for (uint64_t t = 0; t < tiles; t++) {
        memmove(buf + hsize + end, e->slots + e->slot_size * t, (size_t)e->tile_bytes[t]);
        end += e->tile_bytes[t];
        l3_wr_u64le(buf + lay.table_offset + 8 * t, end);
    }
    lay.payload_size = end;
    lay.payload_hash = XXH3_64bits(buf + hsize, (size_t)end);
    l3_write_header(buf, info, &lay);
    size_t total = (size_t)(hsize + end);
    uint8_t *shrunk = realloc(buf, total);
    x->buf = NULL;
    *out_ret = shrunk ? shrunk : buf;
    if (size_ret)
        *size_ret = total;
    return L3_OK;
}

int l3_encode(const struct l3_info *info_in, const void *pixels, size_t stride,
              const struct l3_encode_options *opts, void **out_ret, size_t *size_ret)
{
    if (!info_in || !pixels || !out_ret)
        return L3_ERR_INVALID_ARG;
    *out_ret = NULL;
    if (size_ret)
        *size_ret = 0;
    struct l3_enc *x;
    int st = l3_enc_begin(info_in, pixels, stride, opts, &x);
    if (st)
        return st;
    st = l3_parallel_tiles(x->tiles, x->threads, enc_tile_fn, x);
    if (st == L3_OK)
        st = l3_enc_finish(x, out_ret, size_ret);
    l3_enc_free(x);
    return st;
}
