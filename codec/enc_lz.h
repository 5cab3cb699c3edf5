/* enc_lz.h — the encoder's LZ planes (L3_PLANE_LZ): a greedy match finder
 * over a plane's residuals (hash chains, the last copy's distance first)
 * that parses them into literal runs and copies, and the writer of the
 * parsed stream. Not installed. */
#ifndef L3_ENC_LZ_H
#define L3_ENC_LZ_H

#include <stddef.h>
#include <stdint.h>

#include "enc_rice.h"

#define LZ_CHAIN 8u      /* candidates examined per position */
#define LZ_CHAIN_MAX 64u /* ... with effort >= 2 */

/* Per-worker state of the match finder (l3_lz_init). */
struct lz_state {
    uint32_t *head;   /* hash bucket -> base + last position + 1 (<= base: none) */
    uint32_t *chain;  /* position -> previous position + 1 with the same hash */
    uint32_t *cost;   /* prefix sums of the literal cost estimate, 1/16 bit */
    uint32_t *tok;    /* tokens: run, count, dist triples */
    unsigned hash_bits;
    /* the parse so far (lz_start, lz_parse, lz_finish) */
    unsigned hb;      /* hash bits of this plane */
    uint32_t base;    /* head stamps of this plane are above base ... */
    uint32_t top;     /* ... and at most top (no earlier plane's are) */
    size_t pos;       /* next residual to parse */
    size_t run0;      /* start of the current literal run */
    size_t nt;        /* tokens so far */
    uint64_t saved;   /* estimated savings of the copies, 1/16 bits */
    uint32_t repd;    /* distance of the last copy */
    int simd;         /* the AVX2 kernels of enc_simd.c (same results) */
};

/* Literal cost estimate of one group of g residuals zr (1/16 bits, the
 * group-of-16 Rice plan's codes and 2 bits of symbol per 16 residuals, a
 * zero group 1 bit): its prefix sums after `base` into cr[0 .. g). Returns
 * the last one. (Inline: enc_lz.c and enc_simd.c's tail groups.) */
static inline uint32_t lz_cost_group(uint32_t *cr, const uint16_t *zr, uint32_t g,
                                     uint32_t base, unsigned depth)
{
    uint32_t sum = 0;
    for (uint32_t i = 0; i < g; i++)
        sum += zr[i];
    if (sum == 0) {
        for (uint32_t i = 0; i < g; i++)
            cr[i] = base + 1 + i;
        return base + g;
    }
    unsigned k = fast_k(sum, g, depth);
    for (uint32_t i = 0; i < g; i++) {
        uint32_t q = (uint32_t)zr[i] >> k;
        base += 16 * (q < L3_ESCAPE ? q + 1 + k : L3_ESCAPE + depth) + 32 / g;
        cr[i] = base;
    }
    return base;
}

/* uint32_t words of one worker's state for planes of up to `area`
 * residuals; the hash table's size (bits) into *hash_bits_ret. */
size_t l3_lz_words(size_t area, unsigned *hash_bits_ret);
/* Lays the state out in mem (l3_lz_words(area) words). */
void l3_lz_init(struct lz_state *lz, uint32_t *mem, size_t area, unsigned hash_bits);

/* Bytes of the largest LZ stream of a plane of `area` residuals beyond its
 * Rice-coded literals: at most area/4 + 1 tokens (copies are >= 4 long),
 * each a literal run length, a copy (length, distance) and one more group
 * symbol than the literals alone: under 104 bits. */
static inline size_t l3_lz_stream_extra(size_t area)
{
    return (area / 4 + 2) * 13;
}

/* One LZ coding of a w x h plane with predictor `kind`: residuals of src
 * into z (src NULL: z already holds them), a parse with up to `chain`
 * candidates a position, and the stream into out when its estimate is
 * below `limit` bytes. Returns its length when it is below limit, else 0. */
size_t l3_lz_try(struct lz_state *lz, const uint16_t *src, uint16_t *z, unsigned kind,
                 uint32_t w, uint32_t h, unsigned depth, uint64_t limit, unsigned chain,
                 uint8_t *out);

/* LZ coding of plane src (LEFT residuals into z) behind a gate: the parse
 * of its first quarter (the probe) must save 1/32 of its estimated bits,
 * both against the literal cost model and against `plan` bytes (the plane's
 * predicted size) scaled to those rows; the parse then goes on over the
 * other rows, and the stream is written when its estimate is below `limit`
 * bytes. Returns its length when it is below limit, else 0. */
size_t l3_lz_gated(struct lz_state *lz, const uint16_t *src, uint16_t *z, uint32_t w,
                   uint32_t h, unsigned depth, uint64_t plan, uint64_t limit, uint8_t *out);

#endif
