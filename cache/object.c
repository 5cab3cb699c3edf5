/* object.c — one cache object: open it and check it as verified.c says, store
 * it atomically (temp file in its fan-out directory, fsync, link), remove it
 * only while its name still points at the inode checked. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h> /* memfd_create */
#include <sys/stat.h>
#include <unistd.h>

#include "l3_xxh.h"

#include "handle.h"

#define PREFIX_BYTES 65536
#define MAX_CHECK_PREFIX ((size_t)64 << 20)
#define FANOUT_RETRIES 3

int object_remove_if_same(struct l3cache *c, const char *rel, const struct stat *st)
{
    struct stat now;
    if (fstatat(c->dirfd, rel, &now, AT_SYMLINK_NOFOLLOW) != 0 || now.st_ino != st->st_ino ||
        now.st_dev != st->st_dev)
        return 0;
    if (!c->readonly)
        unlinkat(c->dirfd, rel, 0);
    return 1;
}

/* The whole object read (not mmap'ed: a file truncated behind our back must
 * not SIGBUS) and checked at `level`. */
static int check_whole(struct l3cache *c, int fd, uint64_t size, int level)
{
    if (size > SIZE_MAX)
        return -EFBIG;
    uint8_t *buf = malloc((size_t)size);
    if (!buf)
        return -ENOMEM;
    ssize_t n = l3cache_pread_full(fd, buf, (size_t)size, 0);
    if (n < 0) {
        free(buf);
        return (int)n;
    }
    int st = (uint64_t)n == size ? c->in.check(c->in.ctx, buf, (size_t)n, size, level, NULL) : 1;
    free(buf);
    return st == 0 ? 0 : 1;
}

/* A prefix (64 KiB, more when the tile table is longer) read into *buf_ret
 * (malloc'ed, *len_ret bytes) and checked: 0, 1 corrupt, -errno. */
static int read_header(struct l3cache *c, int fd, uint64_t size, uint8_t **buf_ret,
                       size_t *len_ret)
{
    size_t len = size < PREFIX_BYTES ? (size_t)size : PREFIX_BYTES;
    for (;;) {
        uint8_t *buf = malloc(len);
        if (!buf)
            return -ENOMEM;
        ssize_t n = l3cache_pread_full(fd, buf, len, 0);
        if (n < 0) {
            free(buf);
            return (int)n;
        }
        size_t needed = 0;
        int st = c->in.check(c->in.ctx, buf, (size_t)n, size, L3CACHE_CHECK_HEADER, &needed);
        if (st == 0) {
            *buf_ret = buf;
            *len_ret = (size_t)n;
            return 0;
        }
        free(buf);
        if (st == -1 && needed > len && needed <= size && needed <= MAX_CHECK_PREFIX &&
            (size_t)n == len) {
            len = needed;
            continue;
        }
        return 1;
    }
}

static int check_header(struct l3cache *c, int fd, uint64_t size)
{
    uint8_t *buf;
    size_t len;
    int r = read_header(c, fd, size, &buf, &len);
    if (r == 0)
        free(buf);
    return r;
}

/* The payload checksum, streamed through a small buffer (no copy of the
 * whole object, no large allocation): 0, 1 corrupt, -errno. */
static int check_payload(struct l3cache *c, int fd, uint64_t size)
{
    uint8_t *hdr;
    size_t hlen;
    int r = read_header(c, fd, size, &hdr, &hlen);
    if (r)
        return r;
    uint64_t off = 0, want = 0;
    int st = c->in.payload(c->in.ctx, hdr, hlen, size, &off, &want);
    free(hdr);
    if (st != 0 || off > size)
        return 1;
    uint64_t h;
    if (mapped_payload_hash(fd, size, off, &h) == 0)
        return h == want ? 0 : 1; /* all in memory: hashed in place */
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    uint8_t chunk[64 * 1024];
    while (off < size) {
        size_t n = size - off < sizeof chunk ? (size_t)(size - off) : sizeof chunk;
        ssize_t got = l3cache_pread_full(fd, chunk, n, off);
        if (got < 0)
            return (int)got;
        if ((size_t)got != n)
            return 1; /* shorter than its header says */
        XXH3_64bits_update(&state, chunk, n);
        off += n;
    }
    return XXH3_64bits_digest(&state) == want ? 0 : 1;
}

int object_check(struct l3cache *c, int fd, uint64_t size, int level)
{
    if (size == 0)
        return 1;
    if (level == L3CACHE_CHECK_HEADER)
        return check_header(c, fd, size);
    if (level == L3CACHE_CHECK_PAYLOAD && c->in.payload)
        return check_payload(c, fd, size);
    return check_whole(c, fd, size, level);
}

/* The object was found corrupt: removed and counted if its name is still
 * this inode (reads that find it at once count it once). */
static void object_corrupt(struct l3cache *c, const char *rel, const struct stat *st)
{
    if (object_remove_if_same(c, rel, st))
        stats_count(c, &c->inst.corrupt_repaired, 1);
}

/* last use for LRU eviction: the atime, refreshed at most every
 * touch_interval_s so hits stay cheap */
static void touch_atime(struct l3cache *c, int fd, const struct stat *st)
{
    if (c->readonly)
        return;
    time_t now = time(NULL);
    if (c->in.touch_interval_s == UINT32_MAX ||
        now - st->st_atim.tv_sec >= (time_t)c->in.touch_interval_s) {
        struct timespec ts[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
        struct stat after;
        /* the touch moves ctime: the object stays the one just checked */
        if (futimens(fd, ts) == 0 && fstat(fd, &after) == 0 && after.st_size == st->st_size &&
            after.st_mtim.tv_sec == st->st_mtim.tv_sec &&
            after.st_mtim.tv_nsec == st->st_mtim.tv_nsec)
            verified_add(c, &after);
    }
}

int object_open(struct l3cache *c, const struct l3cache_key *key, int *fd_ret,
                uint64_t *size_ret)
{
    char rel[64];
    l3cache_object_relpath(key, rel);
    int fd = openat(c->dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? -ENOENT : -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EIO;
    }
    /* The checks compare the file size with the sizes in the object's own
     * checksummed header; a size that differs from the index's is then an
     * index entry that is out of date (two builds of one format version
     * whose encoders differ), not a corrupt object: the caller fixes it. */
    int bad = verified_ready(c, key, fd, &st);
    if (bad) {
        close(fd);
        if (bad < 0)
            return bad;
        object_corrupt(c, rel, &st);
        return -EBADMSG;
    }
    touch_atime(c, fd, &st);
    *fd_ret = fd;
    *size_ret = (uint64_t)st.st_size;
    return 0;
}

int object_corrupt_fd(struct l3cache *c, const struct l3cache_key *key, const struct stat *st)
{
    char rel[64];
    l3cache_object_relpath(key, rel);
    object_corrupt(c, rel, st);
    return -EBADMSG;
}

int l3cache_check_fd(l3cache *c, const struct l3cache_key *key, int fd)
{
    if (!c || !key || fd < 0)
        return -EINVAL;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    int bad = verified_ready(c, key, fd, &st);
    return bad <= 0 ? bad : object_corrupt_fd(c, key, &st);
}

/* ------------------------------------------------------------- storing */

static int mkdir_objects(struct l3cache *c, const char *sub)
{
    if (mkdirat(c->dirfd, "objects", c->dir_mode) != 0 && errno != EEXIST)
        return -errno;
    if (mkdirat(c->dirfd, sub, c->dir_mode) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int object_fix_fanout(struct l3cache *c, const char *sub)
{
    /* On a network filesystem a client may still believe in a directory
     * another client removed (`cache clear`): mkdir says EEXIST, a create
     * inside says ENOENT. An rmdir makes the client ask the server and drop
     * its stale entry (it fails harmlessly when the directory is real and
     * not empty); then the directories are made again. */
    unlinkat(c->dirfd, sub, AT_REMOVEDIR);
    unlinkat(c->dirfd, "objects", AT_REMOVEDIR);
    return mkdir_objects(c, sub);
}

/* Creates a file in fan-out directory sub (rel is its path), making or
 * repairing the directory when it is missing. A descriptor or -errno. */
int object_create(struct l3cache *c, const char *sub, const char *rel, int flags)
{
    for (int i = 0;; i++) {
        int fd = openat(c->dirfd, rel, flags | O_CREAT | O_EXCL | O_CLOEXEC, c->file_mode);
        if (fd >= 0 || errno != ENOENT || i == FANOUT_RETRIES)
            return fd >= 0 ? fd : -errno;
        int r = i == 0 ? mkdir_objects(c, sub) : object_fix_fanout(c, sub);
        if (r < 0)
            return r;
    }
}

static void fsync_dir(struct l3cache *c, const char *sub)
{
    int fd = openat(c->dirfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* The written temp file becomes the object: link (EEXIST: another writer
 * won, same key, same bytes), or rename where there are no hard links. */
static int publish(struct l3cache *c, const char *tmprel, const char *rel, int *created_ret)
{
    if (linkat(c->dirfd, tmprel, c->dirfd, rel, 0) == 0) {
        *created_ret = 1;
        return 0;
    }
    if (errno == EEXIST)
        return 0;
    if (errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP || errno == ENOSYS ||
        errno == EMLINK) {
        if (renameat(c->dirfd, tmprel, c->dirfd, rel) != 0)
            return -errno;
        *created_ret = 1;
        return 0;
    }
    return -errno;
}

/* One attempt of object_store. */
static int store_once(struct l3cache *c, const struct l3cache_key *key, const char *sub,
                      const char *rel, const void *data, size_t size, int *created_ret)
{
    char tmpname[160], tmprel[192];
    int r = l3cache_temp_name(tmpname, sizeof(tmpname));
    if (r < 0)
        return r;
    snprintf(tmprel, sizeof(tmprel), "%s/%s", sub, tmpname);
    *created_ret = 0;
    int fd = object_create(c, sub, tmprel, O_WRONLY);
    if (fd < 0)
        return fd;
    r = l3cache_write_all(fd, data, size);
    if (r == 0)
        ranges_store(fd, key, data, size); /* none (ENOTSUP): checked whole */
    if (r == 0 && c->opts.fsync_policy >= L3CACHE_FSYNC_OBJECT && fsync(fd) != 0)
        r = -errno;
    struct stat tmp;
    if (r == 0 && fstat(fd, &tmp) != 0)
        r = -errno;
    if (close(fd) != 0 && r == 0)
        r = -errno; /* NFS reports write-back errors at close */
    if (r == 0 && c->in.before_link)
        c->in.before_link(c->in.ctx, c->dirfd, tmprel);
    if (r == 0)
        r = publish(c, tmprel, rel, created_ret);
    unlinkat(c->dirfd, tmprel, 0);
    if (r == 0 && c->opts.fsync_policy >= L3CACHE_FSYNC_ALL)
        fsync_dir(c, sub);
    /* our own bytes, in the page cache: checked, under the identity the link
     * and the temp name's removal left (both move ctime) */
    struct stat now;
    if (r == 0 && *created_ret && fstatat(c->dirfd, rel, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        now.st_ino == tmp.st_ino && now.st_dev == tmp.st_dev)
        verified_add(c, &now);
    return r;
}

int object_store(struct l3cache *c, const struct l3cache_key *key, const void *data,
                 size_t size, int *created_ret)
{
    char rel[64], sub[16];
    l3cache_object_relpath(key, rel);
    memcpy(sub, rel, 10);
    sub[10] = 0; /* "objects/ab" */
    /* A temp file or fan-out directory removed under the writer (`cache
     * clear` or gc of another process or host: ENOENT, or ESTALE on a
     * network filesystem) is written again from the start. */
    int r;
    for (int i = 0;; i++) {
        r = store_once(c, key, sub, rel, data, size, created_ret);
        if ((r != -ENOENT && r != -ESTALE) || i == FANOUT_RETRIES)
            return r;
    }
}

int object_memory_fd(struct l3cache *c, const void *data, size_t size)
{
    int fd = memfd_create("l3cache", MFD_CLOEXEC);
    if (fd < 0) {
        char path[] = "/tmp/l3cache-XXXXXX";
        fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0)
            return -errno;
        unlink(path);
    }
    int r = l3cache_write_all(fd, data, size);
    struct stat st;
    if (r == 0 && fstat(fd, &st) == 0)
        verified_add(c, &st);
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}
