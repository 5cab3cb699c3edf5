/* enc_rice.c — the Rice planner (enc_rice.h): group symbols of a plane,
 * the sizes they give, sampled estimates, and the planned plane's writer. */
#include "enc_rice.h"

#include "enc_bits.h"
#include "enc_predict.h"
#include "enc_simd.h"

/* Bits of the group symbol s after prev (the codes of bw_symbol). */
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

/* Counted bits of the Rice codes of n residuals with parameter k. */
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

L3_CLONES struct plan l3_plan_plane(const uint16_t *src, uint32_t w, uint32_t h,
                                    unsigned depth, uint16_t *z, uint8_t *syms, int exact,
                                    unsigned pred, size_t g16, unsigned short_bias, int simd)
{
    size_t n = (size_t)w * h;
    struct plan p;
    p.kind = pred;
    if (l3_plane_const(src, n)) {
        p.mode = L3_PLANE_CONST;
        p.bytes = (depth + 7) / 8;
        return p;
    }
    uint64_t raw = ((uint64_t)n * depth + 7) / 8;
    simd = simd && depth <= 8;
    if (simd)
        l3_simd_plane_residuals(src, w, h, depth, z, pred);
    else
        l3_plane_residuals(src, w, h, depth, z, pred);
    uint64_t med, med8;
    if (simd && !exact && w % 16 == 0) {
        l3_simd_plan_both(z, n, depth, syms, syms + g16, &med, &med8);
    } else if (exact) {
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

/* Enough to compare predictors or colour transforms of one tile at a
 * fraction of the cost of planning them. */
L3_CLONES uint64_t l3_plane_estimate(const uint16_t *src, uint32_t w, uint32_t h,
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

struct plan l3_plan_estimated(uint64_t bits, unsigned kind, uint32_t w, uint32_t h,
                              unsigned depth, uint32_t step)
{
    const uint32_t rows = (h + step - 2) / step; /* rows 1, 1 + step, ... below h */
    uint64_t b = (bits * h / rows + 7) / 8, raw = ((uint64_t)w * h * depth + 7) / 8;
    return (struct plan){kind, kind, b < raw ? b : raw};
}

L3_CLONES uint8_t *l3_plane_write_rice(const uint16_t *z, const uint8_t *syms, uint32_t w,
                                       uint32_t h, unsigned depth, uint8_t *out, uint32_t gs)
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
