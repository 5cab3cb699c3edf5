/* l3cache_internal.h — knobs of libl3cache that are not part of the public
 * API: codec hooks (tests inject a fake encoder for fault injection), timing
 * intervals, the key function with an explicit format version, the index
 * record codec and the temp file naming. Used by the cache sources, the tests and the
 * test helper programs. Not installed.
 */
#ifndef L3CACHE_INTERNAL_H
#define L3CACHE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "l3cache.h"

/* Encodes a PNG held in memory. Returns 0 or an enum l3_status value; on
 * success *out_ret is a malloc'ed buffer released with free(). */
typedef int (*l3cache_encode_fn)(void *ctx, const void *png, size_t png_size,
                                 const struct l3_encode_options *opts,
                                 void **out_ret, size_t *size_ret);
/* Checks an object. `data` holds the first `size` bytes of an object whose
 * total size is `total`; returns 0 when valid, an enum l3_status value when
 * not, or -1 with *needed_ret set when it needs a longer prefix. `level`:
 * L3CACHE_CHECK_HEADER (a prefix), _PAYLOAD (data holds the whole object:
 * header and payload checksums), _WHOLE (also every tile's framing). */
enum { L3CACHE_CHECK_HEADER = 0, L3CACHE_CHECK_PAYLOAD = 1, L3CACHE_CHECK_WHOLE = 2 };
typedef int (*l3cache_check_fn)(void *ctx, const void *data, size_t size,
                                uint64_t total, int level, size_t *needed_ret);

/* Where an object's payload is and the checksum it must have, from a header
 * prefix that passed the L3CACHE_CHECK_HEADER check: 0, or an enum l3_status
 * value. Lets the payload check stream the object in small reads. */
typedef int (*l3cache_payload_fn)(void *ctx, const void *prefix, size_t size, uint64_t total,
                                  uint64_t *offset_ret, uint64_t *xxh3_64_ret);

struct l3cache_internal {
    l3cache_encode_fn encode;   /* NULL: l3_transcode_png */
    l3cache_check_fn check;     /* NULL: l3_read_info / l3_verify */
    l3cache_payload_fn payload; /* NULL: l3_read_layout with the default check;
                                   with another check, the payload level reads
                                   the whole object and asks `check` */
    void *ctx;
    uint32_t format_version;    /* 0: L3_FORMAT_VERSION (part of the key) */
    int verify_full;            /* 1: every hit runs the whole-object check */
    unsigned flush_interval_ms; /* stats flush period; 0: 10 s */
    unsigned scan_interval_ms;  /* eviction scan period; 0: 60 s */
    unsigned touch_interval_s;  /* min age of an atime before a hit refreshes
                                   it; 0: 60 s; UINT32_MAX: always */
    unsigned reenable_after_s;  /* retry writes this long after a failure;
                                   0: 60 s */
    unsigned stale_temp_s;      /* temp files older than this are removed at
                                   open (any host); 0: 15 min */
    int no_background;          /* 1: no background thread (tests drive gc) */
    /* claims (docs/CACHE.md, "Several processes and hosts") */
    unsigned claim_beat_ms;     /* heartbeat period of held claims; 0: 1 s */
    unsigned claim_stale_ms;    /* a claim whose mtime did not move for this
                                   long is taken over; 0: 10 s */
    unsigned claim_wait_ms;     /* longest wait for another's claim before
                                   encoding anyway; 0: 120 s */
    int no_claims;              /* 1: never claim (tests of the old behaviour) */
    uint64_t buffer_budget;     /* bytes all readers' buffers may hold at once
                                   (reader.c); 0: 64 MiB */
    /* fault injection: called after an object's temp file is written and
     * closed, before it is linked to its name (tmprel is relative to the
     * cache directory, dirfd); NULL: nothing */
    void (*before_link)(void *ctx, int dirfd, const char *tmprel);
};

int l3cache_open_internal(const struct l3cache_options *opts,
                          const struct l3cache_internal *internal,
                          l3cache **cache_ret);

/* The key of some source bytes under the given format version. */
void l3cache_key_compute(const void *data, size_t size, uint32_t format_version,
                         const struct l3_encode_options *enc,
                         struct l3cache_key *key_ret);
/* 32 lowercase hex digits and a NUL. */
void l3cache_key_hex(const struct l3cache_key *key, char hex_ret[33]);
/* "objects/ab/cdef....l3" relative to the cache directory. */
void l3cache_object_relpath(const struct l3cache_key *key, char path_ret[64]);

/* Index log records (docs/CACHE.md). */
#define L3CACHE_REC_MAGIC 0x4943334cu /* bytes "L3CI" read as little-endian */
#define L3CACHE_REC_ENTRY 1
#define L3CACHE_REC_STATS 2
/* Record version 2 (since the birth time joined the identity): entries of
 * version 1 are skipped (their identity cannot tell a reused inode apart),
 * statistics records of both versions are read. A statistics record holds
 * however many counters its writer knew (its length says): a reader takes
 * the ones it knows and ignores the rest. */
#define L3CACHE_REC_VERSION 2
#define L3CACHE_REC_ENTRY_SIZE 96
#define L3CACHE_REC_ENTRY_V1_SIZE 88
#define L3CACHE_REC_STATS_SIZE (24 + 8 * L3CACHE_NCOUNTERS)
#define L3CACHE_REC_STATS_V1_SIZE 112 /* 11 counters */
#define L3CACHE_REC_MAX 4096

struct l3cache_entry {
    struct l3cache_source src;
    struct l3cache_key key;
    uint64_t encoded_size;
    uint64_t params_id; /* l3cache_params_id(): entries of other format
                           versions or encoder parameters never match */
};
uint64_t l3cache_params_id(uint32_t format_version, const struct l3_encode_options *enc);

size_t l3cache_rec_encode_entry(const struct l3cache_entry *e, uint8_t out[L3CACHE_REC_ENTRY_SIZE]);
size_t l3cache_rec_encode_stats(uint64_t instance_id, const struct l3cache_counters *c,
                                uint8_t out[L3CACHE_REC_STATS_SIZE]);
/* Parses one record at buf[0..avail). Returns its length (> 0) and sets
 * *type_ret when a whole valid record is there (0 for a valid record to skip:
 * a version-1 entry); 0 when more bytes are needed (the record may still be
 * being written); -1 when the bytes at buf are not a valid record (skip one
 * byte and resync). */
long l3cache_rec_parse(const uint8_t *buf, size_t avail, int *type_ret,
                       struct l3cache_entry *entry_ret, uint64_t *instance_ret,
                       struct l3cache_counters *stats_ret);

/* Temp file names: ".tmp-<pid>-<16 hex random>-<host>". */
int l3cache_temp_name(char *buf, size_t bufsize);
/* This host's name as temp files and claims carry it. */
void l3cache_host_name(char *buf, size_t size);
/* Parses a temp name; returns 0 and pid/host when it is one. */
int l3cache_temp_parse(const char *name, long *pid_ret, char *host_ret, size_t hostsize);

/* Rescans the objects now (count, bytes), without evicting. */
int l3cache_rescan(l3cache *cache);

#endif /* L3CACHE_INTERNAL_H */
