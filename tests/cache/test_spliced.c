/* test_spliced.c — l3cache_reader_splice (cache/spliced.c): checked reads
 * without a copy serve the object's bytes, never a rotted range, and fall
 * back to copied reads where the pipe cannot be used. */
#include <criterion/criterion.h>
#include "tc_timeout.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <xxhash.h>

#include "handle.h" /* ranges_store / ranges_load, RANGES_MAX */
#include "helpers.h"
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "ranges_fixture.h"

/* ---- l3cache_reader_splice: checked reads without a copy (cache/spliced.c) ---- */

/* What p holds (must be exactly n bytes), read out into a new buffer. */
static uint8_t *pipe_take(struct l3cache_pipe *p, size_t n)
{
    int left = -1;
    cr_assert_eq(ioctl(p->fd[0], FIONREAD, &left), 0);
    cr_assert_eq((size_t)left, n, "the pipe holds %d bytes, not %zu", left, n);
    uint8_t *got = malloc(n + 1);
    cr_assert_not_null(got);
    for (size_t at = 0; at < n;) {
        ssize_t k = read(p->fd[0], got + at, n - at);
        cr_assert_gt(k, 0);
        at += (size_t)k;
    }
    cr_assert_eq(l3cache_pipe_reset(p), 0, "empty after");
    return got;
}

/* A spliced read that must succeed with the object's bytes in the pipe. */
static void splice_ok(l3cache_reader *rd, const struct obj *ob, struct l3cache_pipe *p,
                      uint64_t off, size_t len)
{
    ssize_t n = l3cache_reader_splice(rd, off, len, p);
    size_t expect = off >= ob->size ? 0 : ob->size - off < len ? ob->size - off : len;
    cr_assert_eq(n, (ssize_t)expect, "splice at %llu: %zd", (unsigned long long)off, n);
    if (n == 0)
        return;
    uint8_t *got = pipe_take(p, (size_t)n);
    cr_assert_eq(memcmp(got, ob->want + off, expect), 0, "bytes at %llu",
                 (unsigned long long)off);
    free(got);
}

/* Every two-chunk read of the object in turn, each with its bytes. */
static void splice_all(l3cache_reader *rd, const struct obj *ob, struct l3cache_pipe *p)
{
    for (uint64_t off = 0; off < ob->size; off += 2 * CHUNK)
        splice_ok(rd, ob, p, off, 2 * CHUNK);
}

/* The pipe holds no bytes (or is closed). */
static void pipe_empty(struct l3cache_pipe *p)
{
    int left = 0;
    if (p->cap)
        cr_assert_eq(ioctl(p->fd[0], FIONREAD, &left), 0);
    cr_assert_eq(left, 0, "nothing left in the pipe");
}

/* Every range of an object, from disk and from memory, comes through the
 * pipe as the object's bytes, the reader mapping the object once; the last
 * short chunk and unaligned reads too. */
Test(ranges, splice_serves_the_object_bytes)
{
    l3cache *c = open_cache();
    struct obj ob;
    get_obj(c, "z.png", 400, 400, &ob); /* ~480 KB: 8 chunks */
    l3cache_reader *rd;
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    cr_assert_eq(mappings_of(ob.o.fd), 0, "mapped at the first spliced read only");
    struct l3cache_pipe p = {0};
    size_t step = 2 * CHUNK;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0)
            drop_pages(ob.o.fd); /* from disk, then from memory */
        splice_all(rd, &ob, &p);
    }
    cr_assert_eq(mappings_of(ob.o.fd), 1, "one mapping for all the reads");
    splice_ok(rd, &ob, &p, CHUNK + 7, 70000);
    splice_ok(rd, &ob, &p, ob.size - 10, step);
    splice_ok(rd, &ob, &p, ob.size, step);
    /* small reads against 64 KiB chunks: each chunk kept in a buffer instead */
    cr_assert_eq(l3cache_reader_splice(rd, CHUNK, 4096, &p), -EOPNOTSUPP);
    pipe_empty(&p);
    cr_assert_eq(COUNTER(c, verified), 0, "nothing checked whole");
    cr_assert_eq(COUNTER(c, corrupt_repaired), 0);
    l3cache_pipe_free(&p);
    l3cache_reader_free(rd);
    cr_assert_eq(mappings_of(ob.o.fd), 0, "unmapped with the reader");
    put_obj(&ob);
    l3cache_close(c);
}

/* A reader that finds its object in memory at its first spliced read does
 * not fault its reads in first (spliced.c, ends_resident), one that finds
 * it on disk does where huge pages can be asked for; either way, pages that
 * leave memory afterwards are read from disk again by the splice, served
 * right, and rot in them is caught. */
Test(ranges, splice_of_an_object_in_memory_then_dropped)
{
    l3cache *c = open_cache();
    struct obj ob;
    get_obj(c, "zw.png", 400, 400, &ob);
    uint8_t *all = NULL;
    cr_assert_eq(read_fd(ob.o.fd, &all), (long)ob.size); /* in memory */
    free(all);
    l3cache_reader *rd;
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    struct l3cache_pipe p = {0};
    splice_ok(rd, &ob, &p, 0, 2 * CHUNK);
    cr_assert_eq(rd->zstate, ZMAP_ON);
    cr_assert_eq(rd->zprefault, 0, "in memory: its reads are not faulted in first");
    drop_pages(ob.o.fd); /* the pages leave memory after the mapping was made */
    splice_all(rd, &ob, &p);
    flip_byte(ob.path, 5 * CHUNK + 123); /* rot, then read from disk */
    drop_pages(ob.o.fd);
    cr_assert_eq(l3cache_reader_splice(rd, 4 * CHUNK, 2 * CHUNK, &p), -EBADMSG);
    pipe_empty(&p);
    cr_assert_eq(COUNTER(c, corrupt_repaired), 1);
    l3cache_reader_free(rd);
    put_obj(&ob);

    /* the same object encoded again, first read from disk */
    get_obj(c, "zw.png", 400, 400, &ob);
    cr_assert_eq(ob.o.hit, 0, "encoded again");
    drop_pages(ob.o.fd);
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    splice_ok(rd, &ob, &p, 2 * CHUNK, 2 * CHUNK);
    void *probe = mmap(NULL, ob.size, PROT_READ, MAP_SHARED, ob.o.fd, 0);
    cr_assert_neq(probe, MAP_FAILED);
#ifdef MADV_HUGEPAGE
    int huge = madvise(probe, ob.size, MADV_HUGEPAGE) == 0;
#else
    int huge = 0;
#endif
    munmap(probe, ob.size);
    cr_assert_eq(rd->zprefault, huge,
                 "not in memory: faulted in first where huge pages can be asked for");
    splice_all(rd, &ob, &p);
    l3cache_pipe_free(&p);
    l3cache_reader_free(rd);
    put_obj(&ob);
    l3cache_close(c);
}

/* A rotted range is never served through the pipe, in memory or read from
 * disk after the open: the read reports the object corrupt (counted once,
 * removed), the pipe is left empty, and reads of other ranges still work;
 * the next get encodes the object again and its bytes come through right. */
Test(ranges, splice_never_serves_a_rotted_range)
{
    l3cache *c = open_cache();
    struct obj ob;
    get_obj(c, "zr.png", 400, 400, &ob);
    l3cache_reader *rd;
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    struct l3cache_pipe p = {0};
    splice_ok(rd, &ob, &p, 2 * CHUNK, 2 * CHUNK); /* mapped, its pages in memory */
    flip_byte(ob.path, 3 * CHUNK + 1000);         /* rot in memory (and on disk) */
    cr_assert_eq(l3cache_reader_splice(rd, 2 * CHUNK, 2 * CHUNK, &p), -EBADMSG);
    pipe_empty(&p);
    cr_assert_eq(COUNTER(c, corrupt_repaired), 1);
    struct stat st;
    cr_assert_neq(stat(ob.path, &st), 0, "the corrupt object was removed");
    /* a range the rot is not in: still served */
    splice_ok(rd, &ob, &p, 0, 2 * CHUNK);
    /* read from disk again (pages dropped): caught again, counted once */
    drop_pages(ob.o.fd);
    cr_assert_eq(l3cache_reader_splice(rd, 3 * CHUNK + 4000, CHUNK, &p), -EBADMSG);
    pipe_empty(&p);
    cr_assert_eq(COUNTER(c, corrupt_repaired), 1, "one object, counted once");
    /* the copied read of the same reader agrees */
    struct l3cache_scratch sc = {0};
    struct l3cache_view v;
    cr_assert_eq(l3cache_reader_read(rd, 3 * CHUNK, CHUNK, &sc, &v), -EBADMSG);
    l3cache_scratch_free(&sc);
    l3cache_reader_free(rd);
    put_obj(&ob);
    /* the repair: encoded again, served right through the pipe */
    get_obj(c, "zr.png", 400, 400, &ob);
    cr_assert_eq(ob.o.hit, 0, "encoded again");
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    splice_all(rd, &ob, &p);
    l3cache_pipe_free(&p);
    l3cache_reader_free(rd);
    put_obj(&ob);
    l3cache_close(c);
}

/* Drops CAP_SYS_RESOURCE from this (forked test) process: F_SETPIPE_SZ is
 * then held to fs.pipe-max-size, as for a daemon that is not root. */
static void drop_sys_resource(void)
{
    struct __user_cap_header_struct hd = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct cd[2];
    cr_assert_eq(syscall(SYS_capget, &hd, cd), 0);
    int bit = CAP_SYS_RESOURCE;
    cd[bit / 32].effective &= ~(1u << (bit % 32));
    cd[bit / 32].permitted &= ~(1u << (bit % 32));
    cr_assert_eq(syscall(SYS_capset, &hd, cd), 0);
}

static long pipe_max_size(void)
{
    FILE *f = fopen("/proc/sys/fs/pipe-max-size", "r");
    cr_assert_not_null(f);
    long v = 0;
    cr_assert_eq(fscanf(f, "%ld", &v), 1);
    fclose(f);
    return v;
}

/* Where the pipe cannot be used the read says so (-EOPNOTSUPP, the pipe
 * left empty) and the copied read serves it: a read larger than a pipe may
 * be made without CAP_SYS_RESOURCE, a pipe that is not empty (what a failed
 * reply left, vmsplice then short), an object without range checksums
 * (checked whole), a chunk much larger than the read, and no checks at all. */
Test(ranges, splice_falls_back_where_the_pipe_cannot_be_used)
{
    l3cache *c = open_cache();
    struct obj ob;
    get_obj(c, "zf.png", 700, 700, &ob); /* ~1.5 MB */
    long maxp = pipe_max_size();
    cr_assert_lt(maxp, (long)ob.size, "a read larger than pipe-max-size can be made");
    l3cache_reader *rd;
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    struct l3cache_pipe p = {0};
    struct l3cache_scratch sc = {0};
    drop_sys_resource();
    cr_assert_eq(l3cache_reader_splice(rd, 0, ob.size, &p), -EOPNOTSUPP, "pipe too small");
    pipe_empty(&p);
    cr_assert_eq(reader_ok(rd, &ob, &sc, 0, ob.size), -1, "the copied read serves it");
    splice_ok(rd, &ob, &p, 0, 2 * CHUNK); /* a read that fits still goes this way */
    /* a pipe holding bytes already (a failed reply not reset): replaced, so
     * that they are not served ahead of the read's */
    cr_assert_eq(write(p.fd[1], "stale", 5), 5);
    splice_ok(rd, &ob, &p, 4 * CHUNK, 2 * CHUNK);
    l3cache_reader_free(rd);
    /* without range checksums: checked whole, not spliced */
    cr_assert_eq(fremovexattr(ob.o.fd, XATTR), 0);
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    cr_assert_eq(l3cache_reader_splice(rd, 0, 2 * CHUNK, &p), -EOPNOTSUPP);
    pipe_empty(&p);
    l3cache_reader_free(rd);
    put_obj(&ob);
    l3cache_close(c);
    /* chunks of 256 KiB, reads of 64 KiB: each chunk kept in a buffer */
    c = open_cache();
    size_t size = (size_t)60 << 20;
    uint8_t *data = malloc(size);
    cr_assert_not_null(data);
    for (size_t i = 0; i < size; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 13);
    char path[400];
    snprintf(path, sizeof path, "%s/bigz", root);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, data, size), (ssize_t)size);
    struct l3cache_key key;
    memset(&key, 0x5d, sizeof key);
    cr_assert_eq(ranges_store(fd, &key, data, size), 0);
    struct obj big = {.want = data, .size = size};
    cr_assert_eq(l3cache_reader_open(c, &key, fd, NULL, &rd), 0);
    cr_assert_eq(l3cache_reader_splice(rd, 0, CHUNK, &p), -EOPNOTSUPP, "chunk 4x the read");
    splice_ok(rd, &big, &p, 0, 256 << 10); /* a read of a whole chunk goes this way */
    l3cache_reader_free(rd);
    l3cache_close(c);
    /* not checked at all (TRUST): nothing to splice, served from the descriptor */
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    struct l3cache_options o = {.dir = cachedir, .fsync_policy = L3CACHE_FSYNC_OBJECT,
                                .flags = L3CACHE_TRUST_STORAGE};
    cr_assert_eq(l3cache_open_internal(&o, &in, &c), 0);
    cr_assert_eq(l3cache_reader_open(c, &key, fd, NULL, &rd), 0);
    cr_assert_eq(l3cache_reader_splice(rd, 0, 256 << 10, &p), -EOPNOTSUPP);
    pipe_empty(&p);
    l3cache_reader_free(rd);
    l3cache_close(c);
    close(fd);
    free(data);
    l3cache_pipe_free(&p);
    l3cache_scratch_free(&sc);
}
