/* cache_asserts.h — helpers that assert, shared by the Criterion executables
 * of tests/cache (test_cache, test_cache_ranges); cache_asserts.c. */
#ifndef L3_TEST_CACHE_ASSERTS_H
#define L3_TEST_CACHE_ASSERTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "helpers.h"

/* One counter of c's instance statistics. */
uint64_t counter(l3cache *c, size_t offset);
#define COUNTER(c, name) counter(c, offsetof(struct l3cache_counters, name))

/* Rot: one byte of the file changed in place (written through to the disk). */
void flip_byte(const char *path, off_t off);

#endif
