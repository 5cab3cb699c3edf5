/* test_cache_repair.c — tests of libl3cache (cache/), suite "cache"
 * (fixture.c): corrupt and truncated objects and index records, stale temp
 * files. */
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
