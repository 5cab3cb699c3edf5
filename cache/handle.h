/* handle.h — the l3cache handle and the rooms of libl3cache (not installed).
 *
 * Locks: c->mu protects every field marked [mu]; c->scan_mu serialises walks
 * of objects/ (scans, eviction, clear); fields marked [const] are set in
 * l3cache_open and read-only afterwards.
 *
 * Rooms (one job each):
 *   open.c      open (directory, lock, log, compaction), close, background thread
 *   index.c     the source index: in-memory table over index.log, tail, append,
 *               compaction
 *   object.c    one object: open and check, store atomically, remove
 *   mapped.c    hashing an object in memory on a mapping, safe against SIGBUS
 *   verified.c  which objects were checked whole and have not changed or left
 *               the page cache since (mincore): what an open must check
 *   ranges.c    range checksums (an extended attribute): store, load, match
 *   reader.c    checked reads of one descriptor: the checksums loaded once,
 *               each read checked on the chunks it touches, two verified
 *               buffers (read ahead for sequential readers)
 *   spliced.c   checked reads without a copy: page-cache pages held by a
 *               pipe, hashed in place, then spliced on by the caller
 *   claim.c     claims on a key shared through the directory, so that
 *               processes and hosts sharing it encode each key once
 *   get.c       l3cache_get: hit path, single flight, encode and store
 *   scan.c      walks of objects/: counting, temp sweep, LRU eviction, verify,
 *               clear
 *   stats.c     counters, their persistence, write-failure state
 *   size.c      l3cache_parse_size
 *   io.c        whole reads and writes, clocks
 *   key.c       key derivation and object paths
 *   record.c    index log record codec
 *   tempname.c  temp file names, host name, random ids
 *   codec_glue.c the default encode and check steps (libl3)
 */
#ifndef L3CACHE_HANDLE_H
#define L3CACHE_HANDLE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "l3cache_internal.h"

#define L3CACHE_LOG_NAME "index.log"
#define L3CACHE_LOCK_NAME "lock"

struct slot {
    int used;
    struct l3cache_entry e;
};

/* One key being encoded by this process; others wait for it. */
struct flight {
    struct flight *next;
    struct l3cache_key key;
    int refs;
    int done;
    int status;     /* 0 or -errno */
    int l3_status;
    int result_fd;  /* readable copy for waiters when no object was stored */
};

/* An object this handle checked whole: its identity then. */
struct vslot {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
};
#define L3CACHE_VSLOTS 16384 /* direct-mapped: a collision costs a re-check */

/* A claim this process holds (objects/ab/<key>.claim). */
struct claim {
    struct claim *next;
    int fd;                     /* open for the heartbeat (futimens) */
    dev_t dev;
    ino_t ino;
    char rel[64];
};

/* A buffer kept for the next reader (reader.c). */
struct pool_buf {
    void *buf;
    size_t cap;
};
#define L3CACHE_POOL 16               /* buffers kept, */
#define L3CACHE_POOL_MAX (2u << 20)   /* each of at most this many bytes */

enum verify_mode { VERIFY_AUTO = 0, VERIFY_ALWAYS = 1, VERIFY_TRUST = 2 };

struct l3cache {
    char *dir;                  /* [const] */
    int dirfd;                  /* [const] */
    int lockfd;                 /* [const] */
    int logfd;                  /* [const after open] (compaction at open replaces it) */
    int log_writable;           /* [const] */
    int readonly;               /* [const] L3CACHE_READONLY */
    struct l3cache_options opts; /* [const] */
    struct l3cache_internal in; /* [const] defaults filled in */
    char host[64];              /* [const] */
    uint64_t instance_id;       /* [const] */
    uint64_t params_id;         /* [const] */
    int verify;                 /* [const] enum verify_mode */
    int shared;                 /* [const] L3CACHE_SHARED */
    int read_checks;            /* [const] L3CACHE_READ_CHECKS */
    mode_t dir_mode, file_mode; /* [const] 0700/0600, shared 0755/0644 */

    pthread_mutex_t mu;
    pthread_cond_t flight_cv;   /* flights finished; first scan done */
    struct flight *flights;     /* [mu] */

    struct slot *slots;         /* [mu] */
    size_t nslots, nused;       /* [mu] */
    uint64_t log_off;           /* [mu] bytes of index.log parsed */
    uint64_t log_records, log_bad_bytes; /* [mu] */

    struct l3cache_counters inst, flushed, persisted; /* [mu] */
    int writes_disabled;        /* [mu] */
    int write_error;            /* [mu] errno that disabled writes */
    time_t disabled_at;         /* [mu] */
    struct vslot *verified;     /* [mu] L3CACHE_VSLOTS entries */
    struct claim *claims;       /* [mu] claims this process holds */
    uint64_t objects, object_bytes; /* [mu] estimate: last scan + own writes */

    pthread_mutex_t pool_mu;    /* the buffers of readers that were freed: */
    struct pool_buf pool[L3CACHE_POOL]; /* [pool_mu] reused by the next readers' */
    int npool;                  /* [pool_mu] fills (no fresh pages to fault in) */
    uint64_t held;              /* [pool_mu] bytes in readers' buffers now, */
    uint64_t held_max;          /* [const] at most this many (in.buffer_budget) */

    pthread_mutex_t scan_mu;    /* one walk of objects/ at a time */
    pthread_cond_t bg_cv;
    pthread_t bg;
    int bg_started;             /* [const after open] */
    int closing, bg_kick;       /* [mu] */
    int first_sweep;            /* [const] the first scan removes stale temp files */
    int scanned;                /* [mu] the first scan is done (objects valid) */
};

/* ---- io.c ---- */
uint64_t l3cache_now_ms(void);
static inline int64_t l3cache_ts_ns(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}
int l3cache_write_all(int fd, const void *buf, size_t len);
/* Reads up to len bytes at off; returns bytes read or -errno. */
ssize_t l3cache_pread_full(int fd, void *buf, size_t len, uint64_t off);
/* Reads a whole file with pread from offset 0 (size_hint: its expected size). */
int l3cache_read_whole(int fd, uint64_t size_hint, uint8_t **buf_ret, size_t *size_ret);

/* ---- index.c (mu held unless said) ---- */
void index_reset(struct l3cache *c);
/* Reads records appended since the last call (by any process). */
void index_tail(struct l3cache *c);
void index_append(struct l3cache *c, const struct l3cache_entry *e);
int index_find(struct l3cache *c, const struct l3cache_source *s, struct l3cache_entry *e_ret);
/* Rewrites the log with the live entries and one stats record; only with the
 * directory lock held exclusively. */
void index_compact(struct l3cache *c);

/* ---- object.c ---- */
/* Opens and checks an object. 0 (fd/size set), -ENOENT when absent, -EBADMSG
 * when it was corrupt (it is then removed), -errno. */
int object_open(struct l3cache *c, const struct l3cache_key *key, int *fd_ret,
                uint64_t *size_ret);
/* Runs the check hook at L3CACHE_CHECK_* level on an open object. 0 valid,
 * 1 corrupt, -errno. */
int object_check(struct l3cache *c, int fd, uint64_t size, int level);
/* The object of key (an open descriptor's fstat st) found corrupt: removed
 * if its name still points to st's inode, counted; returns -EBADMSG. */
int object_corrupt_fd(struct l3cache *c, const struct l3cache_key *key, const struct stat *st);
/* Removes the object at rel when it is still the inode described by st
 * (a read-only handle leaves it): 1 when it was that inode, else 0. */
int object_remove_if_same(struct l3cache *c, const char *rel, const struct stat *st);
/* Creates (O_EXCL) rel in fan-out directory sub ("objects/ab"), making or
 * repairing the directory when it is missing. A descriptor or -errno. */
int object_create(struct l3cache *c, const char *sub, const char *rel, int flags);
/* Stores an object atomically. 0: stored (or already there), -errno. */
int object_store(struct l3cache *c, const struct l3cache_key *key, const void *data,
                 size_t size, int *created_ret);
/* A readable descriptor of bytes that could not be stored. */
int object_memory_fd(struct l3cache *c, const void *data, size_t size);

/* ---- verified.c ---- */
/* 0 when an open object (fd, its fstat st) may be served: per c->verify,
 * checked now or known checked and unchanged and resident; 1 corrupt; -errno. */
int verified_ready(struct l3cache *c, const struct l3cache_key *key, int fd,
                   const struct stat *st);
/* l3cache_read_ready with the descriptor's fstat st already taken. */
int read_ready_st(struct l3cache *c, const struct l3cache_key *key, int fd, const void *map,
                  const struct stat *st, uint64_t off, uint64_t len);
/* 1 when every page of [off, off+len) of the file (mapped at map, or mapped
 * for the call when map is NULL; size bytes long) is in the page cache. */
int pages_resident(int fd, const void *map, uint64_t size, uint64_t off, uint64_t len);
/* Bytes this process wrote itself (a store, a memory copy): checked. */
void verified_add(struct l3cache *c, const struct stat *st);

/* ---- mapped.c ---- */
/* XXH3-64 of [off, size) of an object whose pages are all in memory, on a
 * mapping (SIGBUS-safe): 0, or -ENOTSUP / -errno (then read it instead). */
int mapped_payload_hash(int fd, uint64_t size, uint64_t off, uint64_t *hash_ret);
struct ranges;
/* ranges_match of the whole chunks [c0, c1) at map (a mapping of them),
 * SIGBUS-safe: 1 they match, 0 they do not, -EIO (SIGBUS: the file is
 * shorter than mapped, a page failed to read back) or -ENOTSUP (no handler). */
int mapped_ranges_match(const struct ranges *r, const uint8_t *map, uint64_t c0, uint64_t c1);

/* ---- ranges.c ---- */
#define RANGES_MAX 448 /* chunks; the attribute then fits one 4 KiB block */
#define RANGES_XATTR_MAX (40 + 8 * RANGES_MAX + 8)
struct ranges {
    uint64_t size;
    unsigned log2;      /* chunk size: 1 << log2 */
    uint32_t n;         /* chunks */
    uint64_t sum[RANGES_MAX];
};
/* Records the range checksums of data (the object about to get key's name)
 * on its temp file fd: 0, or -errno (ENOTSUP: a filesystem without user
 * xattrs; the object is then checked whole). */
int ranges_store(int fd, const struct l3cache_key *key, const void *data, size_t size);
/* The valid range checksums of fd (of key, size bytes): 0, -ENODATA when it
 * has none, -EBADMSG when they are not valid for it, -errno. */
int ranges_load(int fd, const struct l3cache_key *key, uint64_t size, struct ranges *r);
/* 1 when fd carries valid range checksums for key and size. */
int ranges_present(int fd, const struct l3cache_key *key, uint64_t size);
/* ---- reader.c, spliced.c: one object descriptor's checked reads ----
 * (in a reader, fields marked [mu] are protected by its own mu) */
enum { SLOT_EMPTY, SLOT_FILLING, SLOT_READY };

struct rslot {
    uint8_t *buf;   /* written only by the thread that set FILLING */
    size_t cap;
    uint64_t off;   /* [mu] the bytes [off, off + len) of the object */
    uint64_t len;   /* [mu] */
    int state;      /* [mu] SLOT_* */
    unsigned users; /* [mu] replies reading buf (READY only) */
    int unread;     /* [mu] read ahead and not served yet (READY only) */
};

struct l3cache_reader {
    struct l3cache *c;       /* [const] */
    struct l3cache_key key;  /* [const] */
    int fd;                  /* [const] */
    const void *map;         /* [const] the caller's, or own_map */
    void *own_map;           /* [const] mapped here (unmapped at free), or NULL */
    struct stat st;          /* [const] the descriptor's fstat at open */
    int err;                 /* [const] that fstat's -errno (0: it worked) */
    int ranged;              /* [const] 1: r holds its valid range checksums */
    struct ranges r;         /* [const] when ranged */
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* a fill ended */
    struct rslot slot[2];    /* [mu] (see struct rslot) */
    uint64_t next;           /* [mu] where the last read ended */
    int seq;                 /* [mu] the last read began where the one before ended */
    int zstate;              /* [mu] spliced.c: ZMAP_NONE until tried, then _ON or _OFF */
    const uint8_t *zmap;     /* [const once zstate is ZMAP_ON] the object mapped for
                              * spliced reads (unmapped at free) */
    int zprefault;           /* [const once zstate is ZMAP_ON] reads fault their chunks
                              * in first: zmap has MADV_HUGEPAGE and the object was
                              * not all in memory when it was mapped */
};
enum { ZMAP_NONE, ZMAP_ON, ZMAP_OFF };

/* The whole chunks [c0, c1) around [off, end). */
static inline void chunk_span(const struct ranges *r, uint64_t off, uint64_t end,
                              uint64_t *c0, uint64_t *c1)
{
    *c0 = off >> r->log2 << r->log2;
    *c1 = (((end - 1) >> r->log2) + 1) << r->log2;
    if (*c1 > r->size)
        *c1 = r->size;
}

/* spliced.c: unmaps what reader_zmap mapped (at l3cache_reader_free). */
void reader_zmap_free(struct l3cache_reader *rd);

/* A buffer of at least need bytes from the pool (or NULL: allocate one). */
void pool_get(struct l3cache *c, size_t need, void **buf_ret, size_t *cap_ret);
/* Keeps buf for a later pool_get, or frees it (the pool is full, buf too big). */
void pool_put(struct l3cache *c, void *buf, size_t cap);
/* Counts add more bytes as held by readers' buffers: 1, or 0 when that would
 * pass held_max (nothing counted). */
int held_take(struct l3cache *c, uint64_t add);
void held_give(struct l3cache *c, uint64_t sub);
/* The whole object (fd, size bytes, of key) against its range checksums:
 * 0 when they match or it has none, 1 when they do not match or are not
 * valid for it (reads would refuse it), -errno. */
int ranges_check_object(int fd, const struct l3cache_key *key, uint64_t size);
/* 1 when the bytes [c0, c1) of the object (whole chunks; the last may end
 * at the object's end) at buf match their checksums. */
int ranges_match(const struct ranges *r, const uint8_t *buf, uint64_t c0, uint64_t c1);

/* ---- claim.c ---- */
enum claim_result { CLAIM_OWNED, CLAIM_STORED, CLAIM_NONE };
/* Before this process encodes key: CLAIM_OWNED (*claim_ret held: encode, then
 * claim_release), CLAIM_STORED (another process stored it meanwhile: fd/size
 * set) or CLAIM_NONE (no claim to be had, or the wait ran out: encode anyway). */
int claim_acquire(struct l3cache *c, const struct l3cache_key *key, struct claim **claim_ret,
                  int *fd_ret, uint64_t *size_ret);
void claim_release(struct l3cache *c, struct claim *cl);
/* Heartbeat of every held claim (background thread). */
void claims_beat(struct l3cache *c);
/* A fan-out directory objects/XX that the filesystem says is missing although
 * this client believed in it (another client removed it): drop the stale
 * entry and create it again. 0 or -errno. */
int object_fix_fanout(struct l3cache *c, const char *sub);

/* ---- scan.c ---- */
/* Walks objects/: counts objects and bytes; evicts over the cap when evict;
 * removes stale temp files when sweep_temps. */
int scan_objects(struct l3cache *c, int evict, int sweep_temps, uint64_t *freed_ret);
/* Temp files of dead writers (this host) or older than stale_temp_s, in the
 * directory open as dirfd (shared by scans and the compaction sweep). */
void sweep_temp(struct l3cache *c, int dirfd, const char *name, time_t now);

/* ---- stats.c ---- */
void counters_add(struct l3cache_counters *a, const struct l3cache_counters *b, int sign);
int counters_zero(const struct l3cache_counters *a);
/* Appends this process's counter delta to the log. */
void stats_flush(struct l3cache *c);
/* A failed object write (mu held): counted; writes disabled for a while
 * when err says the storage cannot take them (full, read-only, I/O error). */
void stats_write_failure(struct l3cache *c, int err);
int stats_writes_allowed(struct l3cache *c); /* mu held */
void stats_count(struct l3cache *c, uint64_t *counter, uint64_t v); /* takes mu */

/* ---- tempname.c (l3cache_host_name in l3cache_internal.h) ---- */
uint64_t l3cache_random_u64(void);

/* ---- codec_glue.c ---- */
int l3cache_default_encode(void *ctx, const void *png, size_t png_size,
                           const struct l3_encode_options *opts, void **out_ret,
                           size_t *size_ret);
int l3cache_default_check(void *ctx, const void *data, size_t size, uint64_t total, int level,
                          size_t *needed_ret);
int l3cache_default_payload(void *ctx, const void *prefix, size_t size, uint64_t total,
                            uint64_t *offset_ret, uint64_t *xxh3_64_ret);

#endif /* L3CACHE_HANDLE_H */
