/* lib_ab.c — two builds of libl3.so decoding the same files in one process,
 * file by file and in turn (A B, then B A, ...), best of R per file and build:
 * the two see the same moment of a noisy machine, the same input and output
 * buffers and the same cache state, which two programs run one after the
 * other do not.
 *
 *   lib_ab LIB_A.so LIB_B.so [-r R] [-j THREADS] [--between MB] [--verify] FILE.l3...
 *
 * --verify: the decodes check the payload checksum (L3_DECODE_VERIFY), as a
 * loader that asks for verification does.
 * --between MB: writes MB MiB of other memory before each timed decode (its
 * input and output leave the caches, as in a loader that does other work
 * between images). One thread is timed in thread CPU time, more in wall
 * clock. Prints MB/s of decoded pixels for each build and B over A (above 1:
 * B is faster); both builds' pixels are compared and a difference fails. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "l3.h"

typedef int (*decode_fn)(const void *, size_t, void *, size_t, size_t,
                         const struct l3_decode_options *);
typedef int (*info_fn)(const void *, size_t, struct l3_info *, void *);
typedef size_t (*size_fn)(const struct l3_info *, size_t);

static double now(int cpu)
{
    struct timespec t;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    void *d = NULL;
    long len;
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (d = malloc((size_t)len)) != NULL && fread(d, 1, (size_t)len, f) != (size_t)len) {
        free(d);
        d = NULL;
    }
    fclose(f);
    *n = d ? (size_t)len : 0;
    return d;
}

int main(int argc, char **argv)
{
    unsigned reps = 5, threads = 1;
    size_t between = 0;
    int verify = 0;
    const char *lib[2] = {NULL, NULL};
    int first = 0;
    for (int i = 1; i < argc && !first; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            reps = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "-j") == 0 && i + 1 < argc)
            threads = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--between") == 0 && i + 1 < argc)
            between = (size_t)atoi(argv[++i]) << 20;
        else if (strcmp(argv[i], "--verify") == 0)
            verify = 1;
        else if (!lib[0])
            lib[0] = argv[i];
        else if (!lib[1])
            lib[1] = argv[i];
        else
            first = i;
    }
    if (!lib[1] || !first || reps == 0 || threads == 0) {
        fprintf(stderr, "usage: lib_ab LIB_A.so LIB_B.so [-r R] [-j THREADS] [--between MB] "
                        "[--verify] FILE.l3...\n");
        return 2;
    }
    decode_fn dec[2];
    info_fn info = NULL;
    size_fn dsize = NULL;
    for (int k = 0; k < 2; k++) {
        void *h = dlopen(lib[k], RTLD_NOW | RTLD_LOCAL);
        if (!h || !(dec[k] = (decode_fn)dlsym(h, "l3_decode"))) {
            fprintf(stderr, "lib_ab: %s: %s\n", lib[k], dlerror());
            return 1;
        }
        if (k == 0) {
            info = (info_fn)dlsym(h, "l3_read_info");
            dsize = (size_fn)dlsym(h, "l3_decoded_size");
            if (!info || !dsize) {
                fprintf(stderr, "lib_ab: %s: %s\n", lib[k], dlerror());
                return 1;
            }
        }
    }
    char *junk = between ? malloc(between) : NULL;
    if (between && !junk)
        return 1;
    struct l3_decode_options o;
    memset(&o, 0, sizeof o);
    o.threads = threads;
    o.flags = verify ? L3_DECODE_VERIFY : 0;
    const int cpu = threads == 1;
    double total[2] = {0, 0};
    size_t pixels = 0;
    for (int i = first; i < argc; i++) {
        size_t n;
        void *d = read_file(argv[i], &n);
        struct l3_info in;
        if (!d || info(d, n, &in, NULL) != L3_OK) {
            fprintf(stderr, "lib_ab: %s: not a readable L3 file\n", argv[i]);
            return 1;
        }
        size_t raw = dsize(&in, 0);
        unsigned char *out[2] = {malloc(raw), malloc(raw)};
        if (!out[0] || !out[1])
            return 1;
        double best[2] = {1e30, 1e30};
        for (unsigned r = 0; r < reps; r++)
            for (int j = 0; j < 2; j++) {
                int k = r & 1 ? 1 - j : j;
                if (junk)
                    memset(junk, (int)(r + j), between);
                double t0 = now(cpu);
                int st = dec[k](d, n, out[k], raw, 0, &o);
                double t = now(cpu) - t0;
                if (st != L3_OK) {
                    fprintf(stderr, "lib_ab: %s: build %c: status %d\n", argv[i], 'A' + k, st);
                    return 1;
                }
                if (t < best[k])
                    best[k] = t;
            }
        if (memcmp(out[0], out[1], raw) != 0) {
            fprintf(stderr, "lib_ab: %s: the two builds decode different pixels\n", argv[i]);
            return 1;
        }
        total[0] += best[0];
        total[1] += best[1];
        pixels += raw;
        free(out[0]);
        free(out[1]);
        free(d);
    }
    printf("%zu files, %u thread%s%s, best of %u: A %.1f MB/s, B %.1f MB/s, B/A %.3f\n",
           (size_t)(argc - first), threads, threads == 1 ? "" : "s",
           verify ? ", payload checksum checked" : "", reps, (double)pixels / total[0] / 1e6,
           (double)pixels / total[1] / 1e6, total[0] / total[1]);
    free(junk);
    return 0;
}
