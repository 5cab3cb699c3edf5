/* enc_rice.h — the encoder's Rice planner: per-group Rice parameters of a
 * plane's residuals (the group symbols), the size they give, sampled
 * estimates for comparing predictors, and the writer of a planned plane.
 * Not installed. */
#ifndef L3_ENC_RICE_H
#define L3_ENC_RICE_H

#include <stddef.h>
#include <stdint.h>

#include "l3_internal.h"

/* How a plane will be coded. */
struct plan {
    unsigned mode;  /* L3_PLANE_* (CONST, RAW, or a predictor | L3_PLANE_SHORT) */
    unsigned kind;  /* predictor of the residuals (also for RAW) */
    uint64_t bytes; /* stream size: exact for CONST and RAW, else an estimate */
};

/* Fast rule (JPEG-LS): the smallest k with n * 2^(k+1) >= s, at most depth. */
static inline unsigned fast_k(uint32_t s, uint32_t n, unsigned depth)
{
    /* n * 2^(k+1) >= s  <=>  2^(k+1) >= m = ceil(s / n); groups are almost
     * always 16 or 8 long, so the division is a shift */
    uint32_t m = (n & (n - 1)) ? (s + n - 1) / n : (s + n - 1) >> __builtin_ctz(n);
    /* m > 2 ? bitlen(m - 1) - 1 : 0, without a branch (m = 0 gives depth) */
    unsigned k = 31u - (unsigned)__builtin_clz((m - 1) | 1);
    return k < depth ? k : depth;
}

/* Bits of the group symbol s after prev (bw_symbol), without branches. */
static inline unsigned sym_cost_nb(unsigned s, unsigned prev)
{
    static const uint8_t t[4] = {3, 1, 2, 8}; /* s + 1 - prev: 0, 1, 2, other */
    unsigned i = s + 1 - prev;
    return t[i < 3 ? i : 3];
}

/* Estimated bits of a group of n residuals summing to s under the fast rule
 * (symbol and codes); its symbol into *sym. */
static inline uint32_t fast_cost(uint32_t s, uint32_t n, unsigned depth, unsigned prev,
                                 unsigned *sym)
{
    unsigned k = fast_k(s, n, depth);
    const unsigned nz = 0u - (s != 0); /* s == 0: symbol 0, no codes */
    *sym = (k + 1) & nz;
    return ((n * (k + 1) + (s >> k)) & nz) + sym_cost_nb((k + 1) & nz, prev);
}

/* Is every sample of the plane the same? (blocks of 64 without an early
 * exit inside, so that the comparison vectorises; inline, so that it is
 * compiled for its caller's target clone) */
static inline int l3_plane_const(const uint16_t *src, size_t n)
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

/* Decides const / raw / predicted (pred) for one plane: residuals into z,
 * group symbols into syms (groups of 16 in the first g16 entries, then
 * groups of 8). The plan takes the short groups (L3_PLANE_SHORT) when they
 * save more than short_bias/32. exact: the best Rice parameter of each group
 * by counted bits (effort >= 2), else the fast rule. simd: with the AVX2
 * kernels of enc_simd.h where they apply (same plan). */
struct plan l3_plan_plane(const uint16_t *src, uint32_t w, uint32_t h, unsigned depth,
                          uint16_t *z, uint8_t *syms, int exact, unsigned pred, size_t g16,
                          unsigned short_bias, int simd);

/* Estimated bits of plane src under predictor pred from rows 1, 1 + step,
 * 1 + 2 * step, ... (groups of 16, fast rule); zrow: w residuals of scratch. */
uint64_t l3_plane_estimate(const uint16_t *src, uint32_t w, uint32_t h, unsigned depth,
                           unsigned pred, uint16_t *zrow, uint32_t step);

/* Stands for a plan not yet made: l3_plane_estimate's bits (every step-th
 * row) scaled to the whole plane, at most the raw size; mode = kind. */
struct plan l3_plan_estimated(uint64_t bits, unsigned kind, uint32_t w, uint32_t h,
                              unsigned depth, uint32_t step);

/* Writes a predicted plane: residuals z with group symbols syms for groups
 * of gs. Writes up to 8 bytes past the stream's end (bwf_put64). Returns
 * the end of the stream. */
uint8_t *l3_plane_write_rice(const uint16_t *z, const uint8_t *syms, uint32_t w, uint32_t h,
                             unsigned depth, uint8_t *out, uint32_t gs);

#endif
