/* map_hash_bench — what the checked read's hash costs besides the hash:
 * XXH3-64 (the build's entry point, codec/l3_xxh.h) of every 64 KiB chunk
 * of the given files, whose pages must be in the page cache already (read
 * them once first), four ways, best of 40 passes over all of them:
 *
 *   fresh mapping    mmap + MADV_RANDOM, hash, munmap per file and pass: what
 *                    a daemon's first read of each object pays (cache/spliced.c)
 *   fresh, kept      the same without the munmap (the mappings are leaked:
 *                    at most 40 times the files' size of address space)
 *   populated        one mapping per file made before the passes: the hash
 *                    alone, on page tables already filled
 *   pread            each chunk copied into one buffer, then hashed there
 *
 *   map_hash_bench FILE... */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "l3_xxh.h"

#define CHUNK 65536
#define PASSES 40

enum way { FRESH, FRESH_KEPT, POPULATED, PREAD, WAYS };
static const char *const names[WAYS] = {"fresh mapping", "fresh, kept", "populated", "pread"};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t hash_chunks(const uint8_t *m, size_t n)
{
    uint64_t s = 0;
    for (size_t o = 0; o < n; o += CHUNK)
        s += XXH3_64bits(m + o, n - o < CHUNK ? n - o : CHUNK);
    return s;
}

int main(int argc, char **argv)
{
    int nf = argc - 1;
    if (nf < 1) {
        fprintf(stderr, "usage: map_hash_bench FILE...\n");
        return 2;
    }
    int *fd = calloc((size_t)nf, sizeof *fd);
    size_t *size = calloc((size_t)nf, sizeof *size);
    const uint8_t **kept = calloc((size_t)nf, sizeof *kept);
    uint8_t *buf = malloc(CHUNK);
    if (!fd || !size || !kept || !buf)
        return 1;
    double total = 0;
    for (int i = 0; i < nf; i++) {
        struct stat st;
        fd[i] = open(argv[i + 1], O_RDONLY | O_CLOEXEC);
        if (fd[i] < 0 || fstat(fd[i], &st) != 0 || st.st_size <= 0) {
            fprintf(stderr, "map_hash_bench: %s: not a readable non-empty file\n", argv[i + 1]);
            return 1;
        }
        size[i] = (size_t)st.st_size;
        total += (double)size[i];
        void *m = mmap(NULL, size[i], PROT_READ, MAP_SHARED, fd[i], 0);
        if (m == MAP_FAILED)
            return 1;
        kept[i] = m;
    }
    uint64_t sums[WAYS] = {0};
    double best[WAYS];
    for (int w = 0; w < WAYS; w++)
        best[w] = 1e9;
    for (int pass = 0; pass < PASSES; pass++)
        for (int w = 0; w < WAYS; w++) {
            uint64_t s = 0;
            double t0 = now();
            for (int i = 0; i < nf; i++) {
                if (w == POPULATED) {
                    s += hash_chunks(kept[i], size[i]);
                } else if (w == PREAD) {
                    for (size_t o = 0; o < size[i]; o += CHUNK) {
                        size_t len = size[i] - o < CHUNK ? size[i] - o : CHUNK;
                        if (pread(fd[i], buf, len, (off_t)o) != (ssize_t)len)
                            return 1;
                        s += XXH3_64bits(buf, len);
                    }
                } else {
                    void *m = mmap(NULL, size[i], PROT_READ, MAP_SHARED, fd[i], 0);
                    if (m == MAP_FAILED)
                        return 1;
                    madvise(m, size[i], MADV_RANDOM);
                    s += hash_chunks(m, size[i]);
                    if (w == FRESH)
                        munmap(m, size[i]);
                }
            }
            double t = now() - t0;
            best[w] = t < best[w] ? t : best[w];
            sums[w] = s;
        }
    printf("%d files, %.1f MB, chunks of %d KiB, best of %d passes:\n", nf, total / 1e6,
           CHUNK >> 10, PASSES);
    for (int w = 0; w < WAYS; w++)
        printf("  %-14s %7.3f ms  %5.1f GB/s\n", names[w], best[w] * 1e3, total / best[w] / 1e9);
    for (int w = 1; w < WAYS; w++)
        if (sums[w] != sums[0]) {
            fprintf(stderr, "map_hash_bench: the ways hashed different bytes\n");
            return 1;
        }
    return 0;
}
