/* Tests of libl3cache (cache/): keys, index, objects, single flight,
 * corruption, eviction, faults (full and read-only filesystems, kill -9 of
 * writers), statistics and the `l3fs cache` CLI. Most tests use a stand-in
 * codec (helpers.c) so that faults can be injected and runs stay short; the
 * `real_codec` tests go through libl3 and compare pixels with libpng. */
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

/* ------------------------------------------------------------ fixture */

static char root[256];
static char srcdir[300];
static char cachedir[300];
static char mnt[300];
static int mounted;

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void setup(void)
{
    snprintf(root, sizeof(root), "/tmp/l3cache-test-XXXXXX");
    cr_assert_not_null(mkdtemp(root));
    snprintf(srcdir, sizeof(srcdir), "%s/src", root);
    snprintf(cachedir, sizeof(cachedir), "%s/cache", root);
    snprintf(mnt, sizeof(mnt), "%s/mnt", root);
    cr_assert_eq(mkdir(srcdir, 0755), 0);
    mounted = 0;
}

static void teardown(void)
{
    if (mounted)
        umount2(mnt, MNT_DETACH);
    nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(cache, .init = setup, .fini = teardown, .timeout = TC_TIMEOUT(120));

static struct fake_codec fc;

/* Opens a cache with the fake codec (or the caller's tweaked internals). */
static l3cache *open_with(const struct l3cache_options *o, struct l3cache_internal *tweak)
{
    struct l3cache_internal in;
    if (tweak)
        in = *tweak;
    else
        fake_internal(&in, &fc);
    l3cache *c = NULL;
    int r = l3cache_open_internal(o, &in, &c);
    cr_assert_eq(r, 0, "open %s: %s", o->dir, strerror(-r));
    return c;
}

static l3cache *open_fake(const char *dir, uint64_t max_bytes, struct l3cache_internal *tweak)
{
    struct l3cache_options o = {.dir = dir, .max_bytes = max_bytes,
                                .fsync_policy = L3CACHE_FSYNC_OBJECT};
    l3cache *c = open_with(&o, tweak);
    /* waits for the first background scan: object counts are exact after */
    struct l3cache_stats s;
    cr_assert_eq(l3cache_get_stats(c, &s), 0);
    return c;
}

static void src_path(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", srcdir, name);
}

static void make_png(const char *name, unsigned w, unsigned h, unsigned seed, int noise)
{
    char p[512];
    src_path(p, sizeof(p), name);
    cr_assert_eq(write_png(p, w, h, seed, noise), 0, "write_png %s", p);
}

/* l3cache_get on a source file. */
static int get_file(l3cache *c, const char *name, struct l3cache_object *obj, int *l3s)
{
    char p[512];
    src_path(p, sizeof(p), name);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "open %s", p);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    int r = get_fd(c, fd, obj, l3s);
    close(fd);
    return r;
}

/* The object fd holds exactly the fake encoding of the source. */
static void expect_object(const struct l3cache_object *obj, const char *name)
{
    char p[512];
    src_path(p, sizeof(p), name);
    uint8_t *want, *got;
    size_t want_size;
    cr_assert_eq(fake_expected(p, &want, &want_size), 0);
    long n = read_fd(obj->fd, &got);
    cr_assert_eq((size_t)n, want_size, "object of %s has %ld bytes, want %zu", name, n, want_size);
    cr_assert_eq(obj->size, want_size);
    cr_assert_eq(memcmp(got, want, want_size), 0, "object bytes of %s differ", name);
    free(want);
    free(got);
}

static void get_ok(l3cache *c, const char *name, int want_hit)
{
    struct l3cache_object obj;
    int r = get_file(c, name, &obj, NULL);
    cr_assert_eq(r, 0, "get %s: %s", name, strerror(-r));
    if (want_hit >= 0)
        cr_assert_eq(obj.hit, want_hit, "%s: hit=%d, want %d", name, obj.hit, want_hit);
    expect_object(&obj, name);
    close(obj.fd);
}

static struct l3cache_source source_of(const char *name)
{
    char p[512];
    src_path(p, sizeof(p), name);
    struct l3cache_source s;
    cr_assert_eq(l3cache_identify(AT_FDCWD, p, 0, NULL, &s), 0);
    return s;
}

/* Counts entries under dir (recursively) whose name starts with prefix and,
 * when suffix is not NULL, ends with it. */
static int count_names(const char *dir, const char *prefix, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char p[1024];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            n += count_names(p, prefix, suffix);
            continue;
        }
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0 &&
            (!suffix || (l >= strlen(suffix) && !strcmp(de->d_name + l - strlen(suffix), suffix))))
            n++;
    }
    closedir(d);
    return n;
}

static void object_path(const struct l3cache_key *key, char *buf, size_t size)
{
    char rel[64];
    l3cache_object_relpath(key, rel);
    snprintf(buf, size, "%s/%s", cachedir, rel);
}

static void flip_byte(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0, "open %s", path);
    uint8_t b;
    cr_assert_eq(pread(fd, &b, 1, off), 1);
    b ^= 0x10;
    cr_assert_eq(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

static int mount_tmpfs(const char *opts)
{
    mkdir(mnt, 0755);
    if (mount("tmpfs", mnt, "tmpfs", 0, opts) != 0)
        return -errno;
    mounted = 1;
    return 0;
}

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

/* ---------------------------------------------------------- corruption */

Test(cache, corrupt_object_header_is_repaired_never_served)
{
    make_png("a.png", 30, 30, 10, 1);
    l3cache *c = open_fake(cachedir, 0, NULL);
    struct l3cache_object obj;
    cr_assert_eq(get_file(c, "a.png", &obj, NULL), 0);
    close(obj.fd);
    char p[512];
    object_path(&obj.key, p, sizeof(p));
    flip_byte(p, 9); /* inside the checksummed header */
    get_ok(c, "a.png", 0);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.instance.corrupt_repaired, 1);
    cr_assert_eq(s.instance.encodes, 2);
    get_ok(c, "a.png", 1); /* the re-created object is good */
    l3cache_close(c);
}

Test(cache, truncated_object_is_repaired)
{
    make_png("a.png", 30, 30, 11, 1);
    l3cache *c = open_fake(cachedir, 0, NULL);
    struct l3cache_object obj;
    cr_assert_eq(get_file(c, "a.png", &obj, NULL), 0);
    close(obj.fd);
    char p[512];
    object_path(&obj.key, p, sizeof(p));
    cr_assert_eq(truncate(p, (off_t)obj.size - 100), 0);
    get_ok(c, "a.png", 0);
    cr_assert_eq(truncate(p, 10), 0); /* shorter than any header */
    get_ok(c, "a.png", 0);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.instance.corrupt_repaired, 2);
    l3cache_close(c);
}

Test(cache, payload_bitflip_found_by_verify_and_full_check)
{
    make_png("a.png", 30, 30, 12, 1);
    make_png("b.png", 30, 30, 13, 1);
    l3cache *c = open_fake(cachedir, 0, NULL);
    struct l3cache_object oa, ob;
    cr_assert_eq(get_file(c, "a.png", &oa, NULL), 0);
    cr_assert_eq(get_file(c, "b.png", &ob, NULL), 0);
    close(oa.fd);
    close(ob.fd);
    char pa[512], pb[512];
    object_path(&oa.key, pa, sizeof(pa));
    object_path(&ob.key, pb, sizeof(pb));
    flip_byte(pa, (off_t)oa.size - 5);
    flip_byte(pb, (off_t)ob.size - 5);
    uint64_t checked = 0, bad = 0;
    cr_assert_eq(l3cache_verify_all(c, &checked, &bad), 0);
    cr_assert_eq(checked, 2);
    cr_assert_eq(bad, 2);
    struct stat st;
    cr_assert_neq(stat(pa, &st), 0, "bad object removed");
    l3cache_close(c);

    /* with L3CACHE_VERIFY_FULL a hit checks the payload too */
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    struct l3cache_options o = {.dir = cachedir, .flags = L3CACHE_VERIFY_FULL};
    cr_assert_eq(l3cache_open_internal(&o, &in, &c), 0);
    get_ok(c, "a.png", 0);
    object_path(&oa.key, pa, sizeof(pa));
    flip_byte(pa, (off_t)oa.size - 1);
    get_ok(c, "a.png", 0);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.instance.corrupt_repaired, 1);
    get_ok(c, "a.png", 1);
    l3cache_close(c);
}

Test(cache, index_bitflips_and_torn_tail)
{
    enum { N = 12 };
    char names[N][16];
    /* no periodic stats flush while the entries are written: the offsets
     * below assume the N entry records come first and one stats record
     * (written at close) follows */
    struct l3cache_internal quiet;
    fake_internal(&quiet, &fc);
    quiet.flush_interval_ms = 600000;
    l3cache *c = open_fake(cachedir, 0, &quiet);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "f%02d.png", i);
        make_png(names[i], 16, 16, 100 + (unsigned)i, 1);
        get_ok(c, names[i], 0);
    }
    l3cache_close(c);
    char log[512];
    snprintf(log, sizeof(log), "%s/index.log", cachedir);
    struct stat st;
    cr_assert_eq(stat(log, &st), 0);
    /* the log holds N entry records and then one stats record */
    cr_assert_eq((size_t)st.st_size, N * (size_t)L3CACHE_REC_ENTRY_SIZE + L3CACHE_REC_STATS_SIZE);
    /* flip a bit in record 3's key and in record 7's magic */
    flip_byte(log, 3 * L3CACHE_REC_ENTRY_SIZE + 50);
    flip_byte(log, 7 * L3CACHE_REC_ENTRY_SIZE + 1);
    /* a torn record at the end, as a crash in the middle of a write leaves */
    uint8_t rec[L3CACHE_REC_ENTRY_SIZE];
    struct l3cache_entry junk = {.encoded_size = 1};
    l3cache_rec_encode_entry(&junk, rec);
    int fd = open(log, O_WRONLY | O_APPEND);
    cr_assert_eq(write(fd, rec, 40), 40);
    close(fd);

    atomic_store(&fc.calls, 0);
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    c = open_fake(cachedir, 0, &in); /* sole user: compacts the damaged log */
    for (int i = 0; i < N; i++) {
        struct l3cache_source s = source_of(names[i]);
        int r = l3cache_index_lookup(c, &s, NULL, NULL);
        if (i == 3 || i == 7)
            cr_assert_eq(r, -ENOENT, "damaged record %d ignored", i);
        else
            cr_assert_eq(r, 0, "intact record %d lost", i);
    }
    for (int i = 0; i < N; i++)
        get_ok(c, names[i], 1); /* objects are still there: all hits */
    cr_assert_eq(atomic_load(&fc.calls), 0);
    l3cache_close(c);
    /* after compaction every record is whole again */
    c = open_fake(cachedir, 0, NULL);
    for (int i = 0; i < N; i++) {
        struct l3cache_source s = source_of(names[i]);
        cr_assert_eq(l3cache_index_lookup(c, &s, NULL, NULL), 0, "record %d", i);
    }
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.total.lookups, 2 * N, "stats records survived compaction");
    l3cache_close(c);
}

Test(cache, torn_tail_followed_by_new_appends_of_another_process)
{
    /* while another process holds the directory, no compaction happens:
     * records appended after a torn one must still be found (resync) */
    make_png("a.png", 16, 16, 1, 1);
    make_png("b.png", 16, 16, 2, 1);
    l3cache *holder = open_fake(cachedir, 0, NULL);
    get_ok(holder, "a.png", 0);
    char log[512];
    snprintf(log, sizeof(log), "%s/index.log", cachedir);
    uint8_t rec[L3CACHE_REC_ENTRY_SIZE];
    struct l3cache_entry junk = {.encoded_size = 1};
    l3cache_rec_encode_entry(&junk, rec);
    int fd = open(log, O_WRONLY | O_APPEND);
    cr_assert_eq(write(fd, rec, 50), 50);
    close(fd);
    l3cache *c2 = open_fake(cachedir, 0, NULL);
    get_ok(c2, "b.png", 0);
    struct l3cache_source sb = source_of("b.png"), sa = source_of("a.png");
    cr_assert_eq(l3cache_index_lookup(holder, &sb, NULL, NULL), 0, "holder sees c2's entry");
    l3cache_close(c2);
    l3cache *c3 = open_fake(cachedir, 0, NULL);
    cr_assert_eq(l3cache_index_lookup(c3, &sa, NULL, NULL), 0);
    cr_assert_eq(l3cache_index_lookup(c3, &sb, NULL, NULL), 0);
    l3cache_close(c3);
    l3cache_close(holder);
}

Test(cache, concurrent_openers_while_one_compacts)
{
    enum { N = 8, KIDS = 4 };
    char names[N][16];
    l3cache *c = open_fake(cachedir, 0, NULL);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "k%02d.png", i);
        make_png(names[i], 16, 16, 700 + (unsigned)i, 1);
        get_ok(c, names[i], 0);
    }
    l3cache_close(c);
    /* bloat the log with superseded records so that the next sole opener
     * compacts it */
    char log[512];
    snprintf(log, sizeof(log), "%s/index.log", cachedir);
    struct l3cache_source s0 = source_of(names[0]);
    struct l3cache_entry dup = {.src = s0, .encoded_size = 12345,
                                .params_id = l3cache_params_id(L3_FORMAT_VERSION, NULL)};
    uint8_t rec[L3CACHE_REC_ENTRY_SIZE];
    int fd = open(log, O_WRONLY | O_APPEND);
    for (int i = 0; i < 3000; i++) {
        dup.encoded_size = 12345 + (uint64_t)i;
        l3cache_rec_encode_entry(&dup, rec);
        cr_assert_eq(write(fd, rec, sizeof(rec)), (ssize_t)sizeof(rec));
    }
    close(fd);
    /* the newest record wins and its size is wrong on purpose (as after
     * two builds with different encoders): the valid object is served and
     * the entry corrected, nothing is re-encoded or removed */
    pid_t kids[KIDS];
    for (int k = 0; k < KIDS; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            struct l3cache_internal in;
            fake_internal(&in, &fc);
            struct l3cache_options o = {.dir = cachedir};
            l3cache *kc;
            if (l3cache_open_internal(&o, &in, &kc) != 0)
                _exit(1);
            int bad = 0;
            for (int r = 0; r < 20; r++)
                for (int i = 0; i < N; i++) {
                    char p[512];
                    src_path(p, sizeof(p), names[i]);
                    int sfd = open(p, O_RDONLY);
                    struct stat st;
                    fstat(sfd, &st);
                    struct l3cache_object obj;
                    uint8_t *want, *got;
                    size_t want_size;
                    if (get_fd(kc, sfd, &obj, NULL) != 0 ||
                        fake_expected(p, &want, &want_size) != 0) {
                        bad = 1;
                        close(sfd);
                        continue;
                    }
                    close(sfd);
                    long n = read_fd(obj.fd, &got);
                    if (n != (long)want_size || memcmp(got, want, want_size) != 0)
                        bad = 1;
                    close(obj.fd);
                    free(want);
                    free(got);
                }
            l3cache_close(kc);
            _exit(bad ? 3 : 0);
        }
    }
    for (int k = 0; k < KIDS; k++) {
        int st;
        waitpid(kids[k], &st, 0);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "opener %d failed (%d)", k,
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    c = open_fake(cachedir, 0, NULL);
    for (int i = 0; i < N; i++) {
        struct l3cache_source s = source_of(names[i]);
        uint64_t esize;
        cr_assert_eq(l3cache_index_lookup(c, &s, &esize, NULL), 0, "entry %d lost", i);
        struct l3cache_object obj;
        cr_assert_eq(get_file(c, names[i], &obj, NULL), 0);
        cr_assert_eq(obj.size, esize, "index size of %d is stale", i);
        cr_assert_eq(obj.hit, 1);
        close(obj.fd);
    }
    struct stat st;
    cr_assert_eq(stat(log, &st), 0);
    cr_assert_lt(st.st_size, 1000 * L3CACHE_REC_ENTRY_SIZE, "log was not compacted (%lld bytes)",
                 (long long)st.st_size);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.total.lookups, N + KIDS * 20 * N + N);
    cr_assert_eq(s.total.corrupt_repaired, 0, "a stale index size is not a corrupt object");
    cr_assert_eq(s.total.encodes, N);
    l3cache_close(c);
}

/* -------------------------------------------------------- temp cleanup */

static void touch_file(const char *dir, const char *name, time_t age)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    cr_assert_geq(fd, 0, "create %s", p);
    cr_assert_eq(write(fd, "partial", 7), 7);
    close(fd);
    if (age) {
        struct timespec ts[2];
        clock_gettime(CLOCK_REALTIME, &ts[0]);
        ts[0].tv_sec -= age;
        ts[1] = ts[0];
        cr_assert_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
    }
}

Test(cache, stale_temp_files_cleaned_on_open)
{
    char sub[512], host[64], name[512];
    snprintf(sub, sizeof(sub), "%s/objects/ab", cachedir);
    mkdir(cachedir, 0755);
    snprintf(name, sizeof(name), "%s/objects", cachedir);
    mkdir(name, 0755);
    mkdir(sub, 0755);
    /* our own host name as the library writes it */
    char mine[160];
    cr_assert_eq(l3cache_temp_name(mine, sizeof(mine)), 0);
    long pid;
    cr_assert_eq(l3cache_temp_parse(mine, &pid, host, sizeof(host)), 0);
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    pid_t alive = fork();
    if (alive == 0) {
        pause();
        _exit(0);
    }
    char n_dead[400], n_alive[400], n_old[400], n_other[400];
    snprintf(n_dead, sizeof(n_dead), ".tmp-%ld-0123456789abcdef-%s", (long)dead, host);
    snprintf(n_alive, sizeof(n_alive), ".tmp-%ld-0123456789abcdef-%s", (long)alive, host);
    snprintf(n_old, sizeof(n_old), ".tmp-77-0123456789abcdef-otherhost");
    snprintf(n_other, sizeof(n_other), ".tmp-78-0123456789abcdef-otherhost");
    touch_file(sub, n_dead, 0);          /* writer died on this host */
    touch_file(sub, n_alive, 0);         /* writer still running */
    touch_file(sub, n_old, 2 * 3600);    /* another host, hours old */
    touch_file(sub, n_other, 0);         /* another host, recent */
    touch_file(sub, "unrelated-file", 0);
    touch_file(cachedir, n_old, 2 * 3600); /* a compaction temp */

    l3cache *c = open_fake(cachedir, 0, NULL);
    l3cache_close(c);
    char p[1024];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", sub, n_dead);
    cr_assert_neq(stat(p, &st), 0, "dead writer's temp removed");
    snprintf(p, sizeof(p), "%s/%s", sub, n_old);
    cr_assert_neq(stat(p, &st), 0, "old temp removed");
    snprintf(p, sizeof(p), "%s/%s", cachedir, n_old);
    cr_assert_neq(stat(p, &st), 0, "old root temp removed");
    snprintf(p, sizeof(p), "%s/%s", sub, n_alive);
    cr_assert_eq(stat(p, &st), 0, "live writer's temp kept");
    snprintf(p, sizeof(p), "%s/%s", sub, n_other);
    cr_assert_eq(stat(p, &st), 0, "recent temp of another host kept");
    kill(alive, SIGKILL);
    waitpid(alive, NULL, 0);
}

/* ------------------------------------------------------------ eviction */

Test(cache, eviction_lru_under_cap_with_open_fd)
{
    enum { N = 10 };
    char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "e%02d.png", i);
        make_png(names[i], 40, 40, 200 + (unsigned)i, 1); /* ~4.8 KB each */
    }
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    in.no_background = 1;
    in.touch_interval_s = UINT32_MAX; /* every hit refreshes the last use */
    l3cache *c = open_fake(cachedir, 0, &in);
    uint64_t sizes = 0;
    struct l3cache_object first;
    cr_assert_eq(get_file(c, names[0], &first, NULL), 0); /* keep this fd open */
    sizes += first.size;
    for (int i = 1; i < N; i++) {
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL); /* distinct access times */
        struct l3cache_object o;
        cr_assert_eq(get_file(c, names[i], &o, NULL), 0);
        sizes += o.size;
        close(o.fd);
    }
    struct timespec ts = {0, 5 * 1000000L};
    nanosleep(&ts, NULL);
    get_ok(c, names[1], 1); /* names[1] is now the most recently used */
    l3cache_close(c);

    /* cap at half: the least recently used go first */
    uint64_t cap = sizes / 2;
    c = open_fake(cachedir, cap, &in);
    uint64_t freed = 0;
    cr_assert_eq(l3cache_gc(c, &freed), 0);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_gt(freed, 0);
    cr_assert_leq(s.object_bytes, cap);
    cr_assert_eq(s.instance.evicted_bytes, freed);
    cr_assert_geq(s.instance.evictions, N / 2);
    cr_assert_eq(s.objects, (uint64_t)N - s.instance.evictions);
    char p[512];
    struct stat st;
    object_path(&first.key, p, sizeof(p));
    cr_assert_neq(stat(p, &st), 0, "least recently used object evicted");
    /* the object that was open stays readable through its fd */
    expect_object(&first, names[0]);
    close(first.fd);
    /* the most recently used survived */
    struct l3cache_source s1 = source_of(names[1]);
    struct l3cache_key k1;
    cr_assert_eq(l3cache_index_lookup(c, &s1, NULL, &k1), 0);
    object_path(&k1, p, sizeof(p));
    cr_assert_eq(stat(p, &st), 0, "recently used object kept");
    /* an evicted file is simply encoded again, index size unchanged */
    uint64_t esize0;
    struct l3cache_source s0 = source_of(names[0]);
    cr_assert_eq(l3cache_index_lookup(c, &s0, &esize0, NULL), 0);
    struct l3cache_object again;
    cr_assert_eq(get_file(c, names[0], &again, NULL), 0);
    cr_assert_eq(again.hit, 0);
    cr_assert_eq(again.size, esize0);
    expect_object(&again, names[0]);
    close(again.fd);
    l3cache_close(c);
}

Test(cache, background_eviction_keeps_the_cap)
{
    enum { N = 24 };
    l3cache *c = open_fake(cachedir, 40000, NULL); /* scan every 200 ms */
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof(name), "g%02d.png", i);
        make_png(name, 40, 40, 300 + (unsigned)i, 1);
        get_ok(c, name, 0);
    }
    struct l3cache_stats s;
    int ok = 0;
    for (int t = 0; t < 50 && !ok; t++) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
        l3cache_get_stats(c, &s);
        ok = s.object_bytes <= 40000 && s.instance.evictions > 0;
    }
    cr_assert(ok, "background eviction: %" PRIu64 " bytes, %" PRIu64 " evictions",
              s.object_bytes, s.instance.evictions);
    l3cache_close(c);
}

/* -------------------------------------------------------------- faults */

Test(cache, full_filesystem_degrades_to_no_cache)
{
    int r = mount_tmpfs("size=1m");
    if (r < 0)
        cr_skip_test("cannot mount a tmpfs (%s): needs root", strerror(-r));
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/cache", mnt);
    enum { N = 16 };
    char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "big%02d.png", i);
        make_png(names[i], 120, 120, 400 + (unsigned)i, 1); /* ~43 KB */
    }
    /* fill most of the filesystem so a few objects fit, then no more */
    char filler[512];
    snprintf(filler, sizeof(filler), "%s/filler", mnt);
    int fd = open(filler, O_WRONLY | O_CREAT, 0644);
    cr_assert_geq(fd, 0);
    static uint8_t block[4096];
    for (int i = 0; i < 200; i++)
        if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block))
            break;
    close(fd);
    l3cache *c = open_fake(dir, 0, NULL);
    for (int i = 0; i < N; i++)
        get_ok(c, names[i], 0); /* every get returns the right bytes */
    for (int i = 0; i < N; i++)
        get_ok(c, names[i], -1);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_gt(s.instance.write_failures, 0);
    cr_assert_eq(s.writes_disabled, 1);
    cr_assert_eq(count_names(dir, ".tmp-", NULL), 0, "no partial temp file left");
    uint64_t checked, bad;
    cr_assert_eq(l3cache_verify_all(c, &checked, &bad), 0);
    cr_assert_eq(bad, 0);
    l3cache_close(c);
}

Test(cache, readonly_directory_serves_and_recovers)
{
    int r = mount_tmpfs("size=8m");
    if (r < 0)
        cr_skip_test("cannot mount a tmpfs (%s): needs root", strerror(-r));
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/cache", mnt);
    make_png("a.png", 30, 30, 1, 1);
    make_png("b.png", 30, 30, 2, 1);
    make_png("c.png", 30, 30, 3, 1);
    l3cache *c = open_fake(dir, 0, NULL);
    get_ok(c, "a.png", 0);
    l3cache_close(c);
    cr_assert_eq(mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0, "remount ro: %s",
                 strerror(errno));

    struct l3cache_internal in;
    fake_internal(&in, &fc);
    in.reenable_after_s = 1;
    c = open_fake(dir, 0, &in);
    get_ok(c, "a.png", 1); /* reads keep working */
    get_ok(c, "b.png", 0); /* a miss is encoded and served anyway */
    get_ok(c, "b.png", 0);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.writes_disabled, 1);
    cr_assert_gt(s.instance.write_failures, 0);
    cr_assert_eq(s.instance.hits, 1);
    l3cache_close(c);

    /* writable again: after the retry delay new objects are stored */
    c = open_fake(dir, 0, &in);
    cr_assert_eq(mount(NULL, mnt, NULL, MS_REMOUNT, NULL), 0);
    sleep(1);
    l3cache_close(c);
    c = open_fake(dir, 0, &in);
    get_ok(c, "c.png", 0);
    get_ok(c, "c.png", 1);
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.writes_disabled, 0);
    l3cache_close(c);
}

Test(cache, readonly_flag_never_writes)
{
    make_png("a.png", 20, 20, 1, 1);
    mkdir(cachedir, 0755);
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    struct l3cache_options o = {.dir = cachedir, .flags = L3CACHE_READONLY};
    l3cache *c;
    cr_assert_eq(l3cache_open_internal(&o, &in, &c), 0);
    get_ok(c, "a.png", 0);
    get_ok(c, "a.png", 0);
    l3cache_close(c);
    cr_assert_eq(count_names(cachedir, "", NULL), 0, "nothing written");
}

/* --------------------------------------------------- multi-process */

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* A helper program: from the environment (meson test) or next to this
 * executable. */
static const char *helper_exe(const char *env, const char *name)
{
    static char path[2][1024];
    const char *v = getenv(env);
    if (v && *v)
        return v;
    char self[900];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    cr_assert_gt(n, 0);
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    char *buf = path[name[0] == 'l'];
    snprintf(buf, sizeof(path[0]), "%s/%s", self, name);
    return buf;
}

static pid_t spawn_hammer(const char *dir, double seconds, unsigned seed, uint64_t cap,
                          int threads, int nfiles, char files[][512])
{
    const char *exe = helper_exe("L3_CACHE_HAMMER", "cache_hammer");
    char a_sec[32], a_seed[32], a_cap[32], a_thr[16];
    snprintf(a_sec, sizeof(a_sec), "%.3f", seconds);
    snprintf(a_seed, sizeof(a_seed), "%u", seed);
    snprintf(a_cap, sizeof(a_cap), "%" PRIu64, cap);
    snprintf(a_thr, sizeof(a_thr), "%d", threads);
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)exe;
    argv[n++] = (char *)dir;
    argv[n++] = a_sec;
    argv[n++] = a_seed;
    argv[n++] = a_cap;
    argv[n++] = a_thr;
    for (int i = 0; i < nfiles && n < 62; i++)
        argv[n++] = files[i];
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        execv(exe, argv);
        _exit(127);
    }
    return pid;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(cache, two_processes_hammer_with_kill9, .timeout = TC_TIMEOUT(240))
{
    double seconds = atof(env_or("L3_CACHE_HAMMER_SECONDS", getenv("L3_STRESS") ? "30" : "10"));
    enum { N = 20 };
    char files[N][512];
    for (int i = 0; i < N; i++) {
        char name[32];
        /* 4 pairs of identical content among the sources */
        snprintf(name, sizeof(name), "h%02d.png", i);
        make_png(name, 48, 32, 500 + (unsigned)(i % 16), 1);
        src_path(files[i], sizeof(files[i]), name);
    }
    uint64_t cap = 60000; /* about a third of the objects: constant churn */
    pid_t steady = spawn_hammer(cachedir, seconds, 1, cap, 3, N, files);
    double end = mono() + seconds;
    unsigned seed = 2, kills = 0;
    while (mono() < end - 0.5) {
        pid_t victim = spawn_hammer(cachedir, 1000, seed, cap, 2, N, files);
        struct timespec ts = {0, (long)(20 + (seed * 37) % 280) * 1000000L};
        nanosleep(&ts, NULL);
        kill(victim, SIGKILL);
        int st;
        waitpid(victim, &st, 0);
        cr_assert(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == 0),
                  "victim failed with status %d", WEXITSTATUS(st));
        kills++;
        seed++;
    }
    int st;
    waitpid(steady, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "steady hammer saw wrong bytes or failed (%d)",
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    cr_assert_gt(kills, 3);

    /* afterwards: everything verifies, no temp file survives an open,
     * every file reads back right */
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    in.no_background = 1;
    l3cache *c = open_fake(cachedir, 0, &in);
    uint64_t checked = 0, bad = 0;
    cr_assert_eq(l3cache_verify_all(c, &checked, &bad), 0);
    cr_assert_eq(bad, 0, "%" PRIu64 " bad objects of %" PRIu64, bad, checked);
    cr_assert_eq(count_names(cachedir, ".tmp-", NULL), 0, "temp files left after reopen");
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof(name), "h%02d.png", i);
        get_ok(c, name, -1);
    }
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.instance.corrupt_repaired, 0);
    cr_log_info("hammer: %.0f s, %u kill -9, %" PRIu64 " objects checked, total lookups %" PRIu64
                ", encodes %" PRIu64 ", evictions %" PRIu64,
                seconds, kills, checked, s.total.lookups, s.total.encodes, s.total.evictions);
    l3cache_close(c);
}

Test(cache, stats_are_cumulative_across_processes)
{
    enum { N = 6 };
    char files[N][512];
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof(name), "s%02d.png", i);
        make_png(name, 20, 20, 600 + (unsigned)i, 1);
        src_path(files[i], sizeof(files[i]), name);
    }
    /* two processes at once, one pass each over the files with 2 threads */
    pid_t a = spawn_hammer(cachedir, 0, 11, 0, 2, N, files);
    pid_t b = spawn_hammer(cachedir, 0, 12, 0, 2, N, files);
    int sa, sb;
    waitpid(a, &sa, 0);
    waitpid(b, &sb, 0);
    cr_assert(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
    cr_assert(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
    l3cache *c = open_fake(cachedir, 0, NULL);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.total.lookups, 4 * N);
    cr_assert_eq(s.total.hits + s.total.misses, 4 * N);
    cr_assert_geq(s.total.encodes, N);
    cr_assert_leq(s.total.encodes, 2 * N, "duplicate work bounded by the process count");
    cr_assert_eq(s.objects, N);
    cr_assert_eq(s.index_entries, N);
    l3cache_close(c);
}


/* ----------------------------------------------------- the real codec */

/* A cache with the default hooks: libl3's transcoder and checks. */
static l3cache *open_real(void)
{
    struct l3cache_options o = {.dir = cachedir, .fsync_policy = L3CACHE_FSYNC_OBJECT};
    l3cache *c = NULL;
    cr_assert_eq(l3cache_open(&o, &c), 0);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    return c;
}

/* The object verifies and decodes to exactly what libpng decodes from the
 * source (l3_png_decode: libpng, no colour conversion), bit for bit. */
static void expect_real_object(int fd, uint64_t size, const char *path)
{
    uint8_t *bytes, *png;
    size_t png_size;
    long n = read_fd(fd, &bytes);
    cr_assert_eq((uint64_t)n, size);
    cr_assert_eq(l3_verify(bytes, (size_t)n), L3_OK, "object of %s does not verify", path);
    void *pix = NULL, *ref = NULL;
    size_t pix_size = 0, ref_size = 0;
    struct l3_info info, ref_info;
    cr_assert_eq(l3_decode_alloc(bytes, (size_t)n, NULL, &pix, &pix_size, &info), L3_OK);
    cr_assert_not_null(png = tc_slurp(path, &png_size), "%s", path);
    cr_assert_eq(l3_png_decode(png, png_size, NULL, &ref_info, &ref, &ref_size), L3_OK,
                 "libpng cannot decode %s", path);
    cr_assert_eq(info.width, ref_info.width);
    cr_assert_eq(info.height, ref_info.height);
    cr_assert_eq(info.color, ref_info.color);
    cr_assert_eq(info.bit_depth, ref_info.bit_depth);
    cr_assert_eq(pix_size, ref_size, "%s: %zu decoded bytes, libpng %zu", path, pix_size, ref_size);
    cr_assert_eq(memcmp(pix, ref, pix_size), 0, "pixels of %s differ from libpng's", path);
    l3_free(pix);
    l3_free(ref);
    free(png);
    free(bytes);
}

Test(cache, real_codec_round_trip_and_repair)
{
    make_png("a.png", 64, 64, 1, 0);
    make_png("b.png", 100, 37, 2, 1); /* not a multiple of the tile size */
    make_png("c.png", 1, 1, 3, 1);
    l3cache *c = open_real();
    const char *names[] = {"a.png", "b.png", "c.png"};
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 3; i++) {
            struct l3cache_object obj;
            cr_assert_eq(get_file(c, names[i], &obj, NULL), 0);
            cr_assert_eq(obj.hit, pass == 1);
            char p[512];
            src_path(p, sizeof(p), names[i]);
            expect_real_object(obj.fd, obj.size, p);
            close(obj.fd);
        }
    }
    /* a truncated object is caught by its header alone, even when the
     * index does not know the size (another source with the same bytes) */
    struct l3cache_object obj;
    cr_assert_eq(get_file(c, "b.png", &obj, NULL), 0);
    close(obj.fd);
    char op[512], a[512], b[512], cmd[1200];
    object_path(&obj.key, op, sizeof(op));
    cr_assert_eq(truncate(op, (off_t)obj.size - 1), 0);
    src_path(a, sizeof(a), "b.png");
    src_path(b, sizeof(b), "b-copy.png");
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", a, b);
    cr_assert_eq(system(cmd), 0);
    struct l3cache_object again;
    cr_assert_eq(get_file(c, "b-copy.png", &again, NULL), 0);
    cr_assert_eq(again.hit, 0, "truncated object served");
    expect_real_object(again.fd, again.size, b);
    close(again.fd);
    /* a header bit flip */
    flip_byte(op, 9);
    cr_assert_eq(get_file(c, "b.png", &again, NULL), 0);
    cr_assert_eq(again.hit, 0, "corrupt object served");
    expect_real_object(again.fd, again.size, a);
    close(again.fd);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.instance.corrupt_repaired, 2);
    uint64_t checked, bad;
    cr_assert_eq(l3cache_verify_all(c, &checked, &bad), 0);
    cr_assert_eq(checked, 3);
    cr_assert_eq(bad, 0);
    l3cache_close(c);
}

/* A few files of each corpus set (every PNG colour type and depth among
 * them), through the cache twice: encoded, then served. */
Test(cache, real_codec_corpus, .timeout = TC_TIMEOUT(240))
{
    static const struct {
        const char *dir;
        int max;
    } sets[] = {
        {"/var/cache/l3fs-corpus/png/pngsuite", 40},
        {"/var/cache/l3fs-corpus/png/wallpapers", 3},
        {"/var/cache/l3fs-corpus/png/photos-2048", 1},
    };
    l3cache *c = NULL;
    int total = 0;
    for (size_t si = 0; si < sizeof(sets) / sizeof(sets[0]); si++) {
        struct dirent **list;
        int n = scandir(sets[si].dir, &list, NULL, alphasort);
        if (n < 0)
            continue;
        int used = 0;
        for (int i = 0; i < n; i++) {
            const char *name = list[i]->d_name;
            size_t l = strlen(name);
            if (used < sets[si].max && l > 4 && !strcmp(name + l - 4, ".png")) {
                if (!c)
                    c = open_real();
                char path[1024];
                snprintf(path, sizeof(path), "%s/%s", sets[si].dir, name);
                for (int pass = 0; pass < 2; pass++) {
                    int fd = open(path, O_RDONLY);
                    cr_assert_geq(fd, 0);
                    struct stat st;
                    cr_assert_eq(fstat(fd, &st), 0);
                    struct l3cache_object obj;
                    int l3s = 0;
                    int r = get_fd(c, fd, &obj, &l3s);
                    close(fd);
                    cr_assert_eq(r, 0, "%s: %s", path, l3_strerror(l3s));
                    if (pass == 1)
                        cr_assert_eq(obj.hit, 1, "%s not served from cache", path);
                    expect_real_object(obj.fd, obj.size, path);
                    close(obj.fd);
                }
                used++;
                total++;
            }
            free(list[i]);
        }
        free(list);
    }
    if (!c)
        cr_skip_test("corpus absent (/var/cache/l3fs-corpus; scripts/fetch-corpus.sh makes it)");
    uint64_t checked, bad;
    cr_assert_eq(l3cache_verify_all(c, &checked, &bad), 0);
    cr_assert_eq(bad, 0);
    cr_assert_gt(checked, 0);
    cr_log_info("corpus: %d files through the cache, %" PRIu64 " objects verified", total, checked);
    l3cache_close(c);
}

/* ------------------------------------------- verification before serving */

static l3cache *open_flags(unsigned flags, struct l3cache_internal *tweak)
{
    struct l3cache_options o = {.dir = cachedir, .fsync_policy = L3CACHE_FSYNC_OBJECT,
                                .flags = flags};
    return open_with(&o, tweak);
}

static uint64_t counter(l3cache *c, size_t offset)
{
    struct l3cache_stats s;
    cr_assert_eq(l3cache_get_stats(c, &s), 0);
    return *(const uint64_t *)((const char *)&s.instance + offset);
}
#define COUNTER(c, name) counter(c, offsetof(struct l3cache_counters, name))

/* The path of the object a source is stored as. */
static void object_of(l3cache *c, const char *name, char *path, size_t size, uint64_t *len)
{
    struct l3cache_object o;
    cr_assert_eq(get_file(c, name, &o, NULL), 0);
    object_path(&o.key, path, size);
    *len = o.size;
    close(o.fd);
}

/* By default a payload flip is found at the next hit (the object changed on
 * disk: its identity moved), the object removed, the source encoded again
 * and the right bytes served, without L3CACHE_VERIFY_FULL. */
Test(cache, payload_rot_never_served_by_default)
{
    make_png("a.png", 40, 40, 21, 1);
    l3cache *c = open_flags(0, NULL);
    char p[512];
    uint64_t len;
    object_of(c, "a.png", p, sizeof p, &len);
    flip_byte(p, (off_t)len - 7);
    struct l3cache_object o;
    cr_assert_eq(get_file(c, "a.png", &o, NULL), 0);
    cr_assert_eq(o.hit, 0, "encoded again");
    cr_assert_eq(o.repaired, 1, "one corrupt object reported to the caller");
    expect_object(&o, "a.png");
    close(o.fd);
    cr_assert_eq(COUNTER(c, corrupt_repaired), 1);
    /* and by key alone (what a daemon does for a version it described) */
    object_of(c, "a.png", p, sizeof p, &len);
    flip_byte(p, 40);
    struct l3cache_object k;
    cr_assert_eq(get_file(c, "a.png", &o, NULL), 0); /* repairs */
    close(o.fd);
    flip_byte(p, 41);
    cr_assert_eq(l3cache_open_key(c, &o.key, &k), -ENOENT, "corrupt: not served");
    cr_assert_eq(k.repaired, 1);
    l3cache_close(c);
}

/* An object checked once is not read again while it stays in the page
 * cache; once its pages are dropped it is checked again before serving. */
Test(cache, payload_checked_again_after_leaving_page_cache)
{
    make_png("a.png", 64, 64, 22, 1);
    l3cache *c = open_flags(0, NULL);
    char p[512];
    uint64_t len;
    object_of(c, "a.png", p, sizeof p, &len); /* stored by us: checked */
    uint64_t v0 = COUNTER(c, verified);
    get_ok(c, "a.png", 1);
    get_ok(c, "a.png", 1);
    cr_assert_eq(COUNTER(c, verified), v0, "resident and checked: not read again");
    int fd = open(p, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    close(fd);
    get_ok(c, "a.png", 1);
    cr_assert_eq(COUNTER(c, verified), v0 + 1, "out of the page cache: checked again");
    /* a descriptor handed out earlier is checked the same way */
    struct l3cache_object o;
    cr_assert_eq(get_file(c, "a.png", &o, NULL), 0);
    cr_assert_eq(l3cache_check_fd(c, &o.key, o.fd), 0);
    flip_byte(p, (off_t)len - 3);
    cr_assert_eq(l3cache_check_fd(c, &o.key, o.fd), -EBADMSG);
    struct stat st;
    cr_assert_neq(stat(p, &st), 0, "the corrupt object was removed");
    close(o.fd);
    get_ok(c, "a.png", 0);
    l3cache_close(c);
    /* a new handle has checked nothing yet */
    c = open_flags(0, NULL);
    get_ok(c, "a.png", 1);
    cr_assert_eq(COUNTER(c, verified), 1);
    l3cache_close(c);
}

/* --no-verify (L3CACHE_TRUST_STORAGE): the header check only, as documented:
 * payload rot is served. */
Test(cache, trust_storage_checks_the_header_only)
{
    make_png("a.png", 40, 40, 23, 1);
    l3cache *c = open_flags(L3CACHE_TRUST_STORAGE, NULL);
    char p[512];
    uint64_t len;
    object_of(c, "a.png", p, sizeof p, &len);
    flip_byte(p, (off_t)len - 7);
    struct l3cache_object o;
    cr_assert_eq(get_file(c, "a.png", &o, NULL), 0);
    cr_assert_eq(o.hit, 1, "served as it is");
    cr_assert_eq(COUNTER(c, verified), 0);
    cr_assert_eq(COUNTER(c, corrupt_repaired), 0);
    close(o.fd);
    l3cache_close(c);
}

/* --------------------------------------------------------------- claims */

/* Two processes, same sources, same order, at the same moment: each key is
 * encoded once in all (the second waits on the first one's claim). */
Test(cache, claims_one_encode_across_processes, .timeout = TC_TIMEOUT(60))
{
    enum { N = 8 };
    char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "s%d.png", i);
        make_png(names[i], 24, 24, 300 + (unsigned)i, 1);
    }
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            struct l3cache_internal in;
            fake_internal(&in, &fc);
            atomic_store(&fc.delay_ms, 150);
            l3cache *kc = open_flags(0, &in);
            int bad = 0;
            for (int i = 0; i < N; i++) {
                struct l3cache_object o;
                if (get_file(kc, names[i], &o, NULL) != 0) {
                    bad = 1;
                    continue;
                }
                uint8_t *want, *got;
                size_t wn;
                char p[512];
                src_path(p, sizeof p, names[i]);
                long n = read_fd(o.fd, &got);
                if (fake_expected(p, &want, &wn) != 0 || n != (long)wn || memcmp(want, got, wn))
                    bad = 1;
                close(o.fd);
            }
            l3cache_close(kc);
            _exit(bad);
        }
    }
    for (int k = 0; k < 2; k++) {
        int st;
        waitpid(kids[k], &st, 0);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d: wrong bytes", k);
    }
    l3cache *c = open_flags(0, NULL);
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.total.encodes, N, "%" PRIu64 " encodes for %d keys", s.total.encodes, N);
    cr_assert_geq(s.total.claim_waits, 1);
    cr_assert_eq(count_names(cachedir, "", ".claim"), 0, "no claim left");
    l3cache_close(c);
}

/* Writes a claim file for the key of source NAME as another owner would. */
static void plant_claim(l3cache *c, const char *name, const char *owner, time_t age_s)
{
    char p[512];
    src_path(p, sizeof p, name);
    uint8_t *png;
    size_t len;
    cr_assert_not_null(png = tc_slurp(p, &len), "%s", p);
    struct l3cache_key key;
    l3cache_key_compute(png, len, L3_FORMAT_VERSION, NULL, &key);
    free(png);
    (void)c;
    char hex[33], dir[600], claim[700];
    l3cache_key_hex(&key, hex);
    snprintf(dir, sizeof dir, "%s/objects", cachedir);
    mkdir(dir, 0700);
    snprintf(dir, sizeof dir, "%s/objects/%.2s", cachedir, hex);
    mkdir(dir, 0700);
    snprintf(claim, sizeof claim, "%s/%s.claim", dir, hex + 2);
    FILE *f = fopen(claim, "w");
    cr_assert_not_null(f);
    fprintf(f, "%s\n", owner);
    fclose(f);
    struct timespec ts[2] = {{time(NULL) - age_s, 0}, {time(NULL) - age_s, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, claim, ts, 0), 0);
}

/* A claim whose owner went silent (another host: its mtime stops moving) is
 * taken over after claim_stale_ms; one of a dead process of this host at
 * once; a live one is waited for at most claim_wait_ms. */
Test(cache, stale_claims_taken_over_and_waits_bounded, .timeout = TC_TIMEOUT(60))
{
    make_png("a.png", 20, 20, 41, 1);
    make_png("b.png", 20, 20, 42, 1);
    make_png("c.png", 20, 20, 43, 1);
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    in.claim_stale_ms = 300;
    in.claim_wait_ms = 5000;
    l3cache *c = open_flags(0, &in);
    char host[64];
    l3cache_host_name(host, sizeof host);
    char owner[160];
    plant_claim(c, "a.png", "l3cache-claim 1 some-other-host 4242 00000000000000aa", 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    get_ok(c, "a.png", 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    cr_assert_geq(ms, 250, "silent claim taken over after %.0f ms (stale after 300)", ms);
    cr_assert_lt(ms, 3000);
    cr_assert_eq(COUNTER(c, claim_takeovers), 1);
    /* a dead process of this host: no wait */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    snprintf(owner, sizeof owner, "l3cache-claim 1 %s %ld 00000000000000bb", host, (long)dead);
    plant_claim(c, "b.png", owner, 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    get_ok(c, "b.png", 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    cr_assert_lt(ms, 250, "dead owner's claim taken at once (%.0f ms)", ms);
    cr_assert_eq(COUNTER(c, claim_takeovers), 2);
    l3cache_close(c);
    /* a live owner (this process, heartbeat simulated by a fresh mtime and
     * a never-stale limit): the wait ends at claim_wait_ms, then it encodes */
    in.claim_stale_ms = 60000;
    in.claim_wait_ms = 400;
    c = open_flags(0, &in);
    snprintf(owner, sizeof owner, "l3cache-claim 1 %s %ld 00000000000000cc", host, (long)getpid());
    plant_claim(c, "c.png", owner, 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    get_ok(c, "c.png", 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    cr_assert_geq(ms, 350, "waited %.0f ms of 400", ms);
    cr_assert_lt(ms, 3000);
    cr_assert_eq(COUNTER(c, claim_takeovers), 0);
    l3cache_close(c);
}

/* ------------------------------------------------------------- privacy */

static mode_t mode_of(const char *rel)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s", cachedir, rel);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0, "%s", p);
    return st.st_mode & 07777;
}

/* Nothing in a private cache is readable by others (whatever the umask);
 * a shared one is 0755/0644 and keeps sources marked private out. */
Test(cache, private_by_default_shared_keeps_private_sources_out)
{
    make_png("a.png", 20, 20, 51, 1);
    make_png("b.png", 20, 20, 52, 1);
    mode_t old = umask(022);
    l3cache *c = open_flags(0, NULL);
    char p[512], rel[700];
    uint64_t len;
    object_of(c, "a.png", p, sizeof p, &len);
    l3cache_close(c);
    cr_assert_eq(mode_of(""), 0700);
    cr_assert_eq(mode_of("objects"), 0700);
    cr_assert_eq(mode_of("index.log"), 0600);
    cr_assert_eq(mode_of("lock"), 0600);
    snprintf(rel, sizeof rel, "%s", p + strlen(cachedir) + 1);
    cr_assert_eq(mode_of(rel), 0600, "object %s", rel);
    char objdir[700];
    snprintf(objdir, sizeof objdir, "%.*s", (int)(strrchr(rel, '/') - rel), rel);
    cr_assert_eq(mode_of(objdir), 0700);

    snprintf(cachedir + strlen(cachedir), sizeof cachedir - strlen(cachedir), "-shared");
    c = open_flags(L3CACHE_SHARED, NULL);
    object_of(c, "a.png", p, sizeof p, &len);
    cr_assert_eq(mode_of(""), 0755);
    cr_assert_eq(mode_of("index.log"), 0644);
    snprintf(rel, sizeof rel, "%s", p + strlen(cachedir) + 1);
    cr_assert_eq(mode_of(rel), 0644);
    /* a private source: served, but neither stored nor indexed */
    src_path(p, sizeof p, "b.png");
    int fd = open(p, O_RDONLY);
    struct l3cache_source src;
    cr_assert_eq(l3cache_identify(fd, "", AT_EMPTY_PATH, NULL, &src), 0);
    for (int pass = 0; pass < 2; pass++) {
        struct l3cache_object o;
        cr_assert_eq(l3cache_get(c, fd, &src, L3CACHE_GET_PRIVATE, &o, NULL), 0);
        cr_assert_eq(o.hit, 0, "never a hit: not stored");
        expect_object(&o, "b.png");
        close(o.fd);
    }
    close(fd);
    cr_assert_eq(l3cache_index_lookup(c, &src, NULL, NULL), -ENOENT, "not indexed");
    struct l3cache_stats s;
    l3cache_get_stats(c, &s);
    cr_assert_eq(s.objects, 1, "only the public source's object");
    l3cache_close(c);
    umask(old);
}

/* A cache an earlier version made readable by others (0755 directories,
 * 0644 files) is private again once opened without L3CACHE_SHARED. */
Test(cache, an_open_cache_made_readable_earlier_is_made_private)
{
    make_png("a.png", 20, 20, 53, 1);
    mode_t old = umask(022);
    l3cache *c = open_flags(L3CACHE_SHARED, NULL);
    char p[512];
    uint64_t len;
    object_of(c, "a.png", p, sizeof p, &len);
    l3cache_close(c);
    cr_assert_eq(mode_of("objects"), 0755);
    cr_assert_eq(mode_of("index.log"), 0644);
    c = open_flags(0, NULL);
    cr_assert_eq(mode_of("objects"), 0700, "objects/ made private");
    cr_assert_eq(mode_of("index.log"), 0600);
    cr_assert_eq(mode_of("lock"), 0600);
    get_ok(c, "a.png", 1); /* and still served */
    l3cache_close(c);
    umask(old);
}

/* ----------------------------------------- files removed under the writer */

static atomic_int temps_to_remove; /* how many more temp files the hook removes */

static void remove_temp(void *ctx, int dirfd, const char *tmprel)
{
    (void)ctx;
    if (atomic_fetch_sub(&temps_to_remove, 1) > 0)
        unlinkat(dirfd, tmprel, 0);
}

/* A temp file removed between its write and its link (as `cache clear` from
 * another client does) is written again: no write failure. Removed at every
 * try: one write failure, writes stay enabled, the right bytes are served. */
Test(cache, temp_removed_under_the_writer_is_written_again)
{
    make_png("a.png", 20, 20, 71, 1);
    make_png("b.png", 20, 20, 72, 1);
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    in.before_link = remove_temp;
    atomic_store(&temps_to_remove, 2);
    l3cache *c = open_flags(0, &in);
    get_ok(c, "a.png", 0);
    cr_assert_eq(COUNTER(c, write_failures), 0, "two removals, written a third time");
    get_ok(c, "a.png", 1);
    atomic_store(&temps_to_remove, 1000);
    get_ok(c, "b.png", 0);
    cr_assert_eq(COUNTER(c, write_failures), 1);
    struct l3cache_stats s;
    cr_assert_eq(l3cache_get_stats(c, &s), 0);
    cr_assert_eq(s.writes_disabled, 0, "a removed file is not a storage that refuses writes");
    atomic_store(&temps_to_remove, 0);
    get_ok(c, "b.png", 0); /* not stored before: encoded and stored now */
    get_ok(c, "b.png", 1);
    cr_assert_eq(count_names(cachedir, ".tmp-", NULL), 0);
    l3cache_close(c);
}

/* `clear` removes every object and stale temp file and leaves the temp file
 * of a live writer (it becomes an object, or its writer removes it). */
Test(cache, clear_leaves_live_writers_temp_files)
{
    make_png("a.png", 20, 20, 74, 1);
    l3cache *c = open_flags(0, NULL);
    get_ok(c, "a.png", 0);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0)
        _exit(0);
    cr_assert_eq(waitpid(child, NULL, 0), child);
    char host[64], live[160], dead[160], p[800];
    l3cache_host_name(host, sizeof host);
    cr_assert_eq(l3cache_temp_name(live, sizeof live), 0);
    snprintf(dead, sizeof dead, ".tmp-%ld-0123456789abcdef-%s", (long)child, host);
    const char *names[2] = {live, dead};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/objects/00", cachedir);
        mkdir(p, 0700);
        snprintf(p, sizeof p, "%s/objects/00/%s", cachedir, names[i]);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
        cr_assert_geq(fd, 0, "%s", p);
        close(fd);
    }
    cr_assert_eq(l3cache_clear(c), 0);
    cr_assert_eq(count_names(cachedir, "", ".l3"), 0, "no object left");
    snprintf(p, sizeof p, "%s/objects/00/%s", cachedir, live);
    cr_assert_eq(access(p, F_OK), 0, "the live writer's temp file stays");
    snprintf(p, sizeof p, "%s/objects/00/%s", cachedir, dead);
    cr_assert_neq(access(p, F_OK), 0, "the dead writer's temp file goes");
    l3cache_close(c);
}

/* ------------------------------------------------------------- identity */

/* The birth time is part of a source's identity: an entry of another file
 * that reuses the inode number, size and both times is not taken for it. */
Test(cache, identity_has_the_birth_time)
{
    make_png("a.png", 20, 20, 61, 1);
    l3cache *c = open_flags(0, NULL);
    get_ok(c, "a.png", 0);
    struct l3cache_source s = source_of("a.png");
    cr_assert_neq(s.btime_ns, 0, "this filesystem keeps birth times (statx)");
    cr_assert_eq(l3cache_index_lookup(c, &s, NULL, NULL), 0);
    struct l3cache_source other = s;
    other.btime_ns += 1;
    cr_assert_eq(l3cache_index_lookup(c, &other, NULL, NULL), -ENOENT);
    cr_assert(!l3cache_source_eq(&s, &other));
    l3cache_close(c);
}

/* Records of version 1 (no birth time): entries skipped, statistics kept. */
Test(cache, version_1_records_read_compatibly)
{
    uint8_t rec[L3CACHE_REC_STATS_V1_SIZE];
    memset(rec, 0, sizeof rec);
    memcpy(rec, "L3CI", 4);
    rec[4] = 1;
    rec[5] = L3CACHE_REC_STATS;
    rec[6] = (uint8_t)L3CACHE_REC_STATS_V1_SIZE;
    rec[16] = 9;  /* lookups */
    rec[104 - 8] = 4; /* write_failures, the 11th counter */
    uint64_t h = XXH3_64bits(rec, sizeof rec - 8);
    for (int i = 0; i < 8; i++)
        rec[sizeof rec - 8 + (size_t)i] = (uint8_t)(h >> (8 * i));
    int type = -1;
    uint64_t inst = 0;
    struct l3cache_counters cnt;
    cr_assert_eq(l3cache_rec_parse(rec, sizeof rec, &type, NULL, &inst, &cnt), (long)sizeof rec);
    cr_assert_eq(type, L3CACHE_REC_STATS);
    cr_assert_eq(cnt.lookups, 9);
    cr_assert_eq(cnt.write_failures, 4);
    cr_assert_eq(cnt.verified, 0, "counters the record does not have are 0");
    uint8_t e1[L3CACHE_REC_ENTRY_V1_SIZE];
    memset(e1, 0, sizeof e1);
    memcpy(e1, "L3CI", 4);
    e1[4] = 1;
    e1[5] = L3CACHE_REC_ENTRY;
    e1[6] = (uint8_t)L3CACHE_REC_ENTRY_V1_SIZE;
    h = XXH3_64bits(e1, sizeof e1 - 8);
    for (int i = 0; i < 8; i++)
        e1[sizeof e1 - 8 + (size_t)i] = (uint8_t)(h >> (8 * i));
    struct l3cache_entry e;
    cr_assert_eq(l3cache_rec_parse(e1, sizeof e1, &type, &e, NULL, NULL), (long)sizeof e1);
    cr_assert_eq(type, 0, "a version-1 entry is skipped");
}
