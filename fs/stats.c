/* stats.c — encode timings, stats.json and Prometheus rendering, and the
 * small JSON reader `l3fs stats` uses. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l3fs.h"

void l3fs_timings_add(struct l3fs_timings *t, uint64_t ns)
{
    t->samples[t->count % L3FS_TIME_SAMPLES] = ns;
    t->count++;
    t->sum_ns += ns;
    if (ns > t->max_ns)
        t->max_ns = ns;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint64_t l3fs_timings_percentile(const struct l3fs_timings *t, double p)
{
    size_t n = t->count < L3FS_TIME_SAMPLES ? (size_t)t->count : L3FS_TIME_SAMPLES;
    if (n == 0)
        return 0;
    uint64_t *v = malloc(n * sizeof *v);
    if (!v)
        return 0;
    memcpy(v, t->samples, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_u64);
    if (p < 0)
        p = 0;
    if (p > 100)
        p = 100;
    /* nearest rank: the smallest value with at least p% of samples <= it */
    size_t rank = (size_t)((p / 100.0) * (double)n + 0.999999999);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    uint64_t r = v[rank - 1];
    free(v);
    return r;
}

double l3fs_hit_rate(uint64_t hits, uint64_t misses)
{
    if (hits + misses == 0)
        return -1;
    return (double)hits / (double)(hits + misses);
}

/* ---- a growing string ---- */
struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t ncap = b->cap ? b->cap * 2 : 1024;
        while (ncap < b->len + (size_t)n + 1)
            ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
}

static char *sb_finish(struct sbuf *b)
{
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

/* A JSON string (names escaped: l3fs_escape). */
static void sb_json_str(struct sbuf *b, const char *s)
{
    size_t need = l3fs_escape(s, 1, NULL, 0);
    char small[512];
    char *e = need < sizeof small ? small : malloc(need + 1);
    if (!e) {
        b->oom = 1;
        return;
    }
    l3fs_escape(s, 1, e, need + 1);
    sb_printf(b, "\"%s\"", e);
    if (e != small)
        free(e);
}

static void sb_rate(struct sbuf *b, double r)
{
    if (r < 0)
        sb_printf(b, "null");
    else
        sb_printf(b, "%.6f", r);
}

static void json_counters(struct sbuf *b, const struct l3cache_counters *c)
{
    const char *sep = "";
    sb_printf(b, "{");
#define ONE(name, desc)                                                   \
    sb_printf(b, "%s\"" #name "\": %" PRIu64, sep, c->name);              \
    sep = ", ";
    L3CACHE_COUNTERS(ONE)
#undef ONE
    sb_printf(b, ", \"hit_rate\": ");
    sb_rate(b, l3fs_hit_rate(c->hits, c->misses));
    sb_printf(b, "}");
}

char *l3fs_json_quote(const char *s)
{
    struct sbuf b = {0};
    sb_json_str(&b, s);
    return sb_finish(&b);
}

char *l3fs_json_cache_counters(const struct l3cache_counters *c)
{
    struct sbuf b = {0};
    json_counters(&b, c);
    return sb_finish(&b);
}

char *l3fs_render_json(const struct l3fs_snapshot *s)
{
    struct sbuf b = {0};
    sb_printf(&b, "{\n  \"version\": ");
    sb_json_str(&b, s->version);
    sb_printf(&b, ",\n  \"source\": ");
    sb_json_str(&b, s->source);
    sb_printf(&b, ",\n  \"cache_dir\": ");
    sb_json_str(&b, s->cache_dir);
    sb_printf(&b, ",\n  \"keep_names\": %d", s->keep_names ? 1 : 0);
    sb_printf(&b, ",\n  \"uptime_s\": %.3f,\n", s->uptime_s);
    const struct l3fs_fs_counters *f = &s->fs;
    const char *sep = "";
    sb_printf(&b, "  \"fs\": {");
#define ONE(field, prom, help)                                            \
    sb_printf(&b, "%s\"" #field "\": %" PRIu64, sep, f->field);           \
    sep = ", ";
    L3FS_FS_COUNTERS(ONE)
#undef ONE
    sb_printf(&b, ", \"hit_rate\": ");
    sb_rate(&b, l3fs_hit_rate(f->l3_open_hits, f->l3_open_misses));
    sb_printf(&b, "},\n");
    sb_printf(&b,
              "  \"encode_time_ms\": {\"count\": %" PRIu64 ", \"p50\": %.3f, \"p90\": %.3f"
              ", \"p99\": %.3f, \"max\": %.3f, \"mean\": %.3f},\n",
              s->encode_count, s->encode_p50_ns / 1e6, s->encode_p90_ns / 1e6,
              s->encode_p99_ns / 1e6, s->encode_max_ns / 1e6,
              s->encode_count ? (double)s->encode_sum_ns / 1e6 / (double)s->encode_count : 0.0);
    if (s->have_cache) {
        sb_printf(&b, "  \"cache\": {\n    \"instance\": ");
        json_counters(&b, &s->cache_instance);
        sb_printf(&b, ",\n    \"total\": ");
        json_counters(&b, &s->cache_total);
        sb_printf(&b,
                  ",\n    \"objects\": %" PRIu64 ", \"object_bytes\": %" PRIu64
                  ", \"max_bytes\": %" PRIu64 ", \"writes_disabled\": %s\n  }\n",
                  s->objects, s->object_bytes, s->max_bytes,
                  s->writes_disabled ? "true" : "false");
    } else {
        sb_printf(&b, "  \"cache\": null\n");
    }
    sb_printf(&b, "}\n");
    return sb_finish(&b);
}

/* A Prometheus label value: backslash, double quote and newline escaped;
 * other control characters as the text \xNN (as in the log; the format
 * itself escapes only those three, so they are written "\\xNN"). */
static void sb_label(struct sbuf *b, const char *name, const char *v)
{
    sb_printf(b, "%s%s=\"", b->len && b->p[b->len - 1] != '{' ? "," : "", name);
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            sb_printf(b, "\\%c", *v);
        else if (*v == '\n')
            sb_printf(b, "\\n");
        else if ((unsigned char)*v < 0x20 || *v == 0x7f)
            sb_printf(b, "\\\\x%02x", (unsigned)(unsigned char)*v);
        else
            sb_printf(b, "%c", *v);
    }
    sb_printf(b, "\"");
}

/* The Prometheus name of a cache counter: bytes_X -> X_bytes (one suffix
 * order for every byte counter: l3fs_cache_served_bytes_total beside
 * l3fs_served_bytes_total). */
static void cache_metric(char *out, size_t cap, const char *field)
{
    if (!strncmp(field, "bytes_", 6))
        snprintf(out, cap, "l3fs_cache_%s_bytes_total", field + 6);
    else
        snprintf(out, cap, "l3fs_cache_%s_total", field);
}

/* Every sample carries mount="MOUNTPOINT",source="SOURCE", so that the files of
 * two mounts in one node-exporter textfile directory do not collide. */
char *l3fs_render_prometheus(const struct l3fs_snapshot *s)
{
    struct sbuf id = {0}; /* the identifying labels, without braces */
    sb_printf(&id, "{");
    if (s->mountpoint)
        sb_label(&id, "mount", s->mountpoint);
    if (s->source)
        sb_label(&id, "source", s->source);
    char *ids = sb_finish(&id);
    if (!ids)
        return NULL;
    const char *L = ids + 1, *sep = ids[1] ? "," : "";
    struct sbuf b = {0};
    const struct l3fs_fs_counters *f = &s->fs;
#define ONE(field, prom, help)                                                               \
    sb_printf(&b, "# HELP " prom " " help "\n# TYPE " prom " counter\n" prom "{%s} %" PRIu64 \
                  "\n", L, f->field);
    L3FS_FS_COUNTERS(ONE)
#undef ONE
    sb_printf(&b, "# HELP l3fs_uptime_seconds Seconds since the mount.\n"
                  "# TYPE l3fs_uptime_seconds gauge\nl3fs_uptime_seconds{%s} %.3f\n",
              L, s->uptime_s);
    sb_printf(&b,
              "# HELP l3fs_encode_seconds Time to encode one PNG (recent encodes).\n"
              "# TYPE l3fs_encode_seconds summary\n"
              "l3fs_encode_seconds{%s%squantile=\"0.5\"} %.6f\n"
              "l3fs_encode_seconds{%s%squantile=\"0.9\"} %.6f\n"
              "l3fs_encode_seconds{%s%squantile=\"0.99\"} %.6f\n"
              "l3fs_encode_seconds{%s%squantile=\"1\"} %.6f\n"
              "l3fs_encode_seconds_sum{%s} %.6f\nl3fs_encode_seconds_count{%s} %" PRIu64 "\n",
              L, sep, s->encode_p50_ns / 1e9, L, sep, s->encode_p90_ns / 1e9, L, sep,
              s->encode_p99_ns / 1e9, L, sep, s->encode_max_ns / 1e9, L, s->encode_sum_ns / 1e9,
              L, s->encode_count);
    if (s->have_cache) {
        char m[96];
#define ONE(name, desc)                                                                   \
    cache_metric(m, sizeof m, #name);                                                     \
    sb_printf(&b,                                                                         \
              "# HELP %s Cache: " desc                                                    \
              " (scope instance: this mount; total: the cache directory).\n"              \
              "# TYPE %s counter\n%s{%s%sscope=\"instance\"} %" PRIu64 "\n"               \
              "%s{%s%sscope=\"total\"} %" PRIu64 "\n",                                     \
              m, m, m, L, sep, s->cache_instance.name, m, L, sep, s->cache_total.name);
        L3CACHE_COUNTERS(ONE)
#undef ONE
        sb_printf(&b,
                  "# HELP l3fs_cache_objects Objects in the cache directory.\n"
                  "# TYPE l3fs_cache_objects gauge\nl3fs_cache_objects{%s} %" PRIu64 "\n"
                  "# HELP l3fs_cache_object_bytes Bytes of objects in the cache directory.\n"
                  "# TYPE l3fs_cache_object_bytes gauge\nl3fs_cache_object_bytes{%s} %" PRIu64
                  "\n"
                  "# HELP l3fs_cache_max_bytes Size cap of the cache (0 = unlimited).\n"
                  "# TYPE l3fs_cache_max_bytes gauge\nl3fs_cache_max_bytes{%s} %" PRIu64 "\n"
                  "# HELP l3fs_cache_writes_disabled 1 after a write failure degraded the cache.\n"
                  "# TYPE l3fs_cache_writes_disabled gauge\nl3fs_cache_writes_disabled{%s} %d\n",
                  L, s->objects, L, s->object_bytes, L, s->max_bytes, L,
                  s->writes_disabled ? 1 : 0);
    }
    free(ids);
    return sb_finish(&b);
}

/* ---- a small JSON reader (enough for the objects rendered above) ---- */

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static const char *skip_value(const char *p);

static const char *skip_string(const char *p)
{
    if (*p != '"')
        return NULL;
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1])
            p++;
    return *p == '"' ? p + 1 : NULL;
}

static const char *skip_container(const char *p, char open, char close)
{
    if (*p != open)
        return NULL;
    p = skip_ws(p + 1);
    if (*p == close)
        return p + 1;
    for (;;) {
        if (open == '{') {
            p = skip_string(skip_ws(p));
            if (!p)
                return NULL;
            p = skip_ws(p);
            if (*p != ':')
                return NULL;
            p = skip_ws(p + 1);
        }
        p = skip_value(p);
        if (!p)
            return NULL;
        p = skip_ws(p);
        if (*p == ',') {
            p = skip_ws(p + 1);
            continue;
        }
        return *p == close ? p + 1 : NULL;
    }
}

static const char *skip_value(const char *p)
{
    p = skip_ws(p);
    if (*p == '"')
        return skip_string(p);
    if (*p == '{')
        return skip_container(p, '{', '}');
    if (*p == '[')
        return skip_container(p, '[', ']');
    const char *s = p;
    while (*p && !strchr(",}] \n\t\r", *p))
        p++;
    return p > s ? p : NULL;
}

/* Finds the value at a dotted path; returns a pointer to its first char. */
static const char *json_find(const char *json, const char *path)
{
    const char *p = skip_ws(json);
    while (*path) {
        const char *dot = strchr(path, '.');
        size_t klen = dot ? (size_t)(dot - path) : strlen(path);
        if (*p != '{')
            return NULL;
        p = skip_ws(p + 1);
        const char *found = NULL;
        while (*p && *p != '}') {
            const char *k = p;
            const char *ke = skip_string(k);
            if (!ke)
                return NULL;
            p = skip_ws(ke);
            if (*p != ':')
                return NULL;
            p = skip_ws(p + 1);
            if ((size_t)(ke - k - 2) == klen && memcmp(k + 1, path, klen) == 0) {
                found = p;
                break;
            }
            p = skip_value(p);
            if (!p)
                return NULL;
            p = skip_ws(p);
            if (*p == ',')
                p = skip_ws(p + 1);
        }
        if (!found)
            return NULL;
        p = found;
        path += klen + (dot ? 1 : 0);
        if (!dot)
            break;
    }
    return p;
}

int l3fs_json_number(const char *json, const char *path, double *value_ret)
{
    const char *p = json_find(json, path);
    if (!p)
        return -ENOENT;
    if (strncmp(p, "true", 4) == 0) {
        *value_ret = 1;
        return 0;
    }
    if (strncmp(p, "false", 5) == 0) {
        *value_ret = 0;
        return 0;
    }
    char *end;
    double v = strtod(p, &end);
    if (end == p)
        return -ENOENT;
    *value_ret = v;
    return 0;
}

int l3fs_json_string(const char *json, const char *path, char *out, size_t cap)
{
    const char *p = json_find(json, path);
    if (!p || *p != '"' || cap == 0)
        return -ENOENT;
    size_t n = 0;
    for (p++; *p && *p != '"'; p++) {
        char c = *p;
        if (c == '\\' && p[1]) {
            p++;
            unsigned u;
            if (*p == 'u' && sscanf(p + 1, "%4x", &u) == 1 && u < 0x80) {
                c = (char)u; /* what l3fs_escape writes: control characters */
                p += 4;
            } else {
                c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'r' ? '\r' : *p;
            }
        }
        if (n + 1 < cap)
            out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

const char *l3fs_human_bytes(uint64_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}
