/* Range checksums (cache/ranges.c, docs/CACHE.md "Range checksums"): every
 * stored object carries them; a checked read looks at the chunks it touches
 * and nothing else, catches rot in them whether the pages are in memory or
 * read from disk, serves the bytes it checked, counts a corrupt object once;
 * an object without valid ones (an earlier version's, another object's, a
 * damaged attribute) is checked whole instead. */
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

#define XATTR "user.l3cache.ranges"
#define CHUNK 65536

static char root[256], srcdir[300], cachedir[300];
static struct fake_codec fc;

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void setup(void)
{
    snprintf(root, sizeof root, "/tmp/l3cache-ranges-XXXXXX");
    cr_assert_not_null(mkdtemp(root));
    snprintf(srcdir, sizeof srcdir, "%s/src", root);
    snprintf(cachedir, sizeof cachedir, "%s/cache", root);
    cr_assert_eq(mkdir(srcdir, 0755), 0);
}

static void teardown(void)
{
    nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(ranges, .init = setup, .fini = teardown, .timeout = TC_TIMEOUT(120));

static l3cache *open_cache_budget(uint64_t buffer_budget)
{
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    in.buffer_budget = buffer_budget;
    struct l3cache_options o = {.dir = cachedir, .fsync_policy = L3CACHE_FSYNC_OBJECT,
                                .flags = L3CACHE_READ_CHECKS};
    l3cache *c = NULL;
    int r = l3cache_open_internal(&o, &in, &c);
    cr_assert_eq(r, 0, "open: %s", strerror(-r));
    return c;
}

static l3cache *open_cache(void)
{
    return open_cache_budget(0);
}

static uint64_t counter(l3cache *c, size_t offset)
{
    struct l3cache_stats s;
    cr_assert_eq(l3cache_get_stats(c, &s), 0);
    return *(const uint64_t *)((const char *)&s.instance + offset);
}
#define COUNTER(c, name) counter(c, offsetof(struct l3cache_counters, name))

/* A noisy PNG src/NAME (about 3 * w * h bytes, so that many chunks), got
 * through the cache: the object (fd open), its path and expected bytes. */
struct obj {
    struct l3cache_object o;
    char path[512];
    uint8_t *want;
    size_t size;
};

static void get_obj(l3cache *c, const char *name, unsigned w, unsigned h, struct obj *ob)
{
    char src[512];
    snprintf(src, sizeof src, "%s/%s", srcdir, name);
    if (access(src, F_OK) != 0)
        cr_assert_eq(write_png(src, w, h, 7 + w, 1), 0);
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    int r = get_fd(c, fd, &ob->o, NULL);
    close(fd);
    cr_assert_eq(r, 0, "get %s: %s", name, strerror(-r));
    char rel[64];
    l3cache_object_relpath(&ob->o.key, rel);
    snprintf(ob->path, sizeof ob->path, "%s/%s", cachedir, rel);
    cr_assert_eq(fake_expected(src, &ob->want, &ob->size), 0);
    cr_assert_eq(ob->o.size, ob->size);
}

static void put_obj(struct obj *ob)
{
    close(ob->o.fd);
    free(ob->want);
}

static void flip_byte(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0);
    uint8_t b;
    cr_assert_eq(pread(fd, &b, 1, off), 1);
    b ^= 0x10;
    cr_assert_eq(pwrite(fd, &b, 1, off), 1);
    cr_assert_eq(fdatasync(fd), 0);
    close(fd);
}

static void drop_pages(int fd)
{
    cr_assert_eq(fdatasync(fd), 0);
    cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
}

/* A checked read of [off, off+len) that must succeed: the bytes it serves
 * (from its buffer, or from the descriptor when it says so) equal want.
 * Returns what l3cache_read_checked returned. */
static ssize_t read_ok(l3cache *c, const struct obj *ob, const void *map, uint64_t off,
                       size_t len)
{
    struct l3cache_scratch sc = {0};
    const void *data;
    ssize_t n = l3cache_read_checked(c, &ob->o.key, ob->o.fd, map, off, len, &sc, &data);
    cr_assert_geq(n, 0, "read at %llu: %s", (unsigned long long)off, strerror((int)-n));
    size_t expect = off >= ob->size ? 0 : ob->size - off < len ? ob->size - off : len;
    uint8_t *got = malloc(len + 1);
    if (n > 0) {
        cr_assert_eq((size_t)n, expect);
        memcpy(got, data, (size_t)n);
    } else {
        cr_assert_null(data);
        cr_assert_eq(pread(ob->o.fd, got, len, (off_t)off), (ssize_t)expect);
    }
    cr_assert_eq(memcmp(got, ob->want + off, expect), 0, "bytes at %llu",
                 (unsigned long long)off);
    free(got);
    l3cache_scratch_free(&sc);
    return n;
}

Test(ranges, stored_objects_carry_them_and_reads_check_their_chunks)
{
    l3cache *c = open_cache();
    struct obj ob;
    get_obj(c, "b.png", 300, 300, &ob); /* ~270 KB: 5 chunks */
    cr_assert_gt(ob.size, 4 * CHUNK);
    ssize_t xs = getxattr(ob.path, XATTR, NULL, 0);
    cr_assert_eq(xs, 40 + 8 * 5 + 8, "5 chunk sums stored (%zd bytes)", xs);
    void *map = mmap(NULL, ob.size, PROT_READ, MAP_SHARED, ob.o.fd, 0);
    cr_assert_neq(map, MAP_FAILED);
    /* from disk and from memory alike: served from the checked buffer */
    drop_pages(ob.o.fd);
    cr_assert_gt(read_ok(c, &ob, map, 0, 131072), 0, "from disk: served from the buffer");
    cr_assert_gt(read_ok(c, &ob, NULL, CHUNK + 5, 1000), 0);
    cr_assert_gt(read_ok(c, &ob, map, 0, 131072), 0, "in memory: served from the buffer");
    cr_assert_eq(read_ok(c, &ob, map, ob.size, 4096), 0, "at the end: nothing");
    cr_assert_gt(read_ok(c, &ob, map, ob.size - 10, 4096), 0); /* the short last chunk */
    cr_assert_eq(COUNTER(c, verified), 0, "no object was checked whole");
    /* rot in chunk 3 (all pages in memory): reads elsewhere still served,
     * a read of it never */
    uint8_t *all;
    cr_assert_eq(read_fd(ob.o.fd, &all), (long)ob.size);
    free(all);
    flip_byte(ob.path, 3 * CHUNK + 100);
    read_ok(c, &ob, map, 0, 131072);
    read_ok(c, &ob, map, 4 * CHUNK, 4096);
    struct l3cache_scratch sc = {0};
    const void *data;
    cr_assert_eq(l3cache_read_checked(c, &ob.o.key, ob.o.fd, map, 3 * CHUNK + 4000, 100, &sc,
                                      &data), -EBADMSG, "rot in memory caught");
    cr_assert_null(data);
    struct stat st;
    cr_assert_neq(stat(ob.path, &st), 0, "the corrupt object was removed");
    cr_assert_eq(COUNTER(c, corrupt_repaired), 1);
    /* another read finding the same object: corrupt, counted once */
    drop_pages(ob.o.fd);
    cr_assert_eq(l3cache_read_checked(c, &ob.o.key, ob.o.fd, map, 2 * CHUNK, 2 * CHUNK, &sc,
                                      &data), -EBADMSG, "rot read from disk caught");
    l3cache_scratch_free(&sc);
    cr_assert_eq(COUNTER(c, corrupt_repaired), 1, "one object, counted once");
    munmap(map, ob.size);
    put_obj(&ob);
    /* the next get encodes it again, with its range checksums */
    get_obj(c, "b.png", 300, 300, &ob);
    cr_assert_eq(ob.o.hit, 0);
    cr_assert_eq(getxattr(ob.path, XATTR, NULL, 0), xs);
    read_ok(c, &ob, NULL, 0, ob.size);
    put_obj(&ob);
    l3cache_close(c);
}

/* The open of an object with range checksums reads nothing: rot in its
 * header is caught by the read of the first chunk, and a truncation by the
 * size the checksums were made for (then it is checked whole). */
Test(ranges, header_rot_and_truncation_caught)
{
    l3cache *c = open_cache();
    struct obj ob;
    get_obj(c, "a.png", 300, 300, &ob);
    put_obj(&ob);
    flip_byte(ob.path, 5);
    get_obj(c, "a.png", 300, 300, &ob);
    cr_assert_eq(ob.o.hit, 1, "the open does not look at the header");
    struct l3cache_scratch sc = {0};
    const void *data;
    cr_assert_eq(l3cache_read_checked(c, &ob.o.key, ob.o.fd, NULL, CHUNK - 10, 20, &sc, &data),
                 -EBADMSG, "a read of the header's chunk is not served");
    l3cache_scratch_free(&sc);
    cr_assert_eq(COUNTER(c, corrupt_repaired), 1);
    put_obj(&ob);
    get_obj(c, "a.png", 300, 300, &ob);
    cr_assert_eq(ob.o.hit, 0, "encoded again");
    put_obj(&ob);
    cr_assert_eq(truncate(ob.path, (off_t)ob.size - 1), 0);
    get_obj(c, "a.png", 300, 300, &ob);
    cr_assert_eq(ob.o.hit, 0, "truncated: checked whole, found corrupt, encoded again");
    cr_assert_eq(COUNTER(c, corrupt_repaired), 2);
    read_ok(c, &ob, NULL, 0, ob.size);
    put_obj(&ob);
    l3cache_close(c);
}

/* An object without range checksums (an earlier version's), with another
 * object's, or with damaged ones is checked whole at open and its reads as
 * l3cache_read_ready says; rot in it is caught all the same. */
Test(ranges, objects_without_valid_ones_are_checked_whole)
{
    l3cache *c = open_cache();
    struct obj a, b;
    get_obj(c, "a.png", 300, 300, &a);
    get_obj(c, "b.png", 250, 250, &b);
    uint8_t xa[RANGES_XATTR_MAX], xb[RANGES_XATTR_MAX];
    ssize_t na = getxattr(a.path, XATTR, xa, sizeof xa), nb = getxattr(b.path, XATTR, xb, sizeof xb);
    cr_assert_gt(na, 0);
    cr_assert_gt(nb, 0);
    put_obj(&a);
    put_obj(&b);
    l3cache_close(c);
    /* a: none; b: a's (another key and size) */
    cr_assert_eq(removexattr(a.path, XATTR), 0);
    cr_assert_eq(setxattr(b.path, XATTR, xa, (size_t)na, 0), 0);
    c = open_cache();
    get_obj(c, "a.png", 300, 300, &a);
    get_obj(c, "b.png", 250, 250, &b);
    cr_assert_eq(a.o.hit + b.o.hit, 2);
    cr_assert_eq(COUNTER(c, verified), 2, "both checked whole at open");
    cr_assert_eq(read_ok(c, &a, NULL, CHUNK, 1000), 0, "then served as checked");
    put_obj(&b);
    /* b's own, damaged (one byte of a chunk sum): not trusted either */
    xb[40] ^= 1;
    cr_assert_eq(setxattr(b.path, XATTR, xb, (size_t)nb, 0), 0);
    get_obj(c, "b.png", 250, 250, &b);
    cr_assert_eq(COUNTER(c, verified), 3, "damaged: checked whole");
    put_obj(&b);
    /* rot in the one without: caught by the whole check of a new handle */
    put_obj(&a);
    l3cache_close(c);
    flip_byte(a.path, 2 * CHUNK + 9);
    c = open_cache();
    get_obj(c, "a.png", 300, 300, &a);
    cr_assert_eq(a.o.hit, 0, "encoded again");
    cr_assert_eq(a.o.repaired, 1);
    cr_assert_eq(COUNTER(c, corrupt_repaired), 1);
    cr_assert_gt(getxattr(a.path, XATTR, NULL, 0), 0, "stored again with range checksums");
    read_ok(c, &a, NULL, 0, a.size);
    put_obj(&a);
    l3cache_close(c);
}

/* Large objects get larger chunks, so the attribute stays within one 4 KiB
 * block (what ext4 holds); the sums describe exactly the bytes stored. */
Test(ranges, chunk_size_grows_with_the_object)
{
    struct {
        size_t size;
        unsigned log2;
        uint32_t n;
    } cases[] = {{1, 16, 1}, {CHUNK, 16, 1}, {CHUNK + 1, 16, 2},
                 {(size_t)RANGES_MAX * CHUNK, 16, RANGES_MAX},
                 {(size_t)RANGES_MAX * CHUNK + 1, 17, (RANGES_MAX + 2) / 2},
                 {(size_t)100 << 20, 18, 400}};
    char path[400];
    snprintf(path, sizeof path, "%s/obj", root);
    struct l3cache_key key, other;
    memset(&key, 0xa5, sizeof key);
    memset(&other, 0x5a, sizeof other);
    size_t max = (size_t)100 << 20;
    uint8_t *data = malloc(max);
    cr_assert_not_null(data);
    for (size_t i = 0; i < max; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 13);
    struct ranges *r = malloc(sizeof *r);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(ranges_store(fd, &key, data, cases[k].size), 0);
        cr_assert_leq(fgetxattr(fd, XATTR, NULL, 0), RANGES_XATTR_MAX);
        cr_assert_eq(ranges_load(fd, &key, cases[k].size, r), 0);
        cr_assert_eq(r->log2, cases[k].log2, "size %zu: chunk 2^%u", cases[k].size, r->log2);
        cr_assert_eq(r->n, cases[k].n);
        uint64_t chunk = (uint64_t)1 << r->log2;
        for (uint32_t i = 0; i < r->n; i++) {
            uint64_t o = (uint64_t)i * chunk, len = cases[k].size - o < chunk ? cases[k].size - o : chunk;
            cr_assert_eq(r->sum[i], XXH3_64bits(data + o, (size_t)len));
        }
        cr_assert_eq(ranges_load(fd, &other, cases[k].size, r), -EBADMSG, "another key's");
        cr_assert_eq(ranges_load(fd, &key, cases[k].size + 1, r), -EBADMSG, "another size");
        close(fd);
    }
    unlink(path); /* a truncation keeps the attribute: a new file has none */
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    cr_assert_eq(ranges_load(fd, &key, 1, r), -ENODATA, "none");
    close(fd);
    free(r);
    free(data);
}

/* ---- l3cache_reader: what a daemon keeps per open file (cache/reader.c) ---- */

/* A read through rd that must succeed with the object's bytes from its own
 * buffers or the scratch: returns the slot it was served from (-1: scratch). */
static int reader_ok(l3cache_reader *rd, const struct obj *ob, struct l3cache_scratch *sc,
                     uint64_t off, size_t len)
{
    struct l3cache_view v;
    ssize_t n = l3cache_reader_read(rd, off, len, sc, &v);
    size_t expect = off >= ob->size ? 0 : ob->size - off < len ? ob->size - off : len;
    cr_assert_eq(n, (ssize_t)expect, "read at %llu: %zd", (unsigned long long)off, n);
    cr_assert_eq(memcmp(v.data, ob->want + off, expect), 0, "bytes at %llu",
                 (unsigned long long)off);
    int slot = v.slot;
    l3cache_reader_done(rd, &v);
    cr_assert_null(v.data);
    return slot;
}

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

/* How many mappings of fd's file this process holds (/proc/self/maps). */
static int mappings_of(int fd)
{
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long ino = 0;
        if (sscanf(line, "%*s %*s %*s %*s %llu", &ino) == 1 && ino == (unsigned long long)st.st_ino)
            n++;
    }
    fclose(f);
    return n;
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

/* ---- l3cache_reader_splice: checked reads without a copy (cache/spliced.c) ---- */

#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

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
        for (uint64_t off = 0; off < ob.size; off += step)
            splice_ok(rd, &ob, &p, off, step);
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
    for (uint64_t off = 0; off < ob.size; off += 2 * CHUNK)
        splice_ok(rd, &ob, &p, off, 2 * CHUNK);
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
