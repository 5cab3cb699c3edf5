/* test_cache_verify.c — tests of libl3cache (cache/), suite "cache"
 * (fixture.c): the real codec (libl3, pixels against libpng) and verification
 * before serving. */
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
