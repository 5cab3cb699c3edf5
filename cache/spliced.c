/* spliced.c — checked reads served without a copy in this process
 * (l3cache_reader_splice): the object's page-cache pages themselves go into
 * the caller's pipe, are hashed where they lie, and the caller replies by
 * handing that pipe on.
 *
 * A read of [off, end) on range checksums:
 *   0. fault the chunks [c0, c1) around it into the mapping (prefault): a
 *      hint that reads missing pages in with huge-page-sized read ahead, in
 *      large folios, so that this and later mappings of them cost a few
 *      faults (it decides nothing about what is served); skipped for an
 *      object found in memory when it was mapped, where it would only
 *      walk pages already there;
 *   1. splice [off, end) of the object's descriptor into the pipe: the pipe
 *      now holds a reference on each page-cache page of those bytes (the
 *      splice reads in what step 0 left missing);
 *   2. hash the whole chunks [c0, c1) around it through a read-only shared
 *      mapping of the object (XXH3-64, compared with the range checksums,
 *      ranges.c; no copy: the faults map the page-cache pages);
 *   3. only then does the caller hand the pipe on (fuse_reply_data: libfuse
 *      splices it into its own pipe behind the reply header, then to
 *      /dev/fuse, and the kernel copies from those pages into the reader's);
 *      on a mismatch the pipe is dropped here and the object reported
 *      corrupt, as a copied read reports it.
 *
 * Why the bytes served are the bytes hashed: the page cache holds one page
 * per offset of a file, and from step 1 until the kernel has copied the
 * reply out of the pipe each served page carries the pipe's reference. A
 * page with a reference the page cache does not expect is never taken out
 * of the file's page cache by reclaim, POSIX_FADV_DONTNEED, drop_caches or
 * migration (each freezes the reference count and gives up when it is
 * higher). Reclaim may unmap it from the mapping; the fault of the hash that
 * follows then finds that same page in the page cache again. So the hash in
 * step 2 reads the very pages the pipe holds. What could still change them
 * is a write to the object file or its truncation: the cache never writes
 * an object in place (a new version is a new inode; the directory is 0700),
 * and a truncation makes the splice short or the hash fault past the end,
 * which mapped.c turns into a failed read (SIGBUS caught), not a crash: the
 * read is then copied (reader.c) and reports what it finds.
 *
 * That page-cache behaviour is the one of local filesystems (ext2/3/4, XFS,
 * Btrfs, F2FS, tmpfs). A FUSE or network filesystem (GlusterFS, NFS) may
 * invalidate its pages whatever references they carry (attributes changed
 * on the server), and a re-fault would then read new bytes: objects there
 * are read with a copy, as are objects without range checksums, chunks much
 * larger than the read (kept whole in a reader's buffer instead), and every
 * read for which a mapping, a splice or a pipe large enough (F_SETPIPE_SZ:
 * fs.pipe-max-size without CAP_SYS_RESOURCE) cannot be had.
 *
 * The mapping is made once per reader, at its first spliced read, and
 * unmapped with the reader: one mmap and munmap per open file. Nothing is
 * read ahead into pipes: step 0 and the splice bring a sequential reader's
 * pages in from the disk, and a pipe holds pages only while its reply is
 * made (one pipe per worker thread, not counted in the
 * handle's budget of buffers).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "handle.h"

/* Filesystems whose page cache keeps a referenced page (see above). */
static int local_page_cache(int fd)
{
    struct statfs fs;
    if (fstatfs(fd, &fs) != 0)
        return 0;
    switch ((unsigned long)fs.f_type) {
    case 0xEF53:     /* ext2, ext3, ext4 */
    case 0x58465342: /* XFS */
    case 0x9123683E: /* Btrfs */
    case 0xF2F52010: /* F2FS */
    case 0x01021994: /* tmpfs */
        return 1;
    default:
        return 0;
    }
}

/* 1 when the first and the last page of the n bytes mapped at m are in
 * the page cache: the object is taken to be in memory, and its reads are
 * not faulted in first (see prefault). Only a guess, and only about speed:
 * a page missing between the two is read in by the splice, in smaller
 * folios. Two pages, not all: mincore walks every page it is asked about,
 * which for a whole pass over 23 MB in memory cost a fifth as much as the
 * hash (docs/FS.md, "Warm objects are not faulted in first"). */
#ifdef MADV_HUGEPAGE
static int ends_resident(const uint8_t *m, uint64_t n)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    unsigned char v0 = 0, v1 = 0;
    return mincore((void *)m, 1, &v0) == 0 && (v0 & 1) &&
           mincore((void *)(m + (n - 1) / page * page), 1, &v1) == 0 && (v1 & 1);
}
#endif

/* The reader's mapping for spliced reads, made at the first call; NULL
 * when there is none (reads then copy). */
static const uint8_t *reader_zmap(struct l3cache_reader *rd)
{
    pthread_mutex_lock(&rd->mu);
    if (rd->zstate == ZMAP_NONE) {
        rd->zstate = ZMAP_OFF;
        if (rd->st.st_size > 0 && (uint64_t)rd->st.st_size <= SIZE_MAX &&
            local_page_cache(rd->fd)) {
            void *m = mmap(NULL, (size_t)rd->st.st_size, PROT_READ, MAP_SHARED, rd->fd, 0);
            if (m != MAP_FAILED) {
                /* the faults read nothing ahead beyond the range they
                 * bring in; with huge pages allowed, a missing page is
                 * read in with its aligned 2 MiB (see prefault) */
                madvise(m, (size_t)rd->st.st_size, MADV_RANDOM);
#ifdef MADV_HUGEPAGE
                rd->zprefault = madvise(m, (size_t)rd->st.st_size, MADV_HUGEPAGE) == 0 &&
                                !ends_resident(m, (uint64_t)rd->st.st_size);
#endif
                rd->zmap = m;
                rd->zstate = ZMAP_ON;
            }
        }
    }
    const uint8_t *m = rd->zstate == ZMAP_ON ? rd->zmap : NULL;
    pthread_mutex_unlock(&rd->mu);
    return m;
}

void reader_zmap_free(struct l3cache_reader *rd)
{
    if (rd->zstate == ZMAP_ON)
        munmap((void *)rd->zmap, (size_t)rd->st.st_size);
}

void l3cache_pipe_free(struct l3cache_pipe *p)
{
    if (p && p->cap) {
        close(p->fd[0]);
        close(p->fd[1]);
    }
    if (p)
        p->cap = 0;
}

/* p empty and able to hold n bytes starting anywhere in a page: 0 or
 * -errno. A pipe that still holds bytes (a reply that failed and was not
 * followed by l3cache_pipe_reset) is replaced: what it held would be served
 * ahead of this read's bytes. */
static int pipe_fit(struct l3cache_pipe *p, size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t need = (n / page + 2) * page;
    l3cache_pipe_reset(p);
    if (p->cap && p->cap >= need)
        return 0;
    if (!p->cap) {
        if (pipe2(p->fd, O_CLOEXEC) != 0)
            return -errno;
        p->cap = (size_t)fcntl(p->fd[0], F_GETPIPE_SZ);
        if ((ssize_t)p->cap <= 0)
            p->cap = page; /* some size: it is open */
    }
    if (p->cap < need) {
        int got = need > INT32_MAX ? -1 : fcntl(p->fd[0], F_SETPIPE_SZ, (int)need);
        if (got < 0)
            return -errno;
        p->cap = (size_t)got;
    }
    return p->cap >= need ? 0 : -ENOBUFS;
}

int l3cache_pipe_reset(struct l3cache_pipe *p)
{
    int left = 0;
    if (p && p->cap && (ioctl(p->fd[0], FIONREAD, &left) != 0 || left != 0)) {
        l3cache_pipe_free(p); /* made anew by the next read */
        return -EIO;
    }
    return 0;
}

/* Before the splice of a read: the chunks [c0, c1) it will hash faulted
 * into the mapping, so that pages not in memory are read in by the
 * mapping's faults, in folios of up to 2 MiB where the filesystem has large
 * folios, rather than by the splice's read ahead in small ones. This read
 * and every later one, through any daemon, then maps an object with fewer
 * and cheaper faults: on Zen 4, 13 photos' objects read in so lie in 68
 * folios instead of 1743, and a fresh mapping hashes them in 1.2-1.3
 * instead of 2.1-2.2 ms (docs/FS.md, "Large folios").
 * Only a hint: what the pipe takes and the hash reads is decided by the
 * splice and the hash as before; an error here (EFAULT past the end, EIO,
 * EINVAL before Linux 5.14) is left to them. Without MADV_HUGEPAGE the
 * faults of a mapping with MADV_RANDOM would read a page at a time, so then
 * nothing is faulted here. Nor is anything for an object whose ends were in
 * memory when it was mapped (ends_resident): populating pages already in
 * the page cache walks them one by one before the hash's own faults would
 * map them sixteen at a time, and on Zen 4 that cost a warm pass through a
 * fresh mount 5-7 % of its time (docs/FS.md, "Warm objects are not faulted
 * in first"). */
static void prefault(const struct l3cache_reader *rd, const uint8_t *map, uint64_t c0,
                     uint64_t c1)
{
#ifdef MADV_POPULATE_READ
    if (!rd->zprefault)
        return;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), a0 = c0 / page * page;
    madvise((void *)(map + a0), (size_t)(c1 - a0), MADV_POPULATE_READ);
#else
    (void)rd, (void)map, (void)c0, (void)c1;
#endif
}

ssize_t l3cache_reader_splice(struct l3cache_reader *rd, uint64_t off, size_t len,
                              struct l3cache_pipe *p)
{
    if (!rd || !p)
        return -EINVAL;
    if (rd->err)
        return rd->err;
    if (!rd->ranged)
        return -EOPNOTSUPP; /* checked whole, or not checked: l3cache_reader_read */
    uint64_t size = rd->r.size;
    if (off >= size || len == 0)
        return 0;
    uint64_t end = size - off < len ? size : off + len;
    /* a chunk much larger than the read would be hashed at each of its
     * reads: a reader's buffer keeps it checked for the reads after */
    if (((uint64_t)1 << rd->r.log2) > 2 * (uint64_t)len)
        return -EOPNOTSUPP;
    const uint8_t *map = reader_zmap(rd);
    if (!map || pipe_fit(p, (size_t)(end - off)) != 0)
        return -EOPNOTSUPP;
    uint64_t c0, c1;
    chunk_span(&rd->r, off, end, &c0, &c1);
    prefault(rd, map, c0, c1);
    /* 1. the pages into the pipe (referenced from now on): a splice from
     * the descriptor, which reads from the disk what is still missing */
    loff_t pos = (loff_t)off;
    size_t got = 0, n = (size_t)(end - off);
    while (got < n) {
        ssize_t k = splice(rd->fd, &pos, p->fd[1], NULL, n - got, 0);
        if (k <= 0) {
            /* EIO: a page that cannot be read; 0: the file is shorter than
             * it was. The copied read reads the descriptor and says what
             * it is. */
            l3cache_pipe_free(p);
            return -EOPNOTSUPP;
        }
        got += (size_t)k;
    }
    /* 2. hashed where they lie */
    int m = mapped_ranges_match(&rd->r, map + c0, c0, c1);
    if (m == 1)
        return (ssize_t)(end - off); /* 3. the caller replies from the pipe */
    l3cache_pipe_free(p);
    if (m < 0)
        return -EOPNOTSUPP; /* SIGBUS (truncated): the copied read */
    return object_corrupt_fd(rd->c, &rd->key, &rd->st);
}
