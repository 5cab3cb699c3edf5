/* cli.c — `l3fs cache stats|verify|gc|clear --cache-dir DIR`. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l3cache_internal.h"

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

static void human(uint64_t v, char *buf, size_t size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double d = (double)v;
    int u = 0;
    while (d >= 1024.0 && u < 5) {
        d /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", v);
    else
        snprintf(buf, size, "%.1f %s", d, units[u]);
}

static double rate(uint64_t hits, uint64_t lookups)
{
    return lookups ? 100.0 * (double)hits / (double)lookups : 0.0;
}

static void print_counters_json(const char *name, const struct l3cache_counters *c)
{
    printf("  \"%s\": {\"lookups\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64
           ", \"hit_rate\": %.4f, \"encodes\": %" PRIu64 ", \"encode_failures\": %" PRIu64
           ", \"bytes_served\": %" PRIu64 ", \"bytes_written\": %" PRIu64
           ", \"evictions\": %" PRIu64 ", \"evicted_bytes\": %" PRIu64
           ", \"corrupt_repaired\": %" PRIu64 ", \"write_failures\": %" PRIu64 "}",
           name, c->lookups, c->hits, c->misses,
           c->lookups ? (double)c->hits / (double)c->lookups : 0.0, c->encodes,
           c->encode_failures, c->bytes_served, c->bytes_written, c->evictions,
           c->evicted_bytes, c->corrupt_repaired, c->write_failures);
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static int cmd_stats(l3cache *c, const char *dir, int json)
{
    l3cache_rescan(c);
    struct l3cache_stats s;
    int r = l3cache_get_stats(c, &s);
    if (r < 0) {
        fprintf(stderr, "l3fs cache stats: %s\n", strerror(-r));
        return 1;
    }
    const struct l3cache_counters *t = &s.total;
    if (json) {
        printf("{\n  \"cache_dir\": ");
        json_string(dir);
        printf(",\n  \"objects\": %" PRIu64 ",\n  \"object_bytes\": %" PRIu64
               ",\n  \"max_bytes\": %" PRIu64 ",\n  \"index_entries\": %" PRIu64
               ",\n  \"writes_disabled\": %d,\n",
               s.objects, s.object_bytes, s.max_bytes, s.index_entries, s.writes_disabled);
        print_counters_json("total", t);
        printf("\n}\n");
        return 0;
    }
    char a[32], b[32], w[32], e[32];
    human(s.object_bytes, a, sizeof(a));
    human(t->bytes_served, b, sizeof(b));
    human(t->bytes_written, w, sizeof(w));
    human(t->evicted_bytes, e, sizeof(e));
    printf("cache directory    %s\n", dir);
    printf("objects            %" PRIu64 " (%s)", s.objects, a);
    if (s.max_bytes) {
        char m[32];
        human(s.max_bytes, m, sizeof(m));
        printf(", cap %s (%.1f%% used)", m, 100.0 * (double)s.object_bytes / (double)s.max_bytes);
    }
    printf("\nindex entries      %" PRIu64 "\n", s.index_entries);
    printf("all processes, all time:\n");
    printf("  lookups          %" PRIu64 "\n", t->lookups);
    printf("  hits             %" PRIu64 "\n", t->hits);
    printf("  misses           %" PRIu64 "\n", t->misses);
    printf("  hit rate         %.1f%%\n", rate(t->hits, t->lookups));
    printf("  encodes          %" PRIu64 " (%" PRIu64 " failed)\n", t->encodes, t->encode_failures);
    printf("  bytes served     %s\n", b);
    printf("  bytes written    %s\n", w);
    printf("  evictions        %" PRIu64 " (%s)\n", t->evictions, e);
    printf("  corrupt repaired %" PRIu64 "\n", t->corrupt_repaired);
    printf("  write failures   %" PRIu64 "\n", t->write_failures);
    return 0;
}

int l3cache_cli_main(int argc, char **argv)
{
    const char *cmd = NULL, *dir = NULL, *size_text = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--cache-dir") || !strcmp(a, "--cache-size")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "l3fs cache: %s needs a value\n", a);
                return 2;
            }
            if (a[8] == 'd')
                dir = argv[++i];
            else
                size_text = argv[++i];
        } else if (!strncmp(a, "--cache-dir=", 12)) {
            dir = a + 12;
        } else if (!strncmp(a, "--cache-size=", 13)) {
            size_text = a + 13;
        } else if (a[0] == '-') {
            fprintf(stderr, "l3fs cache: unknown option %s\n", a);
            usage(stderr);
            return 2;
        } else if (!cmd) {
            cmd = a;
        } else {
            fprintf(stderr, "l3fs cache: unexpected argument %s\n", a);
            return 2;
        }
    }
    if (!cmd || !dir) {
        usage(stderr);
        return 2;
    }
    int is_stats = !strcmp(cmd, "stats"), is_verify = !strcmp(cmd, "verify");
    int is_gc = !strcmp(cmd, "gc"), is_clear = !strcmp(cmd, "clear");
    if (!is_stats && !is_verify && !is_gc && !is_clear) {
        fprintf(stderr, "l3fs cache: unknown command %s\n", cmd);
        usage(stderr);
        return 2;
    }
    struct l3cache_options o = {.dir = dir, .fsync_policy = L3CACHE_FSYNC_OBJECT};
    if (size_text) {
        int r = l3cache_parse_size(size_text, dir, &o.max_bytes);
        if (r < 0) {
            fprintf(stderr, "l3fs cache: bad --cache-size %s\n", size_text);
            return 2;
        }
    }
    if (is_stats) {
        /* never create or change anything just to look */
        struct stat st;
        if (stat(dir, &st) != 0) {
            fprintf(stderr, "l3fs cache: %s: %s\n", dir, strerror(errno));
            return 1;
        }
        o.flags |= L3CACHE_READONLY;
    }
    struct l3cache_internal in = {.no_background = 1};
    l3cache *c = NULL;
    int r = l3cache_open_internal(&o, &in, &c);
    if (r < 0) {
        fprintf(stderr, "l3fs cache: cannot open %s: %s\n", dir, strerror(-r));
        return 1;
    }
    int rc = 0;
    if (is_stats) {
        rc = cmd_stats(c, dir, json);
    } else if (is_verify) {
        uint64_t checked = 0, bad = 0;
        r = l3cache_verify_all(c, &checked, &bad);
        if (r < 0) {
            fprintf(stderr, "l3fs cache verify: %s\n", strerror(-r));
            rc = 1;
        } else if (json) {
            printf("{\"checked\": %" PRIu64 ", \"bad\": %" PRIu64 "}\n", checked, bad);
        } else {
            printf("checked %" PRIu64 " objects, %" PRIu64 " bad%s\n", checked, bad,
                   bad ? " (removed; they are re-created on next access)" : "");
        }
        if (bad)
            rc = 1;
    } else if (is_gc) {
        uint64_t freed = 0;
        r = l3cache_gc(c, &freed);
        if (r < 0) {
            fprintf(stderr, "l3fs cache gc: %s\n", strerror(-r));
            rc = 1;
        } else {
            struct l3cache_stats s;
            l3cache_get_stats(c, &s);
            char f[32], a[32];
            human(freed, f, sizeof(f));
            human(s.object_bytes, a, sizeof(a));
            if (json)
                printf("{\"freed_bytes\": %" PRIu64 ", \"evictions\": %" PRIu64
                       ", \"objects\": %" PRIu64 ", \"object_bytes\": %" PRIu64 "}\n",
                       freed, s.instance.evictions, s.objects, s.object_bytes);
            else
                printf("evicted %" PRIu64 " objects (%s); %" PRIu64 " objects (%s) remain\n",
                       s.instance.evictions, f, s.objects, a);
        }
    } else {
        r = l3cache_clear(c);
        if (r < 0) {
            fprintf(stderr, "l3fs cache clear: %s\n", strerror(-r));
            rc = 1;
        } else if (!json) {
            printf("cleared %s\n", dir);
        }
    }
    l3cache_close(c);
    return rc;
}
