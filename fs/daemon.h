/* daemon.h — the l3fs daemon's state and the rooms it is built from.
 *
 * One struct l3fs_daemon holds everything the running filesystem shares; the
 * FUSE ops reach it through fuse_req_userdata(), the watcher thread through
 * its argument. Every shared field says what protects it:
 *   [const]   set before the session starts, read-only afterwards;
 *   [table]   d->table_lock;
 *   [node]    the node's own n->lock;
 *   [atomic]  __atomic builtins only;
 *   [bad]     d->bad.lock;   [timings] d->timings_lock;
 *   [watcher] touched only by the watcher thread (and start/stop).
 *
 * Rooms (one job each):
 *   node.c     node table: lookup references, lifetimes, retiring, finding a
 *              node's source entry again (openat relative to its directory)
 *   probe.c    name probing for the namespace rules (exists / qualifies)
 *   encoded.c  encoded nodes (a PNG shown as .l3): exact sizes, encodes,
 *              the object an open serves; the list of sources that failed
 *   ctl.c      the hidden .l3fs directory and its two files
 *   dir.c      directory handles: listing and readdir(plus) entries
 *   ops.c      the FUSE low-level ops, ops table at the end
 *   read.c     reads of an open .l3: checked bytes, repair of a corrupt
 *              object, read-ahead after the reply
 *   watch.c    inotify watcher: invalidates the kernel's entries on changes
 *   session.c  l3fs_run: daemon set-up, cache, FUSE session, loop, teardown
 */
#ifndef L3FS_DAEMON_H
#define L3FS_DAEMON_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "l3cache.h"
#include "l3fs_internal.h"

#define L3_INO_BIT (1ull << 63) /* st_ino of an encoded node: source ino ^ bit */

enum node_kind { NK_SRC = 0, NK_L3 = 1, NK_CTL_DIR = 2, NK_CTL_FILE = 3 };

/* Every node the kernel knows. A directory holds an O_PATH|O_NOFOLLOW
 * descriptor of its source directory; any other node a reference to its
 * parent directory node and its source name (node.c). */
struct node {
    /* identity [const after creation] */
    int kind;
    dev_t dev;
    ino_t ino;
    int64_t btime_ns;    /* birth time (statx; 0 where the filesystem has none) */
    int64_t ctime_ns;    /* ctime when the node was made (stands in for btime) */
    int fd;              /* directories: O_PATH descriptor; others -1 */
    char *relpath;       /* path under SOURCE ("" = root): globs and logs */
    int ctl_id;          /* control files: index into ctl.c's table */

    /* [table] */
    struct node *next;   /* hash chain */
    uint64_t nlookup;    /* kernel references + one per child node; freed at 0 */
    struct node *parent; /* non-directories: directory holding `name` (referenced) */
    char *name;          /* non-directories: source name in parent */
    int retired;         /* out of the table: replaced by a node for a newer version */
    struct node *rnext, *rprev; /* list of retired nodes */
    int wd;              /* directories: inotify watch, or -1 */
    struct node *wd_next; /* chain of d->watch.by_wd */

    /* [node] (mode/uid/gid: last seen, written under the node lock) */
    pthread_mutex_t lock;
    mode_t mode;         /* st_mode when last seen (the file type never changes) */
    uid_t uid;           /* owner when last seen: attributes of a held .l3 */
    gid_t gid;
    /* encoded nodes only [node] */
    int have;                    /* src/size/key describe what the kernel was told */
    struct l3cache_source src;
    uint64_t size;
    struct l3cache_key key;
    int obj_fd;                  /* object of `key`, or -1 (node_keep_obj) */
    int fresh;                   /* obj_fd came from an encode no open used yet */
    int open_count;              /* open file handles of this .l3 */
    int opened;                  /* opened_key below is valid */
    struct l3cache_key opened_key; /* object of the last open: pages in the kernel */
};

/* Sources that failed to encode, so a bad file is tried (and logged) once
 * per version of it, not at every access; the oldest entry goes first. */
#define L3FS_BAD_SLOTS 4096
struct bad_list {
    pthread_mutex_t lock;
    struct l3cache_source src[L3FS_BAD_SLOTS]; /* [bad] */
    int err[L3FS_BAD_SLOTS];                    /* [bad] */
    size_t n, next;                             /* [bad] */
};

#define L3FS_WD_BUCKETS 4096
struct watcher {
    int fd;              /* inotify instance, or -1 [const while running] */
    int stop_fd;         /* eventfd that ends the thread [const while running] */
    pthread_t thread;
    int running;         /* [const while running] */
    int warned;          /* [table] one warning when a watch cannot be added */
    struct node *by_wd[L3FS_WD_BUCKETS]; /* [table] */
};

#define L3FS_CTL_FILES 2

struct l3fs_daemon {
    const struct l3fs_options *opts; /* [const] */
    l3cache *cache;                  /* [const]; thread-safe itself */
    struct fuse_session *se;         /* [const] */
    struct timespec start;           /* [const] CLOCK_MONOTONIC at start */
    struct node root;                /* [const] identity; lock as any node */
    struct node ctl_dir;             /* [const] */
    struct node ctl_files[L3FS_CTL_FILES]; /* [const] */

    pthread_mutex_t table_lock;
    struct node **buckets;           /* [table] */
    size_t nbuckets, count;          /* [table] */
    struct node *retired;            /* [table] nodes out of the table, still known */

    sem_t encode_slots;              /* --jobs encodes at once */
    struct l3fs_fs_counters c;       /* [atomic] */
    pthread_mutex_t timings_lock;
    struct l3fs_timings *timings;    /* [timings] */
    struct bad_list bad;
    struct watcher watch;
    /* Object descriptors kept in nodes are capped so that a cold `ls -l` of
     * a huge tree cannot exhaust descriptors. */
    long held_obj_fds;               /* [atomic] */
    long max_held_obj_fds;           /* [const] */
    int said_writes_disabled;        /* [atomic] the one log line about it */
    int source_public;               /* [const] SOURCE and its parents let others in */
    int allow_other;                 /* [const] -o allow_other: ctl files owner-only */
};

/* A source entry as seen now: its stat and its identity (with birth time,
 * from statx). */
struct seen {
    struct stat st;
    struct l3cache_source id;
};

#define COUNT(d, field, v) __atomic_add_fetch(&(d)->c.field, (uint64_t)(v), __ATOMIC_RELAXED)

static inline int key_eq(const struct l3cache_key *a, const struct l3cache_key *b)
{
    return memcmp(a->bytes, b->bytes, sizeof a->bytes) == 0;
}

/* Nanoseconds since *t0 (CLOCK_MONOTONIC). */
uint64_t l3fs_ns_since(const struct timespec *t0);

/* ---- node.c ---- */
struct node *node_of(struct l3fs_daemon *d, fuse_ino_t ino);
fuse_ino_t node_id(struct l3fs_daemon *d, struct node *n);
int node_is_static(struct l3fs_daemon *d, struct node *n);
/* Finds or creates the node of (sn, kind) and takes one kernel reference.
 * fd is an O_PATH descriptor of the entry NAME in directory node PARENT, seen
 * as sn; it is kept by a new directory node and closed otherwise. A node is
 * reused only for the same file (inode and birth time); the node's relpath
 * is built from PARENT's. NULL on ENOMEM. */
struct node *node_ref(struct l3fs_daemon *d, int fd, const struct seen *sn, int kind,
                      struct node *parent, const char *name);
/* Drops references; a node freed at 0 drops the one it holds on its parent. */
void node_unref(struct l3fs_daemon *d, struct node *n, uint64_t count);
/* Takes a node out of the table: the next lookup makes a new node (a new
 * inode for the kernel) while this one keeps serving its open handles. */
void node_retire(struct l3fs_daemon *d, struct node *n);
/* The node's source entry as seen now; -ENOENT when the name now holds
 * another file (inode or birth time differ: never silently another file). */
int node_stat(struct l3fs_daemon *d, struct node *n, struct seen *sn);
/* O_PATH|O_NOFOLLOW descriptor of NAME in dirfd, seen, or -errno. */
int l3fs_open_entry(int dirfd, const char *name, struct seen *sn);
/* A new O_PATH descriptor of the node's source entry, checked as in node_stat. */
int node_open_path(struct l3fs_daemon *d, struct node *n, struct seen *sn);
/* The node's source entry opened for reading (regular files), checked as in
 * node_stat; *sn describes the returned descriptor. */
int node_open_rdonly(struct l3fs_daemon *d, struct node *n, struct seen *sn);
/* Replaces the object descriptor a node keeps (fd < 0: none); over the cap
 * the descriptor is closed instead (the next open asks the cache again).
 * Caller holds n->lock. */
void node_keep_obj(struct l3fs_daemon *d, struct node *n, int fd);
/* In a cache shared between users (--cache-shared): 1 when the file (st)
 * is not readable by every user (its mode, or a directory above it), so its
 * object must stay out of the shared cache. Always 0 for a private cache. */
int node_is_private(struct l3fs_daemon *d, struct node *n, const struct stat *st);
/* The root and control nodes, and the table (session start and end). */
void nodes_init(struct l3fs_daemon *d, int root_fd, const struct seen *root);
void nodes_free(struct l3fs_daemon *d);

/* ---- probe.c ---- */
/* What the namespace rules (names.c) ask a source directory. In readdir the
 * listing answers exists(), and qualifies() remembers what it found about the
 * last name (the memo) so the entry is not opened and looked up twice. */
struct probe_found {
    int fd;                  /* O_PATH descriptor of the entry, or -1 */
    struct seen sn;
    int known;               /* the cache index knew st's identity ... */
    uint64_t size;           /* ... with this .l3 size */
    struct l3cache_key key;  /* ... and object */
};
struct probe_ctx {
    struct l3fs_daemon *d;
    int dirfd;
    const char *reldir;
    char **sorted;       /* readdir: the sorted listing; NULL: ask the filesystem */
    size_t n;
    int memo;            /* remember the last qualifies() */
    char memo_name[256];
    struct probe_found found;
};
void probe_init(struct l3fs_daemon *d, struct l3fs_probe *p, struct probe_ctx *c, int dirfd,
                const char *reldir);
/* Hands over the memo of NAME (the caller closes found_ret->fd); 0 if none. */
int probe_take_memo(struct probe_ctx *c, const char *name, struct probe_found *found_ret);
void probe_done(struct probe_ctx *c);
int probe_cmp_names(const void *a, const void *b); /* qsort/bsearch of char * */

/* ---- encoded.c ---- */
/* .l3 attributes from the source's stat: flipped inode bit, exact size. */
void l3_attr(struct stat *st, uint64_t size);
/* Brings an encoded node up to date with its source (index, else encode) and
 * returns the .l3 attributes. */
int l3_refresh(struct l3fs_daemon *d, struct node *n, struct stat *st_ret);
/* readdirplus: describes n by an index entry found for src (no encode).
 * Returns 1 when open handles hold another version (no attributes for this
 * name then), else 0 with *st turned into the .l3 attributes. */
int l3_describe_indexed(struct l3fs_daemon *d, struct node *n, const struct l3cache_source *src,
                        uint64_t size, const struct l3cache_key *key, struct stat *st);
/* 1 when open handles of n hold a version other than src (lookup splits). */
int l3_held_by_readers(struct node *n, const struct l3cache_source *src);
/* An open of n: a descriptor of the object whose size the kernel was told.
 * *miss_ret: it was encoded for this open; *keep_ret: the kernel's cached
 * pages are still valid. Counts an open handle (l3_closed undoes it). */
int l3_open(struct l3fs_daemon *d, struct node *n, int *fd_ret, uint64_t *size_ret,
            struct l3cache_key *key_ret, int *miss_ret, int *keep_ret);
/* A read found the object an open handle serves (key) corrupt (corrupt = 1:
 * the cache removed it) or its descriptor failing (corrupt = 0: on a network
 * filesystem, an object another host removed before this host's open reached
 * the server): a correct copy (encoded again while the source is that
 * version) in *fd_ret, or -EIO. */
int l3_reopen(struct l3fs_daemon *d, struct node *n, const struct l3cache_key *key,
              uint64_t size, int corrupt, int *fd_ret);
void l3_closed(struct l3fs_daemon *d, struct node *n);

/* ---- ctl.c ---- */
/* Lookup inside the control namespace: 1 when (p, name) is not a control
 * entry (look it up in SOURCE), 0 with e filled, or -errno. */
int ctl_lookup(struct l3fs_daemon *d, struct node *p, const char *name,
               struct fuse_entry_param *e);
void ctl_stat(struct l3fs_daemon *d, struct node *n, struct stat *st);
/* The content of a control file (malloc'ed, NUL-terminated), NULL on ENOMEM. */
char *ctl_render(struct l3fs_daemon *d, int id);
/* readdir of the control directory into buf; returns the bytes used. */
size_t ctl_readdir(struct l3fs_daemon *d, fuse_req_t req, char *buf, size_t size, off_t off,
                   int plus);

/* ---- dir.c ---- */
struct dirh;
/* Lists directory node n (or the control directory). */
int dirh_open(struct l3fs_daemon *d, struct node *n, struct dirh **dh_ret);
void dirh_free(struct dirh *dh);
/* Fills buf with entries from off on; returns the bytes used. */
size_t dirh_read(struct l3fs_daemon *d, struct dirh *dh, fuse_req_t req, char *buf, size_t size,
                 off_t off, int plus);

/* ---- watch.c ---- */
/* Both with d->table_lock held. */
void watch_add_locked(struct l3fs_daemon *d, struct node *n);
void watch_unlink_locked(struct l3fs_daemon *d, struct node *n, int rm);
void watch_start(struct l3fs_daemon *d);
void watch_stop(struct l3fs_daemon *d);

/* ---- ops.c ---- */
extern const struct fuse_lowlevel_ops l3fs_ops;

/* An open file (ops.c opens and releases it, read.c reads a .l3 through it).
 * Fields without a mark are set by the open and read-only until release. */
struct fobj;
struct fh {
    int refs;            /* [atomic] release + reads in flight that use the handle after replying */
    struct node *node;   /* .l3: the node (alive while open) */
    int fd;              /* source files: the descriptor; -1 otherwise */
    int kind;
    uint64_t size;       /* .l3: object size */
    struct l3cache_key key; /* .l3: the object's key */
    struct fobj *obj;    /* [atomic] .l3: the object served now */
    pthread_mutex_t lock; /* .l3: a repair (a read found the object corrupt) */
    struct fobj *old[4]; /* [lock] objects replaced by repairs, freed at release (reads may still use them) */
    int nold;            /* [lock] */
    char *buf;           /* control files: the snapshot */
    size_t len;
};

/* ---- read.c ---- */
/* The object of descriptor fd (taken over: closed on failure too) with its
 * checked reader opened; NULL on failure. */
struct fobj *fobj_new(struct l3fs_daemon *d, const struct l3cache_key *key, int fd);
/* Frees o with its reader and descriptor; NULL: none. */
void fobj_free(struct fobj *o);
/* Replies to a read of [off, off+size) of the .l3 open as h: bytes checked
 * (a corrupt or failing object is replaced first), or spliced from the
 * object, or an error; after checked bytes it reads the next range ahead.
 * The caller holds a reference on h across the call (RELEASE may come as
 * soon as the kernel has the reply). */
void read_l3(fuse_req_t req, struct l3fs_daemon *d, struct fh *h, size_t size, off_t off);
/* Replies with [off, off+size) of fd, spliced from the page cache. */
void splice_reply(fuse_req_t req, int fd, off_t off, size_t size);

#endif /* L3FS_DAEMON_H */
