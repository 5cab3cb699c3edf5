/* cache_hammer: one process of the multi-process tests. Opens the cache in
 * DIR and, for SECONDS, gets random files of the list with THREADS threads,
 * checking every returned object against the expected bytes.
 *   cache_hammer DIR SECONDS SEED CAP_BYTES THREADS FILE...
 * SECONDS 0 means one pass over the files per thread. Exits 0 when every
 * object was right, 3 on a wrong object, 1 on an error. Prints counters. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

struct file {
    const char *path;
    uint8_t *expect;
    size_t expect_size;
};

static struct file *files;
static int nfiles;
static l3cache *cache;
static double seconds;
static unsigned seed;
static atomic_int bad;
static atomic_long gets;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
    unsigned x = seed * 7919u + (unsigned)(uintptr_t)arg * 104729u + 1u;
    double end = now_s() + seconds;
    for (int i = 0;; i++) {
        if (seconds > 0 ? now_s() >= end : i >= nfiles)
            break;
        x = x * 1103515245u + 12345u;
        struct file *f = &files[seconds > 0 ? (x >> 8) % (unsigned)nfiles : (unsigned)i];
        int fd = open(f->path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            fprintf(stderr, "hammer: open %s: %s\n", f->path, strerror(errno));
            atomic_store(&bad, 1);
            break;
        }
        struct l3cache_object obj;
        int r = get_fd(cache, fd, &obj, NULL);
        close(fd);
        if (r < 0) {
            fprintf(stderr, "hammer: get %s: %s\n", f->path, strerror(-r));
            atomic_store(&bad, 1);
            break;
        }
        uint8_t *got = NULL;
        long n = read_fd(obj.fd, &got);
        close(obj.fd);
        if (n < 0 || (size_t)n != f->expect_size || obj.size != f->expect_size ||
            memcmp(got, f->expect, f->expect_size) != 0) {
            fprintf(stderr, "hammer: WRONG BYTES for %s (got %ld, size %" PRIu64 ", want %zu)\n",
                    f->path, n, obj.size, f->expect_size);
            atomic_store(&bad, 3);
            free(got);
            break;
        }
        free(got);
        atomic_fetch_add(&gets, 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: cache_hammer DIR SECONDS SEED CAP_BYTES THREADS FILE...\n");
        return 1;
    }
    seconds = atof(argv[2]);
    seed = (unsigned)strtoul(argv[3], NULL, 10);
    uint64_t cap = strtoull(argv[4], NULL, 10);
    int threads = atoi(argv[5]);
    nfiles = argc - 6;
    files = calloc((size_t)nfiles, sizeof(*files));
    for (int i = 0; i < nfiles; i++) {
        files[i].path = argv[6 + i];
        if (fake_expected(files[i].path, &files[i].expect, &files[i].expect_size) != 0) {
            fprintf(stderr, "hammer: cannot read %s\n", files[i].path);
            return 1;
        }
    }
    struct fake_codec fc = {0};
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    in.touch_interval_s = UINT32_MAX;
    in.scan_interval_ms = 50;
    struct l3cache_options o = {
        .dir = argv[1],
        .max_bytes = cap,
        .fsync_policy = (int)(seed % 3),
    };
    int r = l3cache_open_internal(&o, &in, &cache);
    if (r < 0) {
        fprintf(stderr, "hammer: open %s: %s\n", argv[1], strerror(-r));
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    pthread_t t[64];
    if (threads < 1 || threads > 64)
        threads = 1;
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    struct l3cache_stats s;
    l3cache_get_stats(cache, &s);
    l3cache_close(cache);
    printf("gets %ld lookups %" PRIu64 " hits %" PRIu64 " encodes %" PRIu64
           " evictions %" PRIu64 " corrupt %" PRIu64 "\n",
           atomic_load(&gets), s.instance.lookups, s.instance.hits, s.instance.encodes,
           s.instance.evictions, s.instance.corrupt_repaired);
    for (int i = 0; i < nfiles; i++)
        free(files[i].expect);
    free(files);
    return atomic_load(&bad);
}
