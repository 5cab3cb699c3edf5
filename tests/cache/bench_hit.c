/* cache_bench_hit: cost of a cache hit next to opening the object directly,
 * side by side in one run.  Usage: cache_bench_hit [DIR] (default /tmp).
 * Prints per-call microseconds for l3cache_get (+ pread of the object) and
 * for open + fstat (+ pread) of the same object file. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    char root[512], png[600], dir[600], path[700];
    snprintf(root, sizeof(root), "%s/l3cache-bench-XXXXXX", argc > 1 ? argv[1] : "/tmp");
    if (!mkdtemp(root))
        return 1;
    snprintf(png, sizeof(png), "%s/a.png", root);
    snprintf(dir, sizeof(dir), "%s/cache", root);
    if (write_png(png, 512, 512, 1, 1) != 0)
        return 1;
    struct fake_codec fc = {0};
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    struct l3cache_options o = {.dir = dir, .fsync_policy = L3CACHE_FSYNC_OBJECT};
    l3cache *c;
    if (l3cache_open_internal(&o, &in, &c) != 0)
        return 1;
    int sfd = open(png, O_RDONLY);
    struct stat st;
    fstat(sfd, &st);
    struct l3cache_object obj;
    if (get_fd(c, sfd, &obj, NULL) != 0)
        return 1;
    close(obj.fd);
    char rel[64];
    l3cache_object_relpath(&obj.key, rel);
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    enum { N = 20000 };
    char *buf = malloc(obj.size);
    long sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        for (int i = 0; i < N; i++) {
            get_fd(c, sfd, &obj, NULL);
            sink += pread(obj.fd, buf, obj.size, 0);
            close(obj.fd);
        }
        double t1 = now();
        for (int i = 0; i < N; i++) {
            int fd = open(path, O_RDONLY);
            struct stat s2;
            fstat(fd, &s2);
            sink += pread(fd, buf, (size_t)s2.st_size, 0);
            close(fd);
        }
        double t2 = now();
        for (int i = 0; i < N; i++) {
            get_fd(c, sfd, &obj, NULL);
            close(obj.fd);
        }
        double t3 = now();
        for (int i = 0; i < N; i++) {
            int fd = open(path, O_RDONLY);
            struct stat s2;
            sink += fstat(fd, &s2);
            close(fd);
        }
        double t4 = now();
        printf("object %llu B: get+pread %.1f us, open+fstat+pread %.1f us (%.0f%%); "
               "get %.1f us, open+fstat %.1f us\n",
               (unsigned long long)obj.size, (t1 - t0) / N * 1e6, (t2 - t1) / N * 1e6,
               100.0 * (t2 - t1) / (t1 - t0), (t3 - t2) / N * 1e6, (t4 - t3) / N * 1e6);
    }
    free(buf);
    close(sfd);
    l3cache_close(c);
    remove_tree(root);
    return sink < 0;
}
