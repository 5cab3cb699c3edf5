/* node.c — the node table: every inode the kernel knows, its references and
 * lifetime, and how a node finds its source entry again.
 *
 * A directory node holds an O_PATH|O_NOFOLLOW descriptor of its source
 * directory; any other node holds a reference to its parent directory node
 * and its source name, and opens or stats the entry on demand with
 * openat()/fstatat() relative to the parent's descriptor (O_NOFOLLOW /
 * AT_SYMLINK_NOFOLLOW), checking that the entry found is still the node's
 * inode (st_dev, st_ino). The daemon thus needs one descriptor per known
 * directory, not per known entry. No path string is ever resolved against
 * SOURCE and a name from the kernel (never "/" or "..") cannot leave it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

uint64_t l3fs_ns_since(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (uint64_t)(b.tv_sec - a->tv_sec) * 1000000000ull + (uint64_t)(b.tv_nsec - a->tv_nsec);
}

struct node *node_of(struct l3fs_daemon *d, fuse_ino_t ino)
{
    if (ino == FUSE_ROOT_ID)
        return &d->root;
    return (struct node *)(uintptr_t)ino;
}

fuse_ino_t node_id(struct l3fs_daemon *d, struct node *n)
{
    return n == &d->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)n;
}

int node_is_static(struct l3fs_daemon *d, struct node *n)
{
    return n == &d->root || n == &d->ctl_dir ||
           (n >= d->ctl_files && n < d->ctl_files + L3FS_CTL_FILES);
}

/* ---------------------------------------------------------------- table */

static size_t hash_of(dev_t dev, ino_t ino, int kind)
{
    uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)dev * 0xC2B2AE3D27D4EB4Full;
    h ^= (uint64_t)kind;
    h ^= h >> 29;
    return (size_t)h;
}

/* table_lock held for all of these */
static void table_grow(struct l3fs_daemon *d)
{
    size_t nb = d->nbuckets ? d->nbuckets * 2 : 1024;
    struct node **b = calloc(nb, sizeof *b);
    if (!b)
        return; /* keep the old table; chains just get longer */
    for (size_t i = 0; i < d->nbuckets; i++) {
        struct node *n = d->buckets[i];
        while (n) {
            struct node *next = n->next;
            size_t h = hash_of(n->dev, n->ino, n->kind) & (nb - 1);
            n->next = b[h];
            b[h] = n;
            n = next;
        }
    }
    free(d->buckets);
    d->buckets = b;
    d->nbuckets = nb;
}

static struct node *table_find(struct l3fs_daemon *d, const struct stat *st, int kind)
{
    size_t h = hash_of(st->st_dev, st->st_ino, kind) & (d->nbuckets - 1);
    for (struct node *n = d->buckets[h]; n; n = n->next)
        if (n->dev == st->st_dev && n->ino == st->st_ino && n->kind == kind)
            return n;
    return NULL;
}

static void table_insert(struct l3fs_daemon *d, struct node *n)
{
    size_t h = hash_of(n->dev, n->ino, n->kind) & (d->nbuckets - 1);
    n->next = d->buckets[h];
    d->buckets[h] = n;
    d->count++;
}

static void table_remove(struct l3fs_daemon *d, struct node *n)
{
    size_t h = hash_of(n->dev, n->ino, n->kind) & (d->nbuckets - 1);
    struct node **pp = &d->buckets[h];
    while (*pp && *pp != n)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = n->next;
        d->count--;
    }
}

static void retire_locked(struct l3fs_daemon *d, struct node *n)
{
    if (n->retired)
        return;
    table_remove(d, n);
    n->retired = 1;
    n->rprev = NULL;
    n->rnext = d->retired;
    if (d->retired)
        d->retired->rprev = n;
    d->retired = n;
}

void node_retire(struct l3fs_daemon *d, struct node *n)
{
    pthread_mutex_lock(&d->table_lock);
    retire_locked(d, n);
    pthread_mutex_unlock(&d->table_lock);
}

/* ------------------------------------------------------------ lifetimes */

static void node_free(struct l3fs_daemon *d, struct node *n)
{
    if (n->fd >= 0)
        close(n->fd);
    node_keep_obj(d, n, -1);
    pthread_mutex_destroy(&n->lock);
    free(n->name);
    free(n->relpath);
    free(n);
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

/* A known node found again at (parent, name): one more kernel reference, and
 * it moves there (a rename or another hard link; the caller has just
 * confirmed that it is this inode). Returns the old parent to unreference. */
static struct node *node_found_locked(struct l3fs_daemon *d, struct node *n,
                                      struct node *parent, const char *name)
{
    n->nlookup++;
    if (!n->parent || (n->parent == parent && strcmp(n->name, name) == 0))
        return NULL;
    char *nm = strdup(name);
    if (!nm)
        return NULL;
    free(n->name);
    n->name = nm;
    if (n->parent == parent)
        return NULL;
    struct node *drop = n->parent;
    if (!node_is_static(d, parent))
        parent->nlookup++;
    n->parent = parent;
    return drop;
}

static struct node *node_new(int fd, const struct seen *sn, int kind, struct node *parent,
                             const char *name)
{
    const struct stat *st = &sn->st;
    int isdir = kind == NK_SRC && S_ISDIR(st->st_mode);
    struct node *n = calloc(1, sizeof *n);
    char *rp = join_rel(parent->relpath, name);
    char *nm = isdir ? NULL : strdup(name);
    if (!n || !rp || (!isdir && !nm)) {
        free(n);
        free(rp);
        free(nm);
        return NULL;
    }
    n->kind = kind;
    n->dev = st->st_dev;
    n->ino = st->st_ino;
    n->btime_ns = sn->id.btime_ns;
    n->ctime_ns = sn->id.ctime_ns;
    n->fd = isdir ? fd : -1;
    if (!isdir) {
        n->parent = parent;
        n->name = nm;
    }
    n->nlookup = 1;
    n->relpath = rp;
    n->mode = st->st_mode;
    n->uid = st->st_uid;
    n->gid = st->st_gid;
    n->obj_fd = -1;
    n->wd = -1;
    pthread_mutex_init(&n->lock, NULL);
    return n;
}

/* Whether node n (same dev and inode number as sn) is the file sn describes
 * and not another one that reuses a deleted file's inode number: the birth
 * time says so where the filesystem keeps one; without it, a node is only
 * taken for a file found under another name when its ctime is unchanged
 * (a rename moves ctime, so a renamed file simply gets a new node). */
static int same_file(const struct node *n, const struct seen *sn, int other_name)
{
    if ((n->mode ^ sn->st.st_mode) & S_IFMT)
        return 0;
    if (n->btime_ns && sn->id.btime_ns)
        return n->btime_ns == sn->id.btime_ns;
    return !other_name || n->ctime_ns == sn->id.ctime_ns;
}

struct node *node_ref(struct l3fs_daemon *d, int fd, const struct seen *sn, int kind,
                      struct node *parent, const char *name)
{
    pthread_mutex_lock(&d->table_lock);
    if (d->count >= d->nbuckets)
        table_grow(d);
    struct node *n = table_find(d, &sn->st, kind);
    if (n && !same_file(n, sn, n->parent && (n->parent != parent || strcmp(n->name, name)))) {
        /* Nodes of files hold no descriptor, so the source filesystem may
         * reuse the inode number of a deleted one while the kernel still
         * knows it: another file gets a node (a kernel inode) of its own,
         * and the old node keeps answering for the old file only. */
        retire_locked(d, n);
        n = NULL;
    }
    if (n) {
        struct node *drop = node_found_locked(d, n, parent, name);
        pthread_mutex_unlock(&d->table_lock);
        close(fd);
        if (drop)
            node_unref(d, drop, 1);
        return n;
    }
    n = node_new(fd, sn, kind, parent, name);
    if (!n) {
        pthread_mutex_unlock(&d->table_lock);
        close(fd);
        return NULL;
    }
    if (n->fd < 0) {
        close(fd);
        if (!node_is_static(d, parent))
            parent->nlookup++;
    }
    table_insert(d, n);
    if (n->fd >= 0)
        watch_add_locked(d, n);
    pthread_mutex_unlock(&d->table_lock);
    return n;
}

void node_unref(struct l3fs_daemon *d, struct node *n, uint64_t count)
{
    while (n && !node_is_static(d, n)) {
        pthread_mutex_lock(&d->table_lock);
        if (count > n->nlookup)
            count = n->nlookup;
        n->nlookup -= count;
        if (n->nlookup != 0) {
            pthread_mutex_unlock(&d->table_lock);
            return;
        }
        if (n->retired) {
            if (n->rprev)
                n->rprev->rnext = n->rnext;
            else
                d->retired = n->rnext;
            if (n->rnext)
                n->rnext->rprev = n->rprev;
        } else {
            table_remove(d, n);
        }
        watch_unlink_locked(d, n, 1);
        struct node *parent = n->parent;
        pthread_mutex_unlock(&d->table_lock);
        node_free(d, n);
        n = parent;
        count = 1;
    }
}

/* ------------------------------------------- finding the entry again */

/* Where a non-directory node's entry is now: its parent (referenced until
 * loc_put) and name, copied under the table lock. */
struct loc {
    struct node *parent;
    char name[256];
};

static void loc_get(struct l3fs_daemon *d, struct node *n, struct loc *l)
{
    pthread_mutex_lock(&d->table_lock);
    l->parent = n->parent;
    if (!node_is_static(d, l->parent))
        l->parent->nlookup++;
    snprintf(l->name, sizeof l->name, "%s", n->name);
    pthread_mutex_unlock(&d->table_lock);
}

static void loc_put(struct l3fs_daemon *d, struct loc *l)
{
    node_unref(d, l->parent, 1);
}

/* The entry found is the node's file: same inode, same birth time. */
static int same_inode(const struct node *n, const struct seen *sn)
{
    if (sn->st.st_dev != n->dev || sn->st.st_ino != n->ino)
        return 0;
    return !(n->btime_ns && sn->id.btime_ns && n->btime_ns != sn->id.btime_ns);
}

static int identify(int dirfd, const char *name, int flags, struct seen *sn)
{
    return l3cache_identify(dirfd, name, flags, &sn->st, &sn->id);
}

int node_stat(struct l3fs_daemon *d, struct node *n, struct seen *sn)
{
    if (n->fd >= 0)
        return identify(n->fd, "", AT_EMPTY_PATH, sn);
    struct loc l;
    loc_get(d, n, &l);
    int r = identify(l.parent->fd, l.name, AT_SYMLINK_NOFOLLOW, sn);
    loc_put(d, &l);
    if (r == 0 && !same_inode(n, sn))
        r = -ENOENT;
    return r;
}

/* fd (or -1 with errno) with its identity: fd, or -errno (fd closed). */
static int with_identity(int fd, struct seen *sn)
{
    if (fd < 0)
        return -errno;
    int r = identify(fd, "", AT_EMPTY_PATH, sn);
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

int l3fs_open_entry(int dirfd, const char *name, struct seen *sn)
{
    return with_identity(openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), sn);
}

int node_open_path(struct l3fs_daemon *d, struct node *n, struct seen *sn)
{
    int fd;
    if (n->fd >= 0) {
        fd = with_identity(fcntl(n->fd, F_DUPFD_CLOEXEC, 0), sn);
    } else {
        struct loc l;
        loc_get(d, n, &l);
        fd = l3fs_open_entry(l.parent->fd, l.name, sn);
        loc_put(d, &l);
    }
    if (fd < 0)
        return fd;
    if (!same_inode(n, sn)) {
        close(fd);
        return -ENOENT;
    }
    return fd;
}

int node_open_rdonly(struct l3fs_daemon *d, struct node *n, struct seen *sn)
{
    int pfd = node_open_path(d, n, sn);
    if (pfd < 0)
        return pfd;
    /* the O_PATH descriptor reopened: the inode just checked, no second lookup */
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", pfd);
    int fd = with_identity(open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), sn);
    close(pfd);
    return fd;
}

void node_keep_obj(struct l3fs_daemon *d, struct node *n, int fd)
{
    if (n->obj_fd >= 0) {
        close(n->obj_fd);
        n->obj_fd = -1;
        __atomic_sub_fetch(&d->held_obj_fds, 1, __ATOMIC_RELAXED);
    }
    if (fd < 0)
        return;
    if (__atomic_add_fetch(&d->held_obj_fds, 1, __ATOMIC_RELAXED) > d->max_held_obj_fds) {
        __atomic_sub_fetch(&d->held_obj_fds, 1, __ATOMIC_RELAXED);
        close(fd);
        return;
    }
    n->obj_fd = fd;
}

/* ------------------------------------------------------- who may read */

int node_is_private(struct l3fs_daemon *d, struct node *n, const struct stat *st)
{
    if (!d->opts->cache_shared)
        return 0; /* a private cache is private anyway */
    if (!(st->st_mode & S_IROTH) || !d->source_public)
        return 1;
    /* every directory between SOURCE and the file must let others through
     * (only a permission question: the entry itself is never opened by this
     * path) */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", n->relpath);
    for (char *slash = strchr(path, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        struct stat ds;
        int ok = fstatat(d->root.fd, path, &ds, AT_SYMLINK_NOFOLLOW) == 0 &&
                 S_ISDIR(ds.st_mode) && (ds.st_mode & S_IXOTH);
        *slash = '/';
        if (!ok)
            return 1;
    }
    return 0;
}

/* --------------------------------------------------------- start, end */

static void static_node(struct node *n, int kind, const char *relpath)
{
    n->kind = kind;
    n->fd = -1;
    n->obj_fd = -1;
    n->wd = -1;
    n->relpath = (char *)relpath;
    pthread_mutex_init(&n->lock, NULL);
}

void nodes_init(struct l3fs_daemon *d, int root_fd, const struct seen *root)
{
    const struct stat *root_st = &root->st;
    static_node(&d->root, NK_SRC, "");
    d->root.fd = root_fd;
    d->root.dev = root_st->st_dev;
    d->root.ino = root_st->st_ino;
    d->root.btime_ns = root->id.btime_ns;
    d->root.ctime_ns = root->id.ctime_ns;
    d->root.mode = S_IFDIR;
    d->root.nlookup = 1;
    static_node(&d->ctl_dir, NK_CTL_DIR, L3FS_CTL_DIR);
    for (int i = 0; i < L3FS_CTL_FILES; i++) {
        static_node(&d->ctl_files[i], NK_CTL_FILE, L3FS_CTL_DIR);
        d->ctl_files[i].ctl_id = i;
    }
}

void nodes_free(struct l3fs_daemon *d)
{
    for (size_t i = 0; i < d->nbuckets; i++) {
        struct node *n = d->buckets[i];
        while (n) {
            struct node *next = n->next;
            node_free(d, n);
            n = next;
        }
    }
    free(d->buckets);
    d->buckets = NULL;
    d->nbuckets = d->count = 0;
    while (d->retired) {
        struct node *next = d->retired->rnext;
        node_free(d, d->retired);
        d->retired = next;
    }
    close(d->root.fd);
    d->root.fd = -1;
    pthread_mutex_destroy(&d->root.lock);
    pthread_mutex_destroy(&d->ctl_dir.lock);
    for (int i = 0; i < L3FS_CTL_FILES; i++)
        pthread_mutex_destroy(&d->ctl_files[i].lock);
}
