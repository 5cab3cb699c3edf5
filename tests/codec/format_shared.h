/* format_shared.h — what test_format.c and test_lz_planes.c share: the
 * bit depths of each colour model and an encode that must succeed. For
 * Criterion test files only (it asserts). */
#ifndef L3_TEST_FORMAT_SHARED_H
#define L3_TEST_FORMAT_SHARED_H

#include <criterion/criterion.h>
#include <stddef.h>

#include "l3.h"

/* The bit depths of each colour model (l3_color order), and how many. */
static const unsigned depths_of[5][5] = {
    {1, 2, 4, 8, 16}, {8, 16}, {8, 16}, {8, 16}, {1, 2, 4, 8}};
static const unsigned ndepths[5] = {5, 2, 2, 2, 4};

static inline void *encode_or_fail(const struct l3_info *info, const void *px,
                            const struct l3_encode_options *eo, size_t *n)
{
    void *out = NULL;
    int st = l3_encode(info, px, 0, eo, &out, n);
    cr_assert_eq(st, L3_OK, "encode: %s", l3_strerror(st));
    return out;
}

#endif
