/* record.c — the index log's records (docs/CACHE.md, "Source index"):
 * fixed-size, little-endian, each sealed with an XXH3-64 checksum. */
#include <string.h>

#include <xxhash.h>

#include "l3_le.h"
#include "l3cache_internal.h"

static void rec_header(uint8_t *out, int type, size_t len)
{
    l3_wr_u32le(out, L3CACHE_REC_MAGIC);
    out[4] = 1; /* record version */
    out[5] = (uint8_t)type;
    l3_wr_u16le(out + 6, (uint16_t)len);
}

static void rec_seal(uint8_t *out, size_t len)
{
    l3_wr_u64le(out + len - 8, XXH3_64bits(out, len - 8));
}

size_t l3cache_rec_encode_entry(const struct l3cache_entry *e, uint8_t out[L3CACHE_REC_ENTRY_SIZE])
{
    rec_header(out, L3CACHE_REC_ENTRY, L3CACHE_REC_ENTRY_SIZE);
    l3_wr_u64le(out + 8, e->src.dev);
    l3_wr_u64le(out + 16, e->src.ino);
    l3_wr_u64le(out + 24, e->src.size);
    l3_wr_u64le(out + 32, (uint64_t)e->src.mtime_ns);
    l3_wr_u64le(out + 40, (uint64_t)e->src.ctime_ns);
    memcpy(out + 48, e->key.bytes, 16);
    l3_wr_u64le(out + 64, e->encoded_size);
    l3_wr_u64le(out + 72, e->params_id);
    rec_seal(out, L3CACHE_REC_ENTRY_SIZE);
    return L3CACHE_REC_ENTRY_SIZE;
}

size_t l3cache_rec_encode_stats(uint64_t instance_id, const struct l3cache_counters *c,
                                uint8_t out[L3CACHE_REC_STATS_SIZE])
{
    rec_header(out, L3CACHE_REC_STATS, L3CACHE_REC_STATS_SIZE);
    l3_wr_u64le(out + 8, instance_id);
    uint8_t *p = out + 16;
#define ONE(name, desc)             \
    l3_wr_u64le(p, c->name);        \
    p += 8;
    L3CACHE_COUNTERS(ONE)
#undef ONE
    rec_seal(out, L3CACHE_REC_STATS_SIZE);
    return L3CACHE_REC_STATS_SIZE;
}

static void parse_stats(const uint8_t *buf, struct l3cache_counters *c)
{
    const uint8_t *p = buf + 16;
#define ONE(name, desc)             \
    c->name = l3_rd_u64le(p);       \
    p += 8;
    L3CACHE_COUNTERS(ONE)
#undef ONE
}

long l3cache_rec_parse(const uint8_t *buf, size_t avail, int *type_ret,
                       struct l3cache_entry *entry_ret, uint64_t *instance_ret,
                       struct l3cache_counters *stats_ret)
{
    if (avail < 4)
        return memcmp(buf, "L3CI", avail) == 0 ? 0 : -1;
    if (l3_rd_u32le(buf) != L3CACHE_REC_MAGIC)
        return -1;
    if (avail < 8)
        return 0;
    int type = buf[5];
    size_t len = l3_rd_u16le(buf + 6);
    size_t want;
    if (buf[4] != 1)
        return -1;
    if (type == L3CACHE_REC_ENTRY)
        want = L3CACHE_REC_ENTRY_SIZE;
    else if (type == L3CACHE_REC_STATS)
        want = L3CACHE_REC_STATS_SIZE;
    else
        return -1;
    if (len != want)
        return -1;
    if (avail < len)
        return 0;
    if (XXH3_64bits(buf, len - 8) != l3_rd_u64le(buf + len - 8))
        return -1;
    *type_ret = type;
    if (type == L3CACHE_REC_ENTRY && entry_ret) {
        entry_ret->src.dev = l3_rd_u64le(buf + 8);
        entry_ret->src.ino = l3_rd_u64le(buf + 16);
        entry_ret->src.size = l3_rd_u64le(buf + 24);
        entry_ret->src.mtime_ns = (int64_t)l3_rd_u64le(buf + 32);
        entry_ret->src.ctime_ns = (int64_t)l3_rd_u64le(buf + 40);
        memcpy(entry_ret->key.bytes, buf + 48, 16);
        entry_ret->encoded_size = l3_rd_u64le(buf + 64);
        entry_ret->params_id = l3_rd_u64le(buf + 72);
    } else if (type == L3CACHE_REC_STATS) {
        if (instance_ret)
            *instance_ret = l3_rd_u64le(buf + 8);
        if (stats_ret)
            parse_stats(buf, stats_ret);
    }
    return (long)len;
}
