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

/* Counters kept by the daemon itself (the cache keeps its own). */
struct l3fs_fs_counters {
    uint64_t lookups;        /* LOOKUP requests */
    uint64_t l3_opens;       /* opens of .l3 files */
    uint64_t l3_open_hits;   /* ... served from an already-cached object */
    uint64_t l3_open_misses; /* ... that needed an encode first */
    uint64_t encodes;        /* encodes this daemon ran */
    uint64_t encode_errors;  /* sources that failed to encode (EIO) */
    uint64_t index_hits;     /* .l3 sizes answered by the persistent index */
    uint64_t bytes_served;   /* bytes of .l3 files handed to readers */
    uint64_t passthrough_bytes; /* bytes of other files handed to readers */
};

/* Everything stats.json and metrics show. */
struct l3fs_snapshot {
    const char *version;
    const char *source;
    const char *cache_dir;
    double uptime_s;
    struct l3fs_fs_counters fs;
    uint64_t encode_count, encode_p50_ns, encode_p90_ns, encode_p99_ns, encode_max_ns,
        encode_sum_ns;
    int have_cache;                 /* 0: cache stats unavailable */
    /* cache counters, instance then total: lookups hits misses encodes
     * encode_failures bytes_served bytes_written evictions evicted_bytes
     * corrupt_repaired write_failures */
    uint64_t cache_instance[11], cache_total[11];
    uint64_t objects, object_bytes, max_bytes;
    int writes_disabled;
};
extern const char *const l3fs_cache_counter_names[11];

/* Hit rate of a lookups/hits pair as a fraction, or -1 when nothing was looked up. */
double l3fs_hit_rate(uint64_t hits, uint64_t misses);
/* Renders the snapshot; returns a malloc()ed NUL-terminated string (NULL on ENOMEM). */
char *l3fs_render_json(const struct l3fs_snapshot *s);
char *l3fs_render_prometheus(const struct l3fs_snapshot *s);

/* Minimal reader for the JSON l3fs_render_json writes: the number at a dotted
 * path such as "cache.instance.hits". Returns 0 and *value_ret, or -ENOENT. */
int l3fs_json_number(const char *json, const char *path, double *value_ret);
/* The string at a dotted path, copied into out (cap bytes). */
int l3fs_json_string(const char *json, const char *path, char *out, size_t cap);

/* ---- subcommands (fs/tools.c) ---- */
int l3fs_cmd_stats(int argc, char **argv);
int l3fs_cmd_warm(int argc, char **argv);

/* Formats a byte count as "1.5 GiB" into buf. */
const char *l3fs_human_bytes(uint64_t bytes, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* L3FS_H */
