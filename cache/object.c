/* object.c — one cache object: open and check it (header, or the whole
 * payload), store it atomically (temp file in its fan-out directory, fsync,
 * link), remove it only while its name still points at the inode checked. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h> /* memfd_create */
#include <sys/stat.h>
#include <unistd.h>

#include "handle.h"

#define PREFIX_BYTES 65536
#define MAX_CHECK_PREFIX ((size_t)64 << 20)

/* Removes the object at rel when it is still the inode described by st. */
void object_remove_if_same(struct l3cache *c, const char *rel, const struct stat *st)
{
    if (c->readonly)
        return;
    struct stat now;
    if (fstatat(c->dirfd, rel, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        now.st_ino == st->st_ino && now.st_dev == st->st_dev)
        unlinkat(c->dirfd, rel, 0);
}

int object_check(struct l3cache *c, int fd, uint64_t size, int full)
{
    if (size == 0)
        return 1;
    if (full) {
        if (size > SIZE_MAX)
            return -EFBIG;
        /* read, not mmap: a file truncated behind our back must not SIGBUS */
        uint8_t *buf = malloc((size_t)size);
        if (!buf)
            return -ENOMEM;
        ssize_t n = l3cache_pread_full(fd, buf, (size_t)size, 0);
        if (n < 0) {
            free(buf);
            return (int)n;
        }
        int st = (uint64_t)n == size ? c->in.check(c->in.ctx, buf, (size_t)n, size, 1, NULL) : 1;
        free(buf);
        return st == 0 ? 0 : 1;
    }
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
        int st = c->in.check(c->in.ctx, buf, (size_t)n, size, 0, &needed);
        free(buf);
        if (st == 0)
            return 0;
        if (st == -1 && needed > len && needed <= size && needed <= MAX_CHECK_PREFIX &&
            (size_t)n == len) {
            len = needed;
            continue;
        }
        return 1;
    }
}

int object_open(struct l3cache *c, const struct l3cache_key *key,
                       int *fd_ret, uint64_t *size_ret)
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
    uint64_t size = (uint64_t)st.st_size;
    /* The check compares the file size with the sizes in the object's own
     * checksummed header; a size that differs from the index's is then an
     * index entry that is out of date (two builds of one format version
     * whose encoders differ), not a corrupt object: the caller fixes it. */
    int bad = object_check(c, fd, size, c->in.verify_full);
    if (bad < 0) {
        close(fd);
        return bad;
    }
    if (bad) {
        close(fd);
        object_remove_if_same(c, rel, &st);
        pthread_mutex_lock(&c->mu);
        c->inst.corrupt_repaired++;
        pthread_mutex_unlock(&c->mu);
        return -EBADMSG;
    }
    /* last use for LRU eviction: the atime, refreshed at most every
     * touch_interval_s so hits stay cheap */
    if (!c->readonly) {
        time_t now = time(NULL);
        if (c->in.touch_interval_s == UINT32_MAX ||
            now - st.st_atim.tv_sec >= (time_t)c->in.touch_interval_s) {
            struct timespec ts[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
            futimens(fd, ts);
        }
    }
    *fd_ret = fd;
    *size_ret = size;
    return 0;
}

static int mkdir_objects(struct l3cache *c, const char *sub)
{
    if (mkdirat(c->dirfd, "objects", 0755) != 0 && errno != EEXIST)
        return -errno;
    if (mkdirat(c->dirfd, sub, 0755) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static void fsync_dir(struct l3cache *c, const char *sub)
{
    int fd = openat(c->dirfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int object_store(struct l3cache *c, const struct l3cache_key *key,
                        const void *data, size_t size, int *created_ret)
{
    char rel[64], sub[16], tmpname[160], tmprel[192];
    l3cache_object_relpath(key, rel);
    memcpy(sub, rel, 10);
    sub[10] = 0; /* "objects/ab" */
    int r = l3cache_temp_name(tmpname, sizeof(tmpname));
    if (r < 0)
        return r;
    snprintf(tmprel, sizeof(tmprel), "%s/%s", sub, tmpname);
    *created_ret = 0;

    int fd = openat(c->dirfd, tmprel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT) {
        r = mkdir_objects(c, sub);
        if (r < 0)
            return r;
        fd = openat(c->dirfd, tmprel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    }
    if (fd < 0)
        return -errno;
    r = l3cache_write_all(fd, data, size);
    if (r == 0 && c->opts.fsync_policy >= L3CACHE_FSYNC_OBJECT && fsync(fd) != 0)
        r = -errno;
    if (close(fd) != 0 && r == 0)
        r = -errno; /* NFS reports write-back errors at close */
    if (r == 0) {
        if (linkat(c->dirfd, tmprel, c->dirfd, rel, 0) == 0) {
            *created_ret = 1;
        } else if (errno == EEXIST) {
            /* another writer won; same key, same bytes */
        } else if (errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP ||
                   errno == ENOSYS || errno == EMLINK) {
            /* no hard links here: rename replaces atomically */
            if (renameat(c->dirfd, tmprel, c->dirfd, rel) == 0)
                *created_ret = 1;
            else
                r = -errno;
        } else {
            r = -errno;
        }
    }
    unlinkat(c->dirfd, tmprel, 0);
    if (r == 0 && c->opts.fsync_policy >= L3CACHE_FSYNC_ALL)
        fsync_dir(c, sub);
    return r;
}

int object_memory_fd(const void *data, size_t size)
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
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}
