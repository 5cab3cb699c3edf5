/* l3cache.h — content-addressed on-disk cache of encoded .l3 objects.
 *
 * One public header for libl3cache (cache/). Layout of a cache directory,
 * key derivation and crash-safety rules are documented in docs/CACHE.md.
 *
 * Conventions (systemd style): functions return 0 or a positive count on
 * success and -errno on failure. The library never logs; events worth a log
 * line are counted in struct l3cache_stats and the caller decides.
 *
 * Thread-safety: one l3cache handle may be used by any number of threads at
 * once. Several processes (and hosts, on a shared filesystem) may open the
 * same directory at the same time.
 *
 * Signals: checking an object that is in memory hashes it on a mapping; the
 * library installs a SIGBUS handler once for that (a handler it replaces is
 * still called for every SIGBUS that is not its own).
 */
#ifndef L3CACHE_H
#define L3CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "l3.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct l3cache l3cache;

/* 128-bit content key: XXH3-128 of the source bytes mixed with the L3 format
 * version and the encoder parameters. */
struct l3cache_key {
    uint8_t bytes[16];
};

enum l3cache_fsync {
    L3CACHE_FSYNC_NONE = 0,    /* rely on rename atomicity only */
    L3CACHE_FSYNC_OBJECT = 1,  /* fsync each object before rename (default) */
    L3CACHE_FSYNC_ALL = 2,     /* also fsync directories and index appends */
};

struct l3cache_options {
    const char *dir;          /* cache directory; created if missing */
    uint64_t max_bytes;       /* size cap for objects; 0 = unlimited */
    int fsync_policy;         /* enum l3cache_fsync */
    struct l3_encode_options encode; /* encoder parameters (part of the key) */
    unsigned flags;           /* L3CACHE_* below */
};
#define L3CACHE_READONLY 0x1u /* never write: lookups and reads only */
/* What is checked before an object's bytes are handed out (docs/CACHE.md,
 * "Verification"). Default: the payload checksum, whenever the object is new
 * to this handle, changed on disk (size, mtime or ctime) or has left the page
 * cache since it was last checked (mincore); otherwise nothing more. */
#define L3CACHE_VERIFY_FULL 0x2u /* the payload checksum at every hit */
#define L3CACHE_TRUST_STORAGE 0x8u /* the header checksum only (and size):
                                      for storage that checks itself (ZFS,
                                      btrfs); rot in a payload is served */
#define L3CACHE_NO_BACKGROUND 0x4u /* no background thread (one-shot tools):
                                      the first walk of objects/ runs inside
                                      l3cache_open, eviction only in
                                      l3cache_gc, statistics flushed at close,
                                      no claim heartbeats */
/* The caller checks every read it serves from an object descriptor with
 * l3cache_read_checked (a daemon whose reads move pages out of the object's
 * page cache, as splice with SPLICE_F_MOVE does): an open of an object with
 * range checksums reads nothing more, one without them that this handle
 * checked and that did not change is served without looking at its pages,
 * and the bytes a read needs are checked at that read. */
#define L3CACHE_READ_CHECKS 0x20u
/* A directory shared by several users: created 0755, objects and the index
 * 0644, and sources the caller marks private (L3CACHE_GET_PRIVATE) are never
 * stored in it. Default: a private cache, directories 0700, files 0600. */
#define L3CACHE_SHARED 0x10u

/* Opens (creating if needed) a cache directory. Cleans stale temp files left
 * by crashed writers. *cache_ret is set on success. */
int l3cache_open(const struct l3cache_options *opts, l3cache **cache_ret);
/* Stops background work and releases the handle; NULL is fine. */
void l3cache_close(l3cache *cache);

/* Parses a size such as "50G", "512M", "10%" (of the filesystem holding dir). */
int l3cache_parse_size(const char *text, const char *dir, uint64_t *bytes_ret);

/* Identity of a source file: what a writer cannot restore is part of it
 * (ctime, and the birth time where the filesystem has one), so that another
 * file that reuses an inode number with the same size and mtime is never
 * taken for this one. */
struct l3cache_source {
    uint64_t dev;
    uint64_t ino;
    uint64_t size;
    int64_t mtime_ns;
    int64_t ctime_ns;
    int64_t btime_ns;  /* statx birth time; 0 where the filesystem has none */
};
/* The identity (and, st_ret not NULL, the stat) of dirfd/path with statx()
 * (AT_EMPTY_PATH with path "" for dirfd itself; at_flags such as
 * AT_SYMLINK_NOFOLLOW). 0 or -errno. */
int l3cache_identify(int dirfd, const char *path, int at_flags, struct stat *st_ret,
                     struct l3cache_source *src_ret);
/* The identity from a struct stat alone (btime_ns = 0). */
void l3cache_source_from_stat(const struct stat *st, struct l3cache_source *src_ret);
/* 1 when two identities are the same version of the same file. */
int l3cache_source_eq(const struct l3cache_source *a, const struct l3cache_source *b);

/* Looks the source identity up in the persistent source index, without
 * reading the source. Returns 0 and the encoded size (and key) when known,
 * -ENOENT when this identity was never encoded (or the entry is stale). */
int l3cache_index_lookup(l3cache *cache, const struct l3cache_source *src,
                         uint64_t *encoded_size_ret, struct l3cache_key *key_ret);

/* An opened, verified cache object. */
struct l3cache_object {
    int fd;                  /* read-only fd of the object; caller closes */
    uint64_t size;           /* exact encoded size */
    struct l3cache_key key;
    int hit;                 /* 1: served from cache; 0: encoded by this call */
    int repaired;            /* corrupt objects this call found and removed */
};

/* Flags of l3cache_get */
#define L3CACHE_GET_PRIVATE 0x1u /* the source is not readable by every user:
                                    in an L3CACHE_SHARED cache it is encoded
                                    but never stored or indexed */

/* Returns the object for a source PNG, encoding it on a miss.
 * src_fd is an open, readable fd of the source (read from offset 0 with pread);
 * src is its identity (l3cache_identify). Concurrent calls for the same key in
 * this process wait for one encode (single flight); processes sharing the
 * directory (also on other hosts) wait for one another's claims. A source that
 * is not a valid PNG or is over the limits returns -EIO (and *l3_status_ret,
 * if not NULL, says why); one whose identity changed while it was read
 * returns -EAGAIN (nothing is stored for it: ask again). */
int l3cache_get(l3cache *cache, int src_fd, const struct l3cache_source *src, unsigned flags,
                struct l3cache_object *obj_ret, int *l3_status_ret);

/* Opens the object of a key as l3cache_get would serve it (verified), without
 * the source: 0, or -ENOENT when it is not there (or was corrupt: removed,
 * obj_ret->repaired = 1). */
int l3cache_open_key(l3cache *cache, const struct l3cache_key *key,
                     struct l3cache_object *obj_ret);
/* Before handing out a descriptor obtained earlier (from l3cache_get or
 * l3cache_open_key) again: checks it as an open would (0), or finds it
 * corrupt (-EBADMSG: removed from the directory if its name still points to
 * it, counted). */
int l3cache_check_fd(l3cache *cache, const struct l3cache_key *key, int fd);

/* Before serving bytes [off, off+len) of an object descriptor (with
 * L3CACHE_READ_CHECKS): 0 when those pages are in the page cache and the
 * object was checked since it last changed; else the whole object is checked
 * now (0), or found corrupt (-EBADMSG: removed if its name still points to it,
 * counted; serve another copy). map: the caller's mmap(PROT_READ, MAP_SHARED)
 * of the whole object, or NULL (mapped for the call). */
int l3cache_read_ready(l3cache *cache, const struct l3cache_key *key, int fd, const void *map,
                       uint64_t off, uint64_t len);

/* Memory for the bytes of checked reads, owned by the caller (one per thread
 * that reads): zero-initialised, grown as needed, released with
 * l3cache_scratch_free. */
struct l3cache_scratch {
    void *buf;
    size_t cap;
};
void l3cache_scratch_free(struct l3cache_scratch *scratch);

/* A read of [off, off+len) of an object descriptor checked before it is
 * served (with L3CACHE_READ_CHECKS). An object stored with range checksums
 * (docs/CACHE.md) has the chunks that range touches read and checked, at
 * every read: returns a count n > 0, the checked bytes at *data_ret (n bytes,
 * inside scratch, valid until its next use; serve them, not the descriptor).
 * 0: serve the range from fd (nothing left at off; or an object without
 * range checksums, checked as l3cache_read_ready says). -EBADMSG: corrupt
 * (removed if its name still points to it, counted once; serve another
 * copy); -errno. map: as for l3cache_read_ready (used for objects without
 * range checksums), or NULL. */
ssize_t l3cache_read_checked(l3cache *cache, const struct l3cache_key *key, int fd,
                             const void *map, uint64_t off, size_t len,
                             struct l3cache_scratch *scratch, const void **data_ret);

/* The read state of one object descriptor (obtained from l3cache_get or
 * l3cache_open_key) for a caller that checks every read it serves (with
 * L3CACHE_READ_CHECKS, as l3cache_read_checked does): the descriptor is
 * stat'ed and its range checksums loaded once, at l3cache_reader_open; each
 * read still reads the chunks it touches from the descriptor and hashes
 * them, except where one of the reader's two buffers already holds them
 * (checked when they were read: a read ahead, or a chunk larger than a
 * read). Memory: at most two buffers of the largest read's chunks, given
 * back by l3cache_reader_free; the buffers of all readers of a handle stay
 * within 64 MiB together (past that, reads use the scratch alone). One reader may be used by any number of threads at
 * once; the descriptor (and map) must stay open until it is freed.
 * map: as for l3cache_read_ready, or NULL (the reader then maps the object
 * itself where it needs a map: an object without range checksums, checked
 * whole; and, once, at the first l3cache_reader_splice of one with them;
 * l3cache_reader_read on range checksums never uses one). 0 or -errno (-EINVAL, -ENOMEM;
 * a descriptor whose fstat fails gives a reader whose every read returns
 * that error, so that the caller replaces the object where it reads). */
typedef struct l3cache_reader l3cache_reader;
int l3cache_reader_open(l3cache *cache, const struct l3cache_key *key, int fd, const void *map,
                        l3cache_reader **reader_ret);
void l3cache_reader_free(l3cache_reader *reader);

/* Where the bytes of a checked read are: valid until l3cache_reader_done. */
struct l3cache_view {
    const void *data;
    int slot;           /* the reader's buffer holding them; -1: scratch */
};
/* A checked read of [off, off+len), as l3cache_read_checked describes it:
 * n > 0 checked bytes at view_ret->data (serve them, then call
 * l3cache_reader_done), 0 (serve from the descriptor), -EBADMSG (corrupt:
 * removed if its name still points to it, counted once), -errno. */
ssize_t l3cache_reader_read(l3cache_reader *reader, uint64_t off, size_t len,
                            struct l3cache_scratch *scratch, struct l3cache_view *view_ret);
/* The bytes of view are no longer used (their buffer may be refilled). */
void l3cache_reader_done(l3cache_reader *reader, struct l3cache_view *view);
/* After a read that ended at off has been answered: when the reader reads
 * sequentially, reads and checks [off, off+len) into a free buffer now, so
 * that the next read is served from it. A corrupt range is not reported here
 * (the read that needs it reads it again and does). */
void l3cache_reader_ahead(l3cache_reader *reader, uint64_t off, size_t len);

/* A pipe for checked reads served without a copy (one per thread that
 * reads): zero-initialised (no pipe yet: made and sized at first use),
 * released with l3cache_pipe_free. */
struct l3cache_pipe {
    int fd[2];  /* read end, write end (when cap > 0) */
    size_t cap; /* bytes it holds at most; 0: none open */
};
void l3cache_pipe_free(struct l3cache_pipe *pipe);
/* A checked read of [off, off+len) without a copy (cache/spliced.c): n > 0,
 * the pipe (empty before) now holds exactly the n checked bytes at off, the
 * object's page-cache pages themselves, referenced by the pipe: reply by
 * splicing n bytes from pipe->fd[0], then call l3cache_pipe_reset. 0:
 * nothing at off. -EOPNOTSUPP: this read cannot be served this way (no
 * range checksums, not checked, an object on a filesystem where the
 * guarantee does not hold, no mapping, no pipe large enough, the splice
 * failed; the pipe is left empty): use l3cache_reader_read. -EBADMSG
 * (corrupt, as l3cache_reader_read says; the pipe is left empty), -errno. */
ssize_t l3cache_reader_splice(l3cache_reader *reader, uint64_t off, size_t len,
                              struct l3cache_pipe *pipe);
/* After the reply: 0 when the pipe is empty again; -EIO when the reply left
 * bytes in it (a reply that failed), which are dropped with the pipe. */
int l3cache_pipe_reset(struct l3cache_pipe *pipe);

/* Statistics. `instance` counts this handle since open; `total` is cumulative
 * for the directory (all processes, persisted).
 *
 * The one list of the counters, X(name, description), in the order the
 * statistics records of index.log store them (docs/CACHE.md): the struct,
 * the record codec, stats.json, the Prometheus metrics and `l3fs cache
 * stats` are all generated from it. */
#define L3CACHE_COUNTERS(X)                                                          \
    X(lookups, "lookups of a source (l3cache_get calls)")                            \
    X(hits, "lookups served from a stored object")                                   \
    X(misses, "lookups that needed an encode")                                       \
    X(encodes, "encodes run")                                                        \
    X(encode_failures, "sources that failed to encode")                              \
    X(bytes_served, "bytes of objects handed out from hits")                         \
    X(bytes_written, "bytes of new objects written")                                 \
    X(evictions, "objects evicted under the size cap")                               \
    X(evicted_bytes, "bytes of objects evicted")                                     \
    X(corrupt_repaired, "corrupt objects found, removed and re-created")             \
    X(write_failures, "failed object writes (ENOSPC, EROFS, EIO)")                   \
    X(verified, "payload checks before serving (new, changed or uncached objects)")  \
    X(claim_waits, "encodes left to another process's claim on the key")             \
    X(claim_takeovers, "stale claims (owner gone or silent) taken over")

struct l3cache_counters {
#define L3CACHE_X_FIELD(name, desc) uint64_t name;
    L3CACHE_COUNTERS(L3CACHE_X_FIELD)
#undef L3CACHE_X_FIELD
};
#define L3CACHE_X_ONE(name, desc) +1
enum { L3CACHE_NCOUNTERS = 0 L3CACHE_COUNTERS(L3CACHE_X_ONE) };
#undef L3CACHE_X_ONE
struct l3cache_stats {
    struct l3cache_counters instance;
    struct l3cache_counters total;
    uint64_t objects;           /* objects currently in the directory */
    uint64_t object_bytes;      /* their total size */
    uint64_t max_bytes;         /* the cap, 0 = unlimited */
    int writes_disabled;        /* 1 after a write failure degraded the cache */
    int write_error;            /* errno of the failure that disabled them */
    uint64_t index_entries;     /* source identities known to the index */
};
int l3cache_get_stats(l3cache *cache, struct l3cache_stats *stats_ret);

/* Maintenance (the `l3fs cache` command, fs/cmd_cache.c). */
/* Checks every object whole (checksums, every tile's framing and the range
 * checksums where it has them: all must hold for the daemon to serve it); removes
 * bad ones. Counts via *_ret. */
int l3cache_verify_all(l3cache *cache, uint64_t *checked_ret, uint64_t *bad_ret);
/* Applies the size cap now; returns evicted bytes via *freed_ret. */
int l3cache_gc(l3cache *cache, uint64_t *freed_ret);
/* Removes every object and the index. */
int l3cache_clear(l3cache *cache);

#ifdef __cplusplus
}
#endif
#endif /* L3CACHE_H */
