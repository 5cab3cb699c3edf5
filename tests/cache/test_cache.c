/* Tests of libl3cache (cache/), suite "cache" (fixture.c: a fresh temporary
 * tree per test). Most use a stand-in codec (helpers.c) so that faults can be
 * injected and runs stay short; test_cache_verify.c goes through libl3 and
 * compares pixels with libpng. The rooms, one executable:
 *   test_cache.c          keys, sizes, index records, the hit path, single flight
 *   test_cache_repair.c   corrupt and truncated objects and index, stale temps
 *   test_cache_limits.c   the size cap and eviction; full and read-only filesystems
 *   test_cache_procs.c    several processes: kill -9 of writers, statistics, claims
 *   test_cache_verify.c   the real codec; verification before serving
 *   test_cache_private.c  privacy, files removed under the writer, identity
 *   test_vectors.c        known answers for keys and index records (vectors.sh) */
#include <criterion/criterion.h>
#include "tc_timeout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <png.h>
#include <xxhash.h>

#include "helpers.h"
#include "fixture.h"

/* --------------------------------------------------------------- sizes */

Test(cache, parse_size)
{
    uint64_t v;
    cr_assert_eq(l3cache_parse_size("50G", NULL, &v), 0);
    cr_assert_eq(v, 50ull << 30);
    cr_assert_eq(l3cache_parse_size("512M", NULL, &v), 0);
    cr_assert_eq(v, 512ull << 20);
    cr_assert_eq(l3cache_parse_size("1.5K", NULL, &v), 0);
    cr_assert_eq(v, 1536);
    cr_assert_eq(l3cache_parse_size("2GiB", NULL, &v), 0);
    cr_assert_eq(v, 2ull << 30);
    cr_assert_eq(l3cache_parse_size("1000", NULL, &v), 0);
    cr_assert_eq(v, 1000);
    cr_assert_eq(l3cache_parse_size("3t", NULL, &v), 0);
    cr_assert_eq(v, 3ull << 40);

    struct statvfs sv;
    cr_assert_eq(statvfs(root, &sv), 0);
    uint64_t fs_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
    /* the directory need not exist yet: its nearest parent counts */
    char missing[400];
    snprintf(missing, sizeof(missing), "%s/not/yet", root);
    cr_assert_eq(l3cache_parse_size("10%", missing, &v), 0);
    cr_assert(v >= fs_bytes / 10 - 1 && v <= fs_bytes / 10 + 1, "10%% = %" PRIu64 " of %" PRIu64, v, fs_bytes);

    const char *bad[] = {"", "G", "abc", "10X", "101%", "-5M", "1.G", "5MX", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_lt(l3cache_parse_size(bad[i], root, &v), 0, "'%s' accepted", bad[i]);
    cr_assert_lt(l3cache_parse_size("10%", NULL, &v), 0);
    cr_assert_lt(l3cache_parse_size("99999999T", NULL, &v), 0);
}

/* ---------------------------------------------------------------- keys */

Test(cache, key_derivation)
{
    const char a[] = "some png bytes", b[] = "some png bytez";
    struct l3_encode_options e = {0}, e64 = {.tile_width = 64, .tile_height = 64};
    struct l3_encode_options t32 = {.tile_width = 32}, eff = {.effort = 3}, thr = {.threads = 8};
    struct l3cache_key k1, k2, k;
    l3cache_key_compute(a, sizeof(a), 1, &e, &k1);
    l3cache_key_compute(a, sizeof(a), 1, &e, &k2);
    cr_assert_eq(memcmp(&k1, &k2, 16), 0, "same input, same key");
    l3cache_key_compute(a, sizeof(a), 1, &e64, &k);
    cr_assert_eq(memcmp(&k1, &k, 16), 0, "default tile size is 64");
    l3cache_key_compute(a, sizeof(a), 1, &thr, &k);
    cr_assert_eq(memcmp(&k1, &k, 16), 0, "threads do not change the bytes");
    l3cache_key_compute(b, sizeof(b), 1, &e, &k);
    cr_assert_neq(memcmp(&k1, &k, 16), 0, "content");
    l3cache_key_compute(a, sizeof(a), 2, &e, &k);
    cr_assert_neq(memcmp(&k1, &k, 16), 0, "format version");
    l3cache_key_compute(a, sizeof(a), 1, &t32, &k);
    cr_assert_neq(memcmp(&k1, &k, 16), 0, "tile size");
    l3cache_key_compute(a, sizeof(a), 1, &eff, &k);
    cr_assert_neq(memcmp(&k1, &k, 16), 0, "effort");
    l3cache_key_compute(a, sizeof(a) - 1, 1, &e, &k);
    cr_assert_neq(memcmp(&k1, &k, 16), 0, "length");

    /* Known answers (format version 7): efforts -1, 0 and 2 keep the keys
     * they had before the codec's canonical form; effort 1 encodes exactly
     * as 0 and now shares its key (and 3 that of 2, -5 that of -1). */
    static const struct {
        int effort;
        const char *hex;
    } kat[] = {{0, "6c02be459636fb5b188b0e9994525d42"}, {1, "6c02be459636fb5b188b0e9994525d42"},
               {2, "afeca19efb858ea079b9465fe8a4dd59"}, {3, "afeca19efb858ea079b9465fe8a4dd59"},
               {-1, "7261f6356f60d92cff930429106afb9a"}, {-5, "7261f6356f60d92cff930429106afb9a"}};
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        struct l3_encode_options o = {.effort = kat[i].effort};
        char h[33];
        l3cache_key_compute(a, sizeof(a), 7, &o, &k);
        l3cache_key_hex(&k, h);
        cr_assert_str_eq(h, kat[i].hex, "effort %d", kat[i].effort);
    }
    struct l3_encode_options o0 = {.effort = 0}, o1 = {.effort = 1};
    cr_assert_eq(l3cache_params_id(7, &o0), l3cache_params_id(7, &o1));
    cr_assert_eq(l3cache_params_id(7, &o0), 0x7fd88fd20f8d6a37ull, "index parameter id");

    char hex[33], rel[64];
    l3cache_key_hex(&k1, hex);
    l3cache_object_relpath(&k1, rel);
    cr_assert_eq(strlen(hex), 32);
    char want[64];
    snprintf(want, sizeof(want), "objects/%.2s/%s.l3", hex, hex + 2);
    cr_assert_str_eq(rel, want);
}

/* The canonical form the keys use is only right if efforts it merges encode
 * identically: effort 1 and 0 (and 3 and 2) give the same bytes. */
Test(cache, merged_efforts_encode_identically)
{
    make_png("a.png", 150, 70, 11, 1);
    char p[512];
    src_path(p, sizeof(p), "a.png");
    uint8_t *png;
    size_t len;
    cr_assert_not_null(png = tc_slurp(p, &len), "%s", p);
    const int pairs[][2] = {{0, 1}, {2, 3}, {-1, -4}};
    for (size_t i = 0; i < 3; i++) {
        void *x = NULL, *y = NULL;
        size_t nx = 0, ny = 0;
        struct l3_encode_options a = {.effort = pairs[i][0]}, b = {.effort = pairs[i][1]};
        struct l3_encode_options ca, cb;
        l3_encode_options_canonical(&a, &ca);
        l3_encode_options_canonical(&b, &cb);
        cr_assert_eq(memcmp(&ca, &cb, sizeof ca), 0);
        cr_assert_eq(l3_transcode_png(png, len, &a, &x, &nx), L3_OK);
        cr_assert_eq(l3_transcode_png(png, len, &b, &y, &ny), L3_OK);
        cr_assert(nx == ny && memcmp(x, y, nx) == 0, "efforts %d and %d differ", pairs[i][0],
                  pairs[i][1]);
        l3_free(x);
        l3_free(y);
    }
    free(png);
}

Test(cache, record_codec)
{
    struct l3cache_entry e = {
        .src = {.dev = 0x801, .ino = 1234567, .size = 99, .mtime_ns = -5, .ctime_ns = 1700000000123456789},
        .encoded_size = 4242,
    };
    memset(e.key.bytes, 0xab, 16);
    uint8_t rec[L3CACHE_REC_ENTRY_SIZE];
    cr_assert_eq(l3cache_rec_encode_entry(&e, rec), sizeof(rec));
    struct l3cache_entry back;
    int type = 0;
    cr_assert_eq(l3cache_rec_parse(rec, sizeof(rec), &type, &back, NULL, NULL), (long)sizeof(rec));
    cr_assert_eq(type, L3CACHE_REC_ENTRY);
    cr_assert_eq(memcmp(&back.src, &e.src, sizeof(e.src)), 0);
    cr_assert_eq(back.encoded_size, 4242);
    /* every prefix asks for more; every single bit flip is rejected */
    for (size_t n = 0; n < sizeof(rec); n++)
        cr_assert_eq(l3cache_rec_parse(rec, n, &type, &back, NULL, NULL), 0, "prefix %zu", n);
    for (size_t bit = 0; bit < sizeof(rec) * 8; bit++) {
        rec[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        long r = l3cache_rec_parse(rec, sizeof(rec), &type, &back, NULL, NULL);
        cr_assert(r != (long)sizeof(rec), "bit %zu flipped and accepted", bit);
        rec[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    struct l3cache_counters cnt = {.lookups = 7, .write_failures = 3}, cb;
    uint8_t srec[L3CACHE_REC_STATS_SIZE];
    l3cache_rec_encode_stats(77, &cnt, srec);
    uint64_t inst = 0;
    cr_assert_eq(l3cache_rec_parse(srec, sizeof(srec), &type, NULL, &inst, &cb), (long)sizeof(srec));
    cr_assert_eq(type, L3CACHE_REC_STATS);
    cr_assert_eq(inst, 77);
    cr_assert_eq(cb.lookups, 7);
    cr_assert_eq(cb.write_failures, 3);

    char name[160], host[64];
    long pid;
    cr_assert_eq(l3cache_temp_name(name, sizeof(name)), 0);
    cr_assert_eq(l3cache_temp_parse(name, &pid, host, sizeof(host)), 0);
    cr_assert_eq(pid, (long)getpid());
    cr_assert_lt(l3cache_temp_parse("abc.l3", &pid, host, sizeof(host)), 0);
    cr_assert_lt(l3cache_temp_parse(".tmp-12-zz-host", &pid, host, sizeof(host)), 0);
}

/* ------------------------------------------------------- basic get/hit */

Test(cache, miss_then_hit_with_exact_stats)
{
    make_png("a.png", 40, 30, 1, 0);
    make_png("b.png", 40, 30, 2, 1);
    l3cache *c = open_fake(cachedir, 0, NULL);
    struct l3cache_source sa = source_of("a.png");
    uint64_t esize = 0;
    struct l3cache_key k;
    cr_assert_eq(l3cache_index_lookup(c, &sa, &esize, &k), -ENOENT);

    get_ok(c, "a.png", 0);
    get_ok(c, "a.png", 1);
    get_ok(c, "b.png", 0);
    get_ok(c, "a.png", 1);
    get_ok(c, "b.png", 1);
    cr_assert_eq(atomic_load(&fc.calls), 2, "one encode per distinct file");

    cr_assert_eq(l3cache_index_lookup(c, &sa, &esize, &k), 0);
    struct l3cache_object obj;
    cr_assert_eq(get_file(c, "a.png", &obj, NULL), 0);
    cr_assert_eq(esize, obj.size, "index knows the encoded size");
    cr_assert_eq(memcmp(&k, &obj.key, 16), 0);
    char p[512];
    object_path(&k, p, sizeof(p));
    struct stat st;
    cr_assert_eq(stat(p, &st), 0, "object at %s", p);
    cr_assert_eq((uint64_t)st.st_size, esize);
    uint64_t asize = obj.size;
    close(obj.fd);

    struct l3cache_stats s;
    cr_assert_eq(l3cache_get_stats(c, &s), 0);
    cr_assert_eq(s.instance.lookups, 6);
    cr_assert_eq(s.instance.hits, 4);
    cr_assert_eq(s.instance.misses, 2);
    cr_assert_eq(s.instance.encodes, 2);
    struct l3cache_object ob;
    cr_assert_eq(get_file(c, "b.png", &ob, NULL), 0);
    uint64_t bsize = ob.size;
    close(ob.fd);
    cr_assert_eq(s.instance.bytes_written, asize + bsize);
    cr_assert_eq(s.instance.bytes_served, 3 * asize + bsize);
    cr_assert_eq(s.objects, 2);
    cr_assert_eq(s.object_bytes, asize + bsize);
    cr_assert_eq(s.index_entries, 2);
    cr_assert_eq(s.total.lookups, 6, "total includes unflushed counts");
    cr_assert_eq(s.writes_disabled, 0);
    cr_assert_eq(count_names(cachedir, ".tmp-", NULL), 0, "no temp files left");
    l3cache_close(c);
}

Test(cache, identical_pngs_share_one_object)
{
    make_png("a.png", 50, 20, 9, 1);
    char a[512], b[512], cmd[1200];
    src_path(a, sizeof(a), "a.png");
    src_path(b, sizeof(b), "copy.png");
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", a, b);
    cr_assert_eq(system(cmd), 0);
    l3cache *c = open_fake(cachedir, 0, NULL);
    get_ok(c, "a.png", 0);
    get_ok(c, "copy.png", 1); /* another source, same content: no encode */
    cr_assert_eq(atomic_load(&fc.calls), 1);
    cr_assert_eq(count_names(cachedir, "", ".l3"), 1);
    /* both identities are now in the index */
    struct l3cache_source s1 = source_of("a.png"), s2 = source_of("copy.png");
    struct l3cache_key k1, k2;
    cr_assert_eq(l3cache_index_lookup(c, &s1, NULL, &k1), 0);
    cr_assert_eq(l3cache_index_lookup(c, &s2, NULL, &k2), 0);
    cr_assert_eq(memcmp(&k1, &k2, 16), 0);
    l3cache_close(c);
}

Test(cache, persisted_across_reopen_and_stats_cumulative)
{
    make_png("a.png", 33, 17, 3, 1);
    make_png("b.png", 33, 17, 4, 1);
    l3cache *c = open_fake(cachedir, 0, NULL);
    get_ok(c, "a.png", 0);
    get_ok(c, "b.png", 0);
    get_ok(c, "b.png", 1);
    l3cache_close(c);

    /* next run: the index answers without reading the source */
    c = open_fake(cachedir, 0, NULL);
    struct l3cache_source sa = source_of("a.png");
    uint64_t esize = 0;
    cr_assert_eq(l3cache_index_lookup(c, &sa, &esize, NULL), 0);
    cr_assert_gt(esize, FAKE_HDR);
    get_ok(c, "a.png", 1);
    get_ok(c, "b.png", 1);
    cr_assert_eq(atomic_load(&fc.calls), 2, "nothing re-encoded after reopen");
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.instance.lookups, 2);
    cr_assert_eq(s.instance.hits, 2);
    cr_assert_eq(s.total.lookups, 5);
    cr_assert_eq(s.total.hits, 3);
    cr_assert_eq(s.total.encodes, 2);
    cr_assert_eq(s.objects, 2);
    l3cache_close(c);

    /* and a read-only opener sees the same */
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    struct l3cache_options o = {.dir = cachedir, .flags = L3CACHE_READONLY};
    cr_assert_eq(l3cache_open_internal(&o, &in, &c), 0);
    get_ok(c, "a.png", 1);
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.total.lookups, 6);
    l3cache_close(c);
}

Test(cache, format_version_change_misses_cleanly)
{
    make_png("a.png", 20, 20, 5, 1);
    l3cache *c = open_fake(cachedir, 0, NULL);
    struct l3cache_object o1, o2;
    cr_assert_eq(get_file(c, "a.png", &o1, NULL), 0);
    close(o1.fd);
    l3cache_close(c);

    struct l3cache_internal in;
    fake_internal(&in, &fc);
    in.format_version = L3_FORMAT_VERSION + 1;
    c = open_fake(cachedir, 0, &in);
    cr_assert_eq(get_file(c, "a.png", &o2, NULL), 0);
    cr_assert_eq(o2.hit, 0, "a new format version never serves old objects");
    cr_assert_neq(memcmp(&o1.key, &o2.key, 16), 0);
    close(o2.fd);
    get_ok(c, "a.png", 1);
    l3cache_close(c);
    cr_assert_eq(count_names(cachedir, "", ".l3"), 2);

    /* the old version still finds its own object */
    c = open_fake(cachedir, 0, NULL);
    get_ok(c, "a.png", 1);
    cr_assert_eq(atomic_load(&fc.calls), 2);
    l3cache_close(c);
}

Test(cache, modified_source_is_reencoded)
{
    make_png("a.png", 30, 30, 6, 1);
    l3cache *c = open_fake(cachedir, 0, NULL);
    get_ok(c, "a.png", 0);
    struct l3cache_source before = source_of("a.png");
    make_png("a.png", 30, 30, 7, 1); /* same size, new pixels, new ctime */
    struct l3cache_source after = source_of("a.png");
    cr_assert(before.ctime_ns != after.ctime_ns || before.mtime_ns != after.mtime_ns);
    cr_assert_eq(l3cache_index_lookup(c, &after, NULL, NULL), -ENOENT, "stale entry not served");
    get_ok(c, "a.png", 0);
    cr_assert_eq(atomic_load(&fc.calls), 2);
    l3cache_close(c);
}

Test(cache, encode_failure_is_eio_and_counted)
{
    char p[512];
    src_path(p, sizeof(p), "bad.png");
    FILE *f = fopen(p, "w");
    fputs("this is not a png", f);
    fclose(f);
    make_png("ok.png", 10, 10, 1, 0);
    l3cache *c = open_fake(cachedir, 0, NULL);
    struct l3cache_object obj;
    int l3s = 0;
    cr_assert_eq(get_file(c, "bad.png", &obj, &l3s), -EIO);
    cr_assert_eq(l3s, L3_ERR_PNG);
    cr_assert_eq(obj.fd, -1);
    get_ok(c, "ok.png", 0);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.instance.encode_failures, 1);
    cr_assert_eq(s.instance.encodes, 1);
    cr_assert_eq(count_names(cachedir, "", ".l3"), 1);
    l3cache_close(c);
}

Test(cache, bad_arguments)
{
    l3cache *c = NULL;
    struct l3cache_options o = {0};
    cr_assert_eq(l3cache_open(&o, &c), -EINVAL);
    cr_assert_eq(l3cache_open(NULL, &c), -EINVAL);
    o.dir = cachedir;
    o.fsync_policy = 9;
    cr_assert_eq(l3cache_open(&o, &c), -EINVAL);
    c = open_fake(cachedir, 0, NULL);
    struct stat st = {0};
    struct l3cache_object obj;
    struct l3cache_source src;
    l3cache_source_from_stat(&st, &src);
    cr_assert_eq(l3cache_get(c, -1, &src, 0, &obj, NULL), -EINVAL);
    cr_assert_eq(l3cache_get(NULL, 0, &src, 0, &obj, NULL), -EINVAL);
    cr_assert_eq(l3cache_get(c, 0, NULL, 0, &obj, NULL), -EINVAL);
    cr_assert_eq(l3cache_index_lookup(c, NULL, NULL, NULL), -EINVAL);
    l3cache_close(c);
    l3cache_close(NULL);
}

/* ------------------------------------------------------- single flight */

struct sf_arg {
    l3cache *c;
    int r;
    struct l3cache_object obj;
};

static void *sf_worker(void *p)
{
    struct sf_arg *a = p;
    a->r = get_file(a->c, "a.png", &a->obj, NULL);
    return NULL;
}

Test(cache, single_flight_within_process)
{
    make_png("a.png", 64, 64, 8, 1);
    l3cache *c = open_fake(cachedir, 0, NULL);
    atomic_store(&fc.delay_ms, 300);
    enum { N = 8 };
    struct sf_arg args[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        args[i].c = c;
        pthread_create(&t[i], NULL, sf_worker, &args[i]);
    }
    int hits = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(args[i].r, 0);
        expect_object(&args[i].obj, "a.png");
        hits += args[i].obj.hit;
        close(args[i].obj.fd);
    }
    cr_assert_eq(atomic_load(&fc.calls), 1, "%d encodes for one key", atomic_load(&fc.calls));
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.instance.encodes, 1);
    cr_assert_eq(s.instance.lookups, N);
    cr_assert_eq(s.instance.hits + s.instance.misses, N);
    cr_assert_eq(s.instance.hits, (uint64_t)hits);
    l3cache_close(c);
}
