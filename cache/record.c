/* record.c — key derivation, object paths, index log records, temp names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "l3cache_internal.h"

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Parameter block: only parameters that change the encoded bytes are part
 * of it (not `threads`, not limits). */
static void param_block(uint8_t params[32], uint32_t format_version,
                        const struct l3_encode_options *enc, uint64_t size)
{
    memset(params, 0, 32);
    memcpy(params, "l3cache1", 8);
    put_u32(params + 8, format_version);
    uint32_t tw = enc && enc->tile_width ? enc->tile_width : L3_DEFAULT_TILE;
    uint32_t th = enc && enc->tile_height ? enc->tile_height : L3_DEFAULT_TILE;
    put_u32(params + 12, tw);
    put_u32(params + 16, th);
    put_u32(params + 20, (uint32_t)(enc ? enc->effort : 0));
    put_u64(params + 24, size);
}

uint64_t l3cache_params_id(uint32_t format_version, const struct l3_encode_options *enc)
{
    uint8_t params[32];
    param_block(params, format_version, enc, 0);
    return XXH3_64bits(params, sizeof(params));
}

void l3cache_key_compute(const void *data, size_t size, uint32_t format_version,
                         const struct l3_encode_options *enc,
                         struct l3cache_key *key_ret)
{
    uint8_t params[32];
    param_block(params, format_version, enc, (uint64_t)size);

    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    if (size)
        XXH3_128bits_update(&st, data, size);
    XXH3_128bits_update(&st, params, sizeof(params));
    XXH128_hash_t h = XXH3_128bits_digest(&st);
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, h);
    memcpy(key_ret->bytes, canon.digest, 16);
}

void l3cache_key_hex(const struct l3cache_key *key, char hex_ret[33])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        hex_ret[2 * i] = digits[key->bytes[i] >> 4];
        hex_ret[2 * i + 1] = digits[key->bytes[i] & 15];
    }
    hex_ret[32] = 0;
}

void l3cache_object_relpath(const struct l3cache_key *key, char path_ret[64])
{
    char hex[33];
    l3cache_key_hex(key, hex);
    snprintf(path_ret, 64, "objects/%.2s/%s.l3", hex, hex + 2);
}

static void rec_header(uint8_t *out, int type, size_t len)
{
    put_u32(out, L3CACHE_REC_MAGIC);
    out[4] = 1; /* record version */
    out[5] = (uint8_t)type;
    put_u16(out + 6, (uint16_t)len);
}

static void rec_seal(uint8_t *out, size_t len)
{
    put_u64(out + len - 8, XXH3_64bits(out, len - 8));
}

size_t l3cache_rec_encode_entry(const struct l3cache_entry *e, uint8_t out[L3CACHE_REC_ENTRY_SIZE])
{
    rec_header(out, L3CACHE_REC_ENTRY, L3CACHE_REC_ENTRY_SIZE);
    put_u64(out + 8, e->src.dev);
    put_u64(out + 16, e->src.ino);
    put_u64(out + 24, e->src.size);
    put_u64(out + 32, (uint64_t)e->src.mtime_ns);
    put_u64(out + 40, (uint64_t)e->src.ctime_ns);
    memcpy(out + 48, e->key.bytes, 16);
    put_u64(out + 64, e->encoded_size);
    put_u64(out + 72, e->params_id);
    rec_seal(out, L3CACHE_REC_ENTRY_SIZE);
    return L3CACHE_REC_ENTRY_SIZE;
}

#define NCOUNTERS 11
static uint64_t *counter_slot(struct l3cache_counters *c, int i)
{
    uint64_t *slots[NCOUNTERS] = {
        &c->lookups, &c->hits, &c->misses, &c->encodes, &c->encode_failures,
        &c->bytes_served, &c->bytes_written, &c->evictions, &c->evicted_bytes,
        &c->corrupt_repaired, &c->write_failures,
    };
    return slots[i];
}

size_t l3cache_rec_encode_stats(uint64_t instance_id, const struct l3cache_counters *c,
                                uint8_t out[L3CACHE_REC_STATS_SIZE])
{
    struct l3cache_counters copy = *c;
    rec_header(out, L3CACHE_REC_STATS, L3CACHE_REC_STATS_SIZE);
    put_u64(out + 8, instance_id);
    for (int i = 0; i < NCOUNTERS; i++)
        put_u64(out + 16 + 8 * i, *counter_slot(&copy, i));
    rec_seal(out, L3CACHE_REC_STATS_SIZE);
    return L3CACHE_REC_STATS_SIZE;
}

long l3cache_rec_parse(const uint8_t *buf, size_t avail, int *type_ret,
                       struct l3cache_entry *entry_ret, uint64_t *instance_ret,
                       struct l3cache_counters *stats_ret)
{
    if (avail < 4)
        return memcmp(buf, "L3CI", avail) == 0 ? 0 : -1;
    if (get_u32(buf) != L3CACHE_REC_MAGIC)
        return -1;
    if (avail < 8)
        return 0;
    int type = buf[5];
    size_t len = get_u16(buf + 6);
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
    if (XXH3_64bits(buf, len - 8) != get_u64(buf + len - 8))
        return -1;
    *type_ret = type;
    if (type == L3CACHE_REC_ENTRY && entry_ret) {
        entry_ret->src.dev = get_u64(buf + 8);
        entry_ret->src.ino = get_u64(buf + 16);
        entry_ret->src.size = get_u64(buf + 24);
        entry_ret->src.mtime_ns = (int64_t)get_u64(buf + 32);
        entry_ret->src.ctime_ns = (int64_t)get_u64(buf + 40);
        memcpy(entry_ret->key.bytes, buf + 48, 16);
        entry_ret->encoded_size = get_u64(buf + 64);
        entry_ret->params_id = get_u64(buf + 72);
    } else if (type == L3CACHE_REC_STATS) {
        if (instance_ret)
            *instance_ret = get_u64(buf + 8);
        if (stats_ret)
            for (int i = 0; i < NCOUNTERS; i++)
                *counter_slot(stats_ret, i) = get_u64(buf + 16 + 8 * i);
    }
    return (long)len;
}

static uint64_t random_u64(void)
{
    uint64_t v = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&v, sizeof(v), 1, f) != 1)
            v = 0;
        fclose(f);
    }
    if (!v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = XXH3_64bits(&ts, sizeof(ts)) ^ ((uint64_t)getpid() << 32);
    }
    return v;
}

static void host_name(char *buf, size_t size)
{
    if (gethostname(buf, size) != 0 || !buf[0])
        snprintf(buf, size, "localhost");
    buf[size - 1] = 0;
    for (char *p = buf; *p; p++)
        if (*p == '/' || *p == '-' || (unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            *p = '_';
}

int l3cache_temp_name(char *buf, size_t bufsize)
{
    char host[64];
    host_name(host, sizeof(host));
    int n = snprintf(buf, bufsize, ".tmp-%ld-%016llx-%s", (long)getpid(),
                     (unsigned long long)random_u64(), host);
    return n > 0 && (size_t)n < bufsize ? 0 : -ENAMETOOLONG;
}

int l3cache_temp_parse(const char *name, long *pid_ret, char *host_ret, size_t hostsize)
{
    if (strncmp(name, ".tmp-", 5) != 0)
        return -EINVAL;
    char *end;
    errno = 0;
    long pid = strtol(name + 5, &end, 10);
    if (errno || end == name + 5 || *end != '-' || pid <= 0)
        return -EINVAL;
    const char *r = end + 1;
    for (int i = 0; i < 16; i++)
        if (!r[i] || !strchr("0123456789abcdef", r[i]))
            return -EINVAL;
    if (r[16] != '-')
        return -EINVAL;
    *pid_ret = pid;
    if (host_ret && hostsize) {
        snprintf(host_ret, hostsize, "%s", r + 17);
    }
    return 0;
}

/* Shared with cache.c */
void l3cache_host_name(char *buf, size_t size);
void l3cache_host_name(char *buf, size_t size)
{
    host_name(buf, size);
}
uint64_t l3cache_random_u64(void);
uint64_t l3cache_random_u64(void)
{
    return random_u64();
}
