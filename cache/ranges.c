/* ranges.c — range checksums: an object's bytes cut into chunks (64 KiB, or
 * a larger power of two for objects of more than RANGES_MAX chunks), the
 * XXH3-64 of each recorded when the object is stored, in an extended
 * attribute of the object file (docs/CACHE.md, "Range checksums"). A read is
 * then checked on the chunks it touches alone (reader.c): no read waits for
 * the whole object.
 *
 * The attribute `user.l3cache.ranges`, little-endian, fixed-width fields:
 *
 *   0  u32     magic "L3CR"          16  u8[16] the object's key
 *   4  u8      version (1)           32  u32    chunks
 *   5  u8      log2 of the chunk     36  u32    0
 *   6  u16     0                     40  u64[chunks] XXH3-64 of each chunk
 *   8  u64     object size           then u64 XXH3-64 of all the bytes before
 *
 * It belongs to the inode it was written on (set on the temp file before the
 * object gets its name) and is trusted only when its own checksum, the key
 * and the size agree. An object without a valid one (stored by an earlier
 * version, copied without extended attributes, on a filesystem without user
 * xattrs) is checked whole instead (verified.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "l3_xxh.h"

#include "handle.h"

#define RANGES_XATTR "user.l3cache.ranges"
#define RANGES_MAGIC 0x5243334cu /* bytes "L3CR" read as little-endian */
#define RANGES_VERSION 1
#define RANGES_HEAD 40
#define RANGES_MIN_LOG2 16 /* 64 KiB */
#define RANGES_MAX_LOG2 40

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The chunk size (log2) of an object of size bytes. */
static unsigned chunk_log2(uint64_t size)
{
    unsigned l = RANGES_MIN_LOG2;
    while (l < RANGES_MAX_LOG2 && ((size + ((uint64_t)1 << l) - 1) >> l) > RANGES_MAX)
        l++;
    return l;
}

int ranges_store(int fd, const struct l3cache_key *key, const void *data, size_t size)
{
    unsigned l = chunk_log2(size);
    uint64_t chunk = (uint64_t)1 << l;
    uint32_t n = (uint32_t)((size + chunk - 1) >> l);
    if (n > RANGES_MAX)
        return -EFBIG;
    uint8_t buf[RANGES_XATTR_MAX];
    memset(buf, 0, RANGES_HEAD);
    put32(buf, RANGES_MAGIC);
    buf[4] = RANGES_VERSION;
    buf[5] = (uint8_t)l;
    put64(buf + 8, size);
    memcpy(buf + 16, key->bytes, 16);
    put32(buf + 32, n);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t o = (uint64_t)i << l, len = size - o < chunk ? size - o : chunk;
        put64(buf + RANGES_HEAD + 8 * i, XXH3_64bits((const uint8_t *)data + o, (size_t)len));
    }
    size_t body = RANGES_HEAD + 8 * (size_t)n;
    put64(buf + body, XXH3_64bits(buf, body));
    return fsetxattr(fd, RANGES_XATTR, buf, body + 8, 0) == 0 ? 0 : -errno;
}

int ranges_load(int fd, const struct l3cache_key *key, uint64_t size, struct ranges *r)
{
    uint8_t buf[RANGES_XATTR_MAX];
    ssize_t got = fgetxattr(fd, RANGES_XATTR, buf, sizeof buf);
    if (got < 0)
        return errno == ERANGE ? -EBADMSG : -errno; /* ENODATA: none (ENOTSUP: none possible) */
    if (got < RANGES_HEAD + 8 || get32(buf) != RANGES_MAGIC || buf[4] != RANGES_VERSION)
        return -EBADMSG;
    size_t body = (size_t)got - 8;
    uint32_t n = get32(buf + 32);
    unsigned l = buf[5];
    if (n > RANGES_MAX || body != RANGES_HEAD + 8 * (size_t)n ||
        get64(buf + body) != XXH3_64bits(buf, body))
        return -EBADMSG;
    if (get64(buf + 8) != size || memcmp(buf + 16, key->bytes, 16) != 0 || l != chunk_log2(size) ||
        n != (uint32_t)((size + ((uint64_t)1 << l) - 1) >> l))
        return -EBADMSG; /* not this object's */
    r->size = size;
    r->log2 = l;
    r->n = n;
    for (uint32_t i = 0; i < n; i++)
        r->sum[i] = get64(buf + RANGES_HEAD + 8 * i);
    return 0;
}

int ranges_match(const struct ranges *r, const uint8_t *buf, uint64_t c0, uint64_t c1)
{
    uint64_t chunk = (uint64_t)1 << r->log2;
    for (uint64_t o = c0; o < c1; o += chunk) {
        uint64_t len = c1 - o < chunk ? c1 - o : chunk;
        if (XXH3_64bits(buf + (o - c0), (size_t)len) != r->sum[o >> r->log2])
            return 0;
    }
    return 1;
}

int ranges_present(int fd, const struct l3cache_key *key, uint64_t size)
{
    struct ranges *r = malloc(sizeof *r);
    int ok = r && ranges_load(fd, key, size, r) == 0;
    free(r);
    return ok;
}

int ranges_check_object(int fd, const struct l3cache_key *key, uint64_t size)
{
    struct ranges *r = malloc(sizeof *r);
    if (!r)
        return -ENOMEM;
    int ret = ranges_load(fd, key, size, r);
    if (ret == -ENODATA || ret == -ENOTSUP) {
        ret = 0; /* none: the whole check is all there is */
    } else if (ret == -EBADMSG) {
        ret = 1; /* one that reads would refuse: not this object's, or damaged */
    } else if (ret == 0) {
        uint8_t *buf;
        size_t got;
        ret = l3cache_read_whole(fd, size, &buf, &got);
        if (ret == 0) {
            ret = got == size && ranges_match(r, buf, 0, size) ? 0 : 1;
            free(buf);
        }
    }
    free(r);
    return ret;
}
