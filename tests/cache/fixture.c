/* fixture.c — what the test_cache*.c rooms share: the suite "cache" (a fresh
 * temporary tree per test: a source directory, a cache directory and a mount
 * point for tmpfs faults) and the helpers that open caches (the stand-in
 * codec of helpers.c, or other flags), make sources and look at objects. */
#include <criterion/criterion.h>
#include "tc_timeout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

char root[256];
char srcdir[300];
char cachedir[300];
char mnt[300];
int mounted;

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
    remove_tree(root);
}

TestSuite(cache, .init = setup, .fini = teardown, .timeout = TC_TIMEOUT(120));

struct fake_codec fc;

/* Opens a cache with the fake codec (or the caller's tweaked internals). */
l3cache *open_with(const struct l3cache_options *o, struct l3cache_internal *tweak)
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

l3cache *open_fake(const char *dir, uint64_t max_bytes, struct l3cache_internal *tweak)
{
    struct l3cache_options o = {.dir = dir, .max_bytes = max_bytes,
                                .fsync_policy = L3CACHE_FSYNC_OBJECT};
    l3cache *c = open_with(&o, tweak);
    /* waits for the first background scan: object counts are exact after */
    struct l3cache_stats s;
    cr_assert_eq(l3cache_get_stats(c, &s), 0);
    return c;
}

void src_path(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", srcdir, name);
}

void make_png(const char *name, unsigned w, unsigned h, unsigned seed, int noise)
{
    char p[512];
    src_path(p, sizeof(p), name);
    cr_assert_eq(write_png(p, w, h, seed, noise), 0, "write_png %s", p);
}

/* l3cache_get on a source file. */
int get_file(l3cache *c, const char *name, struct l3cache_object *obj, int *l3s)
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
void expect_object(const struct l3cache_object *obj, const char *name)
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

void get_ok(l3cache *c, const char *name, int want_hit)
{
    struct l3cache_object obj;
    int r = get_file(c, name, &obj, NULL);
    cr_assert_eq(r, 0, "get %s: %s", name, strerror(-r));
    if (want_hit >= 0)
        cr_assert_eq(obj.hit, want_hit, "%s: hit=%d, want %d", name, obj.hit, want_hit);
    expect_object(&obj, name);
    close(obj.fd);
}

struct l3cache_source source_of(const char *name)
{
    char p[512];
    src_path(p, sizeof(p), name);
    struct l3cache_source s;
    cr_assert_eq(l3cache_identify(AT_FDCWD, p, 0, NULL, &s), 0);
    return s;
}

/* Counts entries under dir (recursively) whose name starts with prefix and,
 * when suffix is not NULL, ends with it. */
int count_names(const char *dir, const char *prefix, const char *suffix)
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

void object_path(const struct l3cache_key *key, char *buf, size_t size)
{
    char rel[64];
    l3cache_object_relpath(key, rel);
    snprintf(buf, size, "%s/%s", cachedir, rel);
}


int mount_tmpfs(const char *opts)
{
    mkdir(mnt, 0755);
    if (mount("tmpfs", mnt, "tmpfs", 0, opts) != 0)
        return -errno;
    mounted = 1;
    return 0;
}

l3cache *open_flags(unsigned flags, struct l3cache_internal *tweak)
{
    struct l3cache_options o = {.dir = cachedir, .fsync_policy = L3CACHE_FSYNC_OBJECT,
                                .flags = flags};
    return open_with(&o, tweak);
}


/* The path of the object a source is stored as. */
void object_of(l3cache *c, const char *name, char *path, size_t size, uint64_t *len)
{
    struct l3cache_object o;
    cr_assert_eq(get_file(c, name, &o, NULL), 0);
    object_path(&o.key, path, size);
    *len = o.size;
    close(o.fd);
}
