/* test_cache_private.c — tests of libl3cache (cache/), suite "cache"
 * (fixture.c): privacy of the cache, files removed under the writer, source
 * identity. */
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
