/* record.c — the index log's records (docs/CACHE.md, "Source index"):
 * fixed-size, little-endian, each sealed with an XXH3-64 checksum. */
#include <string.h>

#include "l3_xxh.h"

#include "l3_le.h"
#include "l3cache_internal.h"

static void rec_header(uint8_t *out, int type, size_t len)
{
    l3_wr_u32le(out, L3CACHE_REC_MAGIC);
    out[4] = L3CACHE_REC_VERSION;
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
    l3_wr_u64le(out + 48, (uint64_t)e->src.btime_ns);
    memcpy(out + 56, e->key.bytes, 16);
    l3_wr_u64le(out + 72, e->encoded_size);
    l3_wr_u64le(out + 80, e->params_id);
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

/* The first n counters of a statistics record, in L3CACHE_COUNTERS order;
 * counters the record does not have stay 0. */
static void parse_stats(const uint8_t *buf, size_t n, struct l3cache_counters *c)
{
    const uint8_t *p = buf + 16;
    size_t i = 0;
    memset(c, 0, sizeof *c);
#define ONE(name, desc)                     \
    if (i++ < n) {                          \
        c->name = l3_rd_u64le(p);           \
        p += 8;                             \
    }
    L3CACHE_COUNTERS(ONE)
#undef ONE
}

/* The length a record of this version and type must have (0: not valid);
 * a statistics record of version 2 may hold any number of counters. */
static int length_ok(int version, int type, size_t len)
{
    if (type == L3CACHE_REC_ENTRY)
        return len == (version == 1 ? L3CACHE_REC_ENTRY_V1_SIZE : L3CACHE_REC_ENTRY_SIZE);
    if (type != L3CACHE_REC_STATS)
        return 0;
    if (version == 1)
        return len == L3CACHE_REC_STATS_V1_SIZE;
    return len >= 32 && len <= 24 + 8 * 64 && len % 8 == 0;
}

static void parse_entry(const uint8_t *buf, struct l3cache_entry *e)
{
    e->src.dev = l3_rd_u64le(buf + 8);
    e->src.ino = l3_rd_u64le(buf + 16);
    e->src.size = l3_rd_u64le(buf + 24);
    e->src.mtime_ns = (int64_t)l3_rd_u64le(buf + 32);
    e->src.ctime_ns = (int64_t)l3_rd_u64le(buf + 40);
    e->src.btime_ns = (int64_t)l3_rd_u64le(buf + 48);
    memcpy(e->key.bytes, buf + 56, 16);
    e->encoded_size = l3_rd_u64le(buf + 72);
    e->params_id = l3_rd_u64le(buf + 80);
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
    int version = buf[4], type = buf[5];
    size_t len = l3_rd_u16le(buf + 6);
    if ((version != 1 && version != L3CACHE_REC_VERSION) || !length_ok(version, type, len))
        return -1;
    if (avail < len)
        return 0;
    if (XXH3_64bits(buf, len - 8) != l3_rd_u64le(buf + len - 8))
        return -1;
    *type_ret = type;
    if (type == L3CACHE_REC_ENTRY && version == 1)
        *type_ret = 0; /* identity without birth time: skipped */
    else if (type == L3CACHE_REC_ENTRY && entry_ret)
        parse_entry(buf, entry_ret);
    if (type == L3CACHE_REC_STATS) {
        if (instance_ret)
            *instance_ret = l3_rd_u64le(buf + 8);
        if (stats_ret)
            parse_stats(buf, (len - 24) / 8, stats_ret);
    }
    return (long)len;
}
