/* Range checksums (cache/ranges.c, docs/CACHE.md "Range checksums"): every
 * stored object carries them; a checked read looks at the chunks it touches
 * and nothing else, catches rot in them whether the pages are in memory or
 * read from disk, serves the bytes it checked, counts a corrupt object once;
 * an object without valid ones (an earlier version's, another object's, a
 * damaged attribute) is checked whole instead.
 * Here: the attribute itself, checked reads on it, objects checked whole, the
 * chunk size; test_reader.c and test_spliced.c: the readers. */
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
