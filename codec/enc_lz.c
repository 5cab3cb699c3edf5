/* enc_lz.c — the LZ match finder and the LZ plane writer (enc_lz.h). */
#include "enc_lz.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "enc_bits.h"
#include "enc_predict.h"
#include "enc_rice.h"
#include "enc_simd.h"
#include "l3_internal.h"

#define LZ_MARGIN 4u      /* bits a copy must save over its literals */
#define LZ_REP_LONG 16u   /* a match this long at the last distance is taken */
#define LZ_HASH_SCALE 4u  /* hash buckets per residual of a plane (up to 2^16):
                             a sparse table has few false candidates, whose
                             chain walks were the parse's branch misses */
#define LZ_HASH_LONG 16u  /* of a longer match only the last ... */
#define LZ_HASH_TAIL 4u   /* ... positions are hashed (its inside is found
                             again at its source; hashing the inside of
                             matches up to 32 long instead, with the last 8
                             of longer ones, cost 9% more instructions on
                             flat-art wallpapers for 0.3% smaller files) */

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

/* The first 4 residuals at p (the shortest copy) as one word: a position
 * whose first 4 differ is no candidate, and this test is cheaper (and its
 * branch better predicted) than match_len. */
static inline uint64_t load4(const uint16_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* A head entry as a position + 1 of this plane (0: none, or an earlier
 * plane's). */
static inline uint32_t lz_fresh(uint32_t h, uint32_t base)
{
    return h > base ? h - base : 0;
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
L3_CLONES static void lz_costs_ref(uint32_t *cost, const uint16_t *z, uint32_t w, uint32_t y0,
                                   uint32_t y1, unsigned depth)
{
    cost[0] = 0;
    for (uint32_t y = y0; y < y1; y++) {
        const uint16_t *zr = z + (size_t)y * w;
        uint32_t *cr = cost + (size_t)y * w + 1;
        for (uint32_t x0 = 0; x0 < w; x0 += L3_GROUP) {
            uint32_t g = w - x0 < L3_GROUP ? w - x0 : L3_GROUP;
            lz_cost_group(cr + x0, zr + x0, g, cr[(ptrdiff_t)x0 - 1], depth);
        }
    }
}

static void lz_costs(const struct lz_state *lz, const uint16_t *z, uint32_t w, uint32_t y0,
                     uint32_t y1, unsigned depth)
{
    if (lz->simd && depth <= 8)
        l3_simd_lz_costs(lz->cost, z, w, y0, y1, depth);
    else
        lz_costs_ref(lz->cost, z, w, y0, y1, depth);
}

/* Starts a parse of a plane of n residuals. */
static void lz_start(struct lz_state *lz, size_t n)
{
    unsigned hb = 8; /* table size follows the plane (small tiles) */
    while (hb < lz->hash_bits && ((size_t)1 << hb) < n * LZ_HASH_SCALE)
        hb++;
    /* the head entries of earlier planes are at most top: no clearing,
     * except when the stamps would wrap */
    if (UINT32_MAX - lz->top <= n) {
        memset(lz->head, 0, sizeof(uint32_t) << lz->hash_bits);
        lz->top = 0;
    }
    lz->base = lz->top;
    lz->top += (uint32_t)n;
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
    const uint32_t base = lz->base;
    uint32_t *head = lz->head, *chain = lz->chain, *tok = lz->tok;
    size_t nt = lz->nt, pos = lz->pos, run0 = lz->run0;
    uint64_t saved = lz->saved;
    uint32_t repd = lz->repd; /* distance of the last copy */
    const size_t last = end >= 6 ? end - 5 : 0; /* positions with a full hash */
    while (pos < end) {
        uint32_t best = 0, bestd = 0;
        if (pos < last) {
            /* literals: positions without a candidate whose first 4 do
             * not match at the last copy's distance either find nothing;
             * they are only hashed, in a loop of their own (the search
             * below would only compare the last distance again) */
            uint32_t cand;
            uint64_t here;
            for (;;) {
                uint32_t hv = lz_hash(z + pos, hb);
                cand = lz_fresh(head[hv], base);
                chain[pos] = cand;
                head[hv] = base + (uint32_t)pos + 1;
                here = load4(z + pos);
                if (cand || (repd && repd <= pos && load4(z + pos - repd) == here))
                    break;
                if (++pos == last)
                    break;
            }
            if (pos == last)
                continue;
            const size_t room = end - pos;
            /* the last copy's distance first: a long match there ends the
             * search (a repeated pattern repeats at one distance) */
            if (repd && repd <= pos && load4(z + pos - repd) == here) {
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
                if (load4(a) != here)
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
                    chain[pos] = lz_fresh(head[hv], base);
                    head[hv] = base + (uint32_t)pos + 1;
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
                                         unsigned depth, uint8_t *out, uint32_t gs, int simd)
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
            if (sym && simd)
                l3_simd_rice_group(&bw, zg, g, sym - 1, depth);
            else if (sym)
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
    size_t l = (size_t)(plane_write_lz(z, lz->tok, nt, depth, out, L3_GROUP,
                                       lz->simd && depth <= 8) - out);
    return l < limit ? l : 0;
}

size_t l3_lz_try(struct lz_state *lz, const uint16_t *src, uint16_t *z, unsigned kind,
                 uint32_t w, uint32_t h, unsigned depth, uint64_t limit, unsigned chain,
                 uint8_t *out)
{
    const size_t n = (size_t)w * h;
    if (src && lz->simd)
        l3_simd_plane_residuals(src, w, h, depth, z, kind);
    else if (src)
        l3_plane_residuals(src, w, h, depth, z, kind);
    lz_costs(lz, z, w, 0, h, depth);
    lz_start(lz, n);
    lz_parse(lz, z, n, chain);
    return lz_write(lz, z, n, depth, limit, out);
}

size_t l3_lz_gated(struct lz_state *lz, const uint16_t *src, uint16_t *z, uint32_t w,
                   uint32_t h, unsigned depth, uint64_t plan, uint64_t limit, uint8_t *out)
{
    const size_t n = (size_t)w * h;
    const uint32_t rows = h >= 16 ? h / 4 : h;
    if (lz->simd)
        l3_simd_plane_residuals(src, w, rows, depth, z, L3_PLANE_LEFT);
    else
        l3_plane_residuals(src, w, rows, depth, z, L3_PLANE_LEFT);
    lz_costs(lz, z, w, 0, rows, depth);
    lz_start(lz, n);
    lz_parse(lz, z, (size_t)w * rows, LZ_CHAIN);
    /* (the plan can be cheaper than the model: groups of 8) */
    const uint64_t model = lz->cost[(size_t)w * rows], saved = lz->saved;
    if (saved * 32 < model || (model - saved) * 32 >= plan * 128 * rows / h * 31)
        return 0;
    for (uint32_t y = rows; y < h; y++)
        if (lz->simd)
            l3_simd_row_residuals(src + (size_t)y * w, src + (size_t)(y - 1) * w, w, depth,
                                  z + (size_t)y * w, L3_PLANE_LEFT);
        else
            row_residuals(src + (size_t)y * w, src + (size_t)(y - 1) * w, w, depth,
                          z + (size_t)y * w, L3_PLANE_LEFT);
    lz_costs(lz, z, w, rows, h, depth);
    lz_parse(lz, z, n, LZ_CHAIN);
    return lz_write(lz, z, n, depth, limit, out);
}

size_t l3_lz_words(size_t area, unsigned *hash_bits_ret)
{
    unsigned hash_bits = 10;
    while (hash_bits < 16 && ((size_t)1 << hash_bits) < area * LZ_HASH_SCALE)
        hash_bits++;
    *hash_bits_ret = hash_bits;
    /* head, chain, cost (area + 1 prefix sums), tokens */
    return ((size_t)1 << hash_bits) + area + (area + 1) + 3 * (area / 3 + 2);
}

void l3_lz_init(struct lz_state *lz, uint32_t *mem, size_t area, unsigned hash_bits)
{
    lz->hash_bits = hash_bits;
    lz->simd = 0;
    lz->head = mem;
    memset(lz->head, 0, sizeof(uint32_t) << hash_bits);
    lz->top = 0;
    lz->chain = mem + ((size_t)1 << hash_bits);
    lz->cost = lz->chain + area;
    lz->tok = lz->cost + area + 1;
}
