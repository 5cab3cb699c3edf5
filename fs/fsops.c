/* fsops.c — the l3fs filesystem on the libfuse3 low-level API.
 *
 * Every node the kernel knows is a struct node. A directory node holds an
 * O_PATH|O_NOFOLLOW descriptor of its source directory; any other node holds
 * a reference to its parent directory node and its source name, and opens or
 * stats the entry on demand with openat()/fstatat()/readlinkat() relative to
 * the parent's descriptor (O_NOFOLLOW / AT_SYMLINK_NOFOLLOW), checking that
 * the entry found is still the node's inode (st_dev, st_ino). The daemon thus
 * needs one descriptor per known directory, not per known entry. No path
 * string is ever resolved against SOURCE and a name from the kernel (never
 * "/" or "..") cannot leave it.
 *
 * An encoded node (a PNG shown as .l3) remembers the source identity and the
 * object it last described to the kernel (size and, once opened or encoded,
 * a descriptor of the cache object). Its size is always exact: from that
 * memory, from the cache's persistent index, or by encoding before replying.
 * Opens serve the object the kernel was told about, so size and bytes always
 * agree; a changed source is picked up at the next LOOKUP/GETATTR.
 */
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "l3cache.h"
#include "l3fs_internal.h"

#define L3_INO_BIT (1ull << 63) /* st_ino of an encoded node: source ino ^ bit */

enum node_kind { NK_SRC = 0, NK_L3 = 1, NK_CTL_DIR = 2, NK_CTL_FILE = 3 };

struct node {
    struct node *next; /* hash chain */
    int kind;
    dev_t dev;
    ino_t ino;
    int fd;            /* directories: O_PATH|O_NOFOLLOW descriptor; others -1 */
    uint64_t nlookup;  /* kernel references + one per child node; freed at 0 */
    struct node *parent; /* non-directories: directory holding `name` (referenced) */
    char *name;        /* non-directories: source name in parent (under D.table_lock) */
    char *relpath;     /* path under SOURCE ("" = root): for globs and logs */
    mode_t mode;       /* st_mode when last seen (file type never changes) */
    uid_t uid;         /* owner when last seen: attributes of a held .l3 */
    gid_t gid;
    /* encoded nodes: protected by lock */
    pthread_mutex_t lock;
    int have;                    /* size/src below describe what the kernel was told */
    struct l3cache_source src;
    uint64_t size;
    struct l3cache_key key;
    int obj_fd;                  /* object of `key`, or -1 */
    int fresh;                   /* obj_fd came from an encode no open used yet */
    int open_count;              /* open file handles of this .l3 */
    int retired;                 /* replaced by a node for a newer version */
    struct node *rnext, *rprev;  /* list of retired nodes (under D.table_lock) */
    int opened;                  /* opened_key below is valid */
    struct l3cache_key opened_key; /* object of the last open: pages in the kernel */
    int ctl_id;                  /* control files */
    int wd;                      /* directories: inotify watch, or -1 */
    struct node *wd_next;        /* chain of W.by_wd (under D.table_lock) */
};

struct fh {
    int refs;        /* release + control-file reads in flight */
    struct node *node; /* .l3: the node (alive while open) */
    int fd;          /* object / source file; -1 for control files */
    int kind;
    uint64_t size;   /* .l3: object size */
    char *buf;       /* control files: the snapshot */
    size_t len;
};

struct dirh {
    int fd;
    size_t n;
    char **names;       /* listing in readdir order */
    unsigned char *types;
    ino_t *inos;
    char **sorted;      /* same names sorted, for exists() */
    struct node *dir;
};

static struct {
    struct l3fs_options *opts;
    l3cache *cache;
    struct fuse_session *se;
    struct node root;
    struct node ctl_dir;
    struct node ctl_files[2];
    pthread_mutex_t table_lock;
    struct node **buckets;
    size_t nbuckets, count;
    struct node *retired; /* nodes out of the table, still known to the kernel */
    sem_t encode_slots;
    struct l3fs_fs_counters c; /* updated with __atomic builtins */
    pthread_mutex_t timings_lock;
    struct l3fs_timings *timings;
    struct timespec start;
} D = {.table_lock = PTHREAD_MUTEX_INITIALIZER, .timings_lock = PTHREAD_MUTEX_INITIALIZER};

static const char *const ctl_names[2] = {"stats.json", "metrics"};

/* Sources that failed to encode, so a bad file is tried (and logged) once
 * per version of it, not at every access; the oldest entry goes first. */
#define BAD_SLOTS 4096
static struct {
    pthread_mutex_t lock;
    struct l3cache_source src[BAD_SLOTS];
    int err[BAD_SLOTS];
    size_t n, next;
} Bad = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Object descriptors kept in nodes (snapshots) are capped so that a cold
 * `ls -l` of a huge tree cannot exhaust descriptors; past the cap a node just
 * does not keep one (its next open asks the cache again). */
static long held_obj_fds, max_held_obj_fds = 4096;

static void node_keep_obj(struct node *n, int fd)
{
    if (n->obj_fd >= 0) {
        close(n->obj_fd);
        n->obj_fd = -1;
        __atomic_sub_fetch(&held_obj_fds, 1, __ATOMIC_RELAXED);
    }
    if (fd < 0)
        return;
    if (__atomic_add_fetch(&held_obj_fds, 1, __ATOMIC_RELAXED) > max_held_obj_fds) {
        __atomic_sub_fetch(&held_obj_fds, 1, __ATOMIC_RELAXED);
        close(fd);
        return;
    }
    n->obj_fd = fd;
}

#define COUNT(field, v) __atomic_add_fetch(&D.c.field, (uint64_t)(v), __ATOMIC_RELAXED)

/* ---------------------------------------------------------------- nodes */

static struct node *node_of(fuse_ino_t ino)
{
    if (ino == FUSE_ROOT_ID)
        return &D.root;
    return (struct node *)(uintptr_t)ino;
}

static fuse_ino_t id_of(struct node *n)
{
    return n == &D.root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)n;
}

static int is_static(struct node *n)
{
    return n == &D.root || n == &D.ctl_dir || n == &D.ctl_files[0] || n == &D.ctl_files[1];
}

static size_t hash_of(dev_t dev, ino_t ino, int kind)
{
    uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)dev * 0xC2B2AE3D27D4EB4Full;
    h ^= (uint64_t)kind;
    h ^= h >> 29;
    return (size_t)h;
}

static void table_grow(void)
{
    size_t nb = D.nbuckets ? D.nbuckets * 2 : 1024;
    struct node **b = calloc(nb, sizeof *b);
    if (!b)
        return; /* keep the old table; chains just get longer */
    for (size_t i = 0; i < D.nbuckets; i++) {
        struct node *n = D.buckets[i];
        while (n) {
            struct node *next = n->next;
            size_t h = hash_of(n->dev, n->ino, n->kind) & (nb - 1);
            n->next = b[h];
            b[h] = n;
            n = next;
        }
    }
    free(D.buckets);
    D.buckets = b;
    D.nbuckets = nb;
}


/* ------------------------------------------------------ source watching
 *
 * Directories the kernel knows are watched with inotify (when the source
 * filesystem supports it). A change of an entry invalidates the kernel's
 * dentries of every name it can affect, so the next access looks it up
 * again: changes show at once instead of after the timeouts. Sources on
 * network filesystems changed by other hosts are not seen by inotify and
 * rely on --timeout/--dir-timeout. */
#define WD_BUCKETS 4096
#define WATCH_MASK                                                                        \
    (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_CLOSE_WRITE |   \
     IN_ONLYDIR)
static struct {
    int fd;      /* inotify instance, or -1 */
    int stop_fd; /* eventfd that ends the thread */
    pthread_t thread;
    int running;
    int warned;
    struct node *by_wd[WD_BUCKETS];
} W = {.fd = -1, .stop_fd = -1};

/* Both with D.table_lock held. */
static void watch_add_locked(struct node *n)
{
    n->wd = -1;
    if (W.fd < 0)
        return;
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", n->fd);
    int wd = inotify_add_watch(W.fd, p, WATCH_MASK);
    if (wd < 0) {
        if (!W.warned) {
            W.warned = 1;
            LOG_W("cannot watch %s for changes (%s): relying on the timeouts there and below",
                  n->relpath[0] ? n->relpath : ".", strerror(errno));
        }
        return;
    }
    n->wd = wd;
    struct node **b = &W.by_wd[(unsigned)wd % WD_BUCKETS];
    n->wd_next = *b;
    *b = n;
}

static void watch_unlink_locked(struct node *n, int rm)
{
    if (n->wd < 0)
        return;
    struct node **pp = &W.by_wd[(unsigned)n->wd % WD_BUCKETS];
    while (*pp && *pp != n)
        pp = &(*pp)->wd_next;
    if (*pp)
        *pp = n->wd_next;
    if (rm && W.fd >= 0)
        inotify_rm_watch(W.fd, n->wd);
    n->wd = -1;
}

static void node_free(struct node *n)
{
    if (n->fd >= 0)
        close(n->fd);
    node_keep_obj(n, -1);
    pthread_mutex_destroy(&n->lock);
    free(n->name);
    free(n->relpath);
    free(n);
}

static void node_unref(struct node *n, uint64_t count);
static void node_retire_locked(struct node *n);

/* Finds or creates the node of (st, kind) and takes one kernel reference.
 * fd is an O_PATH descriptor of the entry NAME in directory node PARENT, whose
 * fstat() gave st; it is kept by a new directory node and closed otherwise.
 * A non-directory node references PARENT and remembers NAME; an existing one
 * moves to the (parent, name) it was just found at (a rename or another hard
 * link), since the caller has just confirmed that it is this inode. */
static struct node *node_ref(int fd, const struct stat *st, int kind, const char *relpath,
                             struct node *parent, const char *name)
{
    int isdir = kind == NK_SRC && S_ISDIR(st->st_mode);
    struct node *drop = NULL;
    pthread_mutex_lock(&D.table_lock);
    if (D.count >= D.nbuckets)
        table_grow();
    size_t h = hash_of(st->st_dev, st->st_ino, kind) & (D.nbuckets - 1);
    struct node *n;
    for (n = D.buckets[h]; n; n = n->next)
        if (n->dev == st->st_dev && n->ino == st->st_ino && n->kind == kind)
            break;
    if (n && ((n->mode ^ st->st_mode) & S_IFMT)) {
        /* Nodes of files hold no descriptor, so the source filesystem may
         * reuse the inode number of a deleted one while the kernel still
         * knows it: an entry of another type gets a node of its own. */
        node_retire_locked(n);
        n = NULL;
    }
    if (n) {
        n->nlookup++;
        if (n->parent && (n->parent != parent || strcmp(n->name, name) != 0)) {
            char *nm = strdup(name);
            if (nm) {
                free(n->name);
                n->name = nm;
                if (n->parent != parent) {
                    drop = n->parent;
                    if (!is_static(parent))
                        parent->nlookup++;
                    n->parent = parent;
                }
            }
        }
        pthread_mutex_unlock(&D.table_lock);
        close(fd);
        if (drop)
            node_unref(drop, 1);
        return n;
    }
    n = calloc(1, sizeof *n);
    char *rp = strdup(relpath);
    char *nm = isdir ? NULL : strdup(name);
    if (!n || !rp || (!isdir && !nm)) {
        pthread_mutex_unlock(&D.table_lock);
        free(n);
        free(rp);
        free(nm);
        close(fd);
        return NULL;
    }
    n->kind = kind;
    n->dev = st->st_dev;
    n->ino = st->st_ino;
    if (isdir) {
        n->fd = fd;
    } else {
        close(fd);
        n->fd = -1;
        n->parent = parent;
        n->name = nm;
        if (!is_static(parent))
            parent->nlookup++;
    }
    n->nlookup = 1;
    n->relpath = rp;
    n->mode = st->st_mode;
    n->uid = st->st_uid;
    n->gid = st->st_gid;
    n->obj_fd = -1;
    n->wd = -1;
    pthread_mutex_init(&n->lock, NULL);
    n->next = D.buckets[h];
    D.buckets[h] = n;
    D.count++;
    if (isdir)
        watch_add_locked(n);
    pthread_mutex_unlock(&D.table_lock);
    return n;
}

/* Drops references; a node freed at 0 drops the one it holds on its parent. */
static void node_unref(struct node *n, uint64_t count)
{
    while (n && !is_static(n)) {
        pthread_mutex_lock(&D.table_lock);
        if (count > n->nlookup)
            count = n->nlookup;
        n->nlookup -= count;
        if (n->nlookup != 0) {
            pthread_mutex_unlock(&D.table_lock);
            return;
        }
        if (n->retired) {
            if (n->rprev)
                n->rprev->rnext = n->rnext;
            else
                D.retired = n->rnext;
            if (n->rnext)
                n->rnext->rprev = n->rprev;
        } else {
            size_t h = hash_of(n->dev, n->ino, n->kind) & (D.nbuckets - 1);
            struct node **pp = &D.buckets[h];
            while (*pp && *pp != n)
                pp = &(*pp)->next;
            if (*pp)
                *pp = n->next;
            D.count--;
        }
        watch_unlink_locked(n, 1);
        struct node *parent = n->parent;
        pthread_mutex_unlock(&D.table_lock);
        node_free(n);
        n = parent;
        count = 1;
    }
}

/* Where a non-directory node's entry is now: its parent (referenced until
 * loc_put) and name, copied under the table lock. */
struct loc {
    struct node *parent;
    char name[256];
};

static void loc_get(struct node *n, struct loc *l)
{
    pthread_mutex_lock(&D.table_lock);
    l->parent = n->parent;
    if (!is_static(l->parent))
        l->parent->nlookup++;
    snprintf(l->name, sizeof l->name, "%s", n->name);
    pthread_mutex_unlock(&D.table_lock);
}

static void loc_put(struct loc *l)
{
    node_unref(l->parent, 1);
}

static int same_inode(const struct node *n, const struct stat *st)
{
    return st->st_dev == n->dev && st->st_ino == n->ino;
}

/* stat of the node's source entry. A name that now holds another inode (the
 * entry was replaced, renamed away or deleted) gives -ENOENT: never silently
 * another file. */
static int node_stat(struct node *n, struct stat *st)
{
    if (n->fd >= 0)
        return fstat(n->fd, st) < 0 ? -errno : 0;
    struct loc l;
    loc_get(n, &l);
    int r = fstatat(l.parent->fd, l.name, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
    loc_put(&l);
    if (r == 0 && !same_inode(n, st))
        r = -ENOENT;
    return r;
}

/* A new O_PATH|O_NOFOLLOW descriptor of the node's source entry (checked to be
 * the node's inode, as in node_stat) and its stat. */
static int node_open_path(struct node *n, struct stat *st)
{
    int fd;
    if (n->fd >= 0) {
        fd = fcntl(n->fd, F_DUPFD_CLOEXEC, 0);
    } else {
        struct loc l;
        loc_get(n, &l);
        fd = openat(l.parent->fd, l.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        loc_put(&l);
    }
    if (fd < 0)
        return -errno;
    if (fstat(fd, st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (!same_inode(n, st)) {
        close(fd);
        return -ENOENT;
    }
    return fd;
}

/* Takes an encoded node out of the table: it keeps describing the version
 * its open handles read, and the next lookup of the source makes a new node
 * (a new inode for the kernel) for the new version. */
static void node_retire_locked(struct node *n)
{
    if (!n->retired) {
        size_t h = hash_of(n->dev, n->ino, n->kind) & (D.nbuckets - 1);
        struct node **pp = &D.buckets[h];
        while (*pp && *pp != n)
            pp = &(*pp)->next;
        if (*pp) {
            *pp = n->next;
            D.count--;
        }
        n->retired = 1;
        n->rprev = NULL;
        n->rnext = D.retired;
        if (D.retired)
            D.retired->rprev = n;
        D.retired = n;
    }
}

static void node_retire(struct node *n)
{
    pthread_mutex_lock(&D.table_lock);
    node_retire_locked(n);
    pthread_mutex_unlock(&D.table_lock);
}

/* Reopens a node's O_PATH descriptor for reading (regular files only). */
static int reopen_rdonly(int path_fd)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", path_fd);
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    return fd;
}

static char *join_rel(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    if (a) {
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + 1, name, b + 1);
    } else {
        memcpy(p, name, b + 1);
    }
    return p;
}

/* ------------------------------------------------------ name resolution */

struct probe_ctx {
    int dirfd;
    const char *reldir;
    char **sorted; /* readdir: the listing; NULL: ask the filesystem */
    size_t n;
    /* readdir: what the last qualifies() found, so the entry is not opened,
     * stat()ed and looked up in the index twice */
    int memo;
    char memo_name[256];
    int memo_fd; /* O_PATH descriptor, or -1 */
    struct stat memo_st;
    int memo_known;
    uint64_t memo_size;
    struct l3cache_key memo_key;
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int probe_exists(void *vctx, const char *name)
{
    struct probe_ctx *c = vctx;
    if (c->sorted) {
        const char *key = name;
        return bsearch(&key, c->sorted, c->n, sizeof(char *), cmp_str) != NULL;
    }
    struct stat st;
    return fstatat(c->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Regular file, PNG signature, not excluded. A source the index knows was a
 * PNG when it was encoded, so its signature is not read again. */
static int probe_qualifies(void *vctx, const char *name)
{
    struct probe_ctx *c = vctx;
    if (l3fs_excluded(D.opts->excludes, D.opts->n_excludes, c->reldir, name))
        return 0;
    int pfd = openat(c->dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0)
        return 0;
    struct stat st;
    if (fstat(pfd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(pfd);
        return 0;
    }
    struct l3cache_source src;
    uint64_t size = 0;
    struct l3cache_key key;
    l3cache_source_from_stat(&st, &src);
    int known = D.cache && l3cache_index_lookup(D.cache, &src, &size, &key) == 0;
    if (c->memo && strlen(name) < sizeof c->memo_name) {
        if (c->memo_fd >= 0)
            close(c->memo_fd);
        strcpy(c->memo_name, name);
        c->memo_fd = pfd;
        c->memo_st = st;
        c->memo_known = known;
        c->memo_size = size;
        c->memo_key = key;
    } else {
        close(pfd);
    }
    if (known)
        return 1;
    int fd = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return 0;
    unsigned char sig[8];
    ssize_t r = pread(fd, sig, sizeof sig, 0);
    close(fd);
    return r == (ssize_t)sizeof sig && l3_is_png(sig, sizeof sig);
}

static void probe_init(struct l3fs_probe *p, struct probe_ctx *c, int dirfd, const char *reldir)
{
    c->dirfd = dirfd;
    c->reldir = reldir;
    c->sorted = NULL;
    c->n = 0;
    c->memo = 0;
    c->memo_fd = -1;
    c->memo_name[0] = '\0';
    p->exists = probe_exists;
    p->qualifies = probe_qualifies;
    p->ctx = c;
}

/* ----------------------------------------------------------- attributes */

static uint64_t ns_since(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (uint64_t)(b.tv_sec - a->tv_sec) * 1000000000ull + (uint64_t)(b.tv_nsec - a->tv_nsec);
}

static int same_src(const struct l3cache_source *a, const struct l3cache_source *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

static int bad_find(const struct l3cache_source *src)
{
    int r = 0;
    pthread_mutex_lock(&Bad.lock);
    for (size_t i = 0; i < Bad.n; i++)
        if (same_src(&Bad.src[i], src)) {
            r = Bad.err[i];
            break;
        }
    pthread_mutex_unlock(&Bad.lock);
    return r;
}

static void bad_add(const struct l3cache_source *src, int err)
{
    pthread_mutex_lock(&Bad.lock);
    Bad.src[Bad.next] = *src;
    Bad.err[Bad.next] = err;
    Bad.next = (Bad.next + 1) % BAD_SLOTS;
    if (Bad.n < BAD_SLOTS)
        Bad.n++;
    pthread_mutex_unlock(&Bad.lock);
}

static void l3_attr(struct stat *st, uint64_t size)
{
    st->st_ino ^= L3_INO_BIT;
    st->st_size = (off_t)size;
    st->st_blocks = (blkcnt_t)((size + 511) / 512);
}

/* A cache that cannot store objects (disk full, read-only directory) hands
 * out unlinked in-memory copies and keeps counting write_failures; say so
 * once per daemon. Checked on misses only, with one fstat. */
static void note_cache_writes(int obj_fd)
{
    static int said;
    struct stat st;
    struct l3cache_stats cs;
    if (__atomic_load_n(&said, __ATOMIC_RELAXED) || fstat(obj_fd, &st) < 0 ||
        st.st_nlink != 0 || l3cache_get_stats(D.cache, &cs) < 0 || !cs.writes_disabled)
        return;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_ACQ_REL))
        LOG_W("cache %s: cannot store objects (write failures: %" PRIu64
              "; disk full or read-only?): cache writes disabled, encodes served from memory",
              D.opts->cache_dir, cs.instance.write_failures);
}

/* Encodes the node's source now (caller holds n->lock). */
static int l3_encode_locked(struct node *n, const struct l3cache_source *want)
{
    struct stat st;
    int pfd = node_open_path(n, &st);
    if (pfd < 0)
        return pfd;
    int fd = reopen_rdonly(pfd);
    close(pfd);
    if (fd < 0)
        return fd;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    struct l3cache_source src;
    l3cache_source_from_stat(&st, &src);
    (void)want;
    int known_bad = bad_find(&src);
    if (known_bad) {
        close(fd);
        return known_bad;
    }
    struct l3cache_object obj;
    int l3st = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (sem_wait(&D.encode_slots) < 0 && errno == EINTR)
        ;
    int r = l3cache_get(D.cache, fd, &st, &obj, &l3st);
    sem_post(&D.encode_slots);
    uint64_t ns = ns_since(&t0);
    close(fd);
    if (r < 0) {
        if (r == -EIO) {
            bad_add(&src, -EIO);
            COUNT(encode_errors, 1);
            LOG_E("cannot encode %s: %s", n->relpath[0] ? n->relpath : ".",
                  l3st ? l3_strerror(l3st) : "invalid PNG");
            return -EIO;
        }
        LOG_W("cache error for %s: %s", n->relpath, strerror(-r));
        return r;
    }
    if (!obj.hit) {
        COUNT(encodes, 1);
        pthread_mutex_lock(&D.timings_lock);
        l3fs_timings_add(D.timings, ns);
        pthread_mutex_unlock(&D.timings_lock);
        LOG_D("encoded %s: %" PRIu64 " bytes in %.1f ms", n->relpath, obj.size, ns / 1e6);
        note_cache_writes(obj.fd);
    }
    node_keep_obj(n, obj.fd);
    n->fresh = !obj.hit && n->obj_fd >= 0;
    n->have = 1;
    n->src = src;
    n->size = obj.size;
    n->key = obj.key;
    return 0;
}

/* Brings an encoded node up to date with its source and returns the source
 * stat with the exact .l3 size. */
static void set_ts(struct timespec *ts, int64_t ns)
{
    ts->tv_sec = (time_t)(ns / 1000000000);
    ts->tv_nsec = (long)(ns % 1000000000);
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000;
        ts->tv_sec--;
    }
}

/* While a .l3 is open somewhere, the kernel keeps being told the version
 * those readers opened (size and times): its i_size must not change under a
 * reader, or a read could end early inside the old bytes. The switch to a
 * changed source happens once no handle is open. Caller holds n->lock. */
static int l3_deferred(struct node *n, const struct l3cache_source *src, struct stat *st)
{
    if (!(n->have && (n->retired || (n->open_count > 0 && !same_src(src, &n->src)))))
        return 0;
    st->st_size = (off_t)n->src.size;
    set_ts(&st->st_mtim, n->src.mtime_ns);
    set_ts(&st->st_ctim, n->src.ctime_ns);
    return 1;
}

static int l3_refresh(struct node *n, struct stat *st_ret)
{
    struct stat st;
    int sr = node_stat(n, &st);
    struct l3cache_source src;
    pthread_mutex_lock(&n->lock);
    if (sr < 0) {
        if (!(n->have && (n->retired || n->open_count > 0))) {
            pthread_mutex_unlock(&n->lock);
            return sr;
        }
        /* The source entry is gone or replaced while handles of this version
         * are open: keep describing that version from what the node knows. */
        memset(&st, 0, sizeof st);
        st.st_dev = n->dev;
        st.st_ino = n->ino;
        st.st_mode = n->mode;
        st.st_nlink = 1;
        st.st_uid = n->uid;
        st.st_gid = n->gid;
        st.st_blksize = 4096;
        st.st_size = (off_t)n->src.size;
        set_ts(&st.st_atim, n->src.mtime_ns);
        set_ts(&st.st_mtim, n->src.mtime_ns);
        set_ts(&st.st_ctim, n->src.ctime_ns);
    } else {
        n->mode = st.st_mode;
        n->uid = st.st_uid;
        n->gid = st.st_gid;
    }
    l3cache_source_from_stat(&st, &src);
    if (sr < 0)
        src = n->src;
    int r = 0;
    if (l3_deferred(n, &src, &st)) {
        /* keep describing what the open handles serve */
    } else if (st.st_nlink == 0) {
        r = -ENOENT; /* the source was deleted */
    } else if (!(n->have && same_src(&src, &n->src))) {
        uint64_t size;
        struct l3cache_key key;
        int known_bad = bad_find(&src);
        if (known_bad) {
            r = known_bad;
        } else if (l3cache_index_lookup(D.cache, &src, &size, &key) == 0) {
            COUNT(index_hits, 1);
            if (n->obj_fd >= 0 && !(n->have && memcmp(&key, &n->key, sizeof key) == 0)) {
                node_keep_obj(n, -1);
                n->fresh = 0;
            }
            n->have = 1;
            n->src = src;
            n->size = size;
            n->key = key;
        } else {
            r = l3_encode_locked(n, &src);
            if (r == 0) {
                /* the encode read the file again: report what it saw */
                src = n->src;
                st.st_size = (off_t)src.size;
            }
        }
    }
    uint64_t size = n->size;
    pthread_mutex_unlock(&n->lock);
    if (r < 0)
        return r;
    *st_ret = st;
    l3_attr(st_ret, size);
    return 0;
}

static double timeout_for(int kind)
{
    return kind == NK_L3 ? D.opts->timeout : D.opts->dir_timeout;
}

/* ------------------------------------------------------- control files */

static char *ctl_render(int id)
{
    struct l3fs_snapshot s;
    memset(&s, 0, sizeof s);
    s.version = L3FS_VERSION_STRING;
    s.source = D.opts->source;
    s.cache_dir = D.opts->cache_dir;
    s.uptime_s = (double)ns_since(&D.start) / 1e9;
    struct l3fs_fs_counters *c = &s.fs;
    c->lookups = __atomic_load_n(&D.c.lookups, __ATOMIC_RELAXED);
    c->l3_opens = __atomic_load_n(&D.c.l3_opens, __ATOMIC_RELAXED);
    c->l3_open_hits = __atomic_load_n(&D.c.l3_open_hits, __ATOMIC_RELAXED);
    c->l3_open_misses = __atomic_load_n(&D.c.l3_open_misses, __ATOMIC_RELAXED);
    c->encodes = __atomic_load_n(&D.c.encodes, __ATOMIC_RELAXED);
    c->encode_errors = __atomic_load_n(&D.c.encode_errors, __ATOMIC_RELAXED);
    c->index_hits = __atomic_load_n(&D.c.index_hits, __ATOMIC_RELAXED);
    c->bytes_served = __atomic_load_n(&D.c.bytes_served, __ATOMIC_RELAXED);
    c->passthrough_bytes = __atomic_load_n(&D.c.passthrough_bytes, __ATOMIC_RELAXED);
    pthread_mutex_lock(&D.timings_lock);
    s.encode_count = D.timings->count;
    s.encode_max_ns = D.timings->max_ns;
    s.encode_sum_ns = D.timings->sum_ns;
    s.encode_p50_ns = l3fs_timings_percentile(D.timings, 50);
    s.encode_p90_ns = l3fs_timings_percentile(D.timings, 90);
    s.encode_p99_ns = l3fs_timings_percentile(D.timings, 99);
    pthread_mutex_unlock(&D.timings_lock);
    struct l3cache_stats cs;
    if (l3cache_get_stats(D.cache, &cs) == 0) {
        s.have_cache = 1;
        const struct l3cache_counters *src[2] = {&cs.instance, &cs.total};
        uint64_t *dst[2] = {s.cache_instance, s.cache_total};
        for (int i = 0; i < 2; i++) {
            uint64_t v[11] = {src[i]->lookups,       src[i]->hits,          src[i]->misses,
                              src[i]->encodes,       src[i]->encode_failures, src[i]->bytes_served,
                              src[i]->bytes_written, src[i]->evictions,     src[i]->evicted_bytes,
                              src[i]->corrupt_repaired, src[i]->write_failures};
            memcpy(dst[i], v, sizeof v);
        }
        s.objects = cs.objects;
        s.object_bytes = cs.object_bytes;
        s.max_bytes = cs.max_bytes;
        s.writes_disabled = cs.writes_disabled;
    }
    return id == 0 ? l3fs_render_json(&s) : l3fs_render_prometheus(&s);
}

static void ctl_stat(struct node *n, struct stat *st)
{
    memset(st, 0, sizeof *st);
    fstat(D.root.fd, st); /* owner and times of the source root */
    st->st_ino = 1 + (n == &D.ctl_dir ? 1 : 2 + (ino_t)n->ctl_id);
    st->st_ino |= L3_INO_BIT >> 1;
    if (n == &D.ctl_dir) {
        st->st_mode = S_IFDIR | 0555;
        st->st_nlink = 2;
        st->st_size = 0;
    } else {
        st->st_mode = S_IFREG | 0444;
        st->st_nlink = 1;
        char *s = ctl_render(n->ctl_id);
        st->st_size = s ? (off_t)strlen(s) : 0;
        free(s);
    }
    st->st_blocks = 0;
}

/* -------------------------------------------------------------- lookup */

/* Looks NAME up in directory P; fills e and takes a node reference. */
static int do_lookup(struct node *p, const char *name, struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    if (p == &D.root && strcmp(name, L3FS_CTL_DIR) == 0) {
        e->ino = id_of(&D.ctl_dir);
        ctl_stat(&D.ctl_dir, &e->attr);
        return 0;
    }
    if (p == &D.ctl_dir) {
        for (int i = 0; i < 2; i++)
            if (strcmp(name, ctl_names[i]) == 0) {
                e->ino = id_of(&D.ctl_files[i]);
                ctl_stat(&D.ctl_files[i], &e->attr);
                return 0;
            }
        return -ENOENT;
    }
    if (p->kind != NK_SRC || !S_ISDIR(p->mode))
        return -ENOTDIR;
    if (strlen(name) > 255)
        return -ENAMETOOLONG;

    struct l3fs_probe probe;
    struct probe_ctx pc;
    probe_init(&probe, &pc, p->fd, p->relpath);
    const char *srcname = name;
    char srcbuf[256];
    int kind = NK_SRC;
    if (l3fs_has_l3_ext(name, NULL)) {
        int r = l3fs_resolve_l3(&probe, name, srcbuf);
        if (r < 0)
            return r;
        if (r == L3FS_L3_ENCODED) {
            srcname = srcbuf;
            kind = NK_L3;
        }
    } else if (l3fs_has_png_ext(name, NULL) && l3fs_png_shown_as_l3(&probe, name)) {
        return -ENOENT; /* visible as STEM.l3 only */
    }

    int fd = openat(p->fd, srcname, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (kind == NK_L3 && !S_ISREG(st.st_mode)) { /* replaced meanwhile */
        close(fd);
        return -ENOENT;
    }
    char *rel = join_rel(p->relpath, srcname);
    if (!rel) {
        close(fd);
        return -ENOMEM;
    }
    struct node *n = node_ref(fd, &st, kind, rel, p, srcname);
    if (n && kind == NK_L3) {
        /* The source changed while the node's version is open: that node
         * stays with its readers; this name gets a node for the new version. */
        struct l3cache_source src;
        l3cache_source_from_stat(&st, &src);
        pthread_mutex_lock(&n->lock);
        int split = n->have && n->open_count > 0 && !same_src(&src, &n->src);
        pthread_mutex_unlock(&n->lock);
        if (split) {
            node_retire(n);
            node_unref(n, 1);
            n = NULL;
            fd = openat(p->fd, srcname, O_PATH | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                int err = fd < 0 || errno == 0 ? -ENOENT : -errno;
                if (fd >= 0)
                    close(fd);
                free(rel);
                return err;
            }
            n = node_ref(fd, &st, kind, rel, p, srcname);
        }
    }
    free(rel);
    if (!n)
        return -ENOMEM;
    if (kind == NK_L3) {
        int r = l3_refresh(n, &st);
        if (r < 0) {
            node_unref(n, 1);
            return r;
        }
    }
    e->ino = id_of(n);
    e->attr = st;
    e->attr_timeout = timeout_for(kind);
    e->entry_timeout = timeout_for(kind);
    return 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fuse_entry_param e;
    COUNT(lookups, 1);
    int r = do_lookup(node_of(parent), name, &e);
    if (r < 0)
        fuse_reply_err(req, -r);
    else
        fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    node_unref(node_of(ino), nlookup);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
    for (size_t i = 0; i < count; i++)
        node_unref(node_of(f[i].ino), f[i].nlookup);
    fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct node *n = node_of(ino);
    struct stat st;
    if (n->kind == NK_CTL_DIR || n->kind == NK_CTL_FILE) {
        ctl_stat(n, &st);
        fuse_reply_attr(req, &st, 0);
        return;
    }
    if (n->kind == NK_L3) {
        int r = l3_refresh(n, &st);
        if (r < 0)
            fuse_reply_err(req, -r);
        else
            fuse_reply_attr(req, &st, D.opts->timeout);
        return;
    }
    int r = node_stat(n, &st);
    if (r < 0) {
        fuse_reply_err(req, -r);
        return;
    }
    fuse_reply_attr(req, &st, D.opts->dir_timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct node *n = node_of(ino);
    if (n->kind != NK_SRC || !S_ISLNK(n->mode)) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    char buf[PATH_MAX + 1];
    struct stat st;
    int fd = node_open_path(n, &st);
    if (fd < 0) {
        fuse_reply_err(req, -fd);
        return;
    }
    ssize_t r = readlinkat(fd, "", buf, sizeof buf);
    int e = errno;
    close(fd);
    if (r < 0) {
        fuse_reply_err(req, e);
        return;
    }
    if ((size_t)r >= sizeof buf) {
        fuse_reply_err(req, ENAMETOOLONG);
        return;
    }
    buf[r] = '\0';
    fuse_reply_readlink(req, buf);
}

/* ---------------------------------------------------------------- open */

/* The last handle of a .l3 closed: its snapshot descriptor is not needed
 * any more (an unused fresh encode is kept for the open that follows its
 * lookup). Keeps the daemon's descriptors at one per node at rest. */
static void l3_closed(struct node *n)
{
    pthread_mutex_lock(&n->lock);
    if (--n->open_count == 0 && !n->fresh)
        node_keep_obj(n, -1);
    pthread_mutex_unlock(&n->lock);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct node *n = node_of(ino);
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & (O_TRUNC | O_APPEND | O_CREAT))) {
        fuse_reply_err(req, EROFS);
        return;
    }
    struct fh *h = calloc(1, sizeof *h);
    if (!h) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    h->kind = n->kind;
    h->fd = -1;
    h->refs = 1;
    if (n->kind == NK_CTL_FILE) {
        h->buf = ctl_render(n->ctl_id);
        if (!h->buf) {
            free(h);
            fuse_reply_err(req, ENOMEM);
            return;
        }
        h->len = strlen(h->buf);
        fi->direct_io = 1; /* content changes at every open */
        fi->fh = (uint64_t)(uintptr_t)h;
        fuse_reply_open(req, fi);
        return;
    }
    if (n->kind == NK_CTL_DIR || (n->kind == NK_SRC && !S_ISREG(n->mode))) {
        free(h);
        fuse_reply_err(req, n->kind == NK_CTL_DIR || S_ISDIR(n->mode) ? EISDIR : EACCES);
        return;
    }
    if (n->kind == NK_SRC) {
        struct stat st;
        int pfd = node_open_path(n, &st);
        h->fd = pfd < 0 ? pfd : reopen_rdonly(pfd);
        if (pfd >= 0)
            close(pfd);
        if (h->fd < 0) {
            int e = -h->fd;
            free(h);
            fuse_reply_err(req, e);
            return;
        }
        fi->fh = (uint64_t)(uintptr_t)h;
        fuse_reply_open(req, fi);
        return;
    }

    /* An encoded file: serve the object whose size the kernel knows. */
    COUNT(l3_opens, 1);
    int r = 0, miss = 0, keep = 1;
    pthread_mutex_lock(&n->lock);
    if (!n->have) {
        /* not described yet (cannot normally happen: LOOKUP comes first) */
        pthread_mutex_unlock(&n->lock);
        struct stat st;
        r = l3_refresh(n, &st);
        pthread_mutex_lock(&n->lock);
        keep = 0;
        if (r == 0 && !n->have)
            r = -EIO;
    }
    if (r == 0 && n->fresh && n->obj_fd >= 0) {
        h->fd = dup(n->obj_fd); /* the encode this lookup ran */
        n->fresh = 0;
        miss = 1;
        if (h->fd < 0)
            r = -errno;
    } else if (r == 0) {
        struct stat st;
        struct l3cache_source src;
        int fd = -1;
        int pfd = node_open_path(n, &st);
        if (pfd >= 0) {
            l3cache_source_from_stat(&st, &src);
            if (same_src(&src, &n->src))
                fd = reopen_rdonly(pfd);
            close(pfd);
        }
        struct l3cache_object obj;
        int got = 0;
        if (fd >= 0) {
            struct stat fst;
            if (fstat(fd, &fst) == 0) {
                l3cache_source_from_stat(&fst, &src);
                if (same_src(&src, &n->src)) {
                    struct timespec t0;
                    clock_gettime(CLOCK_MONOTONIC, &t0);
                    int l3st = 0;
                    int g = l3cache_get(D.cache, fd, &fst, &obj, &l3st);
                    if (g == 0 && obj.size == n->size &&
                        memcmp(&obj.key, &n->key, sizeof obj.key) == 0) {
                        got = 1;
                        if (!obj.hit) { /* evicted since: encoded again */
                            miss = 1;
                            COUNT(encodes, 1);
                            pthread_mutex_lock(&D.timings_lock);
                            l3fs_timings_add(D.timings, ns_since(&t0));
                            pthread_mutex_unlock(&D.timings_lock);
                        }
                    } else if (g == 0) {
                        close(obj.fd);
                    }
                }
            }
            close(fd);
        }
        if (got) {
            h->fd = obj.fd;
            if (n->obj_fd < 0)
                node_keep_obj(n, dup(obj.fd));
        } else if (n->obj_fd >= 0) {
            /* the source changed after the kernel was told its size: keep
             * serving that snapshot until the next LOOKUP/GETATTR */
            h->fd = dup(n->obj_fd);
            if (h->fd < 0)
                r = -errno;
        } else {
            r = -EIO; /* neither the described object nor a snapshot */
        }
    }
    uint64_t size = n->size;
    if (r == 0) {
        n->open_count++;
        h->node = n;
        /* the kernel's cached pages are valid only for the object they came from */
        if (!n->opened || memcmp(&n->opened_key, &n->key, sizeof n->key) != 0)
            keep = 0;
        n->opened = 1;
        n->opened_key = n->key;
    }
    pthread_mutex_unlock(&n->lock);
    if (r < 0) {
        free(h);
        fuse_reply_err(req, -r);
        return;
    }
    if (miss)
        COUNT(l3_open_misses, 1);
    else
        COUNT(l3_open_hits, 1);
    h->size = size;
    fi->keep_cache = keep;
    fi->fh = (uint64_t)(uintptr_t)h;
    if (fuse_reply_open(req, fi) == -ENOENT) { /* interrupted: no RELEASE will come */
        l3_closed(n);
        close(h->fd);
        free(h);
    }
}

static void fh_put(struct fh *h)
{
    if (__atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    if (h->fd >= 0)
        close(h->fd);
    free(h->buf);
    free(h);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)ino;
    struct fh *h = (struct fh *)(uintptr_t)fi->fh;
    if (h->kind == NK_CTL_FILE) {
        /* The reader may close (and RELEASE arrive) as soon as the kernel
         * has the reply, before fuse_reply_buf returns: hold the buffer. */
        __atomic_add_fetch(&h->refs, 1, __ATOMIC_ACQ_REL);
        size_t o = (size_t)off < h->len ? (size_t)off : h->len;
        size_t k = h->len - o < size ? h->len - o : size;
        fuse_reply_buf(req, h->buf + o, k);
        fh_put(h);
        return;
    }
    if (h->kind == NK_L3) {
        if ((uint64_t)off < h->size) {
            uint64_t k = h->size - (uint64_t)off;
            COUNT(bytes_served, k < size ? k : size);
        }
    } else {
        COUNT(passthrough_bytes, size); /* upper bound; the file may be shorter */
    }
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    buf.buf[0].fd = h->fd;
    buf.buf[0].pos = off;
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct fh *h = (struct fh *)(uintptr_t)fi->fh;
    if (h && h->node)
        l3_closed(h->node);
    if (h)
        fh_put(h);
    fuse_reply_err(req, 0);
}

/* ------------------------------------------------------------- readdir */

static void dirh_free(struct dirh *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->names[i]);
    free(d->names);
    free(d->types);
    free(d->inos);
    free(d->sorted);
    if (d->fd >= 0)
        close(d->fd);
    free(d);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct node *n = node_of(ino);
    struct dirh *d = calloc(1, sizeof *d);
    if (!d) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    d->fd = -1;
    d->dir = n;
    if (n->kind == NK_CTL_DIR) {
        fi->fh = (uint64_t)(uintptr_t)d;
        fuse_reply_open(req, fi);
        return;
    }
    if (n->kind != NK_SRC || !S_ISDIR(n->mode)) {
        free(d);
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    int err = 0;
    int fd = openat(n->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        err = errno;
        goto fail;
    }
    DIR *dp = fdopendir(fd);
    if (!dp) {
        err = errno;
        close(fd);
        goto fail;
    }
    size_t cap = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(dp))) {
        if (n == &D.root && strcmp(de->d_name, L3FS_CTL_DIR) == 0)
            continue; /* shadowed by the control directory */
        if (d->n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(d->names, cap * sizeof *nn);
            if (nn)
                d->names = nn;
            unsigned char *nt = realloc(d->types, cap);
            if (nt)
                d->types = nt;
            ino_t *ni = realloc(d->inos, cap * sizeof *ni);
            if (ni)
                d->inos = ni;
            if (!nn || !nt || !ni) {
                err = ENOMEM;
                break;
            }
        }
        d->names[d->n] = strdup(de->d_name);
        if (!d->names[d->n]) {
            err = ENOMEM;
            break;
        }
        d->types[d->n] = de->d_type;
        d->inos[d->n] = de->d_ino;
        d->n++;
        errno = 0;
    }
    if (!err && errno)
        err = errno;
    closedir(dp);
    if (err)
        goto fail;
    d->sorted = malloc((d->n ? d->n : 1) * sizeof(char *));
    if (!d->sorted) {
        err = ENOMEM;
        goto fail;
    }
    memcpy(d->sorted, d->names, d->n * sizeof(char *));
    qsort(d->sorted, d->n, sizeof(char *), cmp_str);
    d->fd = openat(n->fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (d->fd < 0) {
        err = errno;
        goto fail;
    }
    fi->fh = (uint64_t)(uintptr_t)d;
    fi->cache_readdir = 0;
    fuse_reply_open(req, fi);
    return;
fail:
    dirh_free(d);
    fuse_reply_err(req, err);
}

static void do_readdir(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi,
                       int plus)
{
    struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
    char *buf = malloc(size ? size : 1);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t used = 0;
    if (d->dir->kind == NK_CTL_DIR) {
        for (off_t i = off; i < 2; i++) {
            struct stat st;
            ctl_stat(&D.ctl_files[i], &st);
            size_t sz;
            if (plus) {
                struct fuse_entry_param e = {.ino = 0, .attr = st};
                sz = fuse_add_direntry_plus(req, buf + used, size - used, ctl_names[i], &e,
                                            i + 1);
            } else {
                sz = fuse_add_direntry(req, buf + used, size - used, ctl_names[i], &st, i + 1);
            }
            if (sz > size - used)
                break;
            used += sz;
        }
        fuse_reply_buf(req, buf, used);
        free(buf);
        return;
    }
    struct l3fs_probe probe;
    struct probe_ctx pc;
    probe_init(&probe, &pc, d->fd, d->dir->relpath);
    pc.sorted = d->sorted;
    pc.n = d->n;
    pc.memo = plus;
    for (size_t i = (size_t)off; i < d->n; i++) {
        const char *name = d->names[i];
        char shown[256];
        int kind = NK_SRC;
        if (d->types[i] != DT_DIR && l3fs_has_png_ext(name, NULL) &&
            l3fs_png_shown_as_l3(&probe, name) && l3fs_l3_name(name, shown) == 0)
            kind = NK_L3;
        const char *vis = kind == NK_L3 ? shown : name;
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_ino = kind == NK_L3 ? d->inos[i] ^ L3_INO_BIT : d->inos[i];
        st.st_mode = kind == NK_L3 ? S_IFREG : (mode_t)DTTOIF(d->types[i]);
        size_t sz;
        if (!plus) {
            sz = fuse_add_direntry(req, buf + used, size - used, vis, &st, (off_t)(i + 1));
            if (sz > size - used)
                break;
            used += sz;
            continue;
        }
        struct fuse_entry_param e;
        memset(&e, 0, sizeof e);
        e.attr = st;
        struct node *n = NULL;
        if (strcmp(name, ".") && strcmp(name, "..")) {
            int memo = kind == NK_L3 && pc.memo_fd >= 0 && strcmp(pc.memo_name, name) == 0;
            int fd;
            struct stat fst;
            int ok;
            if (memo) {
                fd = pc.memo_fd;
                pc.memo_fd = -1;
                fst = pc.memo_st;
                ok = 1;
            } else {
                fd = openat(d->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                ok = fd >= 0 && fstat(fd, &fst) == 0;
            }
            if (ok && (kind != NK_L3 || S_ISREG(fst.st_mode))) {
                int known = 1;
                uint64_t l3size = 0;
                struct l3cache_source src;
                struct l3cache_key key;
                if (kind == NK_L3) {
                    /* only sizes the index already knows: readdir never encodes */
                    l3cache_source_from_stat(&fst, &src);
                    if (memo) {
                        known = pc.memo_known;
                        l3size = pc.memo_size;
                        key = pc.memo_key;
                    } else {
                        known = l3cache_index_lookup(D.cache, &src, &l3size, &key) == 0;
                    }
                    if (known)
                        COUNT(index_hits, 1);
                }
                if (known) {
                    char *rel = join_rel(d->dir->relpath, name);
                    n = rel ? node_ref(fd, &fst, kind, rel, d->dir, name) : NULL;
                    fd = -1;
                    free(rel);
                }
                if (n && kind == NK_L3) {
                    pthread_mutex_lock(&n->lock);
                    int held = l3_deferred(n, &src, &fst);
                    if (held) {
                        /* open handles keep that version: no entry here,
                         * the kernel looks the name up (a new node) */
                    } else if (!(n->have && same_src(&src, &n->src))) {
                        if (n->obj_fd >= 0 && !(n->have && !memcmp(&key, &n->key, sizeof key))) {
                            node_keep_obj(n, -1);
                            n->fresh = 0;
                        }
                        n->have = 1;
                        n->src = src;
                        n->size = l3size;
                        n->key = key;
                    }
                    l3size = n->size;
                    pthread_mutex_unlock(&n->lock);
                    l3_attr(&fst, l3size);
                    if (held) {
                        node_unref(n, 1);
                        n = NULL;
                    }
                }
                if (n) {
                    e.ino = id_of(n);
                    e.attr = fst;
                    e.attr_timeout = e.entry_timeout = timeout_for(kind);
                }
            }
            if (fd >= 0)
                close(fd);
        }
        sz = fuse_add_direntry_plus(req, buf + used, size - used, vis, &e, (off_t)(i + 1));
        if (sz > size - used) {
            if (n)
                node_unref(n, 1);
            break;
        }
        used += sz;
    }
    if (pc.memo_fd >= 0)
        close(pc.memo_fd);
    fuse_reply_buf(req, buf, used);
    free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)ino;
    do_readdir(req, size, off, fi, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    (void)ino;
    do_readdir(req, size, off, fi, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    dirh_free((struct dirh *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct statvfs sv;
    if (fstatvfs(D.root.fd, &sv) < 0)
        fuse_reply_err(req, errno);
    else
        fuse_reply_statfs(req, &sv);
}

/* ------------------------------------------------------ read-only: EROFS */

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int to_set,
                       struct fuse_file_info *fi)
{
    (void)ino, (void)a, (void)to_set, (void)fi;
    fuse_reply_err(req, EROFS);
}
static void op_mknod(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, dev_t r)
{
    (void)p, (void)n, (void)m, (void)r;
    fuse_reply_err(req, EROFS);
}
static void op_mkdir(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m)
{
    (void)p, (void)n, (void)m;
    fuse_reply_err(req, EROFS);
}
static void op_unlink(fuse_req_t req, fuse_ino_t p, const char *n)
{
    (void)p, (void)n;
    fuse_reply_err(req, EROFS);
}
static void op_symlink(fuse_req_t req, const char *l, fuse_ino_t p, const char *n)
{
    (void)l, (void)p, (void)n;
    fuse_reply_err(req, EROFS);
}
static void op_rename(fuse_req_t req, fuse_ino_t p, const char *n, fuse_ino_t np,
                      const char *nn, unsigned int f)
{
    (void)p, (void)n, (void)np, (void)nn, (void)f;
    fuse_reply_err(req, EROFS);
}
static void op_link(fuse_req_t req, fuse_ino_t i, fuse_ino_t np, const char *nn)
{
    (void)i, (void)np, (void)nn;
    fuse_reply_err(req, EROFS);
}
static void op_write(fuse_req_t req, fuse_ino_t i, const char *b, size_t s, off_t o,
                     struct fuse_file_info *fi)
{
    (void)i, (void)b, (void)s, (void)o, (void)fi;
    fuse_reply_err(req, EROFS);
}
static void op_setxattr(fuse_req_t req, fuse_ino_t i, const char *n, const char *v, size_t s,
                        int f)
{
    (void)i, (void)n, (void)v, (void)s, (void)f;
    fuse_reply_err(req, EROFS);
}
static void op_removexattr(fuse_req_t req, fuse_ino_t i, const char *n)
{
    (void)i, (void)n;
    fuse_reply_err(req, EROFS);
}
static void op_create(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m,
                      struct fuse_file_info *fi)
{
    (void)p, (void)n, (void)m, (void)fi;
    fuse_reply_err(req, EROFS);
}
static void op_fallocate(fuse_req_t req, fuse_ino_t i, int m, off_t o, off_t l,
                         struct fuse_file_info *fi)
{
    (void)i, (void)m, (void)o, (void)l, (void)fi;
    fuse_reply_err(req, EROFS);
}

/* ---------------------------------------------------------------- init */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
        conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
    if (conn->capable & FUSE_CAP_READDIRPLUS) {
        conn->want |= FUSE_CAP_READDIRPLUS;
        conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO; /* sizes from the index in one pass */
    }
    if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
        conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
    conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    /* RELEASE (and async READ) are background requests; with the kernel's
     * default of 12 in flight, releases queue up behind a stream of opens
     * and every queued one keeps an object descriptor open here (thousands
     * under 64 readers, up to EMFILE). */
    conn->max_background = 256;
    conn->congestion_threshold = 192;
}

static const struct fuse_lowlevel_ops ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .readlink = op_readlink,
    .open = op_open,
    .read = op_read,
    .release = op_release,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .statfs = op_statfs,
    .setattr = op_setattr,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_unlink,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .write = op_write,
    .setxattr = op_setxattr,
    .removexattr = op_removexattr,
    .create = op_create,
    .fallocate = op_fallocate,
};

/* ----------------------------------------------------------------- run */

static void inval_entry(fuse_ino_t parent, const char *name)
{
    int r = fuse_lowlevel_notify_inval_entry(D.se, parent, name, strlen(name));
    if (r < 0 && r != -ENOENT)
        LOG_D("invalidate %s: %s", name, strerror(-r));
}

/* Every visible name a change of source entry NAME can affect. */
static void inval_names(fuse_ino_t parent, const char *name)
{
    size_t stem;
    char l3[256];
    char v[8][256];
    inval_entry(parent, name);
    if (l3fs_has_png_ext(name, &stem)) {
        if (l3fs_l3_name(name, l3) == 0)
            inval_entry(parent, l3);
    } else if (l3fs_has_l3_ext(name, &stem) && l3fs_png_variants(name, stem, v) == 0) {
        for (int k = 0; k < 8; k++)
            inval_entry(parent, v[k]);
    }
}

static void *watch_main(void *arg)
{
    (void)arg;
    char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
    struct pollfd p[2] = {{.fd = W.fd, .events = POLLIN}, {.fd = W.stop_fd, .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        ssize_t len = read(W.fd, buf, sizeof buf);
        if (len <= 0)
            continue;
        for (char *q = buf; q < buf + len;) {
            struct inotify_event *ev = (struct inotify_event *)(void *)q;
            q += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                LOG_D("change notifications overflowed: the timeouts apply");
                continue;
            }
            fuse_ino_t parent = 0;
            pthread_mutex_lock(&D.table_lock);
            struct node *n = W.by_wd[(unsigned)ev->wd % WD_BUCKETS];
            while (n && n->wd != ev->wd)
                n = n->wd_next;
            if (n && (ev->mask & IN_IGNORED))
                watch_unlink_locked(n, 0); /* the kernel dropped the watch */
            else if (n)
                parent = id_of(n);
            pthread_mutex_unlock(&D.table_lock);
            if (parent && ev->len && ev->name[0])
                inval_names(parent, ev->name);
        }
    }
    return NULL;
}

static void watch_start(void)
{
    if (D.opts->no_watch)
        return;
    W.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    W.stop_fd = eventfd(0, EFD_CLOEXEC);
    if (W.fd < 0 || W.stop_fd < 0) {
        LOG_W("no change notifications (%s): relying on the timeouts", strerror(errno));
        goto fail;
    }
    pthread_mutex_lock(&D.table_lock);
    watch_add_locked(&D.root);
    pthread_mutex_unlock(&D.table_lock);
    if (pthread_create(&W.thread, NULL, watch_main, NULL) != 0) {
        LOG_W("cannot start the change watcher: relying on the timeouts");
        goto fail;
    }
    W.running = 1;
    return;
fail:
    if (W.fd >= 0)
        close(W.fd);
    if (W.stop_fd >= 0)
        close(W.stop_fd);
    W.fd = W.stop_fd = -1;
    D.root.wd = -1;
}

static void watch_stop(void)
{
    if (W.running) {
        uint64_t one = 1;
        if (write(W.stop_fd, &one, sizeof one) != (ssize_t)sizeof one)
            LOG_W("cannot stop the change watcher");
        pthread_join(W.thread, NULL);
        W.running = 0;
    }
    if (W.fd >= 0)
        close(W.fd); /* drops every watch */
    if (W.stop_fd >= 0)
        close(W.stop_fd);
    W.fd = W.stop_fd = -1;
}

/* Every directory node holds a descriptor, every open file one or two:
 * raise the limit as far as allowed (root may go past the hard limit, up to
 * fs.nr_open). */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = 1048576;
    FILE *f = fopen("/proc/sys/fs/nr_open", "r");
    if (f) {
        unsigned long long v;
        if (fscanf(f, "%llu", &v) == 1 && v > 0)
            want = (rlim_t)v;
        fclose(f);
    }
    struct rlimit up = {want, want};
    if (rl.rlim_max < want && setrlimit(RLIMIT_NOFILE, &up) == 0) {
        rl = up;
    } else if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        long cap = (long)(rl.rlim_cur / 8);
        max_held_obj_fds = cap < 4096 ? (cap > 16 ? cap : 16) : 4096;
    }
    LOG_D("descriptor limit %llu, object descriptors kept <= %ld",
          (unsigned long long)rl.rlim_cur, max_held_obj_fds);
}

static void free_table(void)
{
    for (size_t i = 0; i < D.nbuckets; i++) {
        struct node *n = D.buckets[i];
        while (n) {
            struct node *next = n->next;
            node_free(n);
            n = next;
        }
    }
    free(D.buckets);
    D.buckets = NULL;
    D.nbuckets = D.count = 0;
    while (D.retired) {
        struct node *next = D.retired->rnext;
        node_free(D.retired);
        D.retired = next;
    }
}

static void append_opt(char *buf, size_t cap, const char *o)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s%s", n ? "," : "", o);
}

int l3fs_run(struct l3fs_options *opts, int ready_fd)
{
    int status = 1;
    D.opts = opts;
    clock_gettime(CLOCK_MONOTONIC, &D.start);
    raise_fd_limit();
    D.timings = calloc(1, sizeof *D.timings);
    if (!D.timings) {
        LOG_E("out of memory");
        return 1;
    }

    /* source root */
    int rfd = open(opts->source, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat rst;
    if (rfd < 0 || fstat(rfd, &rst) < 0) {
        LOG_E("cannot open source %s: %s", opts->source, strerror(errno));
        if (rfd >= 0)
            close(rfd);
        free(D.timings);
        return 1;
    }
    D.root.fd = rfd;
    D.root.kind = NK_SRC;
    D.root.dev = rst.st_dev;
    D.root.ino = rst.st_ino;
    D.root.mode = S_IFDIR;
    D.root.relpath = (char *)"";
    D.root.obj_fd = -1;
    D.root.nlookup = 1;
    D.root.wd = -1;
    D.ctl_dir.kind = NK_CTL_DIR;
    D.ctl_dir.fd = -1;
    D.ctl_dir.obj_fd = -1;
    D.ctl_dir.relpath = (char *)L3FS_CTL_DIR;
    for (int i = 0; i < 2; i++) {
        D.ctl_files[i].kind = NK_CTL_FILE;
        D.ctl_files[i].ctl_id = i;
        D.ctl_files[i].fd = -1;
        D.ctl_files[i].obj_fd = -1;
        D.ctl_files[i].relpath = (char *)ctl_names[i];
    }

    /* cache */
    struct l3cache_options co;
    memset(&co, 0, sizeof co);
    co.dir = opts->cache_dir;
    co.fsync_policy = opts->fsync_policy;
    co.encode.threads = opts->encode_threads;
    co.encode.effort = opts->effort;
    co.encode.limits.max_pixels = opts->max_pixels;
    co.encode.limits.max_memory = (size_t)opts->max_memory;
    if (opts->cache_size) {
        int r = l3cache_parse_size(opts->cache_size, opts->cache_dir, &co.max_bytes);
        if (r < 0) {
            LOG_E("bad --cache-size %s: %s", opts->cache_size, strerror(-r));
            goto out_root;
        }
    }
    int r = l3cache_open(&co, &D.cache);
    if (r < 0) {
        LOG_E("cannot open cache directory %s: %s", opts->cache_dir, strerror(-r));
        goto out_root;
    }
    sem_init(&D.encode_slots, 0, opts->jobs ? opts->jobs : 1);

    /* FUSE session */
    char fopts[4096] = "";
    char fsname[PATH_MAX + 64];
    /* fsname: the source path with commas escaped away */
    snprintf(fsname, sizeof fsname, "fsname=");
    for (const char *s = opts->source, *e = fsname + sizeof fsname - 2; *s; s++) {
        char *p = fsname + strlen(fsname);
        if (p >= e)
            break;
        if (*s == ',' || *s == '\\') {
            if (p + 1 >= e)
                break;
            *p++ = '\\';
        }
        *p++ = *s;
        *p = '\0';
    }
    if (!opts->fuse_opts || !strstr(opts->fuse_opts, "fsname="))
        append_opt(fopts, sizeof fopts, fsname);
    if (!opts->fuse_opts || !strstr(opts->fuse_opts, "subtype="))
        append_opt(fopts, sizeof fopts, "subtype=l3fs");
    if (opts->fuse_opts && *opts->fuse_opts)
        append_opt(fopts, sizeof fopts, opts->fuse_opts);
    char *fargv[5];
    int fargc = 0;
    fargv[fargc++] = (char *)"l3fs";
    fargv[fargc++] = (char *)"-o";
    fargv[fargc++] = fopts;
    if (opts->debug)
        fargv[fargc++] = (char *)"-d";
    fargv[fargc] = NULL;
    struct fuse_args args = FUSE_ARGS_INIT(fargc, fargv);
    D.se = fuse_session_new(&args, &ops, sizeof ops, NULL);
    if (!D.se) {
        LOG_E("cannot start a FUSE session (bad -o option?)");
        goto out_cache;
    }
    if (fuse_set_signal_handlers(D.se) != 0) {
        LOG_E("cannot install signal handlers");
        goto out_session;
    }
    if (fuse_session_mount(D.se, opts->mountpoint) != 0) {
        LOG_E("cannot mount on %s", opts->mountpoint);
        goto out_signals;
    }
    LOG_I("mounted %s on %s (cache %s, %u encode jobs)", opts->source, opts->mountpoint,
          opts->cache_dir, opts->jobs);
    if (ready_fd >= 0) {
        char ok = 0;
        if (write(ready_fd, &ok, 1) != 1)
            LOG_W("cannot notify the starting process");
        close(ready_fd);
        ready_fd = -1;
        /* running in the background from here: detach from the terminal */
        l3fs_log_setup(opts->log_level, 1);
        int nfd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (nfd >= 0) {
            dup2(nfd, 0);
            dup2(nfd, 1);
            dup2(nfd, 2);
            if (nfd > 2)
                close(nfd);
        }
    }
    watch_start();
    if (opts->singlethread) {
        r = fuse_session_loop(D.se);
    } else {
        struct fuse_loop_config *lc = fuse_loop_cfg_create();
        if (!lc) {
            LOG_E("out of memory");
            r = -ENOMEM;
        } else {
            fuse_loop_cfg_set_max_threads(lc, opts->max_threads);
            fuse_loop_cfg_set_idle_threads(lc, opts->max_threads < 16 ? opts->max_threads : 16);
            r = fuse_session_loop_mt(D.se, lc);
            fuse_loop_cfg_destroy(lc);
        }
    }
    watch_stop();
    status = r < 0 ? 1 : 0;
    if (r > 0)
        LOG_I("signal %d: unmounting", r);
    fuse_session_unmount(D.se);
    LOG_I("unmounted %s", opts->mountpoint);
out_signals:
    fuse_remove_signal_handlers(D.se);
out_session:
    fuse_session_destroy(D.se);
    D.se = NULL;
    fuse_opt_free_args(&args);
out_cache:
    free_table();
    l3cache_close(D.cache);
    D.cache = NULL;
    sem_destroy(&D.encode_slots);
out_root:
    close(D.root.fd);
    free(D.timings);
    D.timings = NULL;
    if (ready_fd >= 0)
        close(ready_fd);
    return status;
}
