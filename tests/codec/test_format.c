/* test_format.c — L3 format core: round trips, header validation, corruption,
 * limits, strides, threads. Deterministic (seeded) inputs only. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "l3.h"

static const unsigned depths_of[5][5] = {
    {1, 2, 4, 8, 16}, {8, 16}, {8, 16}, {8, 16}, {1, 2, 4, 8}};
static const unsigned ndepths[5] = {5, 2, 2, 2, 4};

Test(format, roundtrip_models_depths_sizes)
{
    static const uint32_t sizes[][2] = {{1, 1}, {1, 37}, {29, 1}, {65, 33}, {4097, 3},
                                        {64, 64}, {130, 67}};
    char msg[256];
    for (unsigned color = 0; color < 5; color++)
        for (unsigned di = 0; di < ndepths[color]; di++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
                for (int pat = TH_NOISE; pat <= TH_MIXED; pat++) {
                    struct l3_info info;
                    th_info(&info, color, depths_of[color][di], sizes[si][0], sizes[si][1]);
                    void *px = th_image(&info, (enum th_pattern)pat, si * 31 + pat, NULL);
                    int r = th_roundtrip(&info, px, NULL, 3, msg, sizeof msg, NULL, NULL);
                    cr_assert_eq(r, 0, "color %u depth %u %ux%u pattern %d: %s", color,
                                 info.bit_depth, info.width, info.height, pat, msg);
                    free(px);
                }
}
