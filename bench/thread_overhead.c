/* thread_overhead — what a multi-threaded l3_decode costs beyond its tiles:
 * a small image decoded many times with 1 and with 2 threads, in turn, into
 * a reused buffer; prints the lowest and the median time of each (the lowest
 * is the one that holds up when other processes share the CPUs).
 *
 *   thread_overhead [W H [CALLS [GAP_US]]]
 *
 * W x H (default 512 x 256) 8-bit RGB noise in 64 x 64 tiles (8 batches with
 * two threads), CALLS (default 1000) decodes of each, GAP_US (default 0)
 * microseconds of busy waiting on this thread before every decode, during
 * which the other CPU has nothing of ours to run (as between the decodes of
 * `l3 bench`). Exit status 1 when a decode fails or differs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "l3.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    unsigned w = argc > 1 ? (unsigned)atoi(argv[1]) : 512, h = argc > 2 ? (unsigned)atoi(argv[2]) : 256;
    unsigned calls = argc > 3 ? (unsigned)atoi(argv[3]) : 1000;
    double gap = argc > 4 ? atof(argv[4]) * 1e-6 : 0;
    if (w == 0 || h == 0 || calls == 0) {
        fprintf(stderr, "usage: thread_overhead [W H [CALLS [GAP_US]]]\n");
        return 2;
    }
    struct l3_info info;
    memset(&info, 0, sizeof info);
    info.width = w;
    info.height = h;
    info.color = L3_COLOR_RGB;
    info.bit_depth = 8;
    info.channels = 3;
    size_t n = (size_t)w * h * 3;
    unsigned char *px = malloc(n), *out = malloc(n);
    double *t[2] = {malloc(sizeof(double) * calls), malloc(sizeof(double) * calls)};
    if (!px || !out || !t[0] || !t[1])
        return 1;
    uint32_t s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        px[i] = (unsigned char)(s >> 16 & 0x3f);
    }
    void *l3 = NULL;
    size_t l3n = 0;
    if (l3_encode(&info, px, 0, NULL, &l3, &l3n) != L3_OK)
        return 1;
    for (unsigned c = 0; c < calls; c++)
        for (unsigned k = 0; k < 2; k++) {
            struct l3_decode_options o;
            memset(&o, 0, sizeof o);
            o.threads = k + 1;
            for (double end = now() + gap; gap > 0 && now() < end;)
                ;
            double t0 = now();
            int st = l3_decode(l3, l3n, out, n, 0, &o);
            t[k][c] = now() - t0;
            if (st != L3_OK || memcmp(out, px, n) != 0) {
                fprintf(stderr, "thread_overhead: %u-thread decode failed or differs\n", k + 1);
                return 1;
            }
        }
    for (unsigned k = 0; k < 2; k++)
        qsort(t[k], calls, sizeof(double), cmp_double);
    printf("%ux%u, %u calls, gap %.0f us: 1 thread lowest %.1f median %.1f us; "
           "2 threads lowest %.1f median %.1f us\n",
           w, h, calls, gap * 1e6, t[0][0] * 1e6, t[0][calls / 2] * 1e6, t[1][0] * 1e6,
           t[1][calls / 2] * 1e6);
    l3_free(l3);
    free(px);
    free(out);
    free(t[0]);
    free(t[1]);
    return 0;
}
