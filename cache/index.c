/* index.c — the source index: maps a source identity (and the encoder
 * parameters) to the key and encoded size of its object, so that the size of
 * a known source needs neither its bytes nor its object. An append-only log
 * of checksummed records (index.log, docs/CACHE.md) loaded into an in-memory
 * open-addressing table; other processes' appends are read on a miss. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h> /* renameat */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h> /* makedev */
#include <unistd.h>

#include "l3_xxh.h"

#include "handle.h"

void l3cache_source_from_stat(const struct stat *st, struct l3cache_source *src_ret)
{
    src_ret->dev = (uint64_t)st->st_dev;
    src_ret->ino = (uint64_t)st->st_ino;
    src_ret->size = (uint64_t)st->st_size;
    src_ret->mtime_ns = l3cache_ts_ns(&st->st_mtim);
    src_ret->ctime_ns = l3cache_ts_ns(&st->st_ctim);
    src_ret->btime_ns = 0;
}

static int64_t sx_ns(const struct statx_timestamp *t)
{
    return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static void sx_ts(struct timespec *ts, const struct statx_timestamp *t)
{
    ts->tv_sec = (time_t)t->tv_sec;
    ts->tv_nsec = (long)t->tv_nsec;
}

int l3cache_identify(int dirfd, const char *path, int at_flags, struct stat *st_ret,
                     struct l3cache_source *src_ret)
{
    struct statx sx;
    if (statx(dirfd, path, at_flags, STATX_BASIC_STATS | STATX_BTIME, &sx) != 0)
        return -errno;
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
    st.st_ino = (ino_t)sx.stx_ino;
    st.st_mode = sx.stx_mode;
    st.st_nlink = sx.stx_nlink;
    st.st_uid = sx.stx_uid;
    st.st_gid = sx.stx_gid;
    st.st_rdev = makedev(sx.stx_rdev_major, sx.stx_rdev_minor);
    st.st_size = (off_t)sx.stx_size;
    st.st_blksize = (blksize_t)sx.stx_blksize;
    st.st_blocks = (blkcnt_t)sx.stx_blocks;
    sx_ts(&st.st_atim, &sx.stx_atime);
    sx_ts(&st.st_mtim, &sx.stx_mtime);
    sx_ts(&st.st_ctim, &sx.stx_ctime);
    if (src_ret) {
        l3cache_source_from_stat(&st, src_ret);
        if (sx.stx_mask & STATX_BTIME)
            src_ret->btime_ns = sx_ns(&sx.stx_btime);
    }
    if (st_ret)
        *st_ret = st;
    return 0;
}

static uint64_t src_hash(const struct l3cache_source *s, uint64_t params_id)
{
    uint64_t v[7] = {s->dev, s->ino, s->size, (uint64_t)s->mtime_ns, (uint64_t)s->ctime_ns,
                     (uint64_t)s->btime_ns, params_id};
    return XXH3_64bits(v, sizeof(v));
}

static inline int source_eq(const struct l3cache_source *a, const struct l3cache_source *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns &&
           a->btime_ns == b->btime_ns;
}

int l3cache_source_eq(const struct l3cache_source *a, const struct l3cache_source *b)
{
    return source_eq(a, b);
}

static struct slot *table_find(struct l3cache *c, const struct l3cache_source *s,
                               uint64_t params_id)
{
    if (!c->nslots)
        return NULL;
    size_t mask = c->nslots - 1;
    for (size_t i = (size_t)src_hash(s, params_id) & mask;; i = (i + 1) & mask) {
        struct slot *sl = &c->slots[i];
        if (!sl->used)
            return NULL;
        if (sl->e.params_id == params_id && source_eq(&sl->e.src, s))
            return sl;
    }
}

static int table_put(struct l3cache *c, const struct l3cache_entry *e)
{
    if ((c->nused + 1) * 10 >= c->nslots * 7) {
        size_t n = c->nslots ? c->nslots * 2 : 1024;
        struct slot *ns = calloc(n, sizeof(*ns));
        if (!ns)
            return -ENOMEM;
        for (size_t i = 0; i < c->nslots; i++) {
            if (!c->slots[i].used)
                continue;
            size_t j = (size_t)src_hash(&c->slots[i].e.src, c->slots[i].e.params_id) & (n - 1);
            while (ns[j].used)
                j = (j + 1) & (n - 1);
            ns[j] = c->slots[i];
        }
        free(c->slots);
        c->slots = ns;
        c->nslots = n;
    }
    size_t mask = c->nslots - 1;
    for (size_t i = (size_t)src_hash(&e->src, e->params_id) & mask;; i = (i + 1) & mask) {
        struct slot *sl = &c->slots[i];
        if (!sl->used) {
            sl->used = 1;
            sl->e = *e;
            c->nused++;
            return 0;
        }
        if (sl->e.params_id == e->params_id && source_eq(&sl->e.src, &e->src)) {
            sl->e = *e; /* the newest record wins */
            return 0;
        }
    }
}

void index_reset(struct l3cache *c)
{
    free(c->slots);
    c->slots = NULL;
    c->nslots = c->nused = 0;
    c->log_off = 0;
    c->log_records = c->log_bad_bytes = 0;
    memset(&c->persisted, 0, sizeof(c->persisted));
}

void index_tail(struct l3cache *c)
{
    if (c->logfd < 0)
        return;
    struct stat st;
    if (fstat(c->logfd, &st) != 0)
        return;
    uint64_t size = (uint64_t)st.st_size;
    if (size < c->log_off) /* truncated by `cache clear` */
        index_reset(c);
    if (size == c->log_off)
        return;
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(size - c->log_off < CHUNK ? (size_t)(size - c->log_off) : CHUNK);
    if (!buf)
        return;
    uint64_t off = c->log_off;
    while (off < size) {
        size_t want = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
        ssize_t n = l3cache_pread_full(c->logfd, buf, want, off);
        if (n <= 0)
            break;
        size_t pos = 0;
        int need_more = 0;
        while (pos < (size_t)n) {
            int type = 0;
            struct l3cache_entry e;
            struct l3cache_counters cnt;
            uint64_t inst = 0;
            long r = l3cache_rec_parse(buf + pos, (size_t)n - pos, &type, &e, &inst, &cnt);
            if (r > 0) {
                c->log_records++;
                if (type == L3CACHE_REC_ENTRY)
                    table_put(c, &e);
                else if (type == L3CACHE_REC_STATS && inst != c->instance_id)
                    counters_add(&c->persisted, &cnt, 1);
                pos += (size_t)r;
            } else if (r == 0) {
                need_more = 1;
                break;
            } else {
                c->log_bad_bytes++;
                pos++;
            }
        }
        off += pos;
        if (need_more && off + ((size_t)n - pos) >= size)
            break; /* an incomplete record at the end: retry later */
        if (pos == 0)
            break;
    }
    c->log_off = off;
    free(buf);
}

void index_append(struct l3cache *c, const struct l3cache_entry *e)
{
    /* mu held */
    table_put(c, e);
    if (!c->log_writable || c->readonly)
        return;
    uint8_t rec[L3CACHE_REC_ENTRY_SIZE];
    l3cache_rec_encode_entry(e, rec);
    /* one write() per record on an O_APPEND fd: records of several
     * processes never interleave; a torn record is skipped by checksum */
    ssize_t n = write(c->logfd, rec, sizeof(rec));
    if (n == (ssize_t)sizeof(rec) && c->opts.fsync_policy >= L3CACHE_FSYNC_ALL)
        fdatasync(c->logfd);
}

int index_find(struct l3cache *c, const struct l3cache_source *s,
                      struct l3cache_entry *e_ret)
{
    struct slot *sl = table_find(c, s, c->params_id);
    if (!sl) {
        index_tail(c);
        sl = table_find(c, s, c->params_id);
    }
    if (!sl || sl->e.encoded_size == 0)
        return -ENOENT;
    *e_ret = sl->e;
    return 0;
}

int l3cache_index_lookup(l3cache *c, const struct l3cache_source *src,
                         uint64_t *encoded_size_ret, struct l3cache_key *key_ret)
{
    if (!c || !src)
        return -EINVAL;
    struct l3cache_entry e;
    pthread_mutex_lock(&c->mu);
    int r = index_find(c, src, &e);
    pthread_mutex_unlock(&c->mu);
    if (r == 0) {
        if (encoded_size_ret)
            *encoded_size_ret = e.encoded_size;
        if (key_ret)
            *key_ret = e.key;
    }
    return r;
}

/* Only with the directory lock held exclusively: no other process has the
 * log open. */
void index_compact(struct l3cache *c)
{
    char tmpname[160];
    if (l3cache_temp_name(tmpname, sizeof(tmpname)) < 0)
        return;
    int fd = openat(c->dirfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    size_t cap = c->nused * L3CACHE_REC_ENTRY_SIZE + L3CACHE_REC_STATS_SIZE;
    uint8_t *buf = malloc(cap);
    int r = buf ? 0 : -ENOMEM;
    size_t len = 0;
    if (buf) {
        for (size_t i = 0; i < c->nslots; i++)
            if (c->slots[i].used)
                len += l3cache_rec_encode_entry(&c->slots[i].e, buf + len);
        if (!counters_zero(&c->persisted))
            len += l3cache_rec_encode_stats(0, &c->persisted, buf + len);
        r = l3cache_write_all(fd, buf, len);
    }
    free(buf);
    if (r == 0 && fsync(fd) != 0)
        r = -errno;
    if (close(fd) != 0 && r == 0)
        r = -errno;
    if (r == 0 && renameat(c->dirfd, tmpname, c->dirfd, L3CACHE_LOG_NAME) == 0) {
        fsync(c->dirfd);
        int nfd = openat(c->dirfd, L3CACHE_LOG_NAME, O_RDWR | O_APPEND | O_CLOEXEC);
        if (nfd >= 0) {
            close(c->logfd);
            c->logfd = nfd;
            c->log_off = (uint64_t)len;
            c->log_records = c->nused + (counters_zero(&c->persisted) ? 0 : 1);
            c->log_bad_bytes = 0;
        }
    } else {
        unlinkat(c->dirfd, tmpname, 0);
    }
}
