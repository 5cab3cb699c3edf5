/* fixture.h — the suite "cache" of test_cache (fixture.c): one temporary
 * tree per test, set up by the suite's .init and removed by its .fini. */
#ifndef L3_TEST_CACHE_FIXTURE_H
#define L3_TEST_CACHE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache_asserts.h" /* counter, COUNTER, flip_byte */
#include "helpers.h"

extern char root[256];     /* the test's temporary tree */
extern char srcdir[300];   /* root/src: sources (make_png) */
extern char cachedir[300]; /* root/cache */
extern char mnt[300];      /* root/mnt: mount point of mount_tmpfs */
extern int mounted;        /* mount_tmpfs succeeded: teardown unmounts */
extern struct fake_codec fc; /* the stand-in codec's state (calls, delay, fail) */

/* A cache with the fake codec (or the caller's tweaked internals). */
l3cache *open_with(const struct l3cache_options *o, struct l3cache_internal *tweak);
/* The same on dir with a size cap, after its first background scan (object
 * counts are exact from then on). */
l3cache *open_fake(const char *dir, uint64_t max_bytes, struct l3cache_internal *tweak);
/* A cache on cachedir with these L3CACHE_* flags. */
l3cache *open_flags(unsigned flags, struct l3cache_internal *tweak);
void src_path(char *buf, size_t size, const char *name);
void make_png(const char *name, unsigned w, unsigned h, unsigned seed, int noise);
/* l3cache_get on a source file of srcdir. */
int get_file(l3cache *c, const char *name, struct l3cache_object *obj, int *l3s);
/* The object fd holds exactly the fake encoding of the source. */
void expect_object(const struct l3cache_object *obj, const char *name);
/* get_file succeeds, hit or miss as wanted (-1: either), bytes as expected. */
void get_ok(l3cache *c, const char *name, int want_hit);
struct l3cache_source source_of(const char *name);
/* Entries under dir (recursively) whose name starts with prefix and, when
 * suffix is not NULL, ends with it. */
int count_names(const char *dir, const char *prefix, const char *suffix);
void object_path(const struct l3cache_key *key, char *buf, size_t size);
/* The path and size of the object a source is stored as. */
void object_of(l3cache *c, const char *name, char *path, size_t size, uint64_t *len);
/* tmpfs with these options on mnt: 0 or -errno. */
int mount_tmpfs(const char *opts);

#endif
