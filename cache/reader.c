/* reader.c — checked reads of one object descriptor (L3CACHE_READ_CHECKS):
 * what a daemon keeps per open file so that a read costs the chunks it
 * touches and nothing more.
 *
 * At open the descriptor is stat'ed once and its range checksums (ranges.c)
 * loaded and validated once: the attribute belongs to the inode, and an
 * object is never rewritten in place by the cache (a new version is a new
 * inode), so they hold for the descriptor's life. What they check is read
 * from the descriptor at every read that is not served from a buffer below:
 * rot that happens after the open is caught by the next read of its chunk.
 *
 * Two buffers per reader ("slots") hold whole chunks that were read and
 * hashed; a read covered by one is served from it (the bytes served are the
 * bytes that were hashed: a slot is never refilled while a reply uses it).
 * After a sequential read has been answered, l3cache_reader_ahead reads and
 * checks the next range into a free slot, so the next read finds its bytes
 * checked while the kernel was busy with the previous reply; a chunk larger
 * than a read (objects over 28 MiB) stays in its slot for the reads after
 * the first. A slot keeps bytes that were right when read; it is reused by
 * the next fill, so at most two ranges of a handle outlive their read, and
 * any other range comes from the descriptor again and is hashed. All
 * readers' buffers together stay within a budget of the handle (64 MiB):
 * past it a read uses the caller's scratch and nothing is read ahead.
 *
 * These copied reads are what a read on range checksums falls back to
 * where it cannot be served without a copy (spliced.c,
 * l3cache_reader_splice: the page-cache pages themselves, held by the
 * caller's pipe from before they are hashed until after the reply; the
 * reasons the bytes served are the bytes hashed are written there). A
 * daemon tries that first: then no buffer here is filled and nothing is
 * read ahead into one (the splice reads ahead from the disk as read(2)
 * does); the reader maps the object once, at its first spliced read, for
 * the hash (one mmap and munmap per open file, not per read: a munmap's
 * TLB flush reaches every core a worker ran on). Copied reads alone never
 * make a map.
 *
 * An object without valid range checksums is checked whole, as
 * l3cache_read_ready says (verified.c); the reader then needs a mapping of
 * it (mincore: are the checked pages still in memory?), and when the caller
 * gives none it maps the object itself.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handle.h"

int l3cache_reader_open(l3cache *c, const struct l3cache_key *key, int fd, const void *map,
                        struct l3cache_reader **reader_ret)
{
    if (!c || !key || fd < 0 || !reader_ret)
        return -EINVAL;
    struct l3cache_reader *rd = calloc(1, sizeof *rd);
    if (!rd)
        return -ENOMEM;
    /* a descriptor that fails (on a network filesystem: ESTALE, ENOENT when
     * another host removed the object before this host's deferred open
     * reached the server) is reported by every read, where the caller can
     * replace the object, not by the open */
    if (fstat(fd, &rd->st) != 0)
        rd->err = -errno;
    rd->c = c;
    rd->key = *key;
    rd->fd = fd;
    rd->map = map;
    /* without range checksums (or not checking at all) reads take the
     * whole-object path, which looks at the descriptor itself */
    rd->ranged = rd->err == 0 && c->verify == VERIFY_AUTO &&
                 ranges_load(fd, key, (uint64_t)rd->st.st_size, &rd->r) == 0;
    /* checked whole: l3cache_read_ready looks at the pages through a map */
    if (!map && rd->err == 0 && c->verify == VERIFY_AUTO && !rd->ranged &&
        rd->st.st_size > 0 && (uint64_t)rd->st.st_size <= SIZE_MAX) {
        void *m = mmap(NULL, (size_t)rd->st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED)
            rd->map = rd->own_map = m;
    }
    pthread_mutex_init(&rd->mu, NULL);
    pthread_cond_init(&rd->cv, NULL);
    *reader_ret = rd;
    return 0;
}

void pool_get(struct l3cache *c, size_t need, void **buf_ret, size_t *cap_ret)
{
    *buf_ret = NULL;
    *cap_ret = 0;
    pthread_mutex_lock(&c->pool_mu);
    int best = -1; /* the smallest that fits, else the largest */
    for (int i = 0; i < c->npool; i++) {
        size_t cap = c->pool[i].cap;
        if (best < 0 || (cap >= need ? c->pool[best].cap < need || cap < c->pool[best].cap
                                     : c->pool[best].cap < need && cap > c->pool[best].cap))
            best = i;
    }
    if (best >= 0) {
        *buf_ret = c->pool[best].buf;
        *cap_ret = c->pool[best].cap;
        c->pool[best] = c->pool[--c->npool];
    }
    pthread_mutex_unlock(&c->pool_mu);
}

void pool_put(struct l3cache *c, void *buf, size_t cap)
{
    if (!buf)
        return;
    pthread_mutex_lock(&c->pool_mu);
    if (cap <= L3CACHE_POOL_MAX && c->npool < L3CACHE_POOL) {
        c->pool[c->npool].buf = buf;
        c->pool[c->npool++].cap = cap;
        buf = NULL;
    }
    pthread_mutex_unlock(&c->pool_mu);
    free(buf);
}

int held_take(struct l3cache *c, uint64_t add)
{
    pthread_mutex_lock(&c->pool_mu);
    int ok = c->held + add <= c->held_max;
    if (ok)
        c->held += add;
    pthread_mutex_unlock(&c->pool_mu);
    return ok;
}

void held_give(struct l3cache *c, uint64_t sub)
{
    pthread_mutex_lock(&c->pool_mu);
    c->held -= sub;
    pthread_mutex_unlock(&c->pool_mu);
}

void l3cache_reader_free(struct l3cache_reader *rd)
{
    if (!rd)
        return;
    for (int i = 0; i < 2; i++) {
        held_give(rd->c, rd->slot[i].cap);
        pool_put(rd->c, rd->slot[i].buf, rd->slot[i].cap);
    }
    if (rd->own_map)
        munmap(rd->own_map, (size_t)rd->st.st_size);
    reader_zmap_free(rd);
    pthread_cond_destroy(&rd->cv);
    pthread_mutex_destroy(&rd->mu);
    free(rd);
}

/* Reads [c0, c1) (whole chunks) into *buf (grown as needed) and checks it:
 * 0 valid, 1 corrupt or short, -errno. */
static int fill(struct l3cache_reader *rd, uint8_t **buf, size_t *cap, uint64_t c0, uint64_t c1)
{
    size_t need = (size_t)(c1 - c0);
    if (*cap < need) {
        void *nb = realloc(*buf, need);
        if (!nb)
            return -ENOMEM;
        *buf = nb;
        *cap = need;
    }
    ssize_t n = l3cache_pread_full(rd->fd, *buf, need, c0);
    if (n < 0)
        return (int)n;
    return (size_t)n == need && ranges_match(&rd->r, *buf, c0, c1) ? 0 : 1;
}

/* A slot holding [off, end) in state, or -1 (mu held). */
static int slot_covering(struct l3cache_reader *rd, uint64_t off, uint64_t end, int state)
{
    for (int i = 0; i < 2; i++) {
        const struct rslot *s = &rd->slot[i];
        if (s->state == state && s->off <= off && end <= s->off + s->len)
            return i;
    }
    return -1;
}

/* A slot that may be filled now (no reply reads it, no fill runs in it),
 * the empty one or the one holding the lower offsets first; or -1 (mu
 * held). For a read ahead (ahead), not one holding bytes the reader has not
 * reached yet, nor one read ahead that no read has taken while the reader
 * is less than UNREAD_SPAN of its lengths past its start: the kernel sends a
 * sequential reader's reads several at once (a 1 MiB read(2): eight of
 * 128 KiB) and the workers take them in turn, so the read of a range may
 * come after later ones moved `next` past it; refilling its slot then had
 * that read read and hash the range a second time (19-27 of the 182 reads
 * of a cold pass over the 13 photos on a busy machine, 8-10 on a quieter
 * one). */
#define UNREAD_SPAN 8
static int slot_free(struct l3cache_reader *rd, int ahead)
{
    int best = -1;
    for (int i = 0; i < 2; i++) {
        const struct rslot *s = &rd->slot[i];
        uint64_t reached = s->off + (s->unread ? UNREAD_SPAN : 1) * s->len;
        if (s->state == SLOT_FILLING || s->users ||
            (ahead && s->state == SLOT_READY && reached > rd->next))
            continue;
        if (s->state == SLOT_EMPTY)
            return i;
        if (best < 0 || s->off < rd->slot[best].off)
            best = i;
    }
    return best;
}

/* Makes slot s hold need bytes (its filler only): 0, or -ENOBUFS when all
 * readers' buffers would pass the handle's budget, -ENOMEM. */
static int slot_grow(struct l3cache_reader *rd, struct rslot *s, size_t need)
{
    if (s->cap >= need)
        return 0;
    void *b = s->buf;
    size_t cap = s->cap;
    if (!b)
        pool_get(rd->c, need, &b, &cap);
    size_t want = cap >= need ? cap : need;
    if (!held_take(rd->c, want - s->cap)) {
        if (b != s->buf)
            pool_put(rd->c, b, cap);
        return -ENOBUFS;
    }
    if (cap < need) {
        void *nb = realloc(b, need);
        if (!nb) {
            held_give(rd->c, want - s->cap);
            if (b != s->buf)
                pool_put(rd->c, b, cap);
            return -ENOMEM;
        }
        b = nb;
    }
    s->buf = b;
    s->cap = want;
    return 0;
}

/* Fills slot i (set FILLING by the caller, mu not held) with [c0, c1):
 * 0 (READY, one user taken when use), 1 corrupt, -errno (EMPTY; -ENOBUFS:
 * over the budget of buffers). */
static int fill_slot(struct l3cache_reader *rd, int i, uint64_t c0, uint64_t c1, int use)
{
    struct rslot *s = &rd->slot[i];
    int r = slot_grow(rd, s, (size_t)(c1 - c0));
    if (r == 0) {
        uint8_t *buf = s->buf;
        r = fill(rd, &buf, &s->cap, c0, c1); /* no growth: it fits */
    }
    pthread_mutex_lock(&rd->mu);
    s->state = r == 0 ? SLOT_READY : SLOT_EMPTY;
    s->unread = r == 0 && !use;
    if (r == 0 && use)
        s->users++;
    pthread_cond_broadcast(&rd->cv);
    pthread_mutex_unlock(&rd->mu);
    return r;
}

/* A checked read through the caller's scratch alone. */
static ssize_t read_scratch(struct l3cache_reader *rd, uint64_t off, uint64_t end,
                            struct l3cache_scratch *scratch, struct l3cache_view *view)
{
    uint64_t c0, c1;
    chunk_span(&rd->r, off, end, &c0, &c1);
    uint8_t *buf = scratch->buf;
    int r = fill(rd, &buf, &scratch->cap, c0, c1);
    scratch->buf = buf;
    if (r < 0)
        return r;
    if (r > 0)
        return object_corrupt_fd(rd->c, &rd->key, &rd->st);
    view->data = buf + (off - c0);
    return (ssize_t)(end - off);
}

ssize_t l3cache_reader_read(struct l3cache_reader *rd, uint64_t off, size_t len,
                            struct l3cache_scratch *scratch, struct l3cache_view *view_ret)
{
    if (!rd || !scratch || !view_ret)
        return -EINVAL;
    view_ret->data = NULL;
    view_ret->slot = -1;
    if (rd->err)
        return rd->err;
    if (!rd->ranged) /* checked whole (TRUST: never; ALWAYS: at every open) */
        return l3cache_read_ready(rd->c, &rd->key, rd->fd, rd->map, off, len);
    uint64_t size = rd->r.size;
    if (off >= size || len == 0)
        return 0;
    uint64_t end = size - off < len ? size : off + len;
    pthread_mutex_lock(&rd->mu);
    rd->seq = off == rd->next;
    rd->next = end;
    int i;
    while ((i = slot_covering(rd, off, end, SLOT_READY)) < 0 &&
           slot_covering(rd, off, end, SLOT_FILLING) >= 0)
        pthread_cond_wait(&rd->cv, &rd->mu); /* a fill ahead of this read */
    if (i >= 0) {
        rd->slot[i].users++;
        rd->slot[i].unread = 0;
        view_ret->data = rd->slot[i].buf + (off - rd->slot[i].off);
        pthread_mutex_unlock(&rd->mu);
        view_ret->slot = i;
        return (ssize_t)(end - off);
    }
    uint64_t c0, c1;
    chunk_span(&rd->r, off, end, &c0, &c1);
    /* the caller's scratch (warm in this thread's cache) unless the chunks
     * hold bytes past this read, which the next read will want */
    if (c1 <= end || (i = slot_free(rd, 0)) < 0) {
        pthread_mutex_unlock(&rd->mu);
        return read_scratch(rd, off, end, scratch, view_ret);
    }
    rd->slot[i].state = SLOT_FILLING;
    rd->slot[i].off = c0;
    rd->slot[i].len = c1 - c0;
    pthread_mutex_unlock(&rd->mu);
    int r = fill_slot(rd, i, c0, c1, 1);
    if (r == -ENOBUFS) /* the buffers of all readers are at their budget */
        return read_scratch(rd, off, end, scratch, view_ret);
    if (r < 0)
        return r;
    if (r > 0)
        return object_corrupt_fd(rd->c, &rd->key, &rd->st);
    view_ret->data = rd->slot[i].buf + (off - c0);
    view_ret->slot = i;
    return (ssize_t)(end - off);
}

void l3cache_reader_done(struct l3cache_reader *rd, struct l3cache_view *view)
{
    if (!rd || !view)
        return;
    if (view->slot >= 0) {
        pthread_mutex_lock(&rd->mu);
        rd->slot[view->slot].users--;
        pthread_mutex_unlock(&rd->mu);
    }
    view->slot = -1;
    view->data = NULL;
}

/* The first offset at or after off that no slot holds or fills (mu held). */
static uint64_t first_missing(struct l3cache_reader *rd, uint64_t off)
{
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < 2; i++) {
            const struct rslot *s = &rd->slot[i];
            if (s->state != SLOT_EMPTY && s->off <= off && off < s->off + s->len) {
                off = s->off + s->len;
                moved = 1;
            }
        }
    }
    return off;
}

void l3cache_reader_ahead(struct l3cache_reader *rd, uint64_t off, size_t len)
{
    if (!rd || !rd->ranged || len == 0)
        return;
    /* up to two reads ahead of a sequential reader: the next read finds its
     * bytes ready while the one after is being read */
    for (int k = 0; k < 2; k++) {
        pthread_mutex_lock(&rd->mu);
        /* from where the last read ended: what lies before it was read (or
         * is being read) by a read of its own */
        uint64_t at = first_missing(rd, rd->next);
        int i = -1;
        if (rd->seq && off <= rd->next && at < rd->r.size && at - rd->next < 2 * (uint64_t)len)
            i = slot_free(rd, 1);
        uint64_t c0 = 0, c1 = 0;
        if (i >= 0) {
            uint64_t end = rd->r.size - at < len ? rd->r.size : at + len;
            chunk_span(&rd->r, at, end, &c0, &c1);
            rd->slot[i].state = SLOT_FILLING;
            rd->slot[i].off = c0;
            rd->slot[i].len = c1 - c0;
        }
        pthread_mutex_unlock(&rd->mu);
        /* a corrupt range is left to the read that needs it: that read finds
         * no slot for it, reads it itself and reports it (counted once) */
        if (i < 0 || fill_slot(rd, i, c0, c1, 0) != 0)
            return;
    }
}

void l3cache_scratch_free(struct l3cache_scratch *scratch)
{
    if (scratch) {
        free(scratch->buf);
        scratch->buf = NULL;
        scratch->cap = 0;
    }
}

ssize_t l3cache_read_checked(l3cache *c, const struct l3cache_key *key, int fd, const void *map,
                             uint64_t off, size_t len, struct l3cache_scratch *scratch,
                             const void **data_ret)
{
    if (!c || !key || fd < 0 || !scratch || !data_ret)
        return -EINVAL;
    *data_ret = NULL;
    if (c->verify != VERIFY_AUTO)
        return 0; /* TRUST: never; ALWAYS: at every open */
    struct l3cache_reader *rd;
    int r = l3cache_reader_open(c, key, fd, map, &rd);
    if (r < 0)
        return r;
    struct l3cache_view v = {NULL, -1};
    ssize_t n;
    if (rd->err) /* the descriptor's fstat failed: rd->st was not taken */
        n = rd->err;
    else if (!rd->ranged)
        n = read_ready_st(c, key, fd, rd->map, &rd->st, off, len); /* the one fstat */
    else if (off >= rd->r.size || len == 0)
        n = 0;
    else
        n = read_scratch(rd, off, rd->r.size - off < len ? rd->r.size : off + len, scratch, &v);
    *data_ret = n > 0 ? v.data : NULL;
    l3cache_reader_free(rd);
    return n;
}
