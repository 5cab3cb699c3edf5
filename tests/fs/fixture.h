/* fixture.h — what the test_fs*.c rooms share (fixture.c): the suite "mount"
 * (each test builds a source tree, mounts it with $L3FS in the foreground,
 * checks and unmounts; skipped without /dev/fuse or fusermount3), the tree's
 * expected entries, and helpers to mount, read statistics and check pixels. */
#ifndef L3_TEST_FS_FIXTURE_H
#define L3_TEST_FS_FIXTURE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What the test expects at the mount. */
enum ekind { E_L3, E_SAME, E_LINK, E_DIR, E_BAD };
struct entry {
    char src[128];   /* path under SOURCE */
    char shown[128]; /* path under MOUNTPOINT */
    int kind;
};

/* The test's tree: directories, the daemon, the expected entries. */
struct fs_tree {
    char dir[PATH_MAX], src[PATH_MAX], mnt[PATH_MAX], cache[PATH_MAX], log[PATH_MAX];
    pid_t pid;
    struct entry e[128];
    int n;
};
extern struct fs_tree T;

/* snprintf that must fit (the test fails otherwise) */
void xsnprintf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* tc_write_file that must work */
void spit(const char *path, const void *data, size_t len);
/* Writes a PNG with libpng: color type, bit depth, interlace, tRNS. */
void write_png(const char *path, uint32_t w, uint32_t h, int ctype, int depth,
               int interlace, int trns, uint64_t seed);
void srcpath(char *buf, size_t cap, const char *rel);
void mntpath(char *buf, size_t cap, const char *rel);
void mkdir_src(const char *rel);
void png_src(const char *rel, uint32_t w, uint32_t h, int ct, int depth, int il,
             int trns);
/* The standard tree. */
void make_tree(int with_corrupt);
int have_fuse(void);
void setup(void);
const char *l3fs_bin(void);
/* Mounts SOURCE in the foreground with extra arguments (NULL-terminated). */
void mount_fs(const char *first, ...);
/* Unmounts and returns the daemon's exit status (-1 if it had to be killed). */
int unmount_fs(void);
void teardown(void);
double stat_num(const char *key);
/* Decodes a .l3 buffer and compares with libpng's decode of the source. */
void check_pixels(const void *l3, size_t l3len, const char *png_path);
/* Reads every expected entry through the mount and checks it. */
int check_all(void);
int count_kind(int kind);

#endif
