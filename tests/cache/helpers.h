/* Shared by test_cache and the helper programs of tests/cache. */
#ifndef L3_TEST_CACHE_HELPERS_H
#define L3_TEST_CACHE_HELPERS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tc_file.h"

#include "l3cache_internal.h"

/* A stand-in codec whose behaviour tests control: "encodes" a PNG to
 * FAKE_HDR bytes of header (magic, payload size, header checksum, payload
 * checksum) followed by the PNG bytes xor 0x5a. Its check hook verifies the
 * header checksum (and the payload checksum above L3CACHE_CHECK_HEADER),
 * like the real format does. */
#define FAKE_HDR 32
struct fake_codec {
    atomic_int calls;      /* encoder invocations */
    atomic_int delay_ms;   /* sleep in every encode (single-flight tests) */
    atomic_int fail;       /* 1: every encode fails with L3_ERR_LIMIT */
};
int fake_encode(void *ctx, const void *png, size_t png_size,
                const struct l3_encode_options *opts, void **out_ret, size_t *size_ret);
int fake_check(void *ctx, const void *data, size_t size, uint64_t total, int level,
               size_t *needed_ret);
int fake_payload(void *ctx, const void *prefix, size_t size, uint64_t total,
                 uint64_t *offset_ret, uint64_t *xxh3_64_ret);
/* internal options using the fake codec with fast timers */
void fake_internal(struct l3cache_internal *in, struct fake_codec *fc);

/* Writes a small RGB PNG (width x height) with libpng. noise=1 makes it
 * incompressible (about 3*w*h bytes). Returns 0 on success. */
int write_png(const char *path, unsigned width, unsigned height, unsigned seed, int noise);
/* l3cache_get of an open source descriptor (its identity taken by statx). */
int get_fd(l3cache *c, int fd, struct l3cache_object *obj, int *l3_status_ret);
/* Reads a whole fd with pread from offset 0, leaving the descriptor's file
 * offset alone (cache object descriptors; whole files: tc_slurp); malloc'ed,
 * returns bytes or -1. */
long read_fd(int fd, uint8_t **buf_ret);
/* Expected object bytes for a source file under the fake codec. */
int fake_expected(const char *path, uint8_t **buf_ret, size_t *size_ret);
/* Removes dir and everything under it (no symlink followed); best effort. */
void remove_tree(const char *dir);

#endif
