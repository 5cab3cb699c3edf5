/* test_cache_limits.c — tests of libl3cache (cache/), suite "cache"
 * (fixture.c): the size cap and eviction; full and read-only filesystems. */
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
