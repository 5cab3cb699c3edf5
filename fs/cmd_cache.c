/* cmd_cache.c — `l3fs cache stats|verify|gc|clear --cache-dir DIR
 * [--cache-size SIZE] [--json]`: maintenance of a cache directory through
 * libl3cache (which never prints; this command does). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "l3fs.h"

enum cache_cmd { CMD_STATS, CMD_VERIFY, CMD_GC, CMD_CLEAR };

struct cache_args {
    enum cache_cmd cmd;
    const char *dir, *size_text;
    int json;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: l3fs cache COMMAND --cache-dir DIR [--cache-size SIZE] [--json]\n"
            "commands:\n"
            "  stats    counters of the cache directory (all processes, all time)\n"
            "  verify   check every object's checksums; remove bad ones\n"
            "  gc       apply the size cap now (--cache-size, e.g. 50G, 512M, 10%%)\n"
            "           and remove stale temporary files\n"
            "  clear    remove every object and the index\n");
}

/* 0 parsed, 1 help printed, 2 usage error (printed). */
static int parse(int argc, char **argv, struct cache_args *a)
{
    static const char *const names[] = {"stats", "verify", "gc", "clear"};
    const char *cmd = NULL;
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(s, "--json")) {
            a->json = 1;
        } else if (!strcmp(s, "--cache-dir") || !strcmp(s, "--cache-size")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "l3fs cache: %s needs a value\n", s);
                return 2;
            }
            *(s[8] == 'd' ? &a->dir : &a->size_text) = argv[++i];
        } else if (!strncmp(s, "--cache-dir=", 12)) {
            a->dir = s + 12;
        } else if (!strncmp(s, "--cache-size=", 13)) {
            a->size_text = s + 13;
        } else if (s[0] == '-') {
            fprintf(stderr, "l3fs cache: unknown option %s\n", s);
            usage(stderr);
            return 2;
        } else if (!cmd) {
            cmd = s;
        } else {
            fprintf(stderr, "l3fs cache: unexpected argument %s\n", s);
            return 2;
        }
    }
    if (!cmd || !a->dir) {
        usage(stderr);
        return 2;
    }
    for (int i = 0; i < 4; i++)
        if (!strcmp(cmd, names[i])) {
            a->cmd = (enum cache_cmd)i;
            return 0;
        }
    fprintf(stderr, "l3fs cache: unknown command %s\n", cmd);
    usage(stderr);
    return 2;
}

static int print_stats(l3cache *c, const struct cache_args *a)
{
    struct l3cache_stats s;
    int r = l3cache_get_stats(c, &s);
    if (r < 0) {
        fprintf(stderr, "l3fs cache stats: %s\n", strerror(-r));
        return 1;
    }
    const struct l3cache_counters *t = &s.total;
    if (a->json) {
        char *dir = l3fs_json_quote(a->dir), *cnt = l3fs_json_cache_counters(t);
        if (dir && cnt)
            printf("{\n  \"cache_dir\": %s,\n  \"objects\": %" PRIu64 ",\n  \"object_bytes\": %" PRIu64
                   ",\n  \"max_bytes\": %" PRIu64 ",\n  \"index_entries\": %" PRIu64
                   ",\n  \"writes_disabled\": %d,\n  \"total\": %s\n}\n",
                   dir, s.objects, s.object_bytes, s.max_bytes, s.index_entries,
                   s.writes_disabled, cnt);
        free(dir);
        free(cnt);
        return dir && cnt ? 0 : 1;
    }
    char b1[32], b2[32];
    printf("cache directory    %s\n", a->dir);
    printf("objects            %" PRIu64 " (%s)", s.objects,
           l3fs_human_bytes(s.object_bytes, b1, sizeof b1));
    if (s.max_bytes)
        printf(", cap %s (%.1f%% used)", l3fs_human_bytes(s.max_bytes, b2, sizeof b2),
               100.0 * (double)s.object_bytes / (double)s.max_bytes);
    printf("\nindex entries      %" PRIu64 "\n", s.index_entries);
    printf("all processes, all time:\n");
#define ONE(name, desc)                                                                   \
    if (strstr(#name, "bytes"))                                                           \
        printf("  %-16s %s\n", #name, l3fs_human_bytes(t->name, b1, sizeof b1));          \
    else                                                                                  \
        printf("  %-16s %" PRIu64 "\n", #name, t->name);
    L3CACHE_COUNTERS(ONE)
#undef ONE
    double rate = l3fs_hit_rate(t->hits, t->misses);
    if (rate < 0)
        printf("  %-16s -\n", "hit rate");
    else
        printf("  %-16s %.1f%%\n", "hit rate", 100.0 * rate);
    return 0;
}

static int run_verify(l3cache *c, const struct cache_args *a)
{
    uint64_t checked = 0, bad = 0;
    int r = l3cache_verify_all(c, &checked, &bad);
    if (r < 0) {
        fprintf(stderr, "l3fs cache verify: %s\n", strerror(-r));
        return 1;
    }
    if (a->json)
        printf("{\"checked\": %" PRIu64 ", \"bad\": %" PRIu64 "}\n", checked, bad);
    else
        printf("checked %" PRIu64 " objects, %" PRIu64 " bad%s\n", checked, bad,
               bad ? " (removed; they are re-created on next access)" : "");
    return bad ? 1 : 0;
}

static int run_gc(l3cache *c, const struct cache_args *a)
{
    uint64_t freed = 0;
    int r = l3cache_gc(c, &freed);
    if (r < 0) {
        fprintf(stderr, "l3fs cache gc: %s\n", strerror(-r));
        return 1;
    }
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    char f[32], b[32];
    if (a->json)
        printf("{\"freed_bytes\": %" PRIu64 ", \"evictions\": %" PRIu64 ", \"objects\": %" PRIu64
               ", \"object_bytes\": %" PRIu64 "}\n",
               freed, s.instance.evictions, s.objects, s.object_bytes);
    else
        printf("evicted %" PRIu64 " objects (%s); %" PRIu64 " objects (%s) remain\n",
               s.instance.evictions, l3fs_human_bytes(freed, f, sizeof f), s.objects,
               l3fs_human_bytes(s.object_bytes, b, sizeof b));
    return 0;
}

static int run_clear(l3cache *c, const struct cache_args *a)
{
    int r = l3cache_clear(c);
    if (r < 0) {
        fprintf(stderr, "l3fs cache clear: %s\n", strerror(-r));
        return 1;
    }
    if (!a->json)
        printf("cleared %s\n", a->dir);
    return 0;
}

int l3fs_cmd_cache(int argc, char **argv)
{
    struct cache_args a;
    int p = parse(argc, argv, &a);
    if (p)
        return p == 1 ? 0 : 2;
    struct l3cache_options o = {.dir = a.dir, .fsync_policy = L3CACHE_FSYNC_OBJECT};
    if (a.size_text && l3cache_parse_size(a.size_text, a.dir, &o.max_bytes) < 0) {
        fprintf(stderr, "l3fs cache: bad --cache-size %s\n", a.size_text);
        return 2;
    }
    if (a.cmd == CMD_STATS) {
        /* never create or change anything just to look */
        struct stat st;
        if (stat(a.dir, &st) != 0) {
            fprintf(stderr, "l3fs cache: %s: %s\n", a.dir, strerror(errno));
            return 1;
        }
        o.flags |= L3CACHE_READONLY;
    }
    o.flags |= L3CACHE_NO_BACKGROUND;
    l3cache *c = NULL;
    int r = l3cache_open(&o, &c);
    if (r < 0) {
        fprintf(stderr, "l3fs cache: cannot open %s: %s\n", a.dir, strerror(-r));
        return 1;
    }
    static int (*const run[])(l3cache *, const struct cache_args *) = {
        [CMD_STATS] = print_stats, [CMD_VERIFY] = run_verify, [CMD_GC] = run_gc,
        [CMD_CLEAR] = run_clear};
    int rc = run[a.cmd](c, &a);
    l3cache_close(c);
    return rc;
}
