/* enc_predict.h — the encoder's side of the predictors: zigzag-mapped
 * residuals of a plane under MED, GRAD, LEFT2 or LEFT (the rules of
 * l3_tile.h's decoder, docs/FORMAT.md). Not installed. */
#ifndef L3_ENC_PREDICT_H
#define L3_ENC_PREDICT_H

#include <stddef.h>
#include <stdint.h>

#include "l3_internal.h"

static inline uint16_t zigzag(uint32_t e, uint32_t mask, uint32_t half)
{
    return (uint16_t)(e < half ? 2 * e : 2 * (mask + 1 - e) - 1);
}

/* Residuals of row y > 0 (up = the row above) for MED, GRAD, LEFT or LEFT2.
 * Inline: the sampled estimates and the LZ probe call it per row. */
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

/* Residuals of the whole w x h plane src under predictor pred into z. */
void l3_plane_residuals(const uint16_t *src, uint32_t w, uint32_t h, unsigned depth,
                        uint16_t *z, unsigned pred);

#endif
