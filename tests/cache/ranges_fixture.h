/* ranges_fixture.h — what the range-checksum tests share (ranges_fixture.c):
 * the suite "ranges" (a temporary tree per test, caches with the stand-in
 * codec of helpers.c), objects of generated sources, rot, dropped pages, and
 * checked reads that must succeed. test_ranges.c (cache/ranges.c),
 * test_reader.c (cache/reader.c), test_spliced.c (cache/spliced.c). */
#ifndef L3_TEST_RANGES_FIXTURE_H
#define L3_TEST_RANGES_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "handle.h"
#include "cache_asserts.h" /* counter, COUNTER, flip_byte */
#include "helpers.h"

#define XATTR "user.l3cache.ranges"
#define CHUNK 65536

extern char root[256], srcdir[300], cachedir[300];
extern struct fake_codec fc;

/* A noisy PNG src/NAME (about 3 * w * h bytes, so that many chunks), got
 * through the cache: the object (fd open), its path and expected bytes. */
struct obj {
    struct l3cache_object o;
    char path[512];
    uint8_t *want;
    size_t size;
};

/* A cache on cachedir with the stand-in codec and this reader buffer budget
 * (open_cache: the default one). */
l3cache *open_cache_budget(uint64_t buffer_budget);

l3cache *open_cache(void);

/* A w x h source made and got from c: the object, its path and the bytes it
 * must hold (put_obj releases them). */
void get_obj(l3cache *c, const char *name, unsigned w, unsigned h, struct obj *ob);

void put_obj(struct obj *ob);

/* The file's pages out of the page cache. */
void drop_pages(int fd);

/* A checked read of [off, off+len) that must succeed: the bytes it serves
 * (from its buffer, or from the descriptor when it says so) equal want.
 * Returns what l3cache_read_checked returned. */
ssize_t read_ok(l3cache *c, const struct obj *ob, const void *map, uint64_t off,
                size_t len);

/* A read through rd that must succeed with the object's bytes from its own
 * buffers or the scratch: returns the slot it was served from (-1: scratch). */
int reader_ok(l3cache_reader *rd, const struct obj *ob, struct l3cache_scratch *sc,
              uint64_t off, size_t len);

/* How many mappings of fd's file this process holds (/proc/self/maps). */
int mappings_of(int fd);

#endif
