/* fixture.c — the suite "mount" of test_fs and its helpers (fixture.h):
 * source trees of every PNG type written with libpng (nested directories, odd
 * names, a corrupt PNG, other files, symlinks), mounts in the foreground,
 * statistics and pixel checks against libpng. */
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

/* snprintf that must fit */
void xsnprintf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    cr_assert(n >= 0 && (size_t)n < cap, "path too long");
}

/* tc_write_file that must work */
void spit(const char *path, const void *data, size_t len)
{
    int e = tc_write_file(path, data, len);
    cr_assert_eq(e, 0, "write %s: %s", path, strerror(-e));
}

/* Writes a PNG with libpng: color type, bit depth, interlace, tRNS. */
void write_png(const char *path, uint32_t w, uint32_t h, int ctype, int depth,
               int interlace, int trns, uint64_t seed)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "create %s: %s", path, strerror(errno));
    png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(p);
    cr_assert(p && info);
    if (setjmp(png_jmpbuf(p)))
        cr_assert_fail("libpng failed writing %s", path);
    png_init_io(p, f);
    png_set_compression_level(p, 1);
    png_set_IHDR(p, info, w, h, depth, ctype,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    int channels = ctype == PNG_COLOR_TYPE_GRAY ? 1 : ctype == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                   : ctype == PNG_COLOR_TYPE_RGB ? 3 : ctype == PNG_COLOR_TYPE_RGBA ? 4 : 1;
    unsigned maxv = (1u << depth) - 1;
    if (ctype == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[256];
        png_byte alpha[256];
        unsigned n = 1u << depth;
        for (unsigned i = 0; i < n; i++) {
            pal[i].red = (png_byte)(i * 37);
            pal[i].green = (png_byte)(i * 91);
            pal[i].blue = (png_byte)(255 - i);
            alpha[i] = (png_byte)(i * 53);
        }
        png_set_PLTE(p, info, pal, (int)n);
        if (trns)
            png_set_tRNS(p, info, alpha, (int)(n > 4 ? n / 2 : n), NULL);
    } else if (trns && (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_RGB)) {
        png_color_16 key = {0, (png_uint_16)(1 & maxv), (png_uint_16)(2 & maxv),
                            (png_uint_16)(3 & maxv), (png_uint_16)(1 & maxv)};
        png_set_tRNS(p, info, NULL, 0, &key);
    }
    png_write_info(p, info);
    if (depth == 16)
        png_set_swap(p); /* rows below are native little-endian */
    size_t bits = (size_t)w * channels * depth;
    size_t rowbytes = (bits + 7) / 8;
    png_bytep *rows = calloc(h, sizeof *rows);
    uint64_t s = seed;
    for (uint32_t y = 0; y < h; y++) {
        rows[y] = calloc(1, rowbytes);
        for (uint32_t x = 0; x < w * (uint32_t)channels; x++) {
            /* smooth gradient plus noise: compressible but not trivial */
            unsigned v = (unsigned)((x * 5 + y * 3 + (tc_splitmix64(&s) & 7)) & maxv);
            if (depth == 16) {
                uint16_t v16 = (uint16_t)((x * 977 + y * 131 + (tc_splitmix64(&s) & 255)) & 0xffff);
                memcpy(rows[y] + 2 * x, &v16, 2);
            } else if (depth == 8) {
                rows[y][x] = (png_byte)v;
            } else {
                size_t bit = (size_t)x * depth;
                rows[y][bit / 8] |= (png_byte)(v << (8 - depth - bit % 8));
            }
        }
    }
    png_write_image(p, rows);
    png_write_end(p, NULL);
    png_destroy_write_struct(&p, &info);
    for (uint32_t y = 0; y < h; y++)
        free(rows[y]);
    free(rows);
    cr_assert_eq(fclose(f), 0);
}

struct fs_tree T;

static void add(const char *src, const char *shown, int kind)
{
    cr_assert(T.n < 128);
    xsnprintf(T.e[T.n].src, sizeof T.e[0].src, "%s", src);
    xsnprintf(T.e[T.n].shown, sizeof T.e[0].shown, "%s", shown);
    T.e[T.n].kind = kind;
    T.n++;
}

void srcpath(char *buf, size_t cap, const char *rel)
{
    xsnprintf(buf, cap, "%s/%s", T.src, rel);
}

void mntpath(char *buf, size_t cap, const char *rel)
{
    xsnprintf(buf, cap, "%s/%s", T.mnt, rel);
}

void mkdir_src(const char *rel)
{
    char p[PATH_MAX];
    srcpath(p, sizeof p, rel);
    cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s", p);
    add(rel, rel, E_DIR);
}

void png_src(const char *rel, uint32_t w, uint32_t h, int ct, int depth, int il,
             int trns)
{
    char p[PATH_MAX], shown[128];
    srcpath(p, sizeof p, rel);
    write_png(p, w, h, ct, depth, il, trns, (uint64_t)T.n * 7919 + w);
    xsnprintf(shown, sizeof shown, "%s", rel);
    strcpy(shown + strlen(shown) - 4, ".l3");
    add(rel, shown, E_L3);
}

/* Every PNG colour type and bit depth, interlaced ones, tRNS variants. */
static void make_pngs(const char *dir)
{
    static const struct {
        int ct, depth, il, trns;
    } types[] = {
        {PNG_COLOR_TYPE_GRAY, 1, 0, 0},       {PNG_COLOR_TYPE_GRAY, 2, 0, 0},
        {PNG_COLOR_TYPE_GRAY, 4, 0, 0},       {PNG_COLOR_TYPE_GRAY, 8, 0, 1},
        {PNG_COLOR_TYPE_GRAY, 16, 1, 0},      {PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, 0},
        {PNG_COLOR_TYPE_GRAY_ALPHA, 16, 0, 0}, {PNG_COLOR_TYPE_RGB, 8, 0, 0},
        {PNG_COLOR_TYPE_RGB, 8, 1, 1},        {PNG_COLOR_TYPE_RGB, 16, 0, 0},
        {PNG_COLOR_TYPE_RGBA, 8, 0, 0},       {PNG_COLOR_TYPE_RGBA, 16, 1, 0},
        {PNG_COLOR_TYPE_PALETTE, 1, 0, 0},    {PNG_COLOR_TYPE_PALETTE, 2, 0, 1},
        {PNG_COLOR_TYPE_PALETTE, 4, 1, 0},    {PNG_COLOR_TYPE_PALETTE, 8, 0, 1},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char rel[128];
        xsnprintf(rel, sizeof rel, "%s%st%zu_c%d_d%d%s.png", dir, dir[0] ? "/" : "", i,
                  types[i].ct, types[i].depth, types[i].il ? "_i" : "");
        png_src(rel, 37 + (uint32_t)i * 5, 19 + (uint32_t)i * 3, types[i].ct, types[i].depth,
                types[i].il, types[i].trns);
    }
}

/* The standard tree. */
void make_tree(int with_corrupt)
{
    char p[PATH_MAX], q[PATH_MAX];
    make_pngs("");
    mkdir_src("a");
    mkdir_src("a/b");
    mkdir_src("a/b/c");
    png_src("a/b/c/deep.png", 64, 64, PNG_COLOR_TYPE_RGB, 8, 0, 0);
    png_src("a/with space.png", 40, 30, PNG_COLOR_TYPE_RGBA, 8, 0, 0);
    png_src("a/ünïcödé 画像.png", 33, 17, PNG_COLOR_TYPE_GRAY, 8, 0, 0);
    png_src("-leading dash.png", 20, 20, PNG_COLOR_TYPE_RGB, 8, 0, 0);
    png_src("UPPER.PNG", 50, 10, PNG_COLOR_TYPE_PALETTE, 8, 0, 0);
    png_src("Mixed.Png", 10, 50, PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, 0);
    /* collision: a real dup.l3 wins; dup.png stays visible as a PNG */
    png_src("dup.png", 16, 16, PNG_COLOR_TYPE_RGB, 8, 0, 0);
    T.n--;
    add("dup.png", "dup.png", E_SAME);
    srcpath(p, sizeof p, "dup.l3");
    spit(p, "a real l3 file\n", 15);
    add("dup.l3", "dup.l3", E_SAME);
    /* other files pass through */
    srcpath(p, sizeof p, "labels.txt");
    spit(p, "road\ncar\nperson\n", 16);
    add("labels.txt", "labels.txt", E_SAME);
    srcpath(p, sizeof p, "a/meta.json");
    spit(p, "{\"k\": 1}\n", 9);
    add("a/meta.json", "a/meta.json", E_SAME);
    srcpath(p, sizeof p, "fake.png"); /* .png name, no PNG signature */
    spit(p, "this is not a png\n", 18);
    add("fake.png", "fake.png", E_SAME);
    srcpath(p, sizeof p, "empty.txt");
    spit(p, "", 0);
    add("empty.txt", "empty.txt", E_SAME);
    /* symlinks: outside the source, and one named .png */
    srcpath(p, sizeof p, "outside");
    cr_assert_eq(symlink("../../../../../../../etc", p), 0);
    add("outside", "outside", E_LINK);
    srcpath(p, sizeof p, "link.png");
    cr_assert_eq(symlink("UPPER.PNG", p), 0);
    add("link.png", "link.png", E_LINK);
    if (with_corrupt) {
        /* a real PNG cut in half: signature right, data wrong */
        srcpath(q, sizeof q, "t7_c2_d8.png");
        size_t len;
        char *b = tc_slurp(q, &len);
        cr_assert(b);
        srcpath(p, sizeof p, "corrupt.png");
        spit(p, b, len / 2);
        free(b);
        add("corrupt.png", "corrupt.l3", E_BAD);
    }
}

int have_fuse(void)
{
    return access("/dev/fuse", R_OK | W_OK) == 0 &&
           (access("/usr/bin/fusermount3", X_OK) == 0 || access("/bin/fusermount3", X_OK) == 0);
}

void setup(void)
{
    memset(&T, 0, sizeof T);
    T.pid = -1;
    xsnprintf(T.dir, sizeof T.dir, "/tmp/l3fs-test-XXXXXX");
    cr_assert(mkdtemp(T.dir), "mkdtemp: %s", strerror(errno));
    xsnprintf(T.src, sizeof T.src, "%s/src", T.dir);
    xsnprintf(T.mnt, sizeof T.mnt, "%s/mnt", T.dir);
    xsnprintf(T.cache, sizeof T.cache, "%s/cache", T.dir);
    xsnprintf(T.log, sizeof T.log, "%s/l3fs.log", T.dir);
    cr_assert_eq(mkdir(T.src, 0755), 0);
    cr_assert_eq(mkdir(T.mnt, 0755), 0);
}

const char *l3fs_bin(void)
{
    const char *b = getenv("L3FS");
    cr_assert(b && access(b, X_OK) == 0, "$L3FS must name the l3fs binary");
    return b;
}

/* Mounts SOURCE in the foreground with extra arguments (NULL-terminated). */
void mount_fs(const char *first, ...)
{
    if (!have_fuse())
        cr_skip_test("/dev/fuse or fusermount3 is missing: cannot mount");
    const char *argv[32];
    int n = 0;
    argv[n++] = l3fs_bin();
    argv[n++] = T.src;
    argv[n++] = T.mnt;
    argv[n++] = "-f";
    argv[n++] = "--cache-dir";
    argv[n++] = T.cache;
    argv[n++] = "--log-level";
    argv[n++] = "info";
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fd = open(T.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
        }
        execv(argv[0], (char **)argv);
        _exit(127);
    }
    T.pid = pid;
    char ctl[PATH_MAX];
    mntpath(ctl, sizeof ctl, L3FS_CTL_DIR);
    for (int i = 0; i < 2000; i++) { /* up to 20 s (sanitizer builds start slowly) */
        struct stat st;
        if (stat(ctl, &st) == 0)
            return;
        int ws;
        if (waitpid(pid, &ws, WNOHANG) == pid) {
            T.pid = -1;
            cr_assert_fail("l3fs exited before mounting (status %d); see %s", ws, T.log);
        }
        usleep(10000);
    }
    cr_assert_fail("l3fs did not mount within 20 s; see %s", T.log);
}

/* Unmounts and returns the daemon's exit status (-1 if it had to be killed). */
int unmount_fs(void)
{
    if (T.pid <= 0) {
        if (T.mnt[0])
            tc_sh("fusermount3 -u -z '%s' 2>/dev/null", T.mnt);
        return 0;
    }
    tc_sh("fusermount3 -u -z '%s' 2>/dev/null", T.mnt);
    int ws = 0, st = -1;
    for (int i = 0; i < 3000; i++) { /* 30 s: sanitizer builds on a loaded machine */
        if (waitpid(T.pid, &ws, WNOHANG) == T.pid) {
            st = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            break;
        }
        usleep(10000);
    }
    if (st < 0) {
        kill(T.pid, SIGKILL);
        waitpid(T.pid, &ws, 0);
    }
    T.pid = -1;
    if (st != 0) /* show why in the test log */
        tc_sh("echo 'l3fs exit status %d; its log:' >&2; tail -40 '%s' >&2", st, T.log);
    return st;
}

void teardown(void)
{
    unmount_fs();
    if (T.dir[0] && !getenv("L3FS_TEST_KEEP"))
        tc_sh("rm -rf '%s'", T.dir);
}

static char *stats_json(void)
{
    char p[PATH_MAX];
    size_t len;
    mntpath(p, sizeof p, L3FS_CTL_DIR "/stats.json");
    char *j = tc_slurp(p, &len);
    cr_assert(j, "read %s: %s", p, strerror(errno));
    j = realloc(j, len + 1);
    j[len] = '\0';
    return j;
}

double stat_num(const char *key)
{
    char *j = stats_json();
    double v = -1;
    int r = l3fs_json_number(j, key, &v);
    cr_assert_eq(r, 0, "stats.json has no %s:\n%s", key, j);
    free(j);
    return v;
}

/* Decodes a .l3 buffer and compares with libpng's decode of the source. */
void check_pixels(const void *l3, size_t l3len, const char *png_path)
{
    size_t plen;
    void *png = tc_slurp(png_path, &plen);
    cr_assert(png, "read %s", png_path);
    struct l3_info a, b;
    void *pa = NULL, *pb = NULL;
    size_t sa = 0, sb = 0;
    int r = l3_decode_alloc(l3, l3len, NULL, &pa, &sa, &a);
    cr_assert_eq(r, L3_OK, "l3_decode of %s's .l3: %s", png_path, l3_strerror(r));
    r = l3_png_decode(png, plen, NULL, &b, &pb, &sb);
    cr_assert_eq(r, L3_OK, "l3_png_decode %s: %s", png_path, l3_strerror(r));
    cr_assert(a.width == b.width && a.height == b.height && a.channels == b.channels &&
                  a.bit_depth == b.bit_depth && a.color == b.color,
              "%s: header differs", png_path);
    cr_assert_eq(sa, sb, "%s: decoded sizes differ", png_path);
    cr_assert(memcmp(pa, pb, sa) == 0, "%s: pixels differ", png_path);
    l3_free(pa);
    l3_free(pb);
    free(png);
}

/* Reads every expected entry through the mount and checks it. */
int check_all(void)
{
    int l3count = 0;
    for (int i = 0; i < T.n; i++) {
        struct entry *e = &T.e[i];
        char m[PATH_MAX], s[PATH_MAX];
        mntpath(m, sizeof m, e->shown);
        srcpath(s, sizeof s, e->src);
        struct stat st;
        if (e->kind == E_BAD) {
            errno = 0;
            cr_assert(stat(m, &st) < 0 && errno == EIO, "%s: want EIO, got %s", e->shown,
                      strerror(errno));
            continue;
        }
        cr_assert_eq(lstat(m, &st), 0, "lstat %s: %s", e->shown, strerror(errno));
        struct stat sst;
        cr_assert_eq(lstat(s, &sst), 0);
        cr_assert_eq(st.st_mode, sst.st_mode, "%s: mode", e->shown);
        cr_assert_eq(st.st_uid, sst.st_uid);
        cr_assert_eq(st.st_gid, sst.st_gid);
        if (e->kind == E_LINK) {
            char a[PATH_MAX], b[PATH_MAX];
            ssize_t x = readlink(m, a, sizeof a), y = readlink(s, b, sizeof b);
            cr_assert(x > 0 && x == y && memcmp(a, b, (size_t)x) == 0, "%s: link", e->shown);
            continue;
        }
        if (e->kind == E_DIR)
            continue;
        size_t len;
        void *data = tc_slurp(m, &len);
        cr_assert(data, "read %s: %s", e->shown, strerror(errno));
        cr_assert_eq((size_t)st.st_size, len, "%s: st_size %lld but %zu bytes read", e->shown,
                     (long long)st.st_size, len);
        if (e->kind == E_SAME) {
            size_t slen;
            void *sd = tc_slurp(s, &slen);
            cr_assert(slen == len && memcmp(sd, data, len) == 0, "%s differs", e->shown);
            free(sd);
        } else {
            check_pixels(data, len, s);
            l3count++;
        }
        free(data);
    }
    return l3count;
}

int count_kind(int kind)
{
    int n = 0;
    for (int i = 0; i < T.n; i++)
        n += T.e[i].kind == kind;
    return n;
}

TestSuite(mount, .init = setup, .fini = teardown, .timeout = TC_TIMEOUT(120));
