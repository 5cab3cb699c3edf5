/* fs_bench.c — l3fs against the things it replaces, side by side in one run.
 *
 *   fs_bench --l3fs PATH/TO/l3fs [--photos DIR] [--files N] [--reps R] [--work DIR]
 *            [--baseline PATH/TO/other-l3fs [--baseline-opt OPT]]
 *
 * 1. Cached sequential read: every photo's .l3 read through a fresh mount
 *    (objects already in the cache) against reading the same cache objects
 *    directly; also the second read on the same mount (kernel page cache).
 * 2. Cold read: the .l3 of each 2048x1024 photo read through a mount with an
 *    empty cache (lookup encodes, then read) against a bare libpng decode of
 *    the same PNG (file read + png_read_image).
 * 3. `ls -lR` of N encoded files through a fresh mount against the source.
 * 4. Verification before serving: part 1's reads with the default (every
 *    read checked on its chunks' range checksums; objects without them
 *    checked whole) against --no-verify (header only, as before), the two
 *    mounts alternating in every repetition; and cold reads (an empty cache:
 *    every file encoded) the same way. Each configuration reads a cache
 *    directory of its own. With --baseline, a third configuration (another
 *    build's daemon with OPT, --no-verify unless told; "" for none) joins
 *    the alternation, and the default is also compared with it. Wall time
 *    and CPU time (the reader's and the daemon's, from wait4) are both
 *    compared: on a loaded machine the CPU ratio moves less.
 * Each figure is the best of R repetitions. Needs root or fuse access.
 * --only N runs part N alone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <png.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tc_shell.h"

static const char *l3fs = NULL;
static char work[1024];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double tv_s(const struct timeval *tv)
{
    return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

/* CPU seconds (user + system) this process used so far. */
static double self_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return tv_s(&ru.ru_utime) + tv_s(&ru.ru_stime);
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fs_bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static pid_t daemon_pid = -1;
static char mounted_at[PATH_MAX];
static double daemon_cpu; /* CPU seconds (user + system) of the last daemon unmounted */

static const char *fsync_policy = "object";
static const char *extra_opt = NULL; /* one more l3fs option, or NULL */
static const char *mount_bin = NULL;  /* the daemon do_mount runs: NULL for --l3fs */

static void do_mount(const char *src, const char *mnt, const char *cache)
{
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        const char *bin = mount_bin ? mount_bin : l3fs;
        execl(bin, bin, src, mnt, "-f", "--cache-dir", cache, "--fsync", fsync_policy,
              extra_opt, (char *)NULL);
        _exit(127);
    }
    char ctl[PATH_MAX];
    snprintf(ctl, sizeof ctl, "%s/.l3fs", mnt);
    for (int i = 0; i < 1000; i++) {
        struct stat st;
        if (stat(ctl, &st) == 0) {
            daemon_pid = pid;
            snprintf(mounted_at, sizeof mounted_at, "%s", mnt);
            return;
        }
        usleep(10000);
    }
    kill(pid, SIGKILL);
    die("l3fs did not mount %s", mnt);
}

static void do_umount(void)
{
    if (daemon_pid < 0)
        return;
    tc_sh("fusermount3 -u '%s'", mounted_at);
    int ws;
    struct rusage ru;
    if (wait4(daemon_pid, &ws, 0, &ru) == daemon_pid)
        daemon_cpu = tv_s(&ru.ru_utime) + tv_s(&ru.ru_stime);
    daemon_pid = -1;
}

static void cleanup(void)
{
    do_umount();
    if (work[0] && !getenv("FS_BENCH_KEEP"))
        tc_sh("rm -rf '%s'", work);
}

/* Reads a whole file with 1 MiB reads; returns bytes or -1. */
static long long read_all(const char *path)
{
    static char buf[1 << 20];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    long long total = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        total += n;
    close(fd);
    return n < 0 ? -1 : total;
}

/* Drops a file's pages from the page cache (this file only). */
static void evict(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

struct list {
    char **v;
    size_t n, cap;
};

static void list_add(struct list *l, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = strdup(s);
}

static void list_free(struct list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Regular files under dir (recursive) whose name ends in suffix ("" = all). */
static void find_files(const char *dir, const char *suffix, struct list *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            find_files(p, suffix, out);
        } else if (S_ISREG(st.st_mode)) {
            size_t a = strlen(de->d_name), b = strlen(suffix);
            if (a >= b && strcmp(de->d_name + a - b, suffix) == 0)
                list_add(out, p);
        }
    }
    closedir(d);
    qsort(out->v, out->n, sizeof *out->v, cmp_str);
}

/* Bare libpng decode of a file: read it, png_read_image. Returns seconds. */
static double libpng_decode(const char *path)
{
    double t0 = now();
    FILE *f = fopen(path, "rb");
    if (!f)
        die("open %s", path);
    png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(p);
    if (setjmp(png_jmpbuf(p)))
        die("libpng failed on %s", path);
    png_init_io(p, f);
    png_read_info(p, info);
    png_set_interlace_handling(p);
    png_read_update_info(p, info);
    png_uint_32 h = png_get_image_height(p, info);
    size_t rb = png_get_rowbytes(p, info);
    unsigned char *px = malloc(rb * h);
    png_bytep *rows = malloc(h * sizeof *rows);
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = px + rb * y;
    png_read_image(p, rows);
    png_read_end(p, NULL);
    png_destroy_read_struct(&p, &info, NULL);
    fclose(f);
    double t = now() - t0;
    free(rows);
    free(px);
    return t;
}

/* A 16x16 gray PNG; `id` makes its pixels unique. */
static void write_small_png(const char *p, int id)
{
    FILE *f = fopen(p, "wb");
    if (!f)
        die("write %s", p);
    png_structp pw = png_create_write_struct(PNG_LIBPNG_VER_STRING, 0, 0, 0);
    png_infop iw = png_create_info_struct(pw);
    if (setjmp(png_jmpbuf(pw)))
        die("write %s", p);
    png_init_io(pw, f);
    png_set_IHDR(pw, iw, 16, 16, 8, PNG_COLOR_TYPE_GRAY, 0, 0, 0);
    png_write_info(pw, iw);
    unsigned char row[16];
    for (int y = 0; y < 16; y++) {
        for (int x = 0; x < 16; x++)
            row[x] = (unsigned char)(x * 16 + y);
        if (y == 0) {
            row[0] = (unsigned char)id;
            row[1] = (unsigned char)(id >> 8);
        }
        png_write_row(pw, row);
    }
    png_write_end(pw, iw);
    png_destroy_write_struct(&pw, &iw);
    fclose(f);
}

static double min_d(double a, double b)
{
    return a < b ? a : b;
}

/* The .l3 files of the mount and the cache's objects, all encoded. */
static void encode_all(const char *src, const char *mnt, const char *cache, struct list *l3s,
                       struct list *objs)
{
    do_mount(src, mnt, cache);
    find_files(mnt, ".l3", l3s);
    for (size_t i = 0; i < l3s->n; i++)
        read_all(l3s->v[i]); /* encode everything */
    do_umount();
    char objdir[1200];
    snprintf(objdir, sizeof objdir, "%s/objects", cache);
    find_files(objdir, ".l3", objs);
}

static long long read_list(const struct list *l)
{
    long long bytes = 0;
    for (size_t i = 0; i < l->n; i++)
        bytes += read_all(l->v[i]);
    return bytes;
}

static void evict_list(const struct list *l)
{
    for (size_t i = 0; i < l->n; i++)
        evict(l->v[i]);
}

/* 1. cached sequential read */
static void part_cached(const char *src, const char *mnt, const char *cache, int reps)
{
    struct list l3s = {0}, objs = {0};
    encode_all(src, mnt, cache, &l3s, &objs);
    /* (a) objects not in RAM (evicted from the page cache before each read:
     * an epoch over a dataset larger than memory); (b) objects in RAM. */
    double best_obj_c = 1e9, best_mnt_c = 1e9, best_mnt = 1e9, best_mnt2 = 1e9, best_obj = 1e9;
    long long bytes = 0, obytes = 0;
    for (int r = 0; r < reps; r++) {
        for (size_t i = 0; i < objs.n; i++)
            evict(objs.v[i]);
        double t0 = now();
        for (size_t i = 0; i < objs.n; i++)
            read_all(objs.v[i]);
        best_obj_c = min_d(best_obj_c, now() - t0);
        for (size_t i = 0; i < objs.n; i++)
            evict(objs.v[i]);
        do_mount(src, mnt, cache);
        t0 = now();
        for (size_t i = 0; i < l3s.n; i++)
            read_all(l3s.v[i]);
        best_mnt_c = min_d(best_mnt_c, now() - t0);
        do_umount();

        t0 = now();
        obytes = 0;
        for (size_t i = 0; i < objs.n; i++)
            obytes += read_all(objs.v[i]);
        best_obj = min_d(best_obj, now() - t0);
        do_mount(src, mnt, cache);
        t0 = now();
        bytes = 0;
        for (size_t i = 0; i < l3s.n; i++)
            bytes += read_all(l3s.v[i]);
        best_mnt = min_d(best_mnt, now() - t0);
        t0 = now();
        for (size_t i = 0; i < l3s.n; i++)
            read_all(l3s.v[i]);
        best_mnt2 = min_d(best_mnt2, now() - t0);
        do_umount();
    }
    if (bytes != obytes)
        die("mount served %lld bytes, the objects hold %lld", bytes, obytes);
    printf("\n1. cached sequential read (objects in the l3fs cache), %zu files, %.1f MB, 1 MiB reads\n",
           l3s.n, bytes / 1e6);
    printf("   (a) objects not in RAM: cache objects read directly %8.1f MB/s\n",
           bytes / 1e6 / best_obj_c);
    printf("       through a fresh mount                           %8.1f MB/s  = %.0f%% of direct"
           " (target >= 70%%)\n",
           bytes / 1e6 / best_mnt_c, 100 * best_obj_c / best_mnt_c);
    printf("   (b) objects in RAM: cache objects read directly     %8.1f MB/s\n",
           bytes / 1e6 / best_obj);
    printf("       through a fresh mount                           %8.1f MB/s  = %.0f%% of direct\n",
           bytes / 1e6 / best_mnt, 100 * best_obj / best_mnt);
    printf("       again on the same mount (kernel page cache)     %8.1f MB/s  = %.0f%% of direct\n",
           bytes / 1e6 / best_mnt2, 100 * best_obj / best_mnt2);
    list_free(&l3s);
    list_free(&objs);
}

/* 2. cold read vs bare libpng decode */
static void part_cold(const struct list *pngs_in, const char *src, const char *mnt, int reps)
{
    const struct list pngs = *pngs_in;
    double sum_cold = 0, sum_png = 0, sum_nosync = 0;
    double *cold = calloc(pngs.n, sizeof *cold), *dec = calloc(pngs.n, sizeof *dec);
    double *nosync = calloc(pngs.n, sizeof *nosync);
    for (size_t i = 0; i < pngs.n; i++)
        cold[i] = dec[i] = nosync[i] = 1e9;
    for (int r = 0; r < reps; r++) {
        for (int pass = 0; pass < 2; pass++) {
            /* pass 0: default cache durability (fsync each object); 1: --fsync none */
            fsync_policy = pass ? "none" : "object";
            char cc[1100];
            snprintf(cc, sizeof cc, "%s/cold%d-%d", work, r, pass);
            do_mount(src, mnt, cc);
            for (size_t i = 0; i < pngs.n; i++) {
                char base[256];
                snprintf(base, sizeof base, "%s", strrchr(pngs.v[i], '/') + 1);
                char p[1500], s[1500];
                base[strlen(base) - 4] = '\0';
                snprintf(p, sizeof p, "%s/%s.l3", mnt, base);
                snprintf(s, sizeof s, "%s/%s.png", src, base);
                if (pass == 0)
                    dec[i] = min_d(dec[i], libpng_decode(s));
                double t0 = now();
                if (read_all(p) <= 0)
                    die("cold read of %s failed", p);
                double t = now() - t0;
                if (pass == 0)
                    cold[i] = min_d(cold[i], t);
                else
                    nosync[i] = min_d(nosync[i], t);
            }
            do_umount();
            tc_sh("rm -rf '%s'", cc);
        }
    }
    fsync_policy = "object";
    for (size_t i = 0; i < pngs.n; i++) {
        sum_cold += cold[i];
        sum_png += dec[i];
        sum_nosync += nosync[i];
    }
    printf("\n2. cold read of a photo's .l3 (empty cache: lookup encodes, then read)\n");
    printf("   bare libpng decode                   %8.1f ms per photo\n", 1e3 * sum_png / pngs.n);
    printf("   cold .l3 read through the mount      %8.1f ms per photo  = %.2fx libpng "
           "(target <= 1.5x)\n",
           1e3 * sum_cold / pngs.n, sum_cold / sum_png);
    printf("   the same with --fsync none           %8.1f ms per photo  = %.2fx libpng\n",
           1e3 * sum_nosync / pngs.n, sum_nosync / sum_png);
    free(cold);
    free(dec);
    free(nosync);

}

/* 3. ls -lR of N encoded files */
static void part_ls(const char *mnt, int nfiles, int reps)
{
    if (nfiles > 0) {
        char lsrc[1100], lcache[1100];
        snprintf(lsrc, sizeof lsrc, "%s/lsrc", work);
        snprintf(lcache, sizeof lcache, "%s/lcache", work);
        mkdir(lsrc, 0755);
        /* N distinct small PNGs in 100 directories (one pixel differs) */
        int per = 100, made = 0;
        for (int d = 0; made < nfiles; d++) {
            char dir[1200];
            snprintf(dir, sizeof dir, "%s/d%03d", lsrc, d);
            mkdir(dir, 0755);
            for (int k = 0; k < per && made < nfiles; k++, made++) {
                char p[1500];
                snprintf(p, sizeof p, "%s/img%03d.png", dir, k);
                write_small_png(p, made);
            }
        }
        do_mount(lsrc, mnt, lcache);
        double t0 = now();
        if (tc_sh("'%s' warm '%s' -j 4 > /dev/null 2>&1", l3fs, mnt) != 0)
            die("l3fs warm failed");
        double warm = now() - t0;
        do_umount();
        double best_src = 1e9, best_l3 = 1e9, best_l3b = 1e9;
        for (int r = 0; r < reps; r++) {
            t0 = now();
            tc_sh("ls -lR '%s' > /dev/null", lsrc);
            best_src = min_d(best_src, now() - t0);
            do_mount(lsrc, mnt, lcache);
            t0 = now();
            tc_sh("ls -lR '%s' > /dev/null", mnt);
            best_l3 = min_d(best_l3, now() - t0);
            t0 = now();
            tc_sh("ls -lR '%s' > /dev/null", mnt);
            best_l3b = min_d(best_l3b, now() - t0);
            do_umount();
        }
        printf("\n3. ls -lR of %d encoded files in %d directories (warm: %.1f s)\n", nfiles,
               (nfiles + per - 1) / per, warm);
        printf("   source tree                      %8.1f ms\n", 1e3 * best_src);
        printf("   fresh mount (sizes from index)   %8.1f ms  = %.2fx source (target <= 3x)\n",
               1e3 * best_l3, best_l3 / best_src);
        printf("   again on the same mount          %8.1f ms  = %.2fx source\n", 1e3 * best_l3b,
               best_l3b / best_src);
    }
}

/* 4. the cost of verification before serving: the same reads with the
 * default and with --no-verify, the two alternating in every repetition
 * (which goes first alternates too); each figure is the median over the
 * repetitions of the two modes' time ratio in that repetition (a noisy
 * machine slows both of a pair alike), and the ratio of the best times. */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of n values (sorted in place). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A distribution-free confidence interval of at least 95 % for the median of
 * n values already sorted (median() sorts them): [v[k-1], v[n-k]] for the
 * largest k with P(Binomial(n, 1/2) < k) <= 2.5 %, the order statistics
 * between which the true median lies in at least 95 % of samples whatever the
 * distribution. Returns 0 and leaves *lo, *hi alone when n is too small for
 * one (n < 6). It is for the pair ratios: whether "within 3 %" holds is a
 * question of where the interval lies, not of one median. */
static int median_ci95(const double *sorted, int n, double *lo, double *hi)
{
    double term = 1.0; /* P(X = j) = C(n, j) / 2^n, from P(X = 0) = 2^-n */
    for (int i = 0; i < n; i++)
        term *= 0.5;
    double cdf = 0;
    int k = 0;
    for (int j = 0; j < n; j++) {
        cdf += term; /* P(X <= j) */
        if (cdf > 0.025)
            break;
        k = j + 1; /* P(X < j + 1) <= 2.5 % */
        term = term * (double)(n - j) / (double)(j + 1);
    }
    if (k < 1)
        return 0;
    *lo = sorted[k - 1];
    *hi = sorted[n - k];
    return 1;
}

/* One configuration part 4 times: a daemon binary, an option, and a cache
 * directory of its own (the same objects, encoded by its first mount). Each
 * has its own so that its warm reads find the objects' pages as its own
 * daemon's reads left them: a verifying daemon reads an object in through a
 * mapping, in large folios where the filesystem has them (cache/spliced.c),
 * a --no-verify one through its splices; one shared cache would hand each
 * configuration the page cache the other one made. */
struct vconf {
    const char *bin, *opt;
    char cache[1200];
    struct list l3s, objs;
};

/* The ratio rows of configuration 0 against configuration j. */
static void verify_rows(const char *prefix, double *t[][3], double *cpu[][3], int ncond,
                        const char *const *what, int j, int reps, long long bytes)
{
    double *ratio = calloc((size_t)reps, sizeof(double));
    double *cratio = calloc((size_t)reps, sizeof(double));
    for (int i = 0; i < ncond; i++) {
        double best[2] = {1e9, 1e9};
        for (int r = 0; r < reps; r++) {
            best[0] = min_d(best[0], t[i][0][r]);
            best[1] = min_d(best[1], t[i][j][r]);
            ratio[r] = t[i][0][r] / t[i][j][r];
            cratio[r] = cpu[i][j][r] > 0 ? cpu[i][0][r] / cpu[i][j][r] : 0;
        }
        double med = median(ratio, reps), lo, hi;
        char ci[40] = "(n < 6)";
        if (median_ci95(ratio, reps, &lo, &hi))
            snprintf(ci, sizeof ci, "%.3f-%.3fx", lo, hi);
        char label[80];
        snprintf(label, sizeof label, "%s%s", prefix, what[i]);
        printf("   %-58s %7.1f vs %7.1f %10.3fx %10.3fx %17s %10.3fx\n", label,
               bytes / 1e6 / best[0], bytes / 1e6 / best[1], best[0] / best[1], med, ci,
               median(cratio, reps));
    }
    free(ratio);
    free(cratio);
}

static const char *baseline = NULL;          /* --baseline BIN, or NULL */
static const char *baseline_opt = "--no-verify"; /* --baseline-opt OPT ("" for none) */

static void part_verify(const char *src, const char *mnt, const char *cache, int reps)
{
    struct vconf conf[3] = {{l3fs, NULL}, {l3fs, "--no-verify"},
                            {baseline, baseline_opt[0] ? baseline_opt : NULL}};
    int nconf = baseline ? 3 : 2;
    for (int v = 0; v < nconf; v++) {
        snprintf(conf[v].cache, sizeof conf[v].cache, "%s-%d", cache, v);
        mount_bin = conf[v].bin;
        extra_opt = conf[v].opt;
        encode_all(src, mnt, conf[v].cache, &conf[v].l3s, &conf[v].objs);
    }
    enum { FRESH, AGAIN, COLD, EMPTY, NCOND };
    /* t: wall seconds of the reads; cpu: CPU seconds of the reader and the
     * daemon (whose whole life is counted: its mount, the reads, unmount;
     * FRESH's daemon also served AGAIN, which it hardly sees) */
    double *t[NCOND][3], *cpu[NCOND][3];
    for (int i = 0; i < NCOND; i++)
        for (int v = 0; v < 3; v++) {
            t[i][v] = calloc((size_t)reps, sizeof(double));
            cpu[i][v] = calloc((size_t)reps, sizeof(double));
        }
    char ecache[1200];
    snprintf(ecache, sizeof ecache, "%s-empty", cache);
    long long bytes = 0;
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < nconf; k++) {
            int v = (r + k) % nconf; /* each configuration first in turn */
            struct vconf *cf = &conf[v];
            mount_bin = cf->bin;
            extra_opt = cf->opt;
            read_list(&cf->objs); /* objects in RAM */
            do_mount(src, mnt, cf->cache);
            double c0 = self_cpu(), t0 = now();
            bytes = read_list(&cf->l3s);
            t[FRESH][v][r] = now() - t0;
            cpu[FRESH][v][r] = self_cpu() - c0;
            c0 = self_cpu();
            t0 = now();
            read_list(&cf->l3s);
            t[AGAIN][v][r] = now() - t0;
            cpu[AGAIN][v][r] = self_cpu() - c0;
            do_umount();
            cpu[FRESH][v][r] += daemon_cpu;
            evict_list(&cf->objs); /* objects not in RAM */
            do_mount(src, mnt, cf->cache);
            c0 = self_cpu();
            t0 = now();
            read_list(&cf->l3s);
            t[COLD][v][r] = now() - t0;
            cpu[COLD][v][r] = self_cpu() - c0;
            do_umount();
            cpu[COLD][v][r] += daemon_cpu;
            /* an empty cache: every first read encodes, stores and serves */
            tc_sh("rm -rf '%s'", ecache);
            do_mount(src, mnt, ecache);
            c0 = self_cpu();
            t0 = now();
            if (read_list(&cf->l3s) != bytes)
                die("the empty cache served other sizes");
            t[EMPTY][v][r] = now() - t0;
            cpu[EMPTY][v][r] = self_cpu() - c0;
            do_umount();
            cpu[EMPTY][v][r] += daemon_cpu;
        }
    }
    tc_sh("rm -rf '%s'", ecache);
    mount_bin = NULL;
    extra_opt = NULL;
    printf("\n4. verification before serving: %zu cached .l3 files, %.1f MB, default vs "
           "--no-verify, %d alternating pairs\n", conf[0].l3s.n, bytes / 1e6, reps);
    if (baseline)
        printf("   (and vs baseline: %s %s, alternating with them)\n", baseline,
               conf[2].opt ? conf[2].opt : "(no option)");
    printf("   %-58s %17s %11s %11s %17s %11s\n", "", "best MB/s", "best", "median",
           "median, 95% CI", "CPU median");
    const char *what[NCOND] = {"objects in RAM, fresh mount",
                               "objects in RAM, second read (kernel cache)",
                               "objects not in RAM, fresh mount",
                               "empty cache, fresh mount (every file encoded)"};
    verify_rows("", t, cpu, NCOND, what, 1, reps, bytes);
    if (baseline)
        verify_rows("vs baseline: ", t, cpu, NCOND, what, 2, reps, bytes);
    printf("   (ratios: default / --no-verify%s, of wall time and of CPU time: the reader's "
           "and the daemon's;\n    the interval: where the median pair ratio lies with at "
           "least 95%% confidence, from the order statistics of the pairs; each "
           "configuration\n    reads a cache directory of its own)\n",
           baseline ? " (and / baseline)" : "");
    for (int i = 0; i < NCOND; i++)
        for (int v = 0; v < 3; v++) {
            free(t[i][v]);
            free(cpu[i][v]);
        }
    for (int v = 0; v < nconf; v++) {
        list_free(&conf[v].l3s);
        list_free(&conf[v].objs);
    }
}

int main(int argc, char **argv)
{
    const char *photos = "/var/cache/l3fs-corpus/png/photos-2048";
    int nfiles = 10000, reps = 5, only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--l3fs") && i + 1 < argc)
            l3fs = argv[++i];
        else if (!strcmp(argv[i], "--photos") && i + 1 < argc)
            photos = argv[++i];
        else if (!strcmp(argv[i], "--files") && i + 1 < argc)
            nfiles = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--baseline") && i + 1 < argc)
            baseline = argv[++i];
        else if (!strcmp(argv[i], "--baseline-opt") && i + 1 < argc)
            baseline_opt = argv[++i];
        else if (!strcmp(argv[i], "--work") && i + 1 < argc)
            snprintf(work, sizeof work, "%s", argv[++i]);
        else
            die("usage: fs_bench --l3fs BIN [--photos DIR] [--files N] [--reps R] [--work DIR]\n"
                "       [--baseline BIN [--baseline-opt OPT]] (part 4: also BIN OPT, "
                "default --no-verify)");
    }
    if (!l3fs)
        die("--l3fs PATH is required");
    if (reps < 1)
        reps = 1;
    if (!work[0]) {
        snprintf(work, sizeof work, "/var/tmp/l3fs-bench-XXXXXX");
        if (!mkdtemp(work))
            die("mkdtemp: %s", strerror(errno));
    } else if (mkdir(work, 0755) < 0 && errno != EEXIST) {
        die("mkdir %s", work);
    }
    atexit(cleanup);
    signal(SIGINT, exit);

    struct list pngs = {0};
    find_files(photos, ".png", &pngs);
    if (pngs.n == 0)
        die("no PNGs in %s (scripts/fetch-corpus.sh makes them)", photos);
    char src[1100], mnt[1100], cache[1100];
    snprintf(src, sizeof src, "%s/src", work);
    snprintf(mnt, sizeof mnt, "%s/mnt", work);
    snprintf(cache, sizeof cache, "%s/cache", work);
    mkdir(src, 0755);
    mkdir(mnt, 0755);
    if (tc_sh("cp %s/*.png '%s'/", photos, src) != 0)
        die("copy photos");
    printf("l3fs fs_bench: %zu photos from %s, %d reps (best of), work dir %s\n", pngs.n,
           photos, reps, work);

    if (!only || only == 1)
        part_cached(src, mnt, cache, reps);
    if (!only || only == 2)
        part_cold(&pngs, src, mnt, reps);
    if ((!only || only == 3) && nfiles > 0)
        part_ls(mnt, nfiles, reps);
    if (!only || only == 4) {
        char vcache[1100];
        snprintf(vcache, sizeof vcache, "%s/vcache", work);
        part_verify(src, mnt, vcache, reps);
    }
    list_free(&pngs);
    return 0;
}
