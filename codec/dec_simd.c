/* dec_simd.c — the SIMD lane decoder (see l3_internal.h). This build has none
 * yet: every plane goes through the reference decoder. */
#include "l3_internal.h"

int l3_simd_available(void) { return 0; }

uint32_t l3_simd_tiles_per_batch(uint32_t planes)
{
    (void)planes;
    return 1;
}

size_t l3_simd_scratch_size(uint32_t tile_width)
{
    (void)tile_width;
    return 0;
}

int l3_simd_lane_ok(uint32_t mode, const uint8_t *stream, uint32_t len, const uint8_t *data,
                    size_t size)
{
    (void)mode, (void)stream, (void)len, (void)data, (void)size;
    return 0;
}

void l3_simd_decode_planes(const struct l3_simd_lane *lanes, unsigned n, const uint8_t *data,
                           uint32_t w, uint32_t h, unsigned depth, void *scratch,
                           uint32_t ok[L3_SIMD_MAX_LANES / 32])
{
    (void)lanes, (void)n, (void)data, (void)w, (void)h, (void)depth, (void)scratch;
    ok[0] = 0;
}
