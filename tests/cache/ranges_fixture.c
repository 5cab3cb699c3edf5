/* ranges_fixture.c — the suite "ranges" and its helpers (ranges_fixture.h). */
#include <criterion/criterion.h>
#include "tc_timeout.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <xxhash.h>

#include "handle.h" /* ranges_store / ranges_load, RANGES_MAX */
#include "helpers.h"
#include "ranges_fixture.h"

char root[256], srcdir[300], cachedir[300];
struct fake_codec fc;

static void setup(void)
{
    snprintf(root, sizeof root, "/tmp/l3cache-ranges-XXXXXX");
    cr_assert_not_null(mkdtemp(root));
    snprintf(srcdir, sizeof srcdir, "%s/src", root);
    snprintf(cachedir, sizeof cachedir, "%s/cache", root);
    cr_assert_eq(mkdir(srcdir, 0755), 0);
}

static void teardown(void)
{
    remove_tree(root);
}

TestSuite(ranges, .init = setup, .fini = teardown, .timeout = TC_TIMEOUT(120));

l3cache *open_cache_budget(uint64_t buffer_budget)
{
    struct l3cache_internal in;
    fake_internal(&in, &fc);
    in.buffer_budget = buffer_budget;
    struct l3cache_options o = {.dir = cachedir, .fsync_policy = L3CACHE_FSYNC_OBJECT,
                                .flags = L3CACHE_READ_CHECKS};
    l3cache *c = NULL;
    int r = l3cache_open_internal(&o, &in, &c);
    cr_assert_eq(r, 0, "open: %s", strerror(-r));
    return c;
}

l3cache *open_cache(void)
{
    return open_cache_budget(0);
}


void get_obj(l3cache *c, const char *name, unsigned w, unsigned h, struct obj *ob)
{
    char src[512];
    snprintf(src, sizeof src, "%s/%s", srcdir, name);
    if (access(src, F_OK) != 0)
        cr_assert_eq(write_png(src, w, h, 7 + w, 1), 0);
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    int r = get_fd(c, fd, &ob->o, NULL);
    close(fd);
    cr_assert_eq(r, 0, "get %s: %s", name, strerror(-r));
    char rel[64];
    l3cache_object_relpath(&ob->o.key, rel);
    snprintf(ob->path, sizeof ob->path, "%s/%s", cachedir, rel);
    cr_assert_eq(fake_expected(src, &ob->want, &ob->size), 0);
    cr_assert_eq(ob->o.size, ob->size);
}

void put_obj(struct obj *ob)
{
    close(ob->o.fd);
    free(ob->want);
}


void drop_pages(int fd)
{
    cr_assert_eq(fdatasync(fd), 0);
    cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
}

/* A checked read of [off, off+len) that must succeed: the bytes it serves
 * (from its buffer, or from the descriptor when it says so) equal want.
 * Returns what l3cache_read_checked returned. */
ssize_t read_ok(l3cache *c, const struct obj *ob, const void *map, uint64_t off,
                size_t len)
{
    struct l3cache_scratch sc = {0};
    const void *data;
    ssize_t n = l3cache_read_checked(c, &ob->o.key, ob->o.fd, map, off, len, &sc, &data);
    cr_assert_geq(n, 0, "read at %llu: %s", (unsigned long long)off, strerror((int)-n));
    size_t expect = off >= ob->size ? 0 : ob->size - off < len ? ob->size - off : len;
    uint8_t *got = malloc(len + 1);
    if (n > 0) {
        cr_assert_eq((size_t)n, expect);
        memcpy(got, data, (size_t)n);
    } else {
        cr_assert_null(data);
        cr_assert_eq(pread(ob->o.fd, got, len, (off_t)off), (ssize_t)expect);
    }
    cr_assert_eq(memcmp(got, ob->want + off, expect), 0, "bytes at %llu",
                 (unsigned long long)off);
    free(got);
    l3cache_scratch_free(&sc);
    return n;
}

/* A read through rd that must succeed with the object's bytes from its own
 * buffers or the scratch: returns the slot it was served from (-1: scratch). */
int reader_ok(l3cache_reader *rd, const struct obj *ob, struct l3cache_scratch *sc,
              uint64_t off, size_t len)
{
    struct l3cache_view v;
    ssize_t n = l3cache_reader_read(rd, off, len, sc, &v);
    size_t expect = off >= ob->size ? 0 : ob->size - off < len ? ob->size - off : len;
    cr_assert_eq(n, (ssize_t)expect, "read at %llu: %zd", (unsigned long long)off, n);
    cr_assert_eq(memcmp(v.data, ob->want + off, expect), 0, "bytes at %llu",
                 (unsigned long long)off);
    int slot = v.slot;
    l3cache_reader_done(rd, &v);
    cr_assert_null(v.data);
    return slot;
}

/* How many mappings of fd's file this process holds (/proc/self/maps). */
int mappings_of(int fd)
{
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long ino = 0;
        if (sscanf(line, "%*s %*s %*s %*s %llu", &ino) == 1 && ino == (unsigned long long)st.st_ino)
            n++;
    }
    fclose(f);
    return n;
}
