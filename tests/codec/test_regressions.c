/* test_regressions.c — the hand-built corrupt inputs of fuzz/regressions/
 * (tests/fuzz/make_regressions.c) give the status their EXPECT line names,
 * with the SIMD and the reference decoder, on 1 and 2 threads: a clear
 * error, the same one every time. (tests/fuzz replays the same files
 * through the fuzz harnesses.) */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l3.h"
#include "tc_file.h"

Test(regressions, corrupt_inputs_keep_their_status)
{
    const char *root = getenv("L3_SOURCE_ROOT");
    char dir[4096], path[4400];
    snprintf(dir, sizeof dir, "%s/fuzz/regressions", root ? root : ".");
    snprintf(path, sizeof path, "%s/EXPECT", dir);
    FILE *e = fopen(path, "r");
    cr_assert_not_null(e, "%s: %s", path, strerror(errno));
    char line[512];
    unsigned files = 0, failing = 0;
    while (fgets(line, sizeof line, e)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char name[256], kind[8];
        int want;
        cr_assert_eq(sscanf(line, "%255s %7s %d", name, kind, &want), 3, "EXPECT line: %s", line);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        size_t n;
        void *d = tc_slurp(path, &n);
        cr_assert_not_null(d, "%s: %s", path, strerror(errno));
        if (strcmp(kind, "png") == 0) {
            struct l3_info info;
            void *px = NULL;
            size_t pn = 0;
            int st = l3_png_decode(d, n, NULL, &info, &px, &pn);
            cr_assert_eq(st, want, "%s: l3_png_decode says %d (%s), EXPECT %d", name, st,
                         l3_strerror(st), want);
            l3_free(px);
        } else {
            cr_assert_str_eq(kind, "l3", "EXPECT line: %s", line);
            static const struct l3_decode_options ways[] = {
                {0, 1, {0, 0}}, {0, 2, {0, 0}}, {L3_DECODE_SCALAR, 1, {0, 0}},
                {L3_DECODE_SCALAR, 2, {0, 0}}};
            for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
                void *px = NULL;
                size_t pn = 0;
                int st = l3_decode_alloc(d, n, &ways[i], &px, &pn, NULL);
                cr_assert_eq(st, want, "%s (flags %#x, %u threads): l3_decode_alloc says %d (%s), EXPECT %d",
                             name, ways[i].flags, ways[i].threads, st, l3_strerror(st), want);
                l3_free(px);
            }
        }
        failing += want != L3_OK;
        files++;
        free(d);
    }
    fclose(e);
    cr_assert_geq(files, 50, "EXPECT lists %u files", files);
    cr_assert_geq(failing, 50, "only %u of the %u inputs are refused", failing, files);
}
