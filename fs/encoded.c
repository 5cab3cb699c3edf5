/* encoded.c — encoded nodes: a PNG shown as .l3.
 *
 * An encoded node remembers the source identity and the object it last
 * described to the kernel (size and, once opened or encoded, a descriptor of
 * the cache object). Its size is always exact: from that memory, from the
 * cache's persistent index, or by encoding before replying. Opens serve the
 * object the kernel was told about, so size and bytes always agree; a
 * changed source is picked up at the next LOOKUP/GETATTR. While a .l3 is open
 * somewhere, the kernel keeps being told the version those readers opened.
 *
 * Sources that failed to encode are remembered (d->bad), so a bad file is
 * tried and logged once per version of it.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

/* ------------------------------------------------ sources that failed */

static int bad_find(struct l3fs_daemon *d, const struct l3cache_source *src)
{
    struct bad_list *b = &d->bad;
    int r = 0;
    pthread_mutex_lock(&b->lock);
    for (size_t i = 0; i < b->n; i++)
        if (l3cache_source_eq(&b->src[i], src)) {
            r = b->err[i];
            break;
        }
    pthread_mutex_unlock(&b->lock);
    return r;
}

static void bad_add(struct l3fs_daemon *d, const struct l3cache_source *src, int err)
{
    struct bad_list *b = &d->bad;
    pthread_mutex_lock(&b->lock);
    b->src[b->next] = *src;
    b->err[b->next] = err;
    b->next = (b->next + 1) % L3FS_BAD_SLOTS;
    if (b->n < L3FS_BAD_SLOTS)
        b->n++;
    pthread_mutex_unlock(&b->lock);
}

/* ------------------------------------------------------------ helpers */

void l3_attr(struct stat *st, uint64_t size)
{
    st->st_ino ^= L3_INO_BIT;
    st->st_size = (off_t)size;
    st->st_blocks = (blkcnt_t)((size + 511) / 512);
}

static void set_ts(struct timespec *ts, int64_t ns)
{
    ts->tv_sec = (time_t)(ns / 1000000000);
    ts->tv_nsec = (long)(ns % 1000000000);
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000;
        ts->tv_sec--;
    }
}

/* One encode this daemon ran, taking ns. */
static void count_encode(struct l3fs_daemon *d, uint64_t ns)
{
    COUNT(d, encodes, 1);
    pthread_mutex_lock(&d->timings_lock);
    l3fs_timings_add(d->timings, ns);
    pthread_mutex_unlock(&d->timings_lock);
}

/* A cache that cannot store objects (disk full, read-only directory) hands
 * out unlinked in-memory copies and keeps counting write_failures; say so
 * once per daemon, with the reason. Checked on misses only, with one fstat. */
static void note_cache_writes(struct l3fs_daemon *d, int obj_fd)
{
    struct stat st;
    struct l3cache_stats cs;
    if (__atomic_load_n(&d->said_writes_disabled, __ATOMIC_RELAXED) || fstat(obj_fd, &st) < 0 ||
        st.st_nlink != 0 || l3cache_get_stats(d->cache, &cs) < 0 || !cs.writes_disabled)
        return;
    if (!__atomic_exchange_n(&d->said_writes_disabled, 1, __ATOMIC_ACQ_REL))
        LOG_W("cache %s: cannot store objects (%s; write failures: %" PRIu64
              "): cache writes disabled for a while, encodes served from memory",
              d->opts->cache_dir, strerror(cs.write_error ? cs.write_error : EIO),
              cs.instance.write_failures);
}

/* An object the cache found corrupt (and removed) while serving n. */
static void note_repaired(struct node *n, int repaired)
{
    if (repaired)
        LOG_W("cache object of %s failed its payload checksum: removed, encoded again",
              n->relpath);
}

/* The node now describes object `key` of `size` bytes for source version
 * src; a kept descriptor of another object is dropped. Caller holds n->lock. */
static void adopt(struct l3fs_daemon *d, struct node *n, const struct l3cache_source *src,
                  uint64_t size, const struct l3cache_key *key)
{
    if (n->obj_fd >= 0 && !(n->have && key_eq(key, &n->key))) {
        node_keep_obj(d, n, -1);
        n->fresh = 0;
    }
    n->have = 1;
    n->src = *src;
    n->size = size;
    n->key = *key;
}

/* ------------------------------------------------------------ encoding */

/* l3cache_get of the node's source, in an encode slot: a source rewritten
 * while it was read is read again (a few times; then EIO, as for a torn
 * source). *sn is the version the object is of. */
static int get_source(struct l3fs_daemon *d, struct node *n, struct seen *sn,
                      struct l3cache_object *obj, int *l3st, uint64_t *ns)
{
    int r = -EAGAIN;
    for (int attempt = 0; r == -EAGAIN && attempt < 3; attempt++) {
        int fd = node_open_rdonly(d, n, sn);
        if (fd < 0)
            return fd;
        int known_bad = bad_find(d, &sn->id);
        if (known_bad) {
            close(fd);
            return known_bad;
        }
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (sem_wait(&d->encode_slots) < 0 && errno == EINTR)
            ;
        r = l3cache_get(d->cache, fd, &sn->id, node_is_private(d, n, &sn->st) ? L3CACHE_GET_PRIVATE : 0,
                        obj, l3st);
        sem_post(&d->encode_slots);
        *ns = l3fs_ns_since(&t0);
        close(fd);
        note_repaired(n, obj->repaired);
    }
    return r == -EAGAIN ? -EIO : r;
}

/* Encodes the node's source now (caller holds n->lock). */
static int encode_locked(struct l3fs_daemon *d, struct node *n)
{
    struct seen sn;
    struct l3cache_object obj;
    int l3st = 0;
    uint64_t ns = 0;
    int r = get_source(d, n, &sn, &obj, &l3st, &ns);
    if (r == -EIO) {
        bad_add(d, &sn.id, -EIO);
        COUNT(d, encode_errors, 1);
        LOG_E("cannot encode %s: %s", n->relpath[0] ? n->relpath : ".",
              l3st ? l3_strerror(l3st) : "invalid PNG, or rewritten while it was read");
        return -EIO;
    }
    if (r < 0) {
        LOG_W("cache error for %s: %s", n->relpath, strerror(-r));
        return r;
    }
    if (!obj.hit) {
        count_encode(d, ns);
        LOG_D("encoded %s: %" PRIu64 " bytes in %.1f ms", n->relpath, obj.size, ns / 1e6);
        note_cache_writes(d, obj.fd);
    }
    adopt(d, n, &sn.id, obj.size, &obj.key);
    node_keep_obj(d, n, obj.fd);
    n->fresh = !obj.hit && n->obj_fd >= 0;
    return 0;
}

/* ------------------------------------------------------- describing */

/* While a .l3 is open somewhere, the kernel keeps being told the version
 * those readers opened (size and times): its i_size must not change under a
 * reader, or a read could end early inside the old bytes. The switch to a
 * changed source happens once no handle is open. Caller holds n->lock. */
static int deferred(struct node *n, const struct l3cache_source *src, struct stat *st)
{
    if (!(n->have && (n->retired || (n->open_count > 0 && !l3cache_source_eq(src, &n->src)))))
        return 0;
    st->st_size = (off_t)n->src.size;
    set_ts(&st->st_mtim, n->src.mtime_ns);
    set_ts(&st->st_ctim, n->src.ctime_ns);
    return 1;
}

/* The source entry is gone or replaced while handles of this version are
 * open: the attributes of that version, from what the node knows. */
static void held_stat(struct node *n, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_dev = n->dev;
    st->st_ino = n->ino;
    st->st_mode = n->mode;
    st->st_nlink = 1;
    st->st_uid = n->uid;
    st->st_gid = n->gid;
    st->st_blksize = 4096;
    st->st_size = (off_t)n->src.size;
    set_ts(&st->st_atim, n->src.mtime_ns);
    set_ts(&st->st_mtim, n->src.mtime_ns);
    set_ts(&st->st_ctim, n->src.ctime_ns);
}

/* The node describes source version src from here on: from the index, else
 * by encoding. *st gets the size the encode saw. Caller holds n->lock. */
static int describe_locked(struct l3fs_daemon *d, struct node *n, const struct l3cache_source *src,
                           struct stat *st)
{
    uint64_t size;
    struct l3cache_key key;
    int known_bad = bad_find(d, src);
    if (known_bad)
        return known_bad;
    if (l3cache_index_lookup(d->cache, src, &size, &key) == 0) {
        COUNT(d, index_hits, 1);
        adopt(d, n, src, size, &key);
        return 0;
    }
    int r = encode_locked(d, n);
    if (r == 0)
        st->st_size = (off_t)n->src.size; /* the encode read the file again */
    return r;
}

int l3_refresh(struct l3fs_daemon *d, struct node *n, struct stat *st_ret)
{
    struct seen sn;
    int sr = node_stat(d, n, &sn);
    struct stat st = sn.st;
    struct l3cache_source src;
    pthread_mutex_lock(&n->lock);
    if (sr < 0) {
        if (!(n->have && (n->retired || n->open_count > 0))) {
            pthread_mutex_unlock(&n->lock);
            return sr;
        }
        held_stat(n, &st);
        src = n->src;
    } else {
        n->mode = st.st_mode;
        n->uid = st.st_uid;
        n->gid = st.st_gid;
        src = sn.id;
    }
    int r = 0;
    if (deferred(n, &src, &st))
        ; /* keep describing what the open handles serve */
    else if (st.st_nlink == 0)
        r = -ENOENT; /* the source was deleted */
    else if (!(n->have && l3cache_source_eq(&src, &n->src)))
        r = describe_locked(d, n, &src, &st);
    uint64_t size = n->size;
    pthread_mutex_unlock(&n->lock);
    if (r < 0)
        return r;
    *st_ret = st;
    l3_attr(st_ret, size);
    return 0;
}

int l3_describe_indexed(struct l3fs_daemon *d, struct node *n, const struct l3cache_source *src,
                        uint64_t size, const struct l3cache_key *key, struct stat *st)
{
    pthread_mutex_lock(&n->lock);
    int held = deferred(n, src, st);
    if (!held && !(n->have && l3cache_source_eq(src, &n->src)))
        adopt(d, n, src, size, key);
    size = n->size;
    pthread_mutex_unlock(&n->lock);
    l3_attr(st, size);
    return held;
}

int l3_held_by_readers(struct node *n, const struct l3cache_source *src)
{
    pthread_mutex_lock(&n->lock);
    int held = n->have && n->open_count > 0 && !l3cache_source_eq(src, &n->src);
    pthread_mutex_unlock(&n->lock);
    return held;
}

/* ------------------------------------------------------------- opening */

/* A descriptor n keeps (a fresh encode, or the snapshot open handles keep),
 * checked before it is handed out again; a corrupt one is dropped. Caller
 * holds n->lock. */
static int kept_object_locked(struct l3fs_daemon *d, struct node *n, int *fd_ret)
{
    int r = l3cache_check_fd(d->cache, &n->key, n->obj_fd);
    if (r < 0) {
        note_repaired(n, r == -EBADMSG);
        node_keep_obj(d, n, -1);
        n->fresh = 0;
        return r;
    }
    *fd_ret = dup(n->obj_fd);
    return *fd_ret < 0 ? -errno : 0;
}

/* Through the cache while the source is still the version n describes
 * (encoded again when its object was evicted or found corrupt). */
static int object_from_source_locked(struct l3fs_daemon *d, struct node *n, int *fd_ret,
                                     int *miss_ret)
{
    struct seen sn;
    int fd = node_open_rdonly(d, n, &sn);
    if (fd < 0)
        return -EIO; /* the described version is gone */
    int same = l3cache_source_eq(&sn.id, &n->src);
    close(fd);
    if (!same)
        return -EIO;
    struct l3cache_object obj;
    int l3st = 0;
    uint64_t ns = 0;
    int r = get_source(d, n, &sn, &obj, &l3st, &ns);
    if (r < 0)
        return r;
    if (obj.size != n->size || !key_eq(&obj.key, &n->key)) {
        close(obj.fd);
        return -EIO;
    }
    if (!obj.hit) {
        *miss_ret = 1;
        count_encode(d, ns);
    }
    *fd_ret = obj.fd;
    return 0;
}

/* The object n describes, again: by its key (no source needed, so an old
 * version stays servable after its source changed), else from the source
 * while it is that version, else the snapshot n keeps. Caller holds n->lock. */
static int object_again_locked(struct l3fs_daemon *d, struct node *n, int *fd_ret, int *miss_ret)
{
    struct l3cache_object obj;
    int r = l3cache_open_key(d->cache, &n->key, &obj);
    note_repaired(n, obj.repaired);
    if (r == 0 && obj.size != n->size) {
        close(obj.fd);
        r = -EIO;
    }
    if (r == 0)
        *fd_ret = obj.fd;
    else
        r = object_from_source_locked(d, n, fd_ret, miss_ret);
    if (r < 0 && n->obj_fd >= 0)
        r = kept_object_locked(d, n, fd_ret);
    if (r == 0 && n->obj_fd < 0) /* a snapshot while handles are open */
        node_keep_obj(d, n, dup(*fd_ret));
    return r;
}

int l3_reopen(struct l3fs_daemon *d, struct node *n, const struct l3cache_key *key,
              uint64_t size, int corrupt, int *fd_ret)
{
    note_repaired(n, corrupt);
    int miss = 0, r = -EIO;
    pthread_mutex_lock(&n->lock);
    if (n->have && key_eq(key, &n->key) && n->size == size)
        r = object_again_locked(d, n, fd_ret, &miss);
    pthread_mutex_unlock(&n->lock);
    return r < 0 ? -EIO : 0;
}

int l3_open(struct l3fs_daemon *d, struct node *n, int *fd_ret, uint64_t *size_ret,
            struct l3cache_key *key_ret, int *miss_ret, int *keep_ret)
{
    int r = 0, keep = 1;
    *miss_ret = 0;
    pthread_mutex_lock(&n->lock);
    if (!n->have) {
        /* not described yet (cannot normally happen: LOOKUP comes first) */
        pthread_mutex_unlock(&n->lock);
        struct stat st;
        r = l3_refresh(d, n, &st);
        pthread_mutex_lock(&n->lock);
        keep = 0;
        if (r == 0 && !n->have)
            r = -EIO;
    }
    if (r == 0 && n->fresh && n->obj_fd >= 0 && kept_object_locked(d, n, fd_ret) == 0) {
        n->fresh = 0; /* the encode this lookup ran */
        *miss_ret = 1;
    } else if (r == 0) {
        r = object_again_locked(d, n, fd_ret, miss_ret);
    }
    if (r == 0) {
        n->open_count++;
        /* the kernel's cached pages are valid only for the object they came from */
        if (!n->opened || !key_eq(&n->opened_key, &n->key))
            keep = 0;
        n->opened = 1;
        n->opened_key = n->key;
        *size_ret = n->size;
        *key_ret = n->key;
        *keep_ret = keep;
    }
    pthread_mutex_unlock(&n->lock);
    return r;
}

/* The last handle of a .l3 closed: its snapshot descriptor is not needed
 * any more (an unused fresh encode is kept for the open that follows its
 * lookup). Keeps the daemon's descriptors at one per node at rest. */
void l3_closed(struct l3fs_daemon *d, struct node *n)
{
    pthread_mutex_lock(&n->lock);
    if (--n->open_count == 0 && !n->fresh)
        node_keep_obj(d, n, -1);
    pthread_mutex_unlock(&n->lock);
}
