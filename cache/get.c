/* get.c — l3cache_get: the object for a source, from the index and the
 * object store on a hit, else hashed, encoded once per key in this process
 * (single flight: other threads wait for the leader) and stored. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handle.h"

/* A new open file description for the same file as fd (own offset). */
static int reopen_fd(int fd)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    int nfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nfd < 0)
        nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return nfd < 0 ? -errno : nfd;
}

static int key_eq(const struct l3cache_key *a, const struct l3cache_key *b)
{
    return memcmp(a->bytes, b->bytes, 16) == 0;
}

/* ------------------------------------------------------------- flights */

/* mu held for these */
static struct flight *flight_find(struct l3cache *c, const struct l3cache_key *key)
{
    for (struct flight *f = c->flights; f; f = f->next)
        if (key_eq(&f->key, key))
            return f;
    return NULL;
}

static void flight_release(struct l3cache *c, struct flight *f)
{
    if (--f->refs > 0)
        return;
    for (struct flight **pp = &c->flights; *pp; pp = &(*pp)->next)
        if (*pp == f) {
            *pp = f->next;
            break;
        }
    if (f->result_fd >= 0)
        close(f->result_fd);
    free(f);
}

/* The leader is done: status < 0 an error, else fd is what it hands out
 * (a copy is kept for waiters when it is not a stored object). */
static void flight_finish(struct l3cache *c, struct flight *f, int status, int l3_status,
                          int fd, int for_waiters)
{
    pthread_mutex_lock(&c->mu);
    f->done = 1;
    f->status = status;
    f->l3_status = l3_status;
    if (status == 0 && for_waiters && f->refs > 1) {
        f->result_fd = reopen_fd(fd);
        if (f->result_fd < 0)
            f->result_fd = -1;
    }
    pthread_cond_broadcast(&c->flight_cv);
    flight_release(c, f);
    pthread_mutex_unlock(&c->mu);
}

/* Waits for a flight of this key in this process, if there is one. Returns
 * 1 with its result (fd/size or *status_ret < 0), or 0 with mu still held
 * and no flight of the key left: the caller leads. */
static int flight_wait_locked(struct l3cache *c, const struct l3cache_key *key, int *fd_ret,
                              uint64_t *size_ret, int *status_ret, int *l3_status_ret)
{
    for (;;) {
        struct flight *f = flight_find(c, key);
        if (!f)
            return 0;
        f->refs++;
        while (!f->done)
            pthread_cond_wait(&c->flight_cv, &c->mu);
        int status = f->status, l3s = f->l3_status;
        int rfd = f->result_fd >= 0 ? reopen_fd(f->result_fd) : -1;
        flight_release(c, f);
        pthread_mutex_unlock(&c->mu);
        *status_ret = status;
        if (status < 0) {
            if (rfd >= 0)
                close(rfd);
            if (l3_status_ret)
                *l3_status_ret = l3s;
            return 1;
        }
        if (object_open(c, key, fd_ret, size_ret) == 0) {
            if (rfd >= 0)
                close(rfd);
            return 1;
        }
        struct stat st;
        if (rfd >= 0 && fstat(rfd, &st) == 0) {
            *fd_ret = rfd;
            *size_ret = (uint64_t)st.st_size;
            return 1;
        }
        if (rfd >= 0)
            close(rfd);
        pthread_mutex_lock(&c->mu); /* gone again (evicted): encode ourselves */
    }
}

/* ------------------------------------------------------ encode, store */

static void kick_background(struct l3cache *c)
{
    /* mu held */
    if (c->bg_started) {
        c->bg_kick = 1;
        pthread_cond_signal(&c->bg_cv);
    }
}

/* Stores freshly encoded bytes when writes are allowed and returns a
 * readable descriptor: the stored object, or an in-memory copy
 * (*in_memory_ret) when it could not be stored. */
static int store_encoded(struct l3cache *c, const struct l3cache_key *key, const void *out,
                         size_t out_size, int store, int *in_memory_ret)
{
    pthread_mutex_lock(&c->mu);
    c->inst.encodes++;
    int may_write = store && stats_writes_allowed(c);
    pthread_mutex_unlock(&c->mu);
    int stored = 0, created = 0;
    if (may_write) {
        int r = object_store(c, key, out, out_size, &created);
        pthread_mutex_lock(&c->mu);
        if (r == 0) {
            stored = 1;
            if (created) {
                c->inst.bytes_written += out_size;
                c->objects++;
                c->object_bytes += out_size;
                if (c->opts.max_bytes && c->object_bytes > c->opts.max_bytes)
                    kick_background(c);
            }
        } else {
            stats_write_failure(c, -r);
        }
        pthread_mutex_unlock(&c->mu);
    }
    int fd = -1;
    if (stored) {
        char rel[64];
        l3cache_object_relpath(key, rel);
        fd = openat(c->dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        /* a racing writer's object: same key, so it must have our size */
        if (fd >= 0 && (fstat(fd, &st) != 0 || (uint64_t)st.st_size != out_size)) {
            close(fd);
            fd = -1;
        }
    }
    *in_memory_ret = fd < 0;
    return fd >= 0 ? fd : object_memory_fd(c, out, out_size);
}

/* This process leads the encode of key: another process may have stored it
 * since our first look, or be encoding it (its claim). 1 with fd/size when
 * the object is there now; else 0 with *claim_ret (possibly NULL) to
 * release after encoding. */
static int lead(struct l3cache *c, const struct l3cache_key *key, int store, int *fd_ret,
                uint64_t *size_ret, struct claim **claim_ret)
{
    *claim_ret = NULL;
    if (object_open(c, key, fd_ret, size_ret) == 0)
        return 1;
    if (!store)
        return 0;
    return claim_acquire(c, key, claim_ret, fd_ret, size_ret) == CLAIM_STORED;
}

/* Encodes src bytes under `key` (single flight in this process, claims
 * between processes) and returns a readable fd. store = 0: never stored. */
static int produce(struct l3cache *c, const struct l3cache_key *key, const uint8_t *src,
                   size_t src_size, int store, int *fd_ret, uint64_t *size_ret,
                   int *l3_status_ret, int *was_hit_ret)
{
    *was_hit_ret = 0;
    int status = 0;
    pthread_mutex_lock(&c->mu);
    if (flight_wait_locked(c, key, fd_ret, size_ret, &status, l3_status_ret))
        return status;
    struct flight *f = calloc(1, sizeof(*f));
    if (!f) {
        pthread_mutex_unlock(&c->mu);
        return -ENOMEM;
    }
    f->key = *key;
    f->refs = 1;
    f->result_fd = -1;
    f->next = c->flights;
    c->flights = f;
    pthread_mutex_unlock(&c->mu);

    struct claim *cl;
    if (lead(c, key, store, fd_ret, size_ret, &cl)) {
        *was_hit_ret = 1;
        flight_finish(c, f, 0, 0, -1, 0);
        return 0;
    }
    void *out = NULL;
    size_t out_size = 0;
    int l3s = c->in.encode(c->in.ctx, src, src_size, &c->opts.encode, &out, &out_size);
    if (l3s != 0 || !out || out_size == 0) {
        free(out);
        claim_release(c, cl);
        if (l3s == 0)
            l3s = L3_ERR_INVALID_ARG;
        stats_count(c, &c->inst.encode_failures, 1);
        int r = l3s == L3_ERR_NOMEM ? -ENOMEM : -EIO;
        flight_finish(c, f, r, l3s, -1, 0);
        if (l3_status_ret)
            *l3_status_ret = l3s;
        return r;
    }
    int in_memory = 0;
    int fd = store_encoded(c, key, out, out_size, store, &in_memory);
    claim_release(c, cl);
    free(out);
    flight_finish(c, f, fd < 0 ? fd : 0, 0, fd, in_memory);
    if (fd < 0)
        return fd;
    *fd_ret = fd;
    *size_ret = out_size;
    return 0;
}

/* --------------------------------------------------------------- get */

static void hand_out(struct l3cache_object *obj, int fd, uint64_t size,
                     const struct l3cache_key *key, int hit)
{
    obj->fd = fd;
    obj->size = size;
    obj->key = *key;
    obj->hit = hit;
}

static void count_hit(struct l3cache *c, uint64_t size)
{
    pthread_mutex_lock(&c->mu);
    c->inst.hits++;
    c->inst.bytes_served += size;
    pthread_mutex_unlock(&c->mu);
}

/* object_open, with a corrupt object counted for the caller's log. */
static int open_counted(struct l3cache *c, const struct l3cache_key *key, int *fd_ret,
                        uint64_t *size_ret, struct l3cache_object *obj)
{
    int r = object_open(c, key, fd_ret, size_ret);
    if (r == -EBADMSG)
        obj->repaired++;
    return r;
}

/* The index entry e of this source names an object: serve it when it is
 * there and valid (an entry with another size than the object's is fixed). */
static int get_indexed(struct l3cache *c, struct l3cache_entry *e, int index,
                       struct l3cache_object *obj)
{
    int fd;
    uint64_t size;
    if (open_counted(c, &e->key, &fd, &size, obj) != 0)
        return -ENOENT;
    if (size != e->encoded_size && index) {
        pthread_mutex_lock(&c->mu);
        e->encoded_size = size;
        index_append(c, e);
        pthread_mutex_unlock(&c->mu);
    }
    count_hit(c, size);
    hand_out(obj, fd, size, &e->key, 1);
    return 0;
}

/* The source read whole, and still the version `src` afterwards (else a
 * rewrite raced the read: -EAGAIN, nothing may be recorded for it). */
static int read_source(int fd, const struct l3cache_source *src, uint8_t **buf_ret,
                       size_t *len_ret)
{
    int r = l3cache_read_whole(fd, src->size, buf_ret, len_ret);
    if (r < 0)
        return r;
    struct l3cache_source after;
    if (l3cache_identify(fd, "", AT_EMPTY_PATH, NULL, &after) != 0 ||
        !l3cache_source_eq(&after, src) || *len_ret != src->size) {
        free(*buf_ret);
        return -EAGAIN;
    }
    return 0;
}

int l3cache_get(l3cache *c, int src_fd, const struct l3cache_source *src, unsigned flags,
                struct l3cache_object *obj, int *l3_status_ret)
{
    if (!c || src_fd < 0 || !src || !obj)
        return -EINVAL;
    memset(obj, 0, sizeof(*obj));
    obj->fd = -1;
    if (l3_status_ret)
        *l3_status_ret = 0;
    /* a private source in a shared directory: neither stored nor indexed */
    int store = !(c->shared && (flags & L3CACHE_GET_PRIVATE));
    struct l3cache_entry e;
    pthread_mutex_lock(&c->mu);
    c->inst.lookups++;
    int known = index_find(c, src, &e) == 0;
    pthread_mutex_unlock(&c->mu);
    if (known && get_indexed(c, &e, store, obj) == 0)
        return 0;

    /* not known, or its object is gone: hash the source */
    uint8_t *buf = NULL;
    size_t len = 0;
    int r = read_source(src_fd, src, &buf, &len);
    if (r < 0)
        return r;
    struct l3cache_key key;
    l3cache_key_compute(buf, len, c->in.format_version, &c->opts.encode, &key);
    struct l3cache_entry ne = {.src = *src, .key = key, .params_id = c->params_id};
    int fd;
    uint64_t size;
    int was_hit = 0;
    if (!(known && key_eq(&key, &e.key)) && open_counted(c, &key, &fd, &size, obj) == 0)
        was_hit = 1; /* the same bytes under another identity */
    else
        r = produce(c, &key, buf, len, store, &fd, &size, l3_status_ret, &was_hit);
    free(buf);
    pthread_mutex_lock(&c->mu);
    if (r == 0 && was_hit) {
        c->inst.hits++;
        c->inst.bytes_served += size;
    } else {
        c->inst.misses++;
    }
    if (r == 0 && store && (!known || !key_eq(&key, &e.key) || e.encoded_size != size)) {
        ne.encoded_size = size;
        index_append(c, &ne);
    }
    pthread_mutex_unlock(&c->mu);
    if (r < 0)
        return r;
    hand_out(obj, fd, size, &key, was_hit);
    return 0;
}

int l3cache_open_key(l3cache *c, const struct l3cache_key *key, struct l3cache_object *obj)
{
    if (!c || !key || !obj)
        return -EINVAL;
    memset(obj, 0, sizeof(*obj));
    obj->fd = -1;
    int fd;
    uint64_t size;
    stats_count(c, &c->inst.lookups, 1);
    int r = open_counted(c, key, &fd, &size, obj);
    if (r < 0) {
        stats_count(c, &c->inst.misses, 1);
        return r == -EBADMSG ? -ENOENT : r;
    }
    count_hit(c, size);
    hand_out(obj, fd, size, key, 1);
    return 0;
}
