/* enc_predict.c — residuals of a whole plane (enc_predict.h). */
#include "enc_predict.h"

/* LEFT2 residuals of a w x h plane. The prediction uses only source
 * samples, so the inner loop has no carried dependency and vectorises. */
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

L3_CLONES void l3_plane_residuals(const uint16_t *src, uint32_t w, uint32_t h, unsigned depth,
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
