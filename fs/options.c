/* options.c — the l3fs command line: `--name value`, `--name=value` and
 * `-o name=value` for every l3fs option; other -o options go to libfuse
 * (which of those are known: mount_opts.c; the help text: usage.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "l3cache.h"
#include "l3fs.h"
#include "mount_opts.h"

int l3fs_parse_log_level(const char *s)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    if (strcasecmp(s, "warning") == 0)
        return L3FS_LOG_WARN;
    return -1;
}


static unsigned ncpu(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

static char *default_cache_dir(void)
{
    const char *x = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char buf[PATH_MAX];
    if (geteuid() == 0)
        return strdup("/var/cache/l3fs");
    if (x && x[0] == '/')
        snprintf(buf, sizeof buf, "%s/l3fs", x);
    else if (home && home[0] == '/')
        snprintf(buf, sizeof buf, "%s/.cache/l3fs", home);
    else
        return strdup("/var/tmp/l3fs-cache");
    return strdup(buf);
}

static int set_str(char **dst, const char *v)
{
    char *s = strdup(v);
    if (!s)
        return -ENOMEM;
    free(*dst);
    *dst = s;
    return 0;
}

static int parse_uint(const char *name, const char *v, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(v, &end, 10);
    if (errno || end == v || *end || x == 0 || x > 4096) {
        fprintf(stderr, "l3fs: bad value for %s: '%s' (a number 1..4096)\n", name, v);
        return -EINVAL;
    }
    *out = (unsigned)x;
    return 0;
}

static int parse_seconds(const char *name, const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= 0) || x > 1e7) {
        fprintf(stderr, "l3fs: bad value for %s: '%s' (seconds)\n", name, v);
        return -EINVAL;
    }
    *out = x;
    return 0;
}

/* "1000000", "64M", "4G" (powers of 1024 for K/M/G/T; plain numbers as is). */
static int parse_count(const char *name, const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    uint64_t mul = 1;
    if (*end && !end[1]) {
        switch (*end) {
        case 'k': case 'K': mul = 1ull << 10; end++; break;
        case 'm': case 'M': mul = 1ull << 20; end++; break;
        case 'g': case 'G': mul = 1ull << 30; end++; break;
        case 't': case 'T': mul = 1ull << 40; end++; break;
        }
    }
    if (errno || end == v || *end || x == 0 || x > UINT64_MAX / mul) {
        fprintf(stderr, "l3fs: bad value for %s: '%s' (a number, optionally K, M, G, T)\n",
                name, v);
        return -EINVAL;
    }
    *out = (uint64_t)x * mul;
    return 0;
}

/* True when the comma-separated FUSE option list holds `opt` as an item. */
static int has_fuse_opt(const struct l3fs_options *o, const char *opt)
{
    size_t n = strlen(opt);
    for (const char *p = o->fuse_opts; p && *p;) {
        const char *e = strchr(p, ',');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !memcmp(p, opt, n))
            return 1;
        p = e ? e + 1 : p + k;
    }
    return 0;
}

static int add_fuse_opt(struct l3fs_options *o, const char *opt)
{
    size_t a = o->fuse_opts ? strlen(o->fuse_opts) : 0, b = strlen(opt);
    char *p = realloc(o->fuse_opts, a + b + 2);
    if (!p)
        return -ENOMEM;
    if (a)
        p[a++] = ',';
    memcpy(p + a, opt, b + 1);
    o->fuse_opts = p;
    return 0;
}

/* Option names with a value; '-' and '_' are the same. */
static const char *const valued[] = {"cache-dir", "cache-size", "exclude", "jobs",
                                     "threads", "encode-threads", "max-threads", "timeout",
                                     "dir-timeout", "fsync", "log-level", "max-pixels",
                                     "max-memory", "effort", "log-file", NULL};

static int is_valued(const char *name)
{
    for (int i = 0; valued[i]; i++)
        if (strcmp(name, valued[i]) == 0)
            return 1;
    return 0;
}

/* Applies one l3fs option (name normalised to dashes). 1 = not ours. */
static int apply(struct l3fs_options *o, const char *name, const char *v)
{
    if (strcmp(name, "syslog") == 0) {
        o->use_syslog = 1;
        return 0;
    }
    if (strcmp(name, "no-watch") == 0) {
        o->no_watch = 1;
        return 0;
    }
    if (strcmp(name, "keep-names") == 0) {
        o->keep_names = 1;
        return 0;
    }
    if (strcmp(name, "no-verify") == 0) {
        o->no_verify = 1;
        return 0;
    }
    if (strcmp(name, "cache-shared") == 0) {
        o->cache_shared = 1;
        return 0;
    }
    if (!is_valued(name))
        return 1;
    if (!v) {
        fprintf(stderr, "l3fs: option %s needs a value\n", name);
        return -EINVAL;
    }
    if (!strcmp(name, "cache-dir"))
        return set_str(&o->cache_dir, v);
    if (!strcmp(name, "cache-size"))
        return set_str(&o->cache_size, v);
    if (!strcmp(name, "log-file"))
        return set_str(&o->log_file, v);
    if (!strcmp(name, "exclude")) {
        char **e = realloc(o->excludes, (o->n_excludes + 1) * sizeof *e);
        if (!e)
            return -ENOMEM;
        o->excludes = e;
        if (!(e[o->n_excludes] = strdup(v)))
            return -ENOMEM;
        o->n_excludes++;
        return 0;
    }
    if (!strcmp(name, "jobs") || !strcmp(name, "threads"))
        return parse_uint(name, v, &o->jobs);
    if (!strcmp(name, "encode-threads"))
        return parse_uint(name, v, &o->encode_threads);
    if (!strcmp(name, "effort")) {
        char *end;
        errno = 0;
        long e = strtol(v, &end, 10);
        if (errno || end == v || *end || e < -1 || e > 2) {
            fprintf(stderr, "l3fs: --effort takes -1, 0, 1 or 2\n");
            return -EINVAL;
        }
        o->effort = (int)e;
        return 0;
    }
    if (!strcmp(name, "max-pixels"))
        return parse_count(name, v, &o->max_pixels);
    if (!strcmp(name, "max-memory"))
        return parse_count(name, v, &o->max_memory);
    if (!strcmp(name, "max-threads"))
        return parse_uint(name, v, &o->max_threads);
    if (!strcmp(name, "timeout"))
        return parse_seconds(name, v, &o->timeout);
    if (!strcmp(name, "dir-timeout"))
        return parse_seconds(name, v, &o->dir_timeout);
    if (!strcmp(name, "fsync")) {
        if (!strcmp(v, "none"))
            o->fsync_policy = L3CACHE_FSYNC_NONE;
        else if (!strcmp(v, "object"))
            o->fsync_policy = L3CACHE_FSYNC_OBJECT;
        else if (!strcmp(v, "all"))
            o->fsync_policy = L3CACHE_FSYNC_ALL;
        else {
            fprintf(stderr, "l3fs: --fsync takes none, object or all\n");
            return -EINVAL;
        }
        return 0;
    }
    if (!strcmp(name, "log-level")) {
        int l = l3fs_parse_log_level(v);
        if (l < 0) {
            fprintf(stderr, "l3fs: --log-level takes error, warn, info or debug\n");
            return -EINVAL;
        }
        o->log_level = l;
        return 0;
    }
    return 1;
}


/* One -o list: "a,b=c,exclude=*.x\,y" (backslash escapes a comma). */
static int apply_o_list(struct l3fs_options *o, const char *list)
{
    size_t n = strlen(list);
    char *item = malloc(n + 1);
    if (!item)
        return -ENOMEM;
    const char *p = list;
    int r = 0;
    while (*p && r >= 0) {
        size_t k = 0;
        while (*p && *p != ',') {
            if (*p == '\\' && p[1])
                p++;
            item[k++] = *p++;
        }
        item[k] = '\0';
        if (*p == ',')
            p++;
        if (!k)
            continue;
        char *eq = strchr(item, '=');
        char name[64];
        size_t nl = eq ? (size_t)(eq - item) : k;
        if (nl < sizeof name) {
            memcpy(name, item, nl);
            name[nl] = '\0';
            for (char *c = name; *c; c++)
                if (*c == '_' && c != name)
                    *c = '-';
            int a = apply(o, name, eq ? eq + 1 : NULL);
            if (a <= 0) {
                r = a;
                continue;
            }
        }
        if (l3fs_mount_opt_ignored(item))
            continue;
        if (!l3fs_fuse_opt_known(item)) {
            l3fs_mount_opt_unknown(item, valued);
            r = -EINVAL;
            break;
        }
        r = add_fuse_opt(o, item);
    }
    free(item);
    return r;
}

void l3fs_options_free(struct l3fs_options *o)
{
    free(o->source);
    free(o->mountpoint);
    free(o->cache_dir);
    free(o->cache_size);
    free(o->log_file);
    for (size_t i = 0; i < o->n_excludes; i++)
        free(o->excludes[i]);
    free(o->excludes);
    free(o->fuse_opts);
    memset(o, 0, sizeof *o);
}

int l3fs_parse_args(int argc, char **argv, struct l3fs_options *o)
{
    memset(o, 0, sizeof *o);
    o->jobs = ncpu();
    o->encode_threads = ncpu();
    o->max_threads = 64;
    o->timeout = 10;
    o->dir_timeout = 1;
    o->fsync_policy = L3CACHE_FSYNC_OBJECT;
    o->log_level = L3FS_LOG_WARN;
    const char *pos[2] = {NULL, NULL};
    int npos = 0, r = 0, only_pos = 0;
    for (int i = 1; i < argc && r >= 0; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (npos == 2) {
                fprintf(stderr, "l3fs: unexpected argument '%s'\n", a);
                r = -EINVAL;
                break;
            }
            pos[npos++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_pos = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            l3fs_usage(argv[0], 1);
            l3fs_options_free(o);
            return 1;
        } else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
            printf("l3fs %s (L3 format %d, libl3 %s)\n", L3FS_VERSION_STRING, L3_FORMAT_VERSION,
                   L3_VERSION_STRING);
            l3fs_options_free(o);
            return 1;
        } else if (!strcmp(a, "-f")) {
            o->foreground = 1;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--debug")) {
            o->debug = o->foreground = 1;
            o->log_level = L3FS_LOG_DEBUG;
        } else if (!strcmp(a, "-s")) {
            o->singlethread = 1;
        } else if (!strncmp(a, "-o", 2)) {
            const char *list = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
            if (!list) {
                fprintf(stderr, "l3fs: -o needs an option list\n");
                r = -EINVAL;
            } else {
                r = apply_o_list(o, list);
            }
        } else if (!strncmp(a, "--", 2)) {
            char name[64];
            const char *eq = strchr(a + 2, '=');
            size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            if (nl >= sizeof name) {
                fprintf(stderr, "l3fs: unknown option '%s'\n", a);
                r = -EINVAL;
                break;
            }
            memcpy(name, a + 2, nl);
            name[nl] = '\0';
            for (char *c = name; *c; c++)
                if (*c == '_')
                    *c = '-';
            const char *v = eq ? eq + 1 : NULL;
            if (!v && is_valued(name)) {
                if (i + 1 >= argc) {
                    fprintf(stderr, "l3fs: option --%s needs a value\n", name);
                    r = -EINVAL;
                    break;
                }
                v = argv[++i];
            }
            int x = apply(o, name, v);
            if (x == 1) {
                fprintf(stderr, "l3fs: unknown option '%s'\n", a);
                r = -EINVAL;
            } else {
                r = x;
            }
        } else {
            fprintf(stderr, "l3fs: unknown option '%s'\n", a);
            r = -EINVAL;
        }
    }
    /* The daemon runs with its own credentials: with allow_other and no
     * permission checks by the kernel, any user could read a 0600 file. */
    if (r >= 0 && has_fuse_opt(o, "allow_other") && !has_fuse_opt(o, "default_permissions"))
        r = add_fuse_opt(o, "default_permissions");
    if (r >= 0 && npos != 2) {
        l3fs_usage(argv[0], 0);
        r = -EINVAL;
    }
    if (r >= 0) {
        char buf[PATH_MAX];
        if (!realpath(pos[0], buf)) {
            fprintf(stderr, "l3fs: source %s: %s\n", pos[0], strerror(errno));
            r = -EINVAL;
        } else if (!(o->source = strdup(buf))) {
            r = -ENOMEM;
        } else if (!realpath(pos[1], buf)) {
            if (errno == ENOTCONN) /* a FUSE mount whose daemon is gone (kill -9) */
                fprintf(stderr, "l3fs: %s is a dead FUSE mount (its daemon exited): "
                                "run 'fusermount3 -u %s' first, then mount again\n",
                        pos[1], pos[1]);
            else
                fprintf(stderr, "l3fs: mountpoint %s: %s\n", pos[1], strerror(errno));
            r = -EINVAL;
        } else if (!(o->mountpoint = strdup(buf))) {
            r = -ENOMEM;
        }
    }
    if (r >= 0 && o->log_file && o->log_file[0] != '/') {
        char buf[PATH_MAX];
        if (!getcwd(buf, sizeof buf) || strlen(buf) + strlen(o->log_file) + 2 > sizeof buf) {
            r = -ENAMETOOLONG;
        } else {
            strcat(buf, "/");
            strcat(buf, o->log_file);
            r = set_str(&o->log_file, buf);
        }
    }
    if (r >= 0 && !o->cache_dir && !(o->cache_dir = default_cache_dir()))
        r = -ENOMEM;
    if (r >= 0 && o->cache_dir[0] != '/') {
        char buf[PATH_MAX];
        if (!getcwd(buf, sizeof buf) || strlen(buf) + strlen(o->cache_dir) + 2 > sizeof buf) {
            r = -ENAMETOOLONG;
        } else {
            strcat(buf, "/");
            strcat(buf, o->cache_dir);
            r = set_str(&o->cache_dir, buf);
        }
    }
    if (r < 0) {
        l3fs_options_free(o);
        return r == -ENOMEM ? (fprintf(stderr, "l3fs: out of memory\n"), -ENOMEM) : -EINVAL;
    }
    return 0;
}

