/* verified.c — what must be checked before the bytes of an object without
 * range checksums (ranges.c) are handed out, and what an open checks.
 *
 * Such an object's payload checksum is checked (the whole object read, XXH3
 * of the payload against the checksummed header) when this handle has not
 * checked it before, when its identity (dev, ino, size, mtime, ctime) changed
 * since, or when any of its pages has left the page cache since (mincore):
 * the bytes a reader gets then come from the disk again and may have rotted
 * there. Otherwise the pages in memory are the ones that were checked, and
 * nothing is read. Identities checked are kept in a direct-mapped table; one
 * pushed out by another is simply checked again. An object with range
 * checksums read with L3CACHE_READ_CHECKS has nothing checked at open (its
 * attribute binds the size) and each read checked on its chunks (reader.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "l3_xxh.h"

#include "handle.h"

static struct vslot slot_of(const struct stat *st)
{
    struct vslot v = {(uint64_t)st->st_dev, (uint64_t)st->st_ino, (uint64_t)st->st_size,
                      l3cache_ts_ns(&st->st_mtim), l3cache_ts_ns(&st->st_ctim)};
    return v;
}

static size_t slot_index(const struct vslot *v)
{
    return (size_t)(XXH3_64bits(v, sizeof *v) % L3CACHE_VSLOTS);
}

static int slot_eq(const struct vslot *a, const struct vslot *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

void verified_add(struct l3cache *c, const struct stat *st)
{
    struct vslot v = slot_of(st);
    pthread_mutex_lock(&c->mu);
    c->verified[slot_index(&v)] = v;
    pthread_mutex_unlock(&c->mu);
}

static int verified_has(struct l3cache *c, const struct stat *st)
{
    struct vslot v = slot_of(st);
    pthread_mutex_lock(&c->mu);
    int r = slot_eq(&c->verified[slot_index(&v)], &v);
    pthread_mutex_unlock(&c->mu);
    return r;
}

int pages_resident(int fd, const void *map, uint64_t size, uint64_t off, uint64_t len)
{
    if (off >= size || len == 0)
        return 1;
    if (len > size - off)
        len = size - off;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t first = off / page * page, end = off + len;
    size_t span = (size_t)(end - first), pages = (size_t)((span + page - 1) / page);
    void *own = NULL;
    if (!map) {
        own = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
        if (own == MAP_FAILED)
            return 0;
        map = own;
    }
    unsigned char stackvec[1024], *vec = pages <= sizeof stackvec ? stackvec : malloc(pages);
    int all = 0;
    if (vec && mincore((void *)((const char *)map + first), span, vec) == 0) {
        all = 1;
        for (size_t i = 0; i < pages && all; i++)
            all = vec[i] & 1;
    }
    if (vec != stackvec)
        free(vec);
    if (own)
        munmap(own, (size_t)size);
    return all;
}

/* The payload checksum checked now (the whole object read). */
static int check_now(struct l3cache *c, int fd, const struct stat *st)
{
    int r = object_check(c, fd, (uint64_t)st->st_size, L3CACHE_CHECK_PAYLOAD);
    if (r != 0)
        return r;
    stats_count(c, &c->inst.verified, 1);
    verified_add(c, st);
    return 0;
}

int verified_ready(struct l3cache *c, const struct l3cache_key *key, int fd,
                   const struct stat *st)
{
    uint64_t size = (uint64_t)st->st_size;
    if (c->verify == VERIFY_TRUST)
        return object_check(c, fd, size, L3CACHE_CHECK_HEADER);
    /* with read checks, the pages are looked at when a read needs them: on
     * the chunks it touches where the object has range checksums */
    if (c->verify == VERIFY_AUTO && c->read_checks) {
        if (verified_has(c, st))
            return 0;
        /* each read checks its chunks, the header's among them; the size is
         * the one the range checksums were made for: nothing to read now */
        if (ranges_present(fd, key, size))
            return 0;
    }
    if (c->verify == VERIFY_AUTO && verified_has(c, st) &&
        pages_resident(fd, NULL, size, 0, size))
        return 0;
    return check_now(c, fd, st);
}

int read_ready_st(struct l3cache *c, const struct l3cache_key *key, int fd, const void *map,
                  const struct stat *st, uint64_t off, uint64_t len)
{
    if (c->verify != VERIFY_AUTO)
        return 0; /* TRUST: never; ALWAYS: at every open */
    if (verified_has(c, st) && pages_resident(fd, map, (uint64_t)st->st_size, off, len))
        return 0;
    int r = check_now(c, fd, st);
    if (r <= 0)
        return r;
    return object_corrupt_fd(c, key, st);
}

int l3cache_read_ready(l3cache *c, const struct l3cache_key *key, int fd, const void *map,
                       uint64_t off, uint64_t len)
{
    if (!c || !key || fd < 0)
        return -EINVAL;
    if (c->verify != VERIFY_AUTO)
        return 0;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    return read_ready_st(c, key, fd, map, &st, off, len);
}
