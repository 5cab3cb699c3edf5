/* enc_bits.h — the encoder's bit writer (LSB first, the order l3_tile.h
 * reads) and the codes built on it: group symbols, Rice codes, Exp-Golomb
 * codes. Header-only: every writer is called once per sample or group and
 * must inline into its loop. Not installed. */
#ifndef L3_ENC_BITS_H
#define L3_ENC_BITS_H

#include <stdint.h>
#include <string.h>

#include "l3_tile.h"

struct bw {
    uint8_t *p;   /* next whole byte to store */
    uint64_t acc; /* pending bits, LSB first */
    unsigned n;   /* number of pending bits */
};

/* Appends the n low bits of v (n <= 32), storing 4 bytes at a time. Writes
 * only the stream's own bytes: for buffers without slack (raw planes in a
 * tile slot). */
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

/* Stores the partial bytes; returns the end of the stream. */
static inline uint8_t *bw_flush(struct bw *w)
{
    while (w->n > 0) {
        *w->p++ = (uint8_t)w->acc;
        w->acc >>= 8;
        w->n = w->n > 8 ? w->n - 8 : 0;
    }
    return w->p;
}

/* The same bit stream without a branch per code: the accumulator is stored
 * (8 bytes) after every code and the pointer advances by its whole bytes.
 * Writes up to 8 bytes past the stream's end, so only for buffers with that
 * much room behind the largest stream (the worker's stream buffers). Codes
 * of up to 56 bits: with the 7 bits that may be pending, 63 at most, so
 * that the shift by whole bytes stays below 64. */
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

/* End of a bwf_ stream (its partial byte is stored already). */
static inline uint8_t *bwf_flush(struct bw *w)
{
    return w->p + (w->n > 0);
}

/* The code of group symbol s after prev (codes 1, 01, 001 for the same, one
 * more, one less; else 000 and s in 5 bits), without a branch; its length
 * into *len. */
static inline uint32_t symbol_code(unsigned s, unsigned prev, unsigned *len)
{
    static const uint8_t code[4] = {4, 1, 2, 0}, lens[4] = {3, 1, 2, 8};
    unsigned i = s + 1 - prev;
    i = i < 3 ? i : 3;
    *len = lens[i];
    return code[i] | (((uint32_t)s << 3) & (0u - (i == 3)));
}

/* Writes the group symbol s after prev. */
static inline void bw_symbol(struct bw *bw, unsigned s, unsigned prev)
{
    unsigned len;
    uint32_t c = symbol_code(s, prev, &len);
    bwf_put(bw, c, len);
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

/* Exp-Golomb code of order k for v. */
static inline void bw_eg(struct bw *w, uint32_t v, unsigned k)
{
    unsigned q = bitlen32((v >> k) + 1) - 1;
    uint32_t low = v - (((1u << q) - 1u) << k);
    bwf_put(w, 1u << q, q + 1);
    bwf_put(w, low, q + k);
}

#endif
