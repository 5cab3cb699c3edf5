/* test_vectors.c — known-answer vectors of the cache's persistent formats:
 * object keys, the index parameter id, and the index log's entry and
 * statistics records. The answers come from tests/cache/vectors.sh, which
 * lays the bytes out from docs/CACHE.md and hashes them with xxhsum, not
 * with the cache's code; a change here changes every cache on disk. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l3cache_internal.h"
#include "tc_file.h"

static void from_hex(const char *hex, uint8_t *out, size_t n)
{
    cr_assert_eq(strlen(hex), 2 * n, "vector of %zu hex digits, want %zu", strlen(hex), 2 * n);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        cr_assert_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

static const char s1[] = "L3 cache key vector"; /* 19 bytes, no NUL */

Test(vectors, object_keys)
{
    static const struct {
        const void *src;
        size_t n;
        struct l3_encode_options eo;
        const char *key;
    } v[] = {
        {"", 0, {0}, "f524965c4a0907a0bec113204ffeee1e"},
        {s1, sizeof s1 - 1, {0}, "278b0969f51bbd8db8fc11036291addc"},
        {s1, sizeof s1 - 1, {.tile_width = 64, .tile_height = 64, .effort = 1, .threads = 4},
         "278b0969f51bbd8db8fc11036291addc"}, /* the same canonical parameters */
        {s1, sizeof s1 - 1, {.tile_width = 32, .tile_height = 16, .effort = 2},
         "f25f4a50d52362137a88a082c085a696"},
        {s1, sizeof s1 - 1, {.effort = -1}, "21ad62977ced039eb722c62a01e5a497"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        struct l3cache_key k;
        char hex[33], rel[64], want_rel[64];
        l3cache_key_compute(v[i].src, v[i].n, 1, &v[i].eo, &k);
        l3cache_key_hex(&k, hex);
        cr_assert_str_eq(hex, v[i].key, "vector %zu", i);
        l3cache_object_relpath(&k, rel);
        snprintf(want_rel, sizeof want_rel, "objects/%.2s/%s.l3", v[i].key, v[i].key + 2);
        cr_assert_str_eq(rel, want_rel);
    }
    /* a real PNG: the pinned tests/golden/rgb8.png */
    const char *root = getenv("L3_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/rgb8.png", root ? root : ".");
    size_t n;
    void *png = tc_slurp(path, &n);
    cr_assert_not_null(png, "%s", path);
    struct l3_encode_options e0 = {0};
    struct l3cache_key k;
    char hex[33];
    l3cache_key_compute(png, n, 1, &e0, &k);
    l3cache_key_hex(&k, hex);
    cr_assert_str_eq(hex, "2283fe4e3f2543ccb45fefce2a3a6e4e", "key of %s", path);
    free(png);
    cr_assert_eq(l3cache_params_id(1, &e0), 0x7367fbbb7d1a0c83ull, "index parameter id");
}

/* Version 2 entry: the identity with its birth time. */
Test(vectors, index_entry_record)
{
    static const char want_hex[] =
        "4c3343490201600008070605040302019210000000000000820300000000000015cd853dfe9c9717"
        "fbffffffffffffffb1687e1386573416278b0969f51bbd8db8fc11036291addc1808000000000000"
        "830c1a7dbbfb6773853dcc628b1e750b";
    uint8_t want[L3CACHE_REC_ENTRY_SIZE], got[L3CACHE_REC_ENTRY_SIZE];
    from_hex(want_hex, want, sizeof want);
    struct l3cache_entry e;
    memset(&e, 0, sizeof e);
    e.src.dev = 0x0102030405060708ull;
    e.src.ino = 4242;
    e.src.size = 898;
    e.src.mtime_ns = 1700000000123456789ll;
    e.src.ctime_ns = -5;
    e.src.btime_ns = 1600000000987654321ll;
    from_hex("278b0969f51bbd8db8fc11036291addc", e.key.bytes, 16);
    e.encoded_size = 2072;
    e.params_id = 0x7367fbbb7d1a0c83ull;
    cr_assert_eq(l3cache_rec_encode_entry(&e, got), sizeof got);
    cr_assert_eq(memcmp(got, want, sizeof want), 0, "entry record bytes");
    struct l3cache_entry back;
    int type = 0;
    cr_assert_eq(l3cache_rec_parse(want, sizeof want, &type, &back, NULL, NULL), (long)sizeof want);
    cr_assert_eq(type, L3CACHE_REC_ENTRY);
    cr_assert(back.src.dev == e.src.dev && back.src.ino == e.src.ino && back.src.size == 898 &&
                  back.src.mtime_ns == e.src.mtime_ns && back.src.ctime_ns == -5 &&
                  back.src.btime_ns == e.src.btime_ns &&
                  memcmp(back.key.bytes, e.key.bytes, 16) == 0 && back.encoded_size == 2072 &&
                  back.params_id == e.params_id,
              "entry record fields");
}

/* A version 1 entry (no birth time, written before version 2) is a valid
 * record that is skipped: its identity cannot tell a reused inode apart. */
Test(vectors, index_entry_record_v1_skipped)
{
    static const char v1_hex[] =
        "4c3343490101580008070605040302019210000000000000820300000000000015cd853dfe9c9717"
        "fbffffffffffffff278b0969f51bbd8db8fc11036291addc1808000000000000830c1a7dbbfb6773"
        "6fe816c88e85cac9";
    uint8_t v1[L3CACHE_REC_ENTRY_V1_SIZE];
    from_hex(v1_hex, v1, sizeof v1);
    struct l3cache_entry back;
    int type = -1;
    cr_assert_eq(l3cache_rec_parse(v1, sizeof v1, &type, &back, NULL, NULL), (long)sizeof v1);
    cr_assert_eq(type, 0, "a version 1 entry is skipped");
    v1[9] ^= 1; /* and its checksum still guards it */
    cr_assert_eq(l3cache_rec_parse(v1, sizeof v1, &type, &back, NULL, NULL), -1);
}

/* Version 2 statistics: every counter of L3CACHE_COUNTERS (14). */
Test(vectors, index_stats_record)
{
    static const char want_hex[] =
        "4c334349020288008877665544332211e903000000000000d207000000000000bb0b000000000000"
        "a40f0000000000008d1300000000000076170000000000005f1b000000000000481f000000000000"
        "31230000000000001a27000000000000032b000000000000ec2e000000000000d532000000000000"
        "be36000000000000ba9cdc7c0b9127f7";
    uint8_t want[L3CACHE_REC_STATS_SIZE], got[L3CACHE_REC_STATS_SIZE];
    from_hex(want_hex, want, sizeof want);
    /* counters 1001, 2002, ... in the order of L3CACHE_COUNTERS (docs/CACHE.md) */
    struct l3cache_counters c;
    uint64_t i = 0;
#define SET(name, desc) c.name = ++i * 1001;
    L3CACHE_COUNTERS(SET)
#undef SET
    cr_assert_eq(i, 14, "the vector holds 14 counters");
    cr_assert_eq(l3cache_rec_encode_stats(0x1122334455667788ull, &c, got), sizeof got);
    cr_assert_eq(memcmp(got, want, sizeof want), 0, "statistics record bytes");
    struct l3cache_counters back;
    uint64_t inst = 0;
    int type = 0;
    cr_assert_eq(l3cache_rec_parse(want, sizeof want, &type, NULL, &inst, &back), (long)sizeof want);
    cr_assert_eq(type, L3CACHE_REC_STATS);
    cr_assert_eq(inst, 0x1122334455667788ull);
    cr_assert_eq(memcmp(&back, &c, sizeof c), 0, "statistics record counters");
}

/* A version 1 statistics record (11 counters) is read: its counters, the
 * rest 0. */
Test(vectors, index_stats_record_v1_read)
{
    static const char v1_hex[] =
        "4c334349010270008877665544332211e903000000000000d207000000000000bb0b000000000000"
        "a40f0000000000008d1300000000000076170000000000005f1b000000000000481f000000000000"
        "31230000000000001a27000000000000032b000000000000da9cae09cd28861f";
    uint8_t v1[L3CACHE_REC_STATS_V1_SIZE];
    from_hex(v1_hex, v1, sizeof v1);
    struct l3cache_counters back, want;
    memset(&want, 0, sizeof want);
    uint64_t i = 0;
#define SET(name, desc) want.name = ++i <= 11 ? i * 1001 : 0;
    L3CACHE_COUNTERS(SET)
#undef SET
    uint64_t inst = 0;
    int type = 0;
    cr_assert_eq(l3cache_rec_parse(v1, sizeof v1, &type, NULL, &inst, &back), (long)sizeof v1);
    cr_assert_eq(type, L3CACHE_REC_STATS);
    cr_assert_eq(inst, 0x1122334455667788ull);
    cr_assert_eq(memcmp(&back, &want, sizeof want), 0, "the 11 counters of version 1");
}
