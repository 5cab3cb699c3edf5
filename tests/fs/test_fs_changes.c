/* test_fs_changes.c — the l3fs filesystem (fixture.c): changes to the source
 * under a mount: picked up, seen at once, an open reader's version,
 * descriptors and identity of known files. */
#include <criterion/criterion.h>
#include "tc_timeout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <png.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "l3.h"
#include "l3cache.h"
#include "l3fs.h"
#include "tc_file.h"
#include "tc_shell.h"
#include "tc_rand.h"
#include "fixture.h"

Test(mount, source_changes_are_picked_up)
{
    make_tree(0);
    mount_fs("--timeout", "0.2", "--dir-timeout", "0.2", NULL);
    char s[PATH_MAX], m[PATH_MAX];
    srcpath(s, sizeof s, "a/b/c/deep.png");
    mntpath(m, sizeof m, "a/b/c/deep.l3");
    size_t len1, len2;
    void *d1 = tc_slurp(m, &len1);
    cr_assert(d1);
    check_pixels(d1, len1, s);
    /* rewrite the source with other pixels and another size */
    write_png(s, 90, 70, PNG_COLOR_TYPE_RGB, 16, 0, 0, 4242);
    usleep(400000);
    struct stat st;
    cr_assert_eq(stat(m, &st), 0);
    void *d2 = tc_slurp(m, &len2);
    cr_assert(d2);
    cr_assert_eq((size_t)st.st_size, len2);
    cr_assert(len1 != len2 || memcmp(d1, d2, len1), "content did not change");
    check_pixels(d2, len2, s);
    cr_assert_eq(stat_num("fs.encodes"), 2, "one encode before, one after the change");
    free(d1);
    free(d2);
    /* a new PNG appears, a deleted one disappears */
    char s2[PATH_MAX], m2[PATH_MAX];
    srcpath(s2, sizeof s2, "a/new.png");
    mntpath(m2, sizeof m2, "a/new.l3");
    write_png(s2, 10, 10, PNG_COLOR_TYPE_GRAY, 8, 0, 0, 1);
    usleep(400000);
    cr_assert_eq(stat(m2, &st), 0, "new file: %s", strerror(errno));
    cr_assert_eq(unlink(s), 0);
    usleep(400000);
    errno = 0;
    cr_assert(stat(m, &st) < 0 && errno == ENOENT, "deleted source: %s", strerror(errno));
    cr_assert_eq(unmount_fs(), 0);
}

/* Waits up to 3 s for stat(path) to give size `want` (or ENOENT for -1). */
static int wait_size(const char *path, long long want)
{
    for (int i = 0; i < 300; i++) {
        struct stat st;
        int r = stat(path, &st);
        if ((want < 0 && r < 0 && errno == ENOENT) || (want >= 0 && r == 0 && st.st_size == want))
            return 1;
        usleep(10000);
    }
    return 0;
}

/* Waits up to 3 s until the mounted file `m` decodes to an image `width`
 * wide, then checks its pixels against the source `s`. */
static int wait_width(const char *m, const char *s, uint32_t width)
{
    for (int i = 0; i < 300; i++) {
        size_t len;
        void *d = tc_slurp(m, &len);
        struct l3_info info;
        int seen = d && l3_read_info(d, len, &info, NULL) == L3_OK && info.width == width;
        if (seen)
            check_pixels(d, len, s);
        free(d);
        if (seen)
            return 1;
        usleep(10000);
    }
    return 0;
}

Test(mount, source_changes_seen_at_once_with_long_timeouts)
{
    make_tree(0);
    mount_fs("--timeout", "3600", "--dir-timeout", "3600", NULL);
    char s[PATH_MAX], m[PATH_MAX], q[PATH_MAX];
    srcpath(s, sizeof s, "a/b/c/deep.png");
    mntpath(m, sizeof m, "a/b/c/deep.l3");
    size_t len;
    void *d = tc_slurp(m, &len);
    cr_assert(d);
    free(d);
    /* rewritten (replaced by rename, as most tools do): new bytes at once */
    srcpath(q, sizeof q, "a/b/c/.deep.tmp");
    write_png(q, 120, 30, PNG_COLOR_TYPE_RGBA, 8, 0, 0, 99);
    cr_assert_eq(rename(q, s), 0);
    int seen = 0;
    for (int i = 0; i < 300 && !seen; i++) {
        struct stat st;
        seen = stat(m, &st) == 0 && (size_t)st.st_size != len;
        if (!seen)
            usleep(10000);
    }
    cr_assert(seen, "the change was not seen within 3 s");
    d = tc_slurp(m, &len);
    cr_assert(d);
    check_pixels(d, len, s);
    free(d);
    /* rewritten in place */
    write_png(s, 60, 60, PNG_COLOR_TYPE_GRAY, 16, 0, 0, 7);
    cr_assert(wait_width(m, s, 60), "the in-place rewrite was not seen within 3 s");
    /* deleted: ENOENT; a new PNG appears */
    cr_assert_eq(unlink(s), 0);
    cr_assert(wait_size(m, -1), "deleted source still visible");
    srcpath(s, sizeof s, "a/fresh.png");
    mntpath(m, sizeof m, "a/fresh.l3");
    struct stat st;
    cr_assert(stat(m, &st) < 0);
    write_png(s, 10, 10, PNG_COLOR_TYPE_GRAY, 8, 0, 0, 3);
    int found = 0;
    for (int i = 0; i < 300 && !found; i++) {
        found = stat(m, &st) == 0;
        if (!found)
            usleep(10000);
    }
    cr_assert(found, "new PNG not visible");
    /* a real .l3 appearing next to the PNG takes the name; the PNG shows as PNG */
    srcpath(q, sizeof q, "a/fresh.l3");
    spit(q, "real\n", 5);
    cr_assert(wait_size(m, 5), "the real .l3 did not take over the name");
    mntpath(q, sizeof q, "a/fresh.png");
    cr_assert_eq(stat(q, &st), 0, "the PNG is visible under its own name: %s", strerror(errno));
    cr_assert_eq(unmount_fs(), 0);
}

Test(mount, open_reader_keeps_its_version)
{
    make_tree(0);
    mount_fs("--timeout", "0.1", "--dir-timeout", "0.1", NULL);
    char s[PATH_MAX], m[PATH_MAX];
    srcpath(s, sizeof s, "a/b/c/deep.png");
    mntpath(m, sizeof m, "a/b/c/deep.l3");
    size_t len0;
    unsigned char *d0 = tc_slurp(m, &len0);
    cr_assert(d0 && len0 > 200);
    int fd = open(m, O_RDONLY);
    cr_assert(fd >= 0);
    unsigned char *got = malloc(len0 + 4096);
    ssize_t n = read(fd, got, 100);
    cr_assert_eq(n, 100);
    /* the source is rewritten in place while the file is open */
    write_png(s, 150, 20, PNG_COLOR_TYPE_GRAY, 8, 0, 0, 5);
    usleep(400000); /* attributes expired, change notified */
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    cr_assert_eq((size_t)st.st_size, len0, "size changed under an open reader");
    /* meanwhile a new open of the name gets the new version */
    size_t len1;
    void *d1 = tc_slurp(m, &len1);
    cr_assert(d1);
    struct l3_info info1;
    cr_assert_eq(l3_read_info(d1, len1, &info1, NULL), L3_OK);
    cr_assert_eq(info1.width, 150, "a new open still sees the old version");
    check_pixels(d1, len1, s);
    cr_assert_eq(stat(m, &st), 0);
    cr_assert_eq((size_t)st.st_size, len1);
    free(d1);
    size_t total = 100;
    while ((n = read(fd, got + total, 4096)) > 0)
        total += (size_t)n;
    close(fd);
    cr_assert_eq(total, len0, "the open reader got %zu of %zu bytes", total, len0);
    cr_assert(memcmp(got, d0, len0) == 0, "the open reader got mixed bytes");
    free(got);
    /* once closed, the new version shows */
    cr_assert(wait_width(m, s, 150), "the new version did not show after the reader closed");
    free(d0);
    cr_assert_eq(unmount_fs(), 0);
}

static int daemon_fds(void)
{
    char p[64];
    xsnprintf(p, sizeof p, "/proc/%d/fd", (int)T.pid);
    DIR *d = opendir(p);
    cr_assert(d, "%s: %s", p, strerror(errno));
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* Only directory nodes hold a descriptor: known files cost none, and a file
 * node re-found by name must still be its inode (never another file). */
Test(mount, known_files_hold_no_descriptors_and_keep_identity)
{
    make_tree(0);
    char s[PATH_MAX], m[PATH_MAX], q[PATH_MAX];
    srcpath(s, sizeof s, "many");
    cr_assert_eq(mkdir(s, 0755), 0);
    enum { NFILES = 3000 };
    for (int i = 0; i < NFILES; i++) {
        char rel[64];
        xsnprintf(rel, sizeof rel, "many/f%04d.txt", i);
        srcpath(s, sizeof s, rel);
        spit(s, rel, strlen(rel));
    }
    mount_fs("--timeout", "0", "--dir-timeout", "0", NULL);
    mntpath(m, sizeof m, "many");
    struct stat st;
    cr_assert_eq(stat(m, &st), 0);
    int fd0 = daemon_fds();
    /* hold every file node in the kernel at once (open handles pin inodes) */
    int *held = malloc(NFILES * sizeof *held);
    cr_assert(held);
    for (int i = 0; i < NFILES; i++) {
        char rel[64];
        xsnprintf(rel, sizeof rel, "many/f%04d.txt", i);
        mntpath(m, sizeof m, rel);
        cr_assert_eq(lstat(m, &st), 0, "%s: %s", rel, strerror(errno));
        cr_assert_eq((size_t)st.st_size, strlen(rel));
        held[i] = open(m, O_PATH);
        cr_assert(held[i] >= 0, "%s: %s", rel, strerror(errno));
    }
    int fd1 = daemon_fds();
    cr_assert(fd1 <= fd0 + 16, "daemon descriptors %d -> %d for %d known files", fd0, fd1,
              NFILES);
    for (int i = 0; i < NFILES; i++)
        close(held[i]);
    free(held);

    /* a known file replaced in the source: its old inode does not silently
     * become the new file; found under its new name it is itself again */
    mntpath(m, sizeof m, "many/f0001.txt");
    int hold = open(m, O_RDONLY);
    cr_assert(hold >= 0);
    struct stat old;
    cr_assert_eq(fstat(hold, &old), 0);
    srcpath(s, sizeof s, "many/f0001.txt");
    srcpath(q, sizeof q, "many/moved.txt");
    cr_assert_eq(rename(s, q), 0);
    spit(s, "a new and longer file\n", 22);
    cr_assert_eq(stat(m, &st), 0);
    cr_assert(st.st_ino != old.st_ino && st.st_size == 22, "the name shows the new file");
    errno = 0;
    cr_assert(fstat(hold, &st) < 0 && errno == ENOENT,
              "the old inode answered for the new file (%s)", strerror(errno));
    mntpath(q, sizeof q, "many/moved.txt");
    cr_assert_eq(stat(q, &st), 0);
    cr_assert_eq(st.st_ino, old.st_ino);
    cr_assert_eq(fstat(hold, &st), 0, "the moved file's inode: %s", strerror(errno));
    cr_assert_eq(st.st_ino, old.st_ino);
    cr_assert_eq(st.st_size, old.st_size);
    char buf[64];
    ssize_t n = read(hold, buf, sizeof buf);
    cr_assert_eq(n, (ssize_t)strlen("many/f0001.txt"));
    cr_assert(memcmp(buf, "many/f0001.txt", (size_t)n) == 0);
    close(hold);

    /* an open .l3 whose source is replaced by rename (the old inode gone)
     * keeps describing and serving its version */
    srcpath(s, sizeof s, "a/b/c/deep.png");
    mntpath(m, sizeof m, "a/b/c/deep.l3");
    size_t len0;
    unsigned char *d0 = tc_slurp(m, &len0);
    cr_assert(d0 && len0 > 200);
    int fd = open(m, O_RDONLY);
    cr_assert(fd >= 0);
    unsigned char *got = malloc(len0 + 4096);
    cr_assert_eq(read(fd, got, 100), 100);
    srcpath(q, sizeof q, "a/b/c/.deep.tmp");
    write_png(q, 33, 17, PNG_COLOR_TYPE_RGB, 8, 0, 0, 77);
    cr_assert_eq(rename(q, s), 0);
    cr_assert_eq(fstat(fd, &st), 0, "open .l3 after its source was replaced: %s",
                 strerror(errno));
    cr_assert_eq((size_t)st.st_size, len0, "size changed under an open reader");
    size_t total = 100;
    while ((n = read(fd, got + total, 4096)) > 0)
        total += (size_t)n;
    close(fd);
    cr_assert_eq(total, len0);
    cr_assert(memcmp(got, d0, len0) == 0, "the open reader got mixed bytes");
    free(got);
    free(d0);
    size_t len1;
    void *d1 = tc_slurp(m, &len1);
    cr_assert(d1);
    struct l3_info info;
    cr_assert_eq(l3_read_info(d1, len1, &info, NULL), L3_OK);
    cr_assert_eq(info.width, 33, "the name did not switch to the new source");
    check_pixels(d1, len1, s);
    free(d1);
    cr_assert_eq(unmount_fs(), 0);
}
