/* bench.c — `l3 bench`: L3 against libpng on the same files, same run.
 *
 * Every PNG is read into memory before anything is timed. Then, file by file,
 * each operation (libpng decode, L3 encode with 1 and N threads, L3 decode
 * with 1 and N threads) runs -r times back to back and the best time of each
 * is kept, so that all numbers of a file come from the same second or so on
 * the same machine. Speeds are MB/s (10^6 bytes) of decoded pixels.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"

struct bench_file {
    char *path;
    unsigned char *png;
    size_t png_size;
};

/* The timed operations. */
enum { OP_PNG, OP_ENC1, OP_ENCN, OP_DEC1, OP_DECN, OPS };

struct bench_totals {
    double raw, png, l3;
    double wall[OPS], cpu[OPS]; /* sums of the per-file best times */
};

/* CPU time of the calling thread: for single-threaded operations it does
 * not count time the machine spent on other processes. */
static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct stopwatch {
    double wall, cpu;
};

static void sw_start(struct stopwatch *w)
{
    w->wall = cli_now();
    w->cpu = thread_cpu();
}

static void sw_stop(const struct stopwatch *w, double *best_wall, double *best_cpu)
{
    double cpu = thread_cpu() - w->cpu, wall = cli_now() - w->wall;
    if (*best_wall == 0 || wall < *best_wall)
        *best_wall = wall;
    if (*best_cpu == 0 || cpu < *best_cpu)
        *best_cpu = cpu;
}

/* The time shown for an operation: CPU time for the single-threaded ones
 * when asked (--cpu-time), wall-clock time otherwise. */
static double shown(const double *wall, const double *cpu, int op, int cpu_mode)
{
    return cpu_mode && op != OP_ENCN && op != OP_DECN ? cpu[op] : wall[op];
}

static int add_file(struct bench_file **v, size_t *n, size_t *cap, const char *path)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        struct bench_file *p = realloc(*v, sizeof **v * *cap);
        if (p == NULL)
            return ENOMEM;
        *v = p;
    }
    memset(&(*v)[*n], 0, sizeof **v);
    (*v)[*n].path = strdup(path);
    if ((*v)[*n].path == NULL)
        return ENOMEM;
    (*n)++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds DIR/ *.png (sorted) or the file itself. Returns 0 or an errno. */
static int collect(const char *arg, struct bench_file **v, size_t *n, size_t *cap)
{
    struct stat st;
    if (stat(arg, &st) != 0)
        return errno;
    if (!S_ISDIR(st.st_mode))
        return add_file(v, n, cap, arg);
    DIR *d = opendir(arg);
    if (d == NULL)
        return errno;
    char **names = NULL;
    size_t nn = 0, nc = 0;
    struct dirent *e;
    int err = 0;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcasecmp(e->d_name + l - 4, ".png") != 0)
            continue;
        if (nn == nc) {
            nc = nc ? nc * 2 : 64;
            char **p = realloc(names, sizeof *names * nc);
            if (p == NULL) {
                err = ENOMEM;
                break;
            }
            names = p;
        }
        names[nn] = malloc(strlen(arg) + l + 2);
        if (names[nn] == NULL) {
            err = ENOMEM;
            break;
        }
        sprintf(names[nn], "%s/%s", arg, e->d_name);
        nn++;
    }
    closedir(d);
    if (!err) {
        qsort(names, nn, sizeof *names, cmp_str);
        for (size_t i = 0; i < nn && !err; i++)
            err = add_file(v, n, cap, names[i]);
    }
    for (size_t i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    return err;
}

static double mbps(double bytes, double secs)
{
    return secs > 0 ? bytes / secs / 1e6 : 0.0;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Measures one file. Returns 0, or 1 after reporting an error. */
static int bench_one(const struct bench_file *f, unsigned threads, unsigned reps,
                     uint32_t tile, int effort, int csv, int cpu_mode,
                     struct bench_totals *tot)
{
    struct l3_info info;
    void *px = NULL;
    size_t pxn = 0;
    int st = l3_png_decode(f->png, f->png_size, NULL, &info, &px, &pxn);
    if (st != L3_OK) {
        cli_error(f->path, "%s", l3_strerror(st));
        return 1;
    }
    struct l3_encode_options eo1, eon;
    memset(&eo1, 0, sizeof eo1);
    eo1.threads = 1;
    eo1.tile_width = eo1.tile_height = tile;
    eo1.effort = effort;
    eon = eo1;
    eon.threads = threads;
    void *l3 = NULL;
    size_t l3n = 0;
    st = l3_encode(&info, px, 0, &eo1, &l3, &l3n);
    if (st != L3_OK) {
        cli_error(f->path, "L3 encode: %s", l3_strerror(st));
        free(px);
        return 1;
    }
    unsigned char *out = malloc(pxn ? pxn : 1);
    if (out == NULL) {
        cli_error(f->path, "%s", strerror(ENOMEM));
        free(px);
        l3_free(l3);
        return 1;
    }
    struct l3_decode_options do1, don;
    memset(&do1, 0, sizeof do1);
    do1.threads = 1;
    don = do1;
    don.threads = threads;
    st = l3_decode(l3, l3n, out, pxn, 0, &do1);
    if (st != L3_OK || memcmp(out, px, pxn) != 0) {
        cli_error(f->path, "L3 round trip failed: %s",
                  st != L3_OK ? l3_strerror(st) : "pixels differ");
        free(px);
        free(out);
        l3_free(l3);
        return 1;
    }

    double wall[OPS] = {0}, cpu[OPS] = {0};
    int rc = 0;
    /* Each operation's runs back to back, as in a loop over images. Run
     * after a 1-thread operation, an N-thread one first waits for worker
     * threads whose CPUs went idle: 0.15-2.2 ms on average in a 2-vCPU KVM
     * guest, depending on the host, against a 4 ms two-thread decode. Its
     * later runs find them awake (codec/pool.c); the best of -r is what a
     * decode loop gets. */
    for (int k = 0; k < OPS && rc == 0; k++)
        for (unsigned r = 0; r < reps && rc == 0; r++) {
            struct stopwatch w;
            void *p2 = NULL, *e = NULL;
            size_t en = 0;
            int s = L3_OK;
            sw_start(&w);
            switch (k) {
            case OP_PNG: s = l3_png_decode(f->png, f->png_size, NULL, NULL, &p2, NULL); break;
            case OP_ENC1: s = l3_encode(&info, px, 0, &eo1, &e, &en); break;
            case OP_ENCN: s = l3_encode(&info, px, 0, &eon, &e, &en); break;
            case OP_DEC1: s = l3_decode(l3, l3n, out, pxn, 0, &do1); break;
            default: s = l3_decode(l3, l3n, out, pxn, 0, &don); break;
            }
            sw_stop(&w, &wall[k], &cpu[k]);
            free(p2);
            l3_free(e);
            if (s != L3_OK) {
                cli_error(f->path, "%s", l3_strerror(s));
                rc = 1;
            }
        }
    if (rc == 0 && memcmp(out, px, pxn) != 0) {
        cli_error(f->path, "%u-thread decode differs from the source", threads);
        rc = 1;
    }
    if (rc == 0) {
        double raw = (double)pxn, t[OPS];
        for (int k = 0; k < OPS; k++)
            t[k] = shown(wall, cpu, k, cpu_mode);
        if (csv)
            printf("%s,%u,%u,%u,%u,%zu,%zu,%zu,%.6f,%.6f,%.6f,%.6f,%.6f\n", base_name(f->path),
                   info.width, info.height, info.color, info.bit_depth, pxn, f->png_size, l3n,
                   t[OP_PNG], t[OP_ENC1], t[OP_ENCN], t[OP_DEC1], t[OP_DECN]);
        else
            printf("%-34.34s %5ux%-5u %-3s%2u %9zu %9zu %6.3f %8.1f %8.1f %8.1f %8.1f %8.1f\n",
                   base_name(f->path), info.width, info.height,
                   (const char *[]){"G", "GA", "RGB", "RGBA", "P"}[info.color < 5 ? info.color : 0],
                   info.bit_depth, f->png_size, l3n, (double)l3n / (double)f->png_size,
                   mbps(raw, t[OP_PNG]), mbps(raw, t[OP_ENC1]), mbps(raw, t[OP_ENCN]),
                   mbps(raw, t[OP_DEC1]), mbps(raw, t[OP_DECN]));
        tot->raw += raw;
        tot->png += (double)f->png_size;
        tot->l3 += (double)l3n;
        for (int k = 0; k < OPS; k++) {
            tot->wall[k] += wall[k];
            tot->cpu[k] += cpu[k];
        }
    }
    free(px);
    free(out);
    l3_free(l3);
    return rc;
}

int cli_bench(int argc, char **argv)
{
    unsigned threads = cli_default_threads();
    unsigned reps = 3;
    uint32_t tile = 0;
    int effort = 0;
    int csv = 0, cpu_mode = 0;
    struct bench_file *files = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        if (strcmp(argv[i], "-j") == 0 && i + 1 < argc) {
            long j = cli_parse_count(argv[++i], 1024);
            if (j < 0) {
                cli_error(NULL, "bench: bad -j value '%s' (see 'l3 --help')", argv[i]);
                rc = 2;
            }
            threads = (unsigned)j;
        } else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
            long r = cli_parse_count(argv[++i], 1000);
            if (r < 0) {
                cli_error(NULL, "bench: bad -r value '%s' (see 'l3 --help')", argv[i]);
                rc = 2;
            }
            reps = (unsigned)r;
        } else if (strcmp(argv[i], "--tile") == 0 && i + 1 < argc) {
            long t = cli_parse_count(argv[++i], 65536);
            if (t < 0) {
                cli_error(NULL, "bench: bad --tile value '%s' (see 'l3 --help')", argv[i]);
                rc = 2;
            }
            tile = (uint32_t)t;
        } else if (strcmp(argv[i], "--effort") == 0 && i + 1 < argc) {
            if (cli_parse_effort(argv[++i], &effort)) {
                cli_error(NULL, "bench: bad --effort value '%s' (see 'l3 --help')", argv[i]);
                rc = 2;
            }
        } else if (strcmp(argv[i], "--csv") == 0) {
            csv = 1;
        } else if (strcmp(argv[i], "--cpu-time") == 0) {
            cpu_mode = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            cli_error(NULL, "bench: unknown option '%s' (see 'l3 --help')", argv[i]);
            rc = 2;
        } else {
            int e = collect(argv[i], &files, &n, &cap);
            if (e) {
                cli_error(argv[i], "%s", strerror(e));
                rc = 1;
            }
        }
    }
    if (rc == 0 && n == 0) {
        cli_error(NULL, "bench: no PNG files given (see 'l3 --help')");
        rc = 2;
    }
    /* Everything into memory before any timing. */
    double png_total = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        int e = cli_read_file(files[i].path, &files[i].png, &files[i].png_size);
        if (e) {
            cli_error(files[i].path, "%s", strerror(e));
            rc = 1;
        } else if (!l3_is_png(files[i].png, files[i].png_size)) {
            cli_error(files[i].path, "not a PNG file");
            rc = 1;
        }
        png_total += (double)files[i].png_size;
    }
    struct bench_totals tot;
    memset(&tot, 0, sizeof tot);
    if (rc == 0) {
        if (csv) {
            printf("file,width,height,color,bit_depth,raw_bytes,png_bytes,l3_bytes,"
                   "libpng_decode_s,l3_encode_1t_s,l3_encode_%ut_s,l3_decode_1t_s,"
                   "l3_decode_%ut_s\n", threads, threads);
        } else {
            printf("l3 bench: %zu files (%.1f MB of PNG in memory), N = %u threads, tile %u, "
                   "best of %u runs\n", n, png_total / 1e6, threads,
                   tile ? tile : L3_DEFAULT_TILE, reps);
            printf("speeds in MB/s of decoded pixels; %s\n",
                   cpu_mode ? "libpng, enc 1t, dec 1t: thread CPU time; enc Nt, dec Nt: wall clock"
                            : "wall-clock time");
            printf("%-34s %11s %-5s %9s %9s %6s %8s %8s %8s %8s %8s\n", "file", "size", "type",
                   "PNG B", "L3 B", "L3/PNG", "libpng", "enc 1t", "enc Nt", "dec 1t", "dec Nt");
        }
        fflush(stdout);
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = bench_one(&files[i], threads, reps, tile, effort, csv, cpu_mode, &tot);
        fflush(stdout);
    }
    if (rc == 0 && !csv) {
        double t[OPS];
        for (int k = 0; k < OPS; k++)
            t[k] = shown(tot.wall, tot.cpu, k, cpu_mode);
        printf("%-34s %11s %-5s %9.0f %9.0f %6.3f %8.1f %8.1f %8.1f %8.1f %8.1f\n", "TOTAL", "",
               "", tot.png, tot.l3, tot.l3 / tot.png, mbps(tot.raw, t[OP_PNG]),
               mbps(tot.raw, t[OP_ENC1]), mbps(tot.raw, t[OP_ENCN]), mbps(tot.raw, t[OP_DEC1]),
               mbps(tot.raw, t[OP_DECN]));
        const double *w = tot.wall;
        printf("\nsummary (%zu files, %.1f MB of pixels; 1-thread ratios in %s time, "
               "N-thread ratios in wall-clock time):\n", n, tot.raw / 1e6,
               cpu_mode ? "thread CPU" : "wall-clock");
        printf("  size               L3 = %.3f x PNG bytes\n", tot.l3 / tot.png);
        printf("  decode, 1 thread   %.2f x libpng   (%.1f vs %.1f MB/s)\n",
               t[OP_PNG] / t[OP_DEC1], mbps(tot.raw, t[OP_DEC1]), mbps(tot.raw, t[OP_PNG]));
        printf("  decode, %u threads %s%.2f x libpng   (scaling %.2f x over 1 thread)\n", threads,
               threads < 10 ? " " : "", w[OP_PNG] / w[OP_DECN], w[OP_DEC1] / w[OP_DECN]);
        printf("  encode, 1 thread   %.2f x libpng decode   (%.1f MB/s)\n",
               t[OP_PNG] / t[OP_ENC1], mbps(tot.raw, t[OP_ENC1]));
        printf("  encode, %u threads %s%.2f x libpng decode   (scaling %.2f x over 1 thread)\n",
               threads, threads < 10 ? " " : "", w[OP_PNG] / w[OP_ENCN],
               w[OP_ENC1] / w[OP_ENCN]);
    }
    for (size_t i = 0; i < n; i++) {
        free(files[i].path);
        free(files[i].png);
    }
    free(files);
    return rc;
}
