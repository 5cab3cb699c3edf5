/* hash_bench — libxxhash's plain XXH3-64 entry point against its
 * runtime-dispatched one (codec/l3_xxh.h), on the same bytes in turn:
 * chunks of 4 KiB to 256 KiB over a buffer of SIZE MiB (default 1: in L2;
 * 64: in DRAM), best of 5 rounds. Prints GB/s of each and checks that both
 * give the same hashes.
 *
 *   hash_bench [SIZE_MIB] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
#define XXH_DISPATCH_DISABLE_REPLACE /* both sets by their own names */
#include <xxh_x86dispatch.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)atoi(argv[1]) : 1;
    if (mib == 0 || mib > 4096) {
        fprintf(stderr, "usage: hash_bench [SIZE_MIB (1-4096)]\n");
        return 2;
    }
    size_t n = mib << 20;
    uint8_t *b = malloc(n);
    if (!b)
        return 1;
    uint64_t s = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        b[i] = (uint8_t)(s >> 24);
    }
    unsigned passes = (unsigned)(256 / mib) + 1;
    for (size_t chunk = 4096; chunk <= 262144; chunk *= 4) {
        double best[2] = {1e9, 1e9};
        uint64_t sum[2] = {0, 0};
        for (int round = 0; round < 5; round++)
            for (int k = 0; k < 2; k++) {
                uint64_t acc = 0;
                double t0 = now();
                for (unsigned p = 0; p < passes; p++)
                    for (size_t o = 0; o + chunk <= n; o += chunk)
                        acc += k ? XXH3_64bits_dispatch(b + o, chunk) : XXH3_64bits(b + o, chunk);
                double t = now() - t0;
                best[k] = t < best[k] ? t : best[k];
                sum[k] = acc;
            }
        double bytes = (double)passes * (double)(n / chunk * chunk);
        printf("%zu MiB, chunks of %3zu KiB: plain %5.1f GB/s, dispatched %5.1f GB/s (%.1fx)\n",
               mib, chunk >> 10, bytes / best[0] / 1e9, bytes / best[1] / 1e9, best[0] / best[1]);
        if (sum[0] != sum[1]) {
            fprintf(stderr, "hash_bench: the two entry points give different hashes\n");
            return 1;
        }
    }
    free(b);
    return 0;
}
