/* l3fs.h — the l3fs filesystem daemon: options, statistics, namespace rules.
 *
 * l3fs mirrors a source tree read-only and shows every PNG as NAME.l3, encoded
 * on first access through the content-addressed cache (cache/l3cache.h).
 * docs/FS.md describes the behaviour for users; this header describes the
 * pieces the daemon is built from, so they can be tested on their own.
 *
 * Conventions: functions return 0 (or a count) on success and -errno on
 * failure; output parameters end in `_ret`.
 */
#ifndef L3FS_H
#define L3FS_H

#include <stddef.h>
#include <stdint.h>

#include "l3_version.h"
#include "l3cache.h"

#ifdef __cplusplus
extern "C" {
#endif

#define L3FS_VERSION_STRING L3_VERSION_STRING /* the project's one version */
/* Name of the hidden introspection directory at the mount root. */
#define L3FS_CTL_DIR ".l3fs"

/* ---- options ---- */

enum l3fs_log_level { L3FS_LOG_ERROR = 0, L3FS_LOG_WARN, L3FS_LOG_INFO, L3FS_LOG_DEBUG };

struct l3fs_options {
    char *source;          /* SOURCE (absolute) */
    char *mountpoint;      /* MOUNTPOINT (absolute) */
    char *cache_dir;       /* --cache-dir */
    char *cache_size;      /* --cache-size text ("50G", "10%"), NULL = unlimited */
    char **excludes;       /* --exclude GLOB, repeatable */
    size_t n_excludes;
    unsigned jobs;         /* --jobs/--threads: concurrent encodes (default nproc) */
    unsigned encode_threads; /* --encode-threads: threads inside one encode */
    int effort;            /* --effort: encoder effort -1..2 (0 default) */
    uint64_t max_pixels;   /* --max-pixels: codec limit per image (0 = codec default) */
    uint64_t max_memory;   /* --max-memory: codec memory limit per encode (0 = default) */
    unsigned max_threads;  /* --max-threads: FUSE worker threads */
    double timeout;        /* --timeout: entry/attr timeout of .l3 files (s) */
    double dir_timeout;    /* --dir-timeout: same for everything else (s) */
    int fsync_policy;      /* --fsync none|object|all */
    int log_level;         /* --log-level error|warn|info|debug */
    int use_syslog;        /* --syslog */
    int no_watch;          /* --no-watch: no inotify, timeouts only */
    int keep_names;        /* --keep-names: x.png shows the L3 bytes (no x.l3 names) */
    char *log_file;        /* --log-file FILE (absolute), NULL: stderr / syslog */
    int no_verify;         /* --no-verify: cache objects checked by header only */
    int cache_shared;      /* --cache-shared: a cache directory for several users */
    int foreground;        /* -f */
    int debug;             /* -d (libfuse request tracing, implies -f) */
    int singlethread;      /* -s */
    char *fuse_opts;       /* -o options passed to libfuse/kernel, comma list */
};

/* Parses `l3fs SOURCE MOUNTPOINT [options]` (argv[0] is the program). Prints
 * the reason to stderr and returns -EINVAL on a bad command line; returns 1
 * when --help or --version was handled (nothing to mount). */
int l3fs_parse_args(int argc, char **argv, struct l3fs_options *opts_ret);
void l3fs_options_free(struct l3fs_options *opts);
/* Refuses a mountpoint l3fs must not mount on, with one line on stderr that
 * says what to do: a live FUSE mount there already (-EBUSY), a mountpoint
 * inside the source or equal to it (-ELOOP). MOUNTINFO is the mount table to
 * read (NULL: /proc/self/mountinfo). A dead FUSE mount there (its daemon
 * killed: ENOTCONN) is refused too (-ENOTCONN), saying to fusermount3 -u it.
 * 0 when fine. */
int l3fs_check_mountpoint(const struct l3fs_options *opts, const char *mountinfo);
/* Prints the usage text. */
void l3fs_usage(const char *prog, int full);
/* "error", "warn", "info", "debug" -> enum l3fs_log_level, or -1. */
int l3fs_parse_log_level(const char *s);

/* ---- namespace rules (fs/names.c) ----
 *
 * A directory entry NAME is shown as STEM.l3 when all of these hold:
 *   - NAME is STEM + ".png" in any letter case, STEM not empty;
 *   - it is a regular file (not a symlink) starting with the PNG signature;
 *   - it does not match an --exclude glob;
 *   - no entry STEM.l3 exists in the source directory (a real .l3 wins);
 *   - no other case variant of STEM.png that sorts before NAME (bytewise)
 *     qualifies as well (exactly one source per STEM.l3).
 * Every other entry is shown under its own name. */

/* The questions the rules ask about names in one source directory. */
struct l3fs_probe {
    /* 1 when an entry of that name exists (any type), else 0 */
    int (*exists)(void *ctx, const char *name);
    /* 1 when the entry is a regular file with the PNG signature and is not
     * excluded, else 0 */
    int (*qualifies)(void *ctx, const char *name);
    void *ctx;
};

/* 1 when NAME ends in ".png" (any case) after a non-empty stem; the stem
 * length is stored in *stem_len_ret (may be NULL). */
int l3fs_has_png_ext(const char *name, size_t *stem_len_ret);
/* 1 when NAME ends in ".l3" after a non-empty stem. */
int l3fs_has_l3_ext(const char *name, size_t *stem_len_ret);
/* Writes the 8 case variants of STEM.png in bytewise order ("S.PNG" first,
 * "S.png" last) into variants[i] (256 bytes each). Returns -ENAMETOOLONG
 * when they do not fit. */
int l3fs_png_variants(const char *stem, size_t stem_len, char variants[8][256]);

/* For an entry NAME with a .png extension: 1 when it is shown as STEM.l3. */
int l3fs_png_shown_as_l3(const struct l3fs_probe *probe, const char *name);

enum l3fs_l3_lookup { L3FS_L3_REAL = 0, L3FS_L3_ENCODED = 1 };
/* For a looked-up name STEM.l3: L3FS_L3_REAL when a real entry of that name
 * exists (shown unchanged), L3FS_L3_ENCODED with the source name in src_ret
 * (256 bytes) when a PNG is shown under this name, else -ENOENT. */
int l3fs_resolve_l3(const struct l3fs_probe *probe, const char *name, char *src_ret);

/* Builds the name shown for an encoded source: STEM.l3 (out_ret: 256 bytes). */
int l3fs_l3_name(const char *png_name, char *out_ret);

/* --exclude matching. A glob containing '/' is matched against the path
 * relative to SOURCE (no leading slash; a leading '/' in the glob is
 * ignored) with FNM_PATHNAME; any other glob against the entry name.
 * Matching is case-sensitive. reldir is "" for the root. */
int l3fs_excluded(char *const *globs, size_t n_globs, const char *reldir,
                  const char *name);

/* ---- statistics (fs/stats.c) ---- */

/* Encode-time samples: exact percentiles over the last L3FS_TIME_SAMPLES
 * encodes, exact maximum over all of them. */
#define L3FS_TIME_SAMPLES 8192
struct l3fs_timings {
    uint64_t count;
    uint64_t max_ns;
    uint64_t sum_ns;
    uint64_t samples[L3FS_TIME_SAMPLES];
};
void l3fs_timings_add(struct l3fs_timings *t, uint64_t ns);
/* Percentile p in [0,100] (nearest rank) of the retained samples; 0 if none. */
uint64_t l3fs_timings_percentile(const struct l3fs_timings *t, double p);

/* Counters kept by the daemon itself (the cache keeps its own,
 * L3CACHE_COUNTERS). The one list, X(field, Prometheus name, help), in the
 * order stats.json shows them; struct, JSON and metrics come from it. */
#define L3FS_FS_COUNTERS(X)                                                               \
    X(lookups, "l3fs_lookups_total", "LOOKUP requests handled.")                          \
    X(l3_opens, "l3fs_l3_opens_total", "Opens of .l3 files.")                             \
    X(l3_open_hits, "l3fs_l3_open_hits_total",                                            \
      "Opens of .l3 files served from an already cached object.")                         \
    X(l3_open_misses, "l3fs_l3_open_misses_total",                                        \
      "Opens of .l3 files that needed an encode first.")                                  \
    X(encodes, "l3fs_encodes_total", "PNG to L3 encodes run by this daemon.")             \
    X(encode_errors, "l3fs_encode_errors_total", "Sources that failed to encode.")        \
    X(index_hits, "l3fs_index_hits_total", ".l3 sizes answered by the persistent index.") \
    X(bytes_served, "l3fs_served_bytes_total", "Bytes of .l3 files handed to readers.")   \
    X(passthrough_bytes, "l3fs_passthrough_bytes_total",                                  \
      "Bytes of other files handed to readers.")

struct l3fs_fs_counters {
#define L3FS_X_FIELD(field, prom, help) uint64_t field;
    L3FS_FS_COUNTERS(L3FS_X_FIELD)
#undef L3FS_X_FIELD
};

/* Everything stats.json and metrics show. */
struct l3fs_snapshot {
    const char *version;
    const char *source;
    const char *mountpoint;         /* the mount label of the metrics (NULL: none) */
    const char *cache_dir;
    int keep_names;                 /* --keep-names (stats.json: 0 or 1) */
    double uptime_s;
    struct l3fs_fs_counters fs;
    uint64_t encode_count, encode_p50_ns, encode_p90_ns, encode_p99_ns, encode_max_ns,
        encode_sum_ns;
    int have_cache;                 /* 0: cache stats unavailable */
    struct l3cache_counters cache_instance, cache_total;
    uint64_t objects, object_bytes, max_bytes;
    int writes_disabled;
};

/* Hit rate of a lookups/hits pair as a fraction, or -1 when nothing was looked up. */
double l3fs_hit_rate(uint64_t hits, uint64_t misses);
/* Renders the snapshot; returns a malloc()ed NUL-terminated string (NULL on ENOMEM). */
char *l3fs_render_json(const struct l3fs_snapshot *s);
char *l3fs_render_prometheus(const struct l3fs_snapshot *s);

/* ---- escaping (fs/escape.c) ----
 * Writes s escaped into out (cap bytes, NUL-terminated, truncated if need
 * be) and returns the length the whole escaped text needs. json = 0: for a
 * log line (\n, \t, \r, \xNN for other control bytes, DEL and bytes that
 * are not UTF-8, \\); json = 1: for the inside of a JSON string (\", \\,
 * \n, \uNNNN; bytes that are not UTF-8 as the text \xNN). Valid UTF-8
 * is kept. */
size_t l3fs_escape(const char *s, int json, char *out, size_t cap);

/* A JSON string literal for s, quotes included (malloc'ed; NULL on ENOMEM). */
char *l3fs_json_quote(const char *s);
/* The cache counters as a JSON object with a hit_rate (malloc'ed). */
char *l3fs_json_cache_counters(const struct l3cache_counters *c);

/* Minimal reader for the JSON l3fs_render_json writes: the number at a dotted
 * path such as "cache.instance.hits". Returns 0 and *value_ret, or -ENOENT. */
int l3fs_json_number(const char *json, const char *path, double *value_ret);
/* The string at a dotted path, copied into out (cap bytes). */
int l3fs_json_string(const char *json, const char *path, char *out, size_t cap);

/* ---- subcommands (fs/cmd_stats.c, fs/cmd_warm.c, fs/cmd_cache.c) ----
 * argv[0] is the subcommand's name; each returns a process exit status. */
int l3fs_cmd_stats(int argc, char **argv);
int l3fs_cmd_warm(int argc, char **argv);
/* `l3fs cache stats|verify|gc|clear --cache-dir DIR [--cache-size SIZE]
 * [--json]`: 0 ok, 1 problem found or failure, 2 usage. */
int l3fs_cmd_cache(int argc, char **argv);
/* MOUNTPOINT/.l3fs/stats.json read whole (malloc'ed), NULL with errno. */
char *l3fs_read_stats_json(const char *mountpoint);

/* Formats a byte count as "1.5 GiB" into buf. */
const char *l3fs_human_bytes(uint64_t bytes, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* L3FS_H */
