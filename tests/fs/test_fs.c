/* test_fs.c — the l3fs filesystem, mounted for real.
 *
 * Each test builds a source tree (PNGs of every type written with libpng,
 * nested directories, odd names, a corrupt PNG, other files, symlinks), mounts
 * it with the l3fs binary ($L3FS) in the foreground, checks, and unmounts.
 * Tests skip when /dev/fuse or fusermount3 is missing. The unit tests at the
 * end cover the namespace rules, statistics and the command line alone.
 */
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

/* ------------------------------------------------------------ helpers */

static void xsnprintf(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void xsnprintf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    cr_assert(n >= 0 && (size_t)n < cap, "path too long");
}

/* tc_write_file that must work */
static void spit(const char *path, const void *data, size_t len)
{
    int e = tc_write_file(path, data, len);
    cr_assert_eq(e, 0, "write %s: %s", path, strerror(-e));
}

/* Writes a PNG with libpng: color type, bit depth, interlace, tRNS. */
static void write_png(const char *path, uint32_t w, uint32_t h, int ctype, int depth,
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

/* What the test expects at the mount. */
enum ekind { E_L3, E_SAME, E_LINK, E_DIR, E_BAD };
struct entry {
    char src[128];   /* path under SOURCE */
    char shown[128]; /* path under MOUNTPOINT */
    int kind;
};

static struct {
    char dir[PATH_MAX], src[PATH_MAX], mnt[PATH_MAX], cache[PATH_MAX], log[PATH_MAX];
    pid_t pid;
    struct entry e[128];
    int n;
} T;

static void add(const char *src, const char *shown, int kind)
{
    cr_assert(T.n < 128);
    xsnprintf(T.e[T.n].src, sizeof T.e[0].src, "%s", src);
    xsnprintf(T.e[T.n].shown, sizeof T.e[0].shown, "%s", shown);
    T.e[T.n].kind = kind;
    T.n++;
}

static void srcpath(char *buf, size_t cap, const char *rel)
{
    xsnprintf(buf, cap, "%s/%s", T.src, rel);
}

static void mntpath(char *buf, size_t cap, const char *rel)
{
    xsnprintf(buf, cap, "%s/%s", T.mnt, rel);
}

static void mkdir_src(const char *rel)
{
    char p[PATH_MAX];
    srcpath(p, sizeof p, rel);
    cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s", p);
    add(rel, rel, E_DIR);
}

static void png_src(const char *rel, uint32_t w, uint32_t h, int ct, int depth, int il,
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
static void make_tree(int with_corrupt)
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

static int have_fuse(void)
{
    return access("/dev/fuse", R_OK | W_OK) == 0 &&
           (access("/usr/bin/fusermount3", X_OK) == 0 || access("/bin/fusermount3", X_OK) == 0);
}

static void setup(void)
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

static const char *l3fs_bin(void)
{
    const char *b = getenv("L3FS");
    cr_assert(b && access(b, X_OK) == 0, "$L3FS must name the l3fs binary");
    return b;
}

/* Mounts SOURCE in the foreground with extra arguments (NULL-terminated). */
static void mount_fs(const char *first, ...)
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
static int unmount_fs(void)
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

static void teardown(void)
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

static double stat_num(const char *key)
{
    char *j = stats_json();
    double v = -1;
    int r = l3fs_json_number(j, key, &v);
    cr_assert_eq(r, 0, "stats.json has no %s:\n%s", key, j);
    free(j);
    return v;
}

/* Decodes a .l3 buffer and compares with libpng's decode of the source. */
static void check_pixels(const void *l3, size_t l3len, const char *png_path)
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
static int check_all(void)
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

static int count_kind(int kind)
{
    int n = 0;
    for (int i = 0; i < T.n; i++)
        n += T.e[i].kind == kind;
    return n;
}

TestSuite(mount, .init = setup, .fini = teardown, .timeout = TC_TIMEOUT(120));

/* ------------------------------------------------------------- tests */

Test(mount, pixels_sizes_and_namespace)
{
    make_tree(1);
    mount_fs(NULL);
    int n = check_all();
    cr_assert_eq(n, count_kind(E_L3));

    /* the directory listing is exactly the expected names */
    char cmd[PATH_MAX + 64];
    xsnprintf(cmd, sizeof cmd, "cd '%s' && find . -mindepth 1 | sort > ../found", T.mnt);
    cr_assert_eq(tc_sh("%s", cmd), 0);
    char want[PATH_MAX];
    xsnprintf(want, sizeof want, "%s/want", T.dir);
    FILE *f = fopen(want, "w");
    for (int i = 0; i < T.n; i++)
        fprintf(f, "./%s\n", T.e[i].shown);
    fclose(f);
    cr_assert_eq(tc_sh("cd '%s' && LC_ALL=C sort -o want want && LC_ALL=C sort -o found found && "
                    "diff want found >&2",
                    T.dir),
                 0, "mount listing differs from the expected names");

    /* a transcoded PNG's own name is hidden; .l3fs is hidden but reachable */
    char p[PATH_MAX];
    struct stat st;
    mntpath(p, sizeof p, "UPPER.PNG");
    cr_assert(lstat(p, &st) < 0 && errno == ENOENT);
    mntpath(p, sizeof p, "a/with space.png");
    cr_assert(lstat(p, &st) < 0 && errno == ENOENT);
    mntpath(p, sizeof p, "nonexistent.l3");
    cr_assert(lstat(p, &st) < 0 && errno == ENOENT);
    mntpath(p, sizeof p, L3FS_CTL_DIR);
    cr_assert(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
    /* symlinks stay symlinks; the daemon never follows them */
    mntpath(p, sizeof p, "link.png");
    cr_assert(lstat(p, &st) == 0 && S_ISLNK(st.st_mode));
    /* `..` from the root is the kernel's business: it cannot reach SOURCE's parent */
    mntpath(p, sizeof p, "a/b/../../a/b/c/deep.l3");
    cr_assert(stat(p, &st) == 0);
    cr_assert_eq(unmount_fs(), 0, "daemon exit status");
}

Test(mount, copy_tools_and_python)
{
    make_tree(0);
    mount_fs(NULL);
    check_all();
    /* cp -r, tar, rsync all give byte-identical trees; find and du agree */
    cr_assert_eq(tc_sh("cd '%s' && cp -r mnt cp && diff -r --no-dereference mnt cp >&2", T.dir), 0);
    cr_assert_eq(tc_sh("cd '%s' && mkdir tar && tar cf - -C mnt . | tar xf - -C tar && "
                    "diff -r --no-dereference mnt tar >&2",
                    T.dir),
                 0);
    cr_assert_eq(tc_sh("cd '%s' && rsync -a mnt/ rs/ && diff -r --no-dereference mnt rs >&2 && "
                    "diff -r --no-dereference cp rs >&2",
                    T.dir),
                 0);
    cr_assert_eq(tc_sh("cd '%s' && for d in mnt rs; do (cd $d && find . \\( -type d -printf "
                    "'%%P d\\n' \\) -o -printf '%%P %%y %%s\\n' | sort) > find.$d; done && "
                    "diff find.mnt find.rs >&2",
                    T.dir),
                 0);
    cr_assert_eq(tc_sh("cd '%s' && for d in mnt rs; do (cd $d && find . -type f -print0 | "
                    "du -b --files0-from=- | sort -k2) > du.$d; done && diff du.mnt du.rs >&2 && "
                    "du -sh mnt > /dev/null",
                    T.dir),
                 0);
    /* Python: open().read() and mmap see the same bytes as read(2) */
    char script[PATH_MAX];
    xsnprintf(script, sizeof script, "%s/check.py", T.dir);
    FILE *f = fopen(script, "w");
    fprintf(f, "import mmap, os, sys\n"
               "root = sys.argv[1]\n"
               "n = 0\n"
               "for d, dirs, files in os.walk(root):\n"
               "    for name in files:\n"
               "        p = os.path.join(d, name)\n"
               "        if not name.endswith('.l3') or os.path.islink(p): continue\n"
               "        data = open(p, 'rb').read()\n"
               "        assert len(data) == os.stat(p).st_size, p\n"
               "        fd = os.open(p, os.O_RDONLY)\n"
               "        raw = b''\n"
               "        while True:\n"
               "            b = os.read(fd, 1000)\n"
               "            if not b: break\n"
               "            raw += b\n"
               "        os.close(fd)\n"
               "        with open(p, 'rb') as fh:\n"
               "            m = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)\n"
               "            assert m[:] == data == raw, p\n"
               "            m.close()\n"
               "        n += 1\n"
               "print(n)\n");
    fclose(f);
    char out[PATH_MAX];
    xsnprintf(out, sizeof out, "%s/py.out", T.dir);
    cr_assert_eq(tc_sh("/usr/bin/python3 '%s' '%s' > '%s'", script, T.mnt, out), 0);
    size_t len;
    char *o = tc_slurp(out, &len);
    cr_assert(o);
    cr_assert_eq(atoi(o), count_kind(E_L3) + 1 /* dup.l3 */);
    free(o);
    cr_assert_eq(unmount_fs(), 0);
}

Test(mount, stats_count_exactly_and_index_survives_remount)
{
    make_tree(0);
    int n = count_kind(E_L3);
    mount_fs(NULL);
    check_all(); /* first pass: every file encoded once */
    cr_assert_eq(stat_num("fs.encodes"), n, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(n));
    cr_assert_eq(stat_num("fs.l3_open_misses"), n, "fs.l3_open_misses = %g, want %g", stat_num("fs.l3_open_misses"), (double)(n));
    cr_assert_eq(stat_num("fs.l3_open_hits"), 0, "fs.l3_open_hits = %g, want %g", stat_num("fs.l3_open_hits"), (double)(0));
    cr_assert_eq(stat_num("cache.instance.misses"), n, "cache.instance.misses = %g, want %g", stat_num("cache.instance.misses"), (double)(n));
    cr_assert_eq(stat_num("cache.instance.hits"), 0, "cache.instance.hits = %g, want %g", stat_num("cache.instance.hits"), (double)(0));
    check_all(); /* second pass: all hits */
    cr_assert_eq(stat_num("fs.encodes"), n, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(n));
    cr_assert_eq(stat_num("fs.l3_open_misses"), n, "fs.l3_open_misses = %g, want %g", stat_num("fs.l3_open_misses"), (double)(n));
    cr_assert_eq(stat_num("fs.l3_open_hits"), n, "fs.l3_open_hits = %g, want %g", stat_num("fs.l3_open_hits"), (double)(n));
    cr_assert_eq(stat_num("cache.instance.hits"), n, "cache.instance.hits = %g, want %g", stat_num("cache.instance.hits"), (double)(n));
    cr_assert_eq(stat_num("cache.instance.misses"), n, "cache.instance.misses = %g, want %g", stat_num("cache.instance.misses"), (double)(n));
    cr_assert_eq(stat_num("fs.encode_errors"), 0, "fs.encode_errors = %g, want %g", stat_num("fs.encode_errors"), (double)(0));
    cr_assert_eq(unmount_fs(), 0);

    /* remount on the same cache: sizes come from the index, nothing encodes */
    mount_fs(NULL);
    cr_assert_eq(tc_sh("ls -lR '%s' > /dev/null", T.mnt), 0);
    cr_assert_eq(stat_num("fs.encodes"), 0, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(0));
    cr_assert(stat_num("fs.index_hits") >= n);
    check_all();
    cr_assert_eq(stat_num("fs.encodes"), 0, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(0));
    cr_assert_eq(stat_num("fs.l3_open_hits"), n, "fs.l3_open_hits = %g, want %g", stat_num("fs.l3_open_hits"), (double)(n));
    cr_assert_eq(stat_num("cache.total.misses"), n, "cache.total.misses = %g, want %g", stat_num("cache.total.misses"), (double)(n));
    /* the summary command */
    char out[PATH_MAX];
    xsnprintf(out, sizeof out, "%s/stats.out", T.dir);
    cr_assert_eq(tc_sh("'%s' stats '%s' > '%s'", l3fs_bin(), T.mnt, out), 0);
    size_t len;
    char *o = tc_slurp(out, &len);
    o = realloc(o, len + 1);
    o[len] = '\0';
    cr_assert(strstr(o, "hit rate"), "l3fs stats output:\n%s", o);
    cr_assert(strstr(o, "100.0%"), "l3fs stats output:\n%s", o);
    free(o);
    cr_assert_eq(unmount_fs(), 0);
}

/* ---- 32 readers over overlapping files ---- */
struct reader {
    int id, nfiles, errors;
    char (*paths)[PATH_MAX];
    uint64_t *sums; /* per file: FNV-1a of the bytes, 0 = not read */
    pthread_barrier_t *start;
};

static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h | 1;
}

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    pthread_barrier_wait(r->start);
    for (int k = 0; k < r->nfiles; k++) {
        int i = (k * 7 + r->id) % r->nfiles; /* different order per thread */
        size_t len;
        unsigned char *d = tc_slurp(r->paths[i], &len);
        struct stat st;
        if (!d || stat(r->paths[i], &st) < 0 || (size_t)st.st_size != len) {
            r->errors++;
        } else {
            r->sums[i] = fnv(d, len);
        }
        free(d);
    }
    return NULL;
}

static void run_readers(char (*paths)[PATH_MAX], int nfiles, uint64_t *ref)
{
    enum { NT = 32 };
    pthread_t t[NT];
    struct reader r[NT];
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, NT);
    for (int i = 0; i < NT; i++) {
        r[i] = (struct reader){.id = i, .nfiles = nfiles, .paths = paths, .start = &b};
        r[i].sums = calloc((size_t)nfiles, sizeof(uint64_t));
        cr_assert_eq(pthread_create(&t[i], NULL, reader_main, &r[i]), 0);
    }
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NT; i++) {
        cr_assert_eq(r[i].errors, 0, "thread %d had read errors", i);
        for (int k = 0; k < nfiles; k++) {
            if (!ref[k])
                ref[k] = r[i].sums[k];
            cr_assert_eq(r[i].sums[k], ref[k], "thread %d saw other bytes in %s", i, paths[k]);
        }
        free(r[i].sums);
    }
    pthread_barrier_destroy(&b);
}

Test(mount, thirty_two_readers_one_encode_per_file)
{
    mkdir_src("c");
    enum { NF = 12 };
    for (int i = 0; i < NF; i++) {
        char rel[64];
        xsnprintf(rel, sizeof rel, "c/img%02d.png", i);
        png_src(rel, 300 + (uint32_t)i * 10, 200, i % 2 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGBA,
                8, 0, 0);
    }
    mount_fs("--jobs", "4", NULL);
    char(*paths)[PATH_MAX] = calloc(NF, PATH_MAX);
    for (int i = 0; i < NF; i++)
        mntpath(paths[i], PATH_MAX, T.e[i + 1].shown);
    uint64_t ref[NF] = {0};
    run_readers(paths, NF, ref); /* cold */
    cr_assert_eq(stat_num("fs.encodes"), NF, "exactly one encode per file");
    cr_assert_eq(stat_num("cache.instance.encodes"), NF, "cache.instance.encodes = %g, want %g", stat_num("cache.instance.encodes"), (double)(NF));
    run_readers(paths, NF, ref); /* warm */
    cr_assert_eq(stat_num("fs.encodes"), NF, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(NF));
    cr_assert_eq(check_all(), NF); /* and the bytes decode to the source pixels */
    free(paths);
    cr_assert_eq(unmount_fs(), 0);
}

Test(mount, corrupt_png_gives_eio_others_served)
{
    make_tree(1);
    mount_fs(NULL);
    char p[PATH_MAX];
    mntpath(p, sizeof p, "corrupt.l3");
    for (int i = 0; i < 3; i++) {
        struct stat st;
        errno = 0;
        cr_assert(stat(p, &st) < 0 && errno == EIO, "stat: %s", strerror(errno));
        errno = 0;
        int fd = open(p, O_RDONLY);
        cr_assert(fd < 0 && errno == EIO, "open: %s", strerror(errno));
    }
    /* the name is listed; every other file is still served */
    cr_assert_eq(tc_sh("ls '%s' | grep -qx corrupt.l3", T.mnt), 0);
    check_all();
    cr_assert_eq(stat_num("fs.encode_errors"), 1, "fs.encode_errors = %g, want %g", stat_num("fs.encode_errors"), (double)(1));
    /* logged once, with the path */
    cr_assert_eq(unmount_fs(), 0, "daemon stayed alive and exited cleanly");
    cr_assert_eq(tc_sh("test \"$(grep -c 'corrupt.png' '%s')\" = 1", T.log), 0,
                 "one log line naming corrupt.png");
}

Test(mount, pixel_limit_gives_eio_and_cache_cli)
{
    make_tree(0);
    mount_fs("--max-pixels", "2000", NULL);
    char small[PATH_MAX], big[PATH_MAX];
    mntpath(small, sizeof small, "t0_c0_d1.l3");     /* 37x19 */
    mntpath(big, sizeof big, "t15_c3_d8.l3");        /* 112x64 */
    struct stat st;
    cr_assert_eq(stat(small, &st), 0, "%s", strerror(errno));
    errno = 0;
    cr_assert(stat(big, &st) < 0 && errno == EIO, "over the limit: %s", strerror(errno));
    cr_assert_eq(stat_num("fs.encode_errors"), 1);
    cr_assert_eq(unmount_fs(), 0);
    /* the cache maintenance commands are reachable through l3fs */
    char out[PATH_MAX];
    xsnprintf(out, sizeof out, "%s/cache.out", T.dir);
    cr_assert_eq(tc_sh("'%s' cache stats --cache-dir '%s' > '%s'", l3fs_bin(), T.cache, out), 0);
    cr_assert_eq(tc_sh("grep -q objects '%s'", out), 0);
    cr_assert_eq(tc_sh("'%s' cache verify --cache-dir '%s' > /dev/null", l3fs_bin(), T.cache), 0);
}

/* ------------------------------------------------- the cache command */

/* Runs `l3fs cache ARGS`; its output in out, its exit status returned. */
static int cache_cmd(char *out, size_t outsize, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int cache_cmd(char *out, size_t outsize, const char *fmt, ...)
{
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    xsnprintf(cmd, sizeof cmd, "'%s' cache %s 2>&1", l3fs_bin(), args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, outsize - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static uint64_t json_u64(const char *json, const char *key)
{
    char pat[64];
    xsnprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    cr_assert_not_null(p, "no %s in %s", key, json);
    return strtoull(p + strlen(pat), NULL, 10);
}

/* l3cache_get of source NAME under T.src (real codec): its size, or with
 * want_hit < 0 whether it was a hit. */
static uint64_t cache_get(l3cache *c, const char *name, int want_hit)
{
    char p[PATH_MAX];
    srcpath(p, sizeof p, name);
    int fd = open(p, O_RDONLY);
    cr_assert(fd >= 0);
    struct l3cache_source src;
    cr_assert_eq(l3cache_identify(fd, "", AT_EMPTY_PATH, NULL, &src), 0);
    struct l3cache_object o;
    cr_assert_eq(l3cache_get(c, fd, &src, 0, &o, NULL), 0);
    if (want_hit >= 0)
        cr_assert_eq(o.hit, want_hit, "%s: hit %d", name, o.hit);
    close(fd);
    close(o.fd);
    return want_hit < 0 ? (uint64_t)o.hit : o.size;
}

static int cache_get_any(l3cache *c, const char *name)
{
    return (int)cache_get(c, name, -1);
}

static l3cache *fill_cache(void)
{
    struct l3cache_options co = {.dir = T.cache, .fsync_policy = L3CACHE_FSYNC_OBJECT};
    l3cache *c = NULL;
    cr_assert_eq(l3cache_open(&co, &c), 0);
    return c;
}

Test(cache_cmd, stats_verify_gc_clear, .init = setup, .fini = teardown)
{
    const char *names[] = {"a.png", "b.png", "c.png"};
    for (int i = 0; i < 3; i++) {
        char p[PATH_MAX];
        srcpath(p, sizeof p, names[i]);
        write_png(p, 40 + (uint32_t)i, 40, PNG_COLOR_TYPE_RGB, 8, 0, 0, (uint64_t)i + 1);
    }
    l3cache *c = fill_cache();
    uint64_t size = 0;
    for (int i = 0; i < 3; i++)
        size += cache_get(c, names[i], 0);
    cache_get(c, "a.png", 1);
    cache_get(c, "b.png", 1);
    l3cache_close(c);

    char out[8192];
    cr_assert_eq(cache_cmd(out, sizeof out, "stats --cache-dir '%s' --json", T.cache), 0,
                 "%s", out);
    cr_assert_eq(json_u64(out, "lookups"), 5);
    cr_assert_eq(json_u64(out, "hits"), 2);
    cr_assert_eq(json_u64(out, "misses"), 3);
    cr_assert_eq(json_u64(out, "objects"), 3);
    cr_assert_eq(json_u64(out, "object_bytes"), size);
    cr_assert_eq(json_u64(out, "index_entries"), 3);
    cr_assert_eq(cache_cmd(out, sizeof out, "stats --cache-dir '%s'", T.cache), 0, "%s", out);
    cr_assert_not_null(strstr(out, "hit rate         40.0%"), "%s", out);

    /* every object checks out; then one payload byte flipped: 1 bad, removed */
    cr_assert_eq(cache_cmd(out, sizeof out, "verify --cache-dir '%s' --json", T.cache), 0,
                 "%s", out);
    cr_assert_eq(json_u64(out, "checked"), 3, "%s", out);
    cr_assert_eq(json_u64(out, "bad"), 0, "%s", out);
    cr_assert_eq(tc_sh("f=$(find '%s/objects' -name '*.l3' | head -1) && "
                    "printf '\\377' | dd of=\"$f\" bs=1 seek=$(( $(stat -c %%s \"$f\") - 3 )) "
                    "conv=notrunc status=none",
                    T.cache),
                 0);
    cr_assert_eq(cache_cmd(out, sizeof out, "verify --cache-dir '%s' --json", T.cache), 1,
                 "%s", out);
    cr_assert_eq(json_u64(out, "checked"), 3, "%s", out);
    cr_assert_eq(json_u64(out, "bad"), 1, "%s", out);
    cr_assert_eq(tc_sh("test $(find '%s/objects' -name '*.l3' | wc -l) = 2", T.cache), 0);

    /* refill, then gc under a cap of one object, and clear */
    c = fill_cache();
    int hits = 0;
    for (int i = 0; i < 3; i++)
        hits += cache_get_any(c, names[i]);
    l3cache_close(c);
    cr_assert_eq(hits, 2, "the removed object is encoded again, the others are hits");
    cr_assert_eq(cache_cmd(out, sizeof out, "gc --cache-dir '%s' --cache-size %llu --json",
                           T.cache, (unsigned long long)(size / 3 + 100)),
                 0, "%s", out);
    cr_assert_geq(json_u64(out, "evictions"), 2, "%s", out);
    cr_assert_leq(json_u64(out, "object_bytes"), size / 3 + 100, "%s", out);
    cr_assert_eq(cache_cmd(out, sizeof out, "clear --cache-dir '%s'", T.cache), 0, "%s", out);
    cr_assert_eq(cache_cmd(out, sizeof out, "stats --cache-dir '%s' --json", T.cache), 0,
                 "%s", out);
    cr_assert_eq(json_u64(out, "objects"), 0);
    cr_assert_eq(json_u64(out, "index_entries"), 0);

    cr_assert_eq(cache_cmd(out, sizeof out, "stats"), 2, "missing --cache-dir is a usage error");
    cr_assert_eq(cache_cmd(out, sizeof out, "frobnicate --cache-dir '%s'", T.cache), 2);
    cr_assert_eq(cache_cmd(out, sizeof out, "gc --cache-dir '%s' --cache-size 12Q", T.cache), 2);
}

/* A source named with a newline and terminal escapes, which fails to encode:
 * one log line, the name escaped in it (no forged line, no escape byte). */
Test(mount, hostile_name_gives_one_escaped_log_line)
{
    const char *evil = "evil\n12:00:00.000 l3fs error: FORGED LOG LINE\x1b[2J\x1b[31m.png";
    char p[PATH_MAX], m[PATH_MAX];
    srcpath(p, sizeof p, evil);
    spit(p, "\x89PNG\r\n\x1a\ngarbage after the signature", 33);
    mount_fs(NULL);
    mntpath(m, sizeof m, "evil\n12:00:00.000 l3fs error: FORGED LOG LINE\x1b[2J\x1b[31m.l3");
    struct stat st;
    errno = 0;
    cr_assert(stat(m, &st) < 0 && errno == EIO, "want EIO, got %s", strerror(errno));
    cr_assert_eq(unmount_fs(), 0);
    size_t len;
    char *log = tc_slurp(T.log, &len); /* NUL-terminated */
    cr_assert(log);
    cr_assert(memchr(log, 0x1b, len) == NULL, "an escape byte reached the log:\n%s", log);
    int lines = 0, forged = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "cannot encode")) {
            lines++;
            cr_assert(strstr(line, "evil\\n12:00:00.000 l3fs error: FORGED LOG LINE"
                                   "\\x1b[2J\\x1b[31m.png"),
                      "not escaped: %s", line);
        }
        if (!strncmp(line, "12:00:00.000", 12))
            forged++;
    }
    cr_assert_eq(lines, 1, "one log line for the bad file");
    cr_assert_eq(forged, 0, "a forged line in the log");
    free(log);
}

Test(mount, every_write_is_erofs)
{
    make_tree(0);
    mount_fs(NULL);
    char f[PATH_MAX], d[PATH_MAX], n[PATH_MAX], t[PATH_MAX];
    mntpath(f, sizeof f, "t0_c0_d1.l3");
    mntpath(d, sizeof d, "a");
    mntpath(n, sizeof n, "new-file");
    mntpath(t, sizeof t, "labels.txt");
#define EROFS_OK(expr)                                                                    \
    do {                                                                                  \
        errno = 0;                                                                        \
        cr_assert((expr) < 0 && errno == EROFS, #expr ": %s", strerror(errno));           \
    } while (0)
    EROFS_OK(open(f, O_WRONLY));
    EROFS_OK(open(f, O_RDWR));
    EROFS_OK(open(t, O_WRONLY | O_TRUNC));
    EROFS_OK(open(t, O_WRONLY | O_APPEND));
    EROFS_OK(open(n, O_WRONLY | O_CREAT, 0644));
    EROFS_OK(mkdir(n, 0755));
    EROFS_OK(rmdir(d));
    EROFS_OK(unlink(f));
    EROFS_OK(unlink(t));
    EROFS_OK(rename(t, n));
    EROFS_OK(link(t, n));
    EROFS_OK(symlink("x", n));
    EROFS_OK(mknod(n, S_IFIFO | 0644, 0));
    EROFS_OK(chmod(f, 0600));
    EROFS_OK(chown(t, 1, 1));
    EROFS_OK(truncate(t, 0));
    EROFS_OK(utimes(t, NULL));
    EROFS_OK(setxattr(t, "user.x", "1", 1, 0));
    EROFS_OK(removexattr(t, "user.x"));
    cr_assert_eq(check_all(), count_kind(E_L3), "nothing changed");
    cr_assert_eq(unmount_fs(), 0);
}

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

Test(mount, exclude_keeps_png)
{
    make_tree(0);
    mkdir_src("labels");
    png_src("labels/l1.png", 20, 20, PNG_COLOR_TYPE_PALETTE, 8, 0, 0);
    T.e[T.n - 1].kind = E_SAME;
    strcpy(T.e[T.n - 1].shown, "labels/l1.png");
    png_src("a/mask_x.png", 20, 20, PNG_COLOR_TYPE_GRAY, 8, 0, 0);
    T.e[T.n - 1].kind = E_SAME;
    strcpy(T.e[T.n - 1].shown, "a/mask_x.png");
    mount_fs("--exclude", "labels/*.png", "-o", "exclude=mask_*", NULL);
    check_all();
    char p[PATH_MAX];
    struct stat st;
    mntpath(p, sizeof p, "labels/l1.l3");
    cr_assert(lstat(p, &st) < 0 && errno == ENOENT);
    cr_assert_eq(unmount_fs(), 0);
}

Test(mount, control_files_and_warm)
{
    make_tree(0);
    int n = count_kind(E_L3);
    mount_fs(NULL);
    /* hidden from the root listing, but readable */
    cr_assert_neq(tc_sh("ls -a '%s' | grep -q '^.l3fs$'", T.mnt), 0, ".l3fs listed");
    char p[PATH_MAX];
    size_t len;
    mntpath(p, sizeof p, L3FS_CTL_DIR "/metrics");
    char *m = tc_slurp(p, &len);
    cr_assert(m && len > 0);
    m = realloc(m, len + 1);
    m[len] = '\0';
    char ids[2 * PATH_MAX + 32], mw[3 * PATH_MAX];
    snprintf(ids, sizeof ids, "mount=\"%s\",source=\"%s\"", T.mnt, T.src);
    snprintf(mw, sizeof mw, "# TYPE l3fs_encodes_total counter\nl3fs_encodes_total{%s} 0\n", ids);
    cr_assert(strstr(m, mw), "%s", m);
    snprintf(mw, sizeof mw, "l3fs_cache_hits_total{%s,scope=\"instance\"} 0\n", ids);
    cr_assert(strstr(m, mw), "%s", m);
    snprintf(mw, sizeof mw, "l3fs_encode_seconds{%s,quantile=\"0.99\"}", ids);
    cr_assert(strstr(m, mw), "%s", m);
    free(m);
    cr_assert_eq(tc_sh("ls '%s/" L3FS_CTL_DIR "' | tr '\\n' ' ' | grep -qx 'metrics stats.json '",
                    T.mnt),
                 0);
    /* warm encodes everything; a rerun finds it all cached */
    char out[PATH_MAX];
    xsnprintf(out, sizeof out, "%s/warm.out", T.dir);
    cr_assert_eq(tc_sh("'%s' warm '%s' -j 4 > '%s' 2>/dev/null", l3fs_bin(), T.mnt, out), 0);
    cr_assert_eq(stat_num("fs.encodes"), n, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(n));
    char *o = tc_slurp(out, &len);
    o = realloc(o, len + 1);
    o[len] = '\0';
    char want[128];
    xsnprintf(want, sizeof want, "warm: %d files", n + 1 /* dup.l3 */);
    cr_assert(strstr(o, want), "%s", o);
    free(o);
    cr_assert_eq(tc_sh("'%s' warm '%s' a -j 2 > '%s' 2>/dev/null", l3fs_bin(), T.mnt, out), 0);
    o = tc_slurp(out, &len);
    o = realloc(o, len + 1);
    o[len] = '\0';
    cr_assert(strstr(o, " 0 encoded now"), "%s", o);
    free(o);
    cr_assert_eq(stat_num("fs.encodes"), n, "fs.encodes = %g, want %g", stat_num("fs.encodes"), (double)(n));
    cr_assert_eq(stat_num("encode_time_ms.count"), n, "encode_time_ms.count = %g, want %g", stat_num("encode_time_ms.count"), (double)(n));
    cr_assert(stat_num("encode_time_ms.max") >= stat_num("encode_time_ms.p50"));
    cr_assert_eq(unmount_fs(), 0);
}

Test(mount, sigterm_unmounts_cleanly)
{
    make_tree(0);
    mount_fs(NULL);
    check_all();
    cr_assert_eq(kill(T.pid, SIGTERM), 0);
    int ws = 0;
    for (int i = 0; i < 1000 && waitpid(T.pid, &ws, WNOHANG) != T.pid; i++)
        usleep(10000);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "status %d", ws);
    T.pid = -1;
    cr_assert_eq(tc_sh("grep -q ' %s ' /proc/mounts", T.mnt), 1, "still mounted");
}

Test(mount, background_start_and_bad_arguments)
{
    if (!have_fuse())
        cr_skip_test("/dev/fuse or fusermount3 is missing: cannot mount");
    make_tree(0);
    /* a bad cache size fails before mounting, with status 1 */
    cr_assert_eq(tc_sh("'%s' '%s' '%s' --cache-dir '%s' --cache-size lots 2>/dev/null", l3fs_bin(),
                    T.src, T.mnt, T.cache),
                 1);
    cr_assert_eq(tc_sh("'%s' '%s' 2>/dev/null", l3fs_bin(), T.src), 2);
    cr_assert_eq(tc_sh("'%s' --version | grep -q '^l3fs '", l3fs_bin()), 0);
    /* background (no -f): returns once mounted, -o form of options */
    cr_assert_eq(tc_sh("'%s' '%s' '%s' -o cache_dir='%s',jobs=2,log_level=info", l3fs_bin(), T.src,
                    T.mnt, T.cache),
                 0);
    char p[PATH_MAX];
    struct stat st;
    mntpath(p, sizeof p, "t8_c2_d8_i.l3");
    cr_assert_eq(stat(p, &st), 0, "%s", strerror(errno));
    cr_assert_eq(tc_sh("fusermount3 -u '%s'", T.mnt), 0);
}

/* ------------------------------------------------------- unit tests */

struct fake_dir {
    const char *names[16];
    const char *pngs[16]; /* names that qualify */
};

static int in_list(const char *const *l, const char *name)
{
    for (int i = 0; l[i]; i++)
        if (!strcmp(l[i], name))
            return 1;
    return 0;
}
static int fake_exists(void *c, const char *n)
{
    return in_list(((struct fake_dir *)c)->names, n);
}
static int fake_qualifies(void *c, const char *n)
{
    return in_list(((struct fake_dir *)c)->pngs, n);
}

Test(names, shown_names_and_collisions)
{
    struct fake_dir d = {
        .names = {"a.png", "b.PNG", "c.png", "c.l3", "d.png", "d.PNG", "e.png", "f.png", "f.Png",
                  ".png", NULL},
        .pngs = {"a.png", "b.PNG", "c.png", "d.png", "d.PNG", "f.png", NULL},
    };
    struct l3fs_probe p = {fake_exists, fake_qualifies, &d};
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "a.png"), 1);
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "b.PNG"), 1);
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "c.png"), 0, "a real c.l3 wins");
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "d.PNG"), 1, "bytewise first variant wins");
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "d.png"), 0);
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "e.png"), 0, "no PNG signature");
    cr_assert_eq(l3fs_png_shown_as_l3(&p, "f.png"), 1, "f.Png does not qualify");
    cr_assert_eq(l3fs_png_shown_as_l3(&p, ".png"), 0, "empty stem");
    char src[256];
    cr_assert_eq(l3fs_resolve_l3(&p, "a.l3", src), L3FS_L3_ENCODED);
    cr_assert_str_eq(src, "a.png");
    cr_assert_eq(l3fs_resolve_l3(&p, "b.l3", src), L3FS_L3_ENCODED);
    cr_assert_str_eq(src, "b.PNG");
    cr_assert_eq(l3fs_resolve_l3(&p, "c.l3", src), L3FS_L3_REAL);
    cr_assert_eq(l3fs_resolve_l3(&p, "d.l3", src), L3FS_L3_ENCODED);
    cr_assert_str_eq(src, "d.PNG");
    cr_assert_eq(l3fs_resolve_l3(&p, "e.l3", src), -ENOENT);
    cr_assert_eq(l3fs_resolve_l3(&p, "zz.l3", src), -ENOENT);
    cr_assert_eq(l3fs_resolve_l3(&p, ".l3", src), -ENOENT);
    char out[256];
    cr_assert_eq(l3fs_l3_name("x.y.PnG", out), 0);
    cr_assert_str_eq(out, "x.y.l3");
    char v[8][256];
    cr_assert_eq(l3fs_png_variants("s", 1, v), 0);
    for (int i = 1; i < 8; i++)
        cr_assert(strcmp(v[i - 1], v[i]) < 0, "variants sorted");
    cr_assert_str_eq(v[0], "s.PNG");
    cr_assert_str_eq(v[7], "s.png");
}

Test(names, exclude_globs)
{
    char *g[] = {(char *)"labels/*.png", (char *)"*_mask.png", (char *)"/top.png"};
    cr_assert_eq(l3fs_excluded(g, 3, "labels", "x.png"), 1);
    cr_assert_eq(l3fs_excluded(g, 3, "a/labels", "x.png"), 0, "anchored at SOURCE");
    cr_assert_eq(l3fs_excluded(g, 3, "a/b", "car_mask.png"), 1);
    cr_assert_eq(l3fs_excluded(g, 3, "", "top.png"), 1);
    cr_assert_eq(l3fs_excluded(g, 3, "a", "top.png"), 0);
    cr_assert_eq(l3fs_excluded(g, 3, "", "img.png"), 0);
}

Test(stats, percentiles_json_and_prometheus)
{
    struct l3fs_timings *t = calloc(1, sizeof *t);
    cr_assert_eq(l3fs_timings_percentile(t, 50), 0);
    for (uint64_t i = 1; i <= 100; i++)
        l3fs_timings_add(t, i * 1000);
    cr_assert_eq(l3fs_timings_percentile(t, 50), 50000);
    cr_assert_eq(l3fs_timings_percentile(t, 90), 90000);
    cr_assert_eq(l3fs_timings_percentile(t, 99), 99000);
    cr_assert_eq(l3fs_timings_percentile(t, 100), 100000);
    cr_assert_eq(t->max_ns, 100000);
    free(t);
    struct l3fs_snapshot s;
    memset(&s, 0, sizeof s);
    s.version = "9";
    s.source = "/data/a \"q\"";
    s.cache_dir = "/c";
    s.fs.encodes = 7;
    s.fs.l3_open_hits = 3;
    s.fs.l3_open_misses = 1;
    s.have_cache = 1;
    s.cache_instance.hits = 5;
    s.cache_instance.misses = 15;
    s.cache_total.hits = 42;
    s.encode_count = 2;
    s.encode_p99_ns = 2500000;
    char *j = l3fs_render_json(&s);
    double v;
    cr_assert_eq(l3fs_json_number(j, "fs.encodes", &v), 0);
    cr_assert_eq(v, 7);
    cr_assert_eq(l3fs_json_number(j, "fs.hit_rate", &v), 0);
    cr_assert_float_eq(v, 0.75, 1e-9);
    cr_assert_eq(l3fs_json_number(j, "cache.instance.hit_rate", &v), 0);
    cr_assert_float_eq(v, 0.25, 1e-9);
    cr_assert_eq(l3fs_json_number(j, "cache.total.hits", &v), 0);
    cr_assert_eq(v, 42);
    cr_assert_eq(l3fs_json_number(j, "encode_time_ms.p99", &v), 0);
    cr_assert_float_eq(v, 2.5, 1e-9);
    cr_assert_eq(l3fs_json_number(j, "cache.nothing", &v), -ENOENT);
    char str[64];
    cr_assert_eq(l3fs_json_string(j, "source", str, sizeof str), 0);
    cr_assert_str_eq(str, "/data/a \"q\"");
    free(j);
    s.mountpoint = "/mnt/a\\b";
    char *m = l3fs_render_prometheus(&s);
    /* every sample names its mount and source, label values escaped */
    cr_assert(strstr(m, "l3fs_cache_hits_total{mount=\"/mnt/a\\\\b\",source=\"/data/a "
                        "\\\"q\\\"\",scope=\"total\"} 42\n"), "%s", m);
    cr_assert(strstr(m, "l3fs_encode_seconds{mount=\"/mnt/a\\\\b\",source=\"/data/a "
                        "\\\"q\\\"\",quantile=\"0.99\"} 0.002500\n"));
    cr_assert(strstr(m, "l3fs_encodes_total{mount=\"/mnt/a\\\\b\",source=\"/data/a "
                        "\\\"q\\\"\"} 7\n"));
    /* byte counters all end in _bytes_total */
    cr_assert(strstr(m, "# TYPE l3fs_cache_served_bytes_total counter\n"));
    cr_assert(strstr(m, "# TYPE l3fs_cache_written_bytes_total counter\n"));
    cr_assert(strstr(m, "# TYPE l3fs_cache_evicted_bytes_total counter\n"));
    cr_assert(!strstr(m, "_bytes_served") && !strstr(m, "_bytes_written"));
    free(m);
    s.mountpoint = NULL;
    s.source = NULL;
    m = l3fs_render_prometheus(&s);
    cr_assert(strstr(m, "l3fs_encodes_total{} 7\n"));
    cr_assert(strstr(m, "l3fs_encode_seconds{quantile=\"0.5\"}"));
    free(m);
    cr_assert_eq(l3fs_hit_rate(0, 0), -1);
}

Test(names, escaped_for_logs_and_json)
{
    char out[256];
    l3fs_escape("a\nb\x1b[2Jc\\d\t\x7f", 0, out, sizeof out);
    cr_assert_str_eq(out, "a\\nb\\x1b[2Jc\\\\d\\t\\x7f");
    l3fs_escape("ünïcödé 画像 \"q\"", 0, out, sizeof out);
    cr_assert_str_eq(out, "ünïcödé 画像 \"q\"", "valid UTF-8 kept");
    l3fs_escape("bad\xff\xc0\x80\xed\xa0\x80.png", 0, out, sizeof out);
    cr_assert_str_eq(out, "bad\\xff\\xc0\\x80\\xed\\xa0\\x80.png", "not UTF-8: bytes");
    l3fs_escape("q\"\n\x1b\xff", 1, out, sizeof out);
    cr_assert_str_eq(out, "q\\\"\\n\\u001b\\\\xff");
    cr_assert_eq(l3fs_escape("\n\n", 0, out, 3), 4, "the length needed");
    cr_assert_str_eq(out, "\\n");
    /* JSON round trip through the reader */
    struct l3fs_snapshot s;
    memset(&s, 0, sizeof s);
    s.version = "1";
    s.source = "/data/x\ny\x1bz";
    s.cache_dir = "/c";
    char *j = l3fs_render_json(&s);
    cr_assert(strchr(j, '\x1b') == NULL && !strstr(j, "x\ny"), "%s", j);
    char back[64];
    cr_assert_eq(l3fs_json_string(j, "source", back, sizeof back), 0);
    cr_assert_str_eq(back, "/data/x\ny\x1bz");
    free(j);
    /* and in the Prometheus labels: no raw control byte either */
    s.mountpoint = "/m";
    char *m = l3fs_render_prometheus(&s);
    cr_assert(strchr(m, '\x1b') == NULL, "%s", m);
    cr_assert(strstr(m, "source=\"/data/x\\ny\\\\x1bz\"") != NULL, "%s", m);
    free(m);
}

Test(options, both_spellings)
{
    char tmp[] = "/tmp/l3fs-opt-XXXXXX";
    cr_assert(mkdtemp(tmp));
    char *argv[] = {"l3fs", tmp, tmp, "--cache-dir", "/c1", "--exclude", "a*",
                    "-o", "exclude=b*,allow_other,jobs=3,timeout=2.5,cache_size=1G",
                    "--dir-timeout=0.5", "-f", NULL};
    struct l3fs_options o;
    cr_assert_eq(l3fs_parse_args(11, argv, &o), 0);
    cr_assert_str_eq(o.cache_dir, "/c1");
    cr_assert_eq(o.n_excludes, 2);
    cr_assert_str_eq(o.excludes[0], "a*");
    cr_assert_str_eq(o.excludes[1], "b*");
    cr_assert_eq(o.jobs, 3);
    cr_assert_float_eq(o.timeout, 2.5, 1e-9);
    cr_assert_float_eq(o.dir_timeout, 0.5, 1e-9);
    cr_assert_str_eq(o.cache_size, "1G");
    /* allow_other brings default_permissions with it */
    cr_assert_str_eq(o.fuse_opts, "allow_other,default_permissions");
    cr_assert_eq(o.foreground, 1);
    l3fs_options_free(&o);
    char *both[] = {"l3fs", tmp, tmp, "-o", "default_permissions,allow_other", NULL};
    cr_assert_eq(l3fs_parse_args(5, both, &o), 0);
    cr_assert_str_eq(o.fuse_opts, "default_permissions,allow_other");
    l3fs_options_free(&o);
    char *lim[] = {"l3fs", tmp, tmp, "-o", "max_pixels=64M,max_memory=1G,nofail,x-systemd.x=1",
                   NULL};
    cr_assert_eq(l3fs_parse_args(5, lim, &o), 0);
    cr_assert_eq(o.max_pixels, 64ull << 20);
    cr_assert_eq(o.max_memory, 1ull << 30);
    cr_assert_null(o.fuse_opts, "fstab-only options are dropped");
    l3fs_options_free(&o);
    char *eff[] = {"l3fs", tmp, tmp, "--effort", "-1", NULL};
    cr_assert_eq(l3fs_parse_args(5, eff, &o), 0);
    cr_assert_eq(o.effort, -1);
    l3fs_options_free(&o);
    char *eff2[] = {"l3fs", tmp, tmp, "-o", "effort=2", NULL};
    cr_assert_eq(l3fs_parse_args(5, eff2, &o), 0);
    cr_assert_eq(o.effort, 2);
    l3fs_options_free(&o);
    char *eff_bad[] = {"l3fs", tmp, tmp, "--effort", "3", NULL};
    cr_assert_eq(l3fs_parse_args(5, eff_bad, &o), -EINVAL);
    char *bad[] = {"l3fs", tmp, tmp, "--jobs", "zero", NULL};
    cr_assert_eq(l3fs_parse_args(5, bad, &o), -EINVAL);
    char *missing[] = {"l3fs", tmp, NULL};
    cr_assert_eq(l3fs_parse_args(2, missing, &o), -EINVAL);
    rmdir(tmp);
}

/* Runs l3fs_parse_args with stderr captured into err (one line expected). */
static int parse_err(int argc, char **argv, struct l3fs_options *o, char *err, size_t cap)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *f = tmpfile();
    cr_assert(f && saved >= 0);
    dup2(fileno(f), 2);
    int r = l3fs_parse_args(argc, argv, o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    size_t n = fread(err, 1, cap - 1, f);
    err[n] = '\0';
    fclose(f);
    return r;
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(options, o_typos_are_refused_in_one_line)
{
    char tmp[] = "/tmp/l3fs-opt-XXXXXX";
    cr_assert(mkdtemp(tmp));
    struct l3fs_options o;
    char err[1024];
    char *typo[] = {"l3fs", tmp, tmp, "-o", "ro,cahce_dir=/x", NULL};
    cr_assert_eq(parse_err(5, typo, &o, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "unknown mount option 'cahce_dir=/x'"), "%s", err);
    cr_assert(strstr(err, "did you mean 'cache_dir'?"), "%s", err);
    cr_assert_eq(lines(err), 1, "%s", err);
    char *typo2[] = {"l3fs", tmp, tmp, "-o", "allow_otehr", NULL};
    cr_assert_eq(parse_err(5, typo2, &o, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "did you mean 'allow_other'?"), "%s", err);
    char *junk[] = {"l3fs", tmp, tmp, "-o", "frobnicate=3", NULL};
    cr_assert_eq(parse_err(5, junk, &o, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "unknown mount option 'frobnicate=3'; "), "%s", err);
    cr_assert_eq(lines(err), 1, "%s", err);
    /* a flag given a value, a valued FUSE option without one: not known either */
    char *val[] = {"l3fs", tmp, tmp, "-o", "ro=1", NULL};
    cr_assert_eq(parse_err(5, val, &o, err, sizeof err), -EINVAL);
    char *noval[] = {"l3fs", tmp, tmp, "-o", "fsname", NULL};
    cr_assert_eq(parse_err(5, noval, &o, err, sizeof err), -EINVAL);
    /* every FUSE/kernel option fstab lines use still passes */
    char *good[] = {"l3fs", tmp, tmp, "-o",
                    "rw,noatime,nodev,nosuid,noexec,auto_unmount,fsname=data,subtype=x,"
                    "defaults,nofail,_netdev,x-systemd.automount,keep_names,log_file=/l",
                    NULL};
    cr_assert_eq(parse_err(5, good, &o, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(o.fuse_opts, "rw,noatime,nodev,nosuid,noexec,auto_unmount,fsname=data,"
                                  "subtype=x");
    cr_assert_eq(o.keep_names, 1);
    cr_assert_str_eq(o.log_file, "/l");
    l3fs_options_free(&o);
    char *flags[] = {"l3fs", tmp, tmp, "--keep-names", "--log-file", "rel.log", NULL};
    cr_assert_eq(l3fs_parse_args(6, flags, &o), 0);
    cr_assert_eq(o.keep_names, 1);
    cr_assert(o.log_file[0] == '/' && strstr(o.log_file, "/rel.log"), "%s", o.log_file);
    l3fs_options_free(&o);
    rmdir(tmp);
}

Test(options, refused_mountpoints)
{
    char tmp[] = "/tmp/l3fs-opt-XXXXXX";
    cr_assert(mkdtemp(tmp));
    char src[PATH_MAX], inner[PATH_MAX], other[PATH_MAX], info[PATH_MAX];
    snprintf(src, sizeof src, "%s/src", tmp);
    snprintf(inner, sizeof inner, "%s/src/mnt", tmp);
    snprintf(other, sizeof other, "%s/m t", tmp);
    snprintf(info, sizeof info, "%s/mountinfo", tmp);
    cr_assert_eq(mkdir(src, 0755), 0);
    cr_assert_eq(mkdir(inner, 0755), 0);
    cr_assert_eq(mkdir(other, 0755), 0);
    struct l3fs_options o;
    char *in[] = {"l3fs", src, inner, NULL};
    cr_assert_eq(l3fs_parse_args(3, in, &o), 0);
    cr_assert_eq(l3fs_check_mountpoint(&o, "/nonexistent"), -ELOOP);
    l3fs_options_free(&o);
    char *same[] = {"l3fs", src, src, NULL};
    cr_assert_eq(l3fs_parse_args(3, same, &o), 0);
    cr_assert_eq(l3fs_check_mountpoint(&o, "/nonexistent"), -ELOOP);
    l3fs_options_free(&o);
    /* a FUSE mount at the mountpoint (octal-escaped space) refuses; another type does not */
    char *ok[] = {"l3fs", src, other, NULL};
    cr_assert_eq(l3fs_parse_args(3, ok, &o), 0);
    FILE *f = fopen(info, "w");
    fprintf(f, "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
               "90 22 0:50 / %s/m\\040t rw,relatime shared:5 - ext4 /dev/sda1 rw\n", tmp);
    fclose(f);
    cr_assert_eq(l3fs_check_mountpoint(&o, info), 0, "a bind/volume mount is fine");
    f = fopen(info, "a");
    fprintf(f, "91 90 0:51 / %s/m\\040t rw,nosuid,nodev,relatime shared:6 - fuse.l3fs /data "
               "rw,user_id=0,group_id=0\n", tmp);
    fclose(f);
    cr_assert_eq(l3fs_check_mountpoint(&o, info), -EBUSY);
    cr_assert_eq(l3fs_check_mountpoint(&o, "/nonexistent"), 0, "no table: no refusal");
    l3fs_options_free(&o);
    unlink(info);
    rmdir(other);
    rmdir(inner);
    rmdir(src);
    rmdir(tmp);
}
