/* test_reader.c — l3cache_reader (cache/reader.c), what a daemon keeps per
 * open file: read ahead for sequential readers, ranges kept for late reads,
 * mappings only where an object is checked whole, failing descriptors, rot
 * after open, chunks larger than a read, the buffer budget; and
 * l3cache_verify_all on range checksums. */
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
#include "ranges_fixture.h"

/* ---- l3cache_reader: what a daemon keeps per open file (cache/reader.c) ---- */

/* A sequential reader: every read served with the object's bytes, those
 * after the first from a buffer read ahead (nothing read twice); the range
 * checksums are loaded once, at open. */
Test(ranges, reader_reads_ahead_for_a_sequential_reader)
{
    l3cache *c = open_cache();
    struct obj ob;
    get_obj(c, "s.png", 400, 400, &ob); /* ~480 KB: 8 chunks */
    l3cache_reader *rd;
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    /* the attribute is gone now: the reader does not read it again */
    cr_assert_eq(fremovexattr(ob.o.fd, XATTR), 0);
    struct l3cache_scratch sc = {0};
    size_t step = 2 * CHUNK;
    int from_slots = 0, reads = 0;
    for (uint64_t off = 0; off < ob.size; off += step, reads++) {
        int slot = reader_ok(rd, &ob, &sc, off, step);
        from_slots += slot >= 0;
        cr_assert(off == 0 || slot >= 0, "read at %llu was read ahead", (unsigned long long)off);
        l3cache_reader_ahead(rd, off + step, step);
    }
    cr_assert_eq(from_slots, reads - 1);
    /* not sequential: no read ahead (the next read comes from the descriptor) */
    reader_ok(rd, &ob, &sc, 5 * CHUNK, 1000);
    reader_ok(rd, &ob, &sc, CHUNK + 7, 1000);
    l3cache_reader_ahead(rd, CHUNK + 1007, 1000);
    cr_assert_lt(reader_ok(rd, &ob, &sc, 7 * CHUNK - 10, 5), 2);
    cr_assert_eq(COUNTER(c, verified), 0, "nothing checked whole");
    cr_assert_eq(COUNTER(c, corrupt_repaired), 0);
    l3cache_scratch_free(&sc);
    l3cache_reader_free(rd);
    put_obj(&ob);
    l3cache_close(c);
}

/* Reads of one sequential reader taken out of turn (the kernel sends
 * several at once; workers take them in any order): a range read ahead is
 * kept for its read even when reads of later ranges came first, instead of
 * being refilled by the next read ahead and then read and hashed again. */
Test(ranges, reader_keeps_a_range_read_ahead_for_a_late_read)
{
    l3cache *c = open_cache();
    struct obj ob;
    get_obj(c, "late.png", 700, 700, &ob); /* ~1.5 MB: 23 chunks */
    l3cache_reader *rd;
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    struct l3cache_scratch sc = {0};
    size_t s = 2 * CHUNK;
    cr_assert_eq(reader_ok(rd, &ob, &sc, 0, s), -1);
    l3cache_reader_ahead(rd, s, s); /* [s, 2s) and [2s, 3s) read ahead */
    cr_assert_geq(reader_ok(rd, &ob, &sc, 2 * s, s), 0, "out of turn, from its buffer");
    cr_assert_eq(reader_ok(rd, &ob, &sc, 3 * s, s), -1, "the one after: from the descriptor");
    l3cache_reader_ahead(rd, 4 * s, s); /* sequential again: reads ahead */
    cr_assert_geq(reader_ok(rd, &ob, &sc, s, s), 0,
                  "the late read still finds the range read ahead for it");
    l3cache_scratch_free(&sc);
    l3cache_reader_free(rd);
    put_obj(&ob);
    l3cache_close(c);
}

/* A reader maps the object only where a read looks at its pages: one
 * without range checksums, checked whole and then served while its pages
 * stay in memory (mincore through that map); ranged reads read the
 * descriptor, and their reader makes no map. */
Test(ranges, reader_maps_only_an_object_it_checks_whole)
{
    l3cache *c = open_cache();
    struct obj ob;
    get_obj(c, "m.png", 300, 300, &ob);
    cr_assert_eq(mappings_of(ob.o.fd), 0);
    l3cache_reader *rd;
    struct l3cache_scratch sc = {0};
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    cr_assert_eq(mappings_of(ob.o.fd), 0, "range checksums: no map");
    reader_ok(rd, &ob, &sc, CHUNK, 1000);
    l3cache_reader_free(rd);
    /* without them: checked whole, the pages looked at through its own map */
    cr_assert_eq(fremovexattr(ob.o.fd, XATTR), 0);
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    cr_assert_eq(mappings_of(ob.o.fd), 1, "checked whole: mapped");
    struct l3cache_view v;
    uint64_t before = COUNTER(c, verified);
    cr_assert_eq(l3cache_reader_read(rd, 0, 1000, &sc, &v), 0, "serve from the descriptor");
    cr_assert_eq(COUNTER(c, verified), before + 1, "checked whole: new to this handle");
    cr_assert_eq(l3cache_reader_read(rd, 1000, 1000, &sc, &v), 0);
    cr_assert_eq(COUNTER(c, verified), before + 1, "its pages are still the checked ones");
    drop_pages(ob.o.fd);
    cr_assert_eq(l3cache_reader_read(rd, 2000, 1000, &sc, &v), 0);
    cr_assert_eq(COUNTER(c, verified), before + 2, "its pages left memory: checked again");
    l3cache_reader_free(rd);
    cr_assert_eq(mappings_of(ob.o.fd), 0, "unmapped with the reader");
    /* a caller's map is used, not another one */
    void *map = mmap(NULL, ob.size, PROT_READ, MAP_SHARED, ob.o.fd, 0);
    cr_assert_neq(map, MAP_FAILED);
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, map, &rd), 0);
    cr_assert_eq(mappings_of(ob.o.fd), 1);
    l3cache_reader_free(rd);
    cr_assert_eq(munmap(map, ob.size), 0);
    l3cache_scratch_free(&sc);
    put_obj(&ob);
    l3cache_close(c);
}

/* A descriptor that fails (as one of an object another GlusterFS client
 * removed does: ESTALE or ENOENT) still gives a reader, whose reads report
 * the error: the daemon's read replaces the object then, where an open that
 * failed would have refused the file. */
Test(ranges, reader_of_a_failing_descriptor_reports_at_every_read)
{
    l3cache *c = open_cache();
    struct obj ob;
    get_obj(c, "f.png", 200, 200, &ob);
    int bad = dup(ob.o.fd);
    cr_assert_geq(bad, 0);
    cr_assert_eq(close(bad), 0); /* a descriptor number that fstat refuses */
    l3cache_reader *rd = NULL;
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, bad, NULL, &rd), 0);
    cr_assert_not_null(rd);
    struct l3cache_scratch sc = {0};
    struct l3cache_view v;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(l3cache_reader_read(rd, 0, 1000, &sc, &v), -EBADF);
        cr_assert_null(v.data);
    }
    l3cache_reader_ahead(rd, 1000, 1000); /* nothing to read ahead from */
    const void *data = &data;
    cr_assert_eq(l3cache_read_checked(c, &ob.o.key, bad, NULL, 0, 1000, &sc, &data), -EBADF,
                 "the one-shot form reports it too");
    cr_assert_null(data);
    cr_assert_eq(COUNTER(c, corrupt_repaired), 0, "a failing descriptor is not rot");
    l3cache_reader_free(rd);
    /* the object itself reads as before */
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    reader_ok(rd, &ob, &sc, 0, ob.size);
    l3cache_scratch_free(&sc);
    l3cache_reader_free(rd);
    put_obj(&ob);
    l3cache_close(c);
}

/* Rot after the open is caught: every range a read needs that is not in one
 * of the reader's two buffers is read from the descriptor and hashed again.
 * A buffer keeps the bytes it checked (right when they were read) until it
 * is refilled; two reads of other ranges refill both, and the rotten chunk
 * is then read again and caught (a reader that kept checked chunks for
 * longer, or trusted them after the object changed, fails here). */
Test(ranges, reader_catches_rot_after_open_and_keeps_no_chunk_for_long)
{
    l3cache *c = open_cache();
    struct obj ob;
    get_obj(c, "r.png", 400, 400, &ob);
    l3cache_reader *rd;
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &rd), 0);
    struct l3cache_scratch sc = {0};
    /* chunk 0 read, chunks 1 and 2 read ahead into the two buffers */
    cr_assert_eq(reader_ok(rd, &ob, &sc, 0, CHUNK), -1);
    l3cache_reader_ahead(rd, CHUNK, CHUNK);
    /* rot in chunks 1, 2 and 6, in memory (and so on disk) */
    flip_byte(ob.path, CHUNK + 77);
    flip_byte(ob.path, 2 * CHUNK + 5);
    flip_byte(ob.path, 6 * CHUNK + 3);
    /* what the buffers checked before the rot: the right bytes */
    cr_assert_geq(reader_ok(rd, &ob, &sc, CHUNK, CHUNK), 0, "chunk 1 from its buffer");
    cr_assert_geq(reader_ok(rd, &ob, &sc, 2 * CHUNK + 100, 50), 0, "chunk 2 from its buffer");
    cr_assert_eq(COUNTER(c, corrupt_repaired), 0);
    /* two reads elsewhere (each wants its chunk's rest: kept in a buffer) */
    cr_assert_geq(reader_ok(rd, &ob, &sc, 3 * CHUNK, 100), 0);
    cr_assert_geq(reader_ok(rd, &ob, &sc, 4 * CHUNK, 100), 0);
    /* a read ahead over rot (chunk 6) neither serves nor reports it */
    cr_assert_geq(reader_ok(rd, &ob, &sc, 4 * CHUNK + 100, CHUNK - 100), 0);
    l3cache_reader_ahead(rd, 5 * CHUNK, CHUNK);
    struct stat st;
    cr_assert_eq(COUNTER(c, corrupt_repaired), 0);
    cr_assert_eq(stat(ob.path, &st), 0, "not reported by the read ahead");
    cr_assert_geq(reader_ok(rd, &ob, &sc, 5 * CHUNK, CHUNK), 0, "chunk 5 read ahead");
    struct l3cache_view v;
    cr_assert_eq(l3cache_reader_read(rd, 6 * CHUNK, CHUNK, &sc, &v), -EBADMSG,
                 "the read that needs it reads it and reports it");
    cr_assert_null(v.data);
    cr_assert_eq(COUNTER(c, corrupt_repaired), 1);
    cr_assert_neq(stat(ob.path, &st), 0, "the corrupt object was removed");
    /* chunk 1 is in neither buffer now: read from the descriptor, caught */
    cr_assert_eq(l3cache_reader_read(rd, CHUNK + 10, 100, &sc, &v), -EBADMSG,
                 "rot after open caught after the buffers moved on");
    cr_assert_eq(COUNTER(c, corrupt_repaired), 1, "one object, counted once");
    l3cache_scratch_free(&sc);
    l3cache_reader_free(rd);
    put_obj(&ob);
    l3cache_close(c);
}

/* An object whose chunks are larger than a read (over RANGES_MAX * 64 KiB):
 * the reads after the first within a chunk are served from the buffer the
 * first one checked, not read and hashed again. */
Test(ranges, reader_keeps_a_chunk_larger_than_a_read)
{
    l3cache *c = open_cache();
    size_t size = (size_t)60 << 20; /* chunks of 256 KiB */
    uint8_t *data = malloc(size);
    cr_assert_not_null(data);
    for (size_t i = 0; i < size; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 11);
    char path[400];
    snprintf(path, sizeof path, "%s/big", root);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, data, size), (ssize_t)size);
    struct l3cache_key key;
    memset(&key, 0x3c, sizeof key);
    cr_assert_eq(ranges_store(fd, &key, data, size), 0);
    struct obj ob = {.want = data, .size = size};
    l3cache_reader *rd;
    cr_assert_eq(l3cache_reader_open(c, &key, fd, NULL, &rd), 0);
    struct l3cache_scratch sc = {0};
    size_t step = 128 << 10;
    int first = reader_ok(rd, &ob, &sc, 0, step);
    cr_assert_geq(first, 0, "the chunk's rest is kept");
    /* rot in the first chunk's second half, after it was checked: the read
     * of that half is served from the buffer the first read checked */
    uint8_t b = (uint8_t)(data[step + 9] ^ 1);
    cr_assert_eq(pwrite(fd, &b, 1, (off_t)step + 9), 1);
    cr_assert_eq(reader_ok(rd, &ob, &sc, step, step), first, "second half: same buffer");
    cr_assert_geq(reader_ok(rd, &ob, &sc, 2 * step, step), 0);
    cr_assert_geq(reader_ok(rd, &ob, &sc, 4 * step, step), 0);
    /* both buffers refilled: the first chunk is read again, the rot caught */
    struct l3cache_view v;
    cr_assert_eq(l3cache_reader_read(rd, step, step, &sc, &v), -EBADMSG);
    l3cache_scratch_free(&sc);
    l3cache_reader_free(rd);
    close(fd);
    free(data);
    l3cache_close(c);
}

/* `l3fs cache verify` (l3cache_verify_all) checks the range checksums too:
 * an object whose bytes pass every other check but disagree with its range
 * checksums (reads would refuse it) is bad and removed; one with another
 * object's attribute likewise; one without is checked whole as before. */
Test(ranges, verify_all_checks_them)
{
    l3cache *c = open_cache();
    struct obj a, b, n;
    get_obj(c, "a.png", 300, 300, &a);
    get_obj(c, "b.png", 250, 250, &b);
    get_obj(c, "n.png", 200, 200, &n);
    uint64_t checked = 0, bad = 0;
    cr_assert_eq(l3cache_verify_all(c, &checked, &bad), 0);
    cr_assert_eq(checked, 3);
    cr_assert_eq(bad, 0, "all clean");
    /* a: valid-looking sums of other bytes (same key and size); b: a's */
    uint8_t *other = malloc(a.size);
    cr_assert_not_null(other);
    memcpy(other, a.want, a.size);
    other[CHUNK + 3] ^= 1;
    cr_assert_eq(ranges_store(a.o.fd, &a.o.key, other, a.size), 0);
    free(other);
    uint8_t xa[RANGES_XATTR_MAX];
    ssize_t na = getxattr(a.path, XATTR, xa, sizeof xa);
    cr_assert_gt(na, 0);
    cr_assert_eq(setxattr(b.path, XATTR, xa, (size_t)na, 0), 0);
    cr_assert_eq(removexattr(n.path, XATTR), 0);
    cr_assert_eq(l3cache_verify_all(c, &checked, &bad), 0);
    cr_assert_eq(checked, 3);
    cr_assert_eq(bad, 2, "the two whose range checksums do not hold");
    struct stat st;
    cr_assert_neq(stat(a.path, &st), 0, "removed");
    cr_assert_neq(stat(b.path, &st), 0, "removed");
    cr_assert_eq(stat(n.path, &st), 0, "none: checked whole, clean, kept");
    put_obj(&a);
    put_obj(&b);
    put_obj(&n);
    l3cache_close(c);
}

/* What all readers' buffers hold together is bounded (the handle's budget,
 * 64 MiB by default): past it a read is served from the caller's scratch,
 * with the right bytes, and a reader freed gives its share back. */
Test(ranges, reader_buffers_stay_within_the_budget)
{
    l3cache *c = open_cache_budget(3 * CHUNK + CHUNK / 2);
    struct obj ob;
    get_obj(c, "u.png", 400, 400, &ob);
    l3cache_reader *a, *b;
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &a), 0);
    cr_assert_eq(l3cache_reader_open(c, &ob.o.key, ob.o.fd, NULL, &b), 0);
    struct l3cache_scratch sc = {0};
    /* reads that want their chunk's rest keep it: a holds two chunks */
    cr_assert_geq(reader_ok(a, &ob, &sc, 0, 100), 0);
    cr_assert_geq(reader_ok(a, &ob, &sc, 2 * CHUNK, 100), 0);
    cr_assert_geq(reader_ok(b, &ob, &sc, 4 * CHUNK, 100), 0, "three chunks: within");
    cr_assert_eq(reader_ok(b, &ob, &sc, 6 * CHUNK, 100), -1, "a fourth: from the scratch");
    cr_assert_eq(reader_ok(b, &ob, &sc, 6 * CHUNK + 100, 100), -1);
    l3cache_reader_ahead(b, 6 * CHUNK + 200, 100); /* sequential, but over the budget */
    cr_assert_eq(reader_ok(b, &ob, &sc, 6 * CHUNK + 200, 100), -1, "nothing read ahead");
    l3cache_reader_free(a);
    cr_assert_geq(reader_ok(b, &ob, &sc, 5 * CHUNK, 100), 0, "a's share given back");
    l3cache_scratch_free(&sc);
    l3cache_reader_free(b);
    put_obj(&ob);
    l3cache_close(c);
}
