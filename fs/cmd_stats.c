/* cmd_stats.c — `l3fs stats MOUNTPOINT`: a human summary of
 * MOUNTPOINT/.l3fs/stats.json (docs/FS.md, "Statistics"). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "l3fs.h"

static char *read_small(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n < 0) {
                free(buf);
                buf = NULL;
            }
            break;
        }
        len += (size_t)n;
        if (len == cap) {
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int e = errno;
    close(fd);
    if (buf)
        buf[len] = '\0';
    errno = e;
    return buf;
}

char *l3fs_read_stats_json(const char *mountpoint)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" L3FS_CTL_DIR "/stats.json", mountpoint);
    return read_small(path);
}

static double num(const char *json, const char *path)
{
    double v = 0;
    l3fs_json_number(json, path, &v);
    return v;
}

static void print_rate(const char *label, double hits, double misses)
{
    double r = l3fs_hit_rate((uint64_t)hits, (uint64_t)misses);
    if (r < 0)
        printf("  %-22s -\n", label);
    else
        printf("  %-22s %.1f%% (%.0f hits, %.0f misses)\n", label, r * 100, hits, misses);
}

int l3fs_cmd_stats(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: l3fs stats MOUNTPOINT\n"
                        "Prints a summary of MOUNTPOINT/" L3FS_CTL_DIR "/stats.json.\n");
        return argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? 0 : 2;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" L3FS_CTL_DIR "/stats.json", argv[1]);
    char *j = l3fs_read_stats_json(argv[1]);
    if (!j) {
        fprintf(stderr, "l3fs stats: cannot read %s: %s (is an l3fs mounted there?)\n", path,
                strerror(errno));
        return 1;
    }
    double probe;
    if (l3fs_json_number(j, "fs.encodes", &probe) < 0) {
        fprintf(stderr, "l3fs stats: %s is not l3fs statistics\n", path);
        free(j);
        return 1;
    }
    char src[PATH_MAX] = "?", cdir[PATH_MAX] = "?", ver[64] = "?", b1[32], b2[32], b3[32];
    l3fs_json_string(j, "source", src, sizeof src);
    l3fs_json_string(j, "cache_dir", cdir, sizeof cdir);
    l3fs_json_string(j, "version", ver, sizeof ver);
    double up = num(j, "uptime_s");
    printf("l3fs %s: %s -> %s, up %.0fh%02.0fm%02.0fs\n", ver, src, argv[1],
           (double)(int)(up / 3600), (double)((int)up % 3600 / 60), (double)((int)up % 60));
    printf("this mount:\n");
    print_rate("open hit rate", num(j, "fs.l3_open_hits"), num(j, "fs.l3_open_misses"));
    printf("  %-22s %.0f (.l3 opens %.0f, lookups %.0f, sizes from index %.0f)\n", "encodes",
           num(j, "fs.encodes"), num(j, "fs.l3_opens"), num(j, "fs.lookups"),
           num(j, "fs.index_hits"));
    printf("  %-22s %.0f\n", "encode errors", num(j, "fs.encode_errors"));
    printf("  %-22s p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms (%.0f encodes)\n",
           "encode time", num(j, "encode_time_ms.p50"), num(j, "encode_time_ms.p90"),
           num(j, "encode_time_ms.p99"), num(j, "encode_time_ms.max"),
           num(j, "encode_time_ms.count"));
    printf("  %-22s %s of .l3, %s of other files\n", "served",
           l3fs_human_bytes((uint64_t)num(j, "fs.bytes_served"), b1, sizeof b1),
           l3fs_human_bytes((uint64_t)num(j, "fs.passthrough_bytes"), b2, sizeof b2));
    if (l3fs_json_number(j, "cache.objects", &probe) == 0) {
        printf("cache %s:\n", cdir);
        print_rate("hit rate (mount)", num(j, "cache.instance.hits"),
                   num(j, "cache.instance.misses"));
        print_rate("hit rate (all time)", num(j, "cache.total.hits"),
                   num(j, "cache.total.misses"));
        double maxb = num(j, "cache.max_bytes");
        printf("  %-22s %.0f objects, %s%s%s\n", "size", num(j, "cache.objects"),
               l3fs_human_bytes((uint64_t)num(j, "cache.object_bytes"), b1, sizeof b1),
               maxb > 0 ? " of " : " (no cap)",
               maxb > 0 ? l3fs_human_bytes((uint64_t)maxb, b3, sizeof b3) : "");
        printf("  %-22s %.0f evictions, %.0f corrupt objects repaired, %.0f write failures%s\n",
               "events", num(j, "cache.total.evictions"), num(j, "cache.total.corrupt_repaired"),
               num(j, "cache.total.write_failures"),
               num(j, "cache.writes_disabled") ? " (writes disabled)" : "");
    }
    free(j);
    return 0;
}

