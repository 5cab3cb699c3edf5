/* bench.c — `l3 bench`: L3 against libpng on the same files, same run.
 *
 * Every PNG is read into memory before anything is timed. Then, file by file,
 * each operation runs -r times interleaved (libpng decode, L3 encode with 1
 * and N threads, L3 decode with 1 and N threads) and the best time of each is
 * kept, so that all numbers of a file come from the same minutes on the same
 * machine. Speeds are MB/s (10^6 bytes) of decoded pixels.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

struct bench_file {
    char *path;
    unsigned char *png;
    size_t png_size;
};

struct bench_totals {
    double raw, png, l3;
    double t_png, t_enc1, t_encn, t_dec1, t_decn;
};

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

static void min_time(double *best, double t)
{
    if (*best == 0 || t < *best)
        *best = t;
}

/* Measures one file. Returns 0, or 1 after reporting an error. */
static int bench_one(const struct bench_file *f, unsigned threads, unsigned reps,
                     uint32_t tile, int csv, struct bench_totals *tot)
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

    double t_png = 0, t_enc1 = 0, t_encn = 0, t_dec1 = 0, t_decn = 0;
    int rc = 0;
    for (unsigned r = 0; r < reps && rc == 0; r++) {
        void *p2 = NULL;
        double t0 = cli_now();
        st = l3_png_decode(f->png, f->png_size, NULL, NULL, &p2, NULL);
        min_time(&t_png, cli_now() - t0);
        free(p2);

        void *e = NULL;
        size_t en = 0;
        t0 = cli_now();
        int st2 = l3_encode(&info, px, 0, &eo1, &e, &en);
        min_time(&t_enc1, cli_now() - t0);
        l3_free(e);
        e = NULL;
        t0 = cli_now();
        int st3 = l3_encode(&info, px, 0, &eon, &e, &en);
        min_time(&t_encn, cli_now() - t0);
        l3_free(e);

        t0 = cli_now();
        int st4 = l3_decode(l3, l3n, out, pxn, 0, &do1);
        min_time(&t_dec1, cli_now() - t0);
        t0 = cli_now();
        int st5 = l3_decode(l3, l3n, out, pxn, 0, &don);
        min_time(&t_decn, cli_now() - t0);
        int bad = st != L3_OK ? st : st2 != L3_OK ? st2 : st3 != L3_OK ? st3
                : st4 != L3_OK ? st4 : st5;
        if (bad != L3_OK) {
            cli_error(f->path, "%s", l3_strerror(bad));
            rc = 1;
        }
    }
    if (rc == 0 && memcmp(out, px, pxn) != 0) {
        cli_error(f->path, "%u-thread decode differs from the source", threads);
        rc = 1;
    }
    if (rc == 0) {
        double raw = (double)pxn;
        if (csv)
            printf("%s,%u,%u,%u,%u,%zu,%zu,%zu,%.6f,%.6f,%.6f,%.6f,%.6f\n", base_name(f->path),
                   info.width, info.height, info.color, info.bit_depth, pxn, f->png_size, l3n,
                   t_png, t_enc1, t_encn, t_dec1, t_decn);
        else
            printf("%-34.34s %5ux%-5u %-3s%2u %9zu %9zu %6.3f %8.1f %8.1f %8.1f %8.1f %8.1f\n",
                   base_name(f->path), info.width, info.height,
                   (const char *[]){"G", "GA", "RGB", "RGBA", "P"}[info.color < 5 ? info.color : 0],
                   info.bit_depth, f->png_size, l3n, (double)l3n / (double)f->png_size,
                   mbps(raw, t_png), mbps(raw, t_enc1), mbps(raw, t_encn), mbps(raw, t_dec1),
                   mbps(raw, t_decn));
        tot->raw += raw;
        tot->png += (double)f->png_size;
        tot->l3 += (double)l3n;
        tot->t_png += t_png;
        tot->t_enc1 += t_enc1;
        tot->t_encn += t_encn;
        tot->t_dec1 += t_dec1;
        tot->t_decn += t_decn;
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
    int csv = 0;
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
        } else if (strcmp(argv[i], "--csv") == 0) {
            csv = 1;
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
            printf("speeds in MB/s of decoded pixels\n");
            printf("%-34s %11s %-5s %9s %9s %6s %8s %8s %8s %8s %8s\n", "file", "size", "type",
                   "PNG B", "L3 B", "L3/PNG", "libpng", "enc 1t", "enc Nt", "dec 1t", "dec Nt");
        }
        fflush(stdout);
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = bench_one(&files[i], threads, reps, tile, csv, &tot);
        fflush(stdout);
    }
    if (rc == 0 && !csv) {
        printf("%-34s %11s %-5s %9.0f %9.0f %6.3f %8.1f %8.1f %8.1f %8.1f %8.1f\n", "TOTAL", "",
               "", tot.png, tot.l3, tot.l3 / tot.png, mbps(tot.raw, tot.t_png),
               mbps(tot.raw, tot.t_enc1), mbps(tot.raw, tot.t_encn), mbps(tot.raw, tot.t_dec1),
               mbps(tot.raw, tot.t_decn));
        printf("\nsummary (%zu files, %.1f MB of pixels):\n", n, tot.raw / 1e6);
        printf("  size               L3 = %.3f x PNG bytes\n", tot.l3 / tot.png);
        printf("  decode, 1 thread   %.2f x libpng   (%.1f vs %.1f MB/s)\n",
               tot.t_png / tot.t_dec1, mbps(tot.raw, tot.t_dec1), mbps(tot.raw, tot.t_png));
        printf("  decode, %u threads %s%.2f x libpng   (scaling %.2f x over 1 thread)\n", threads,
               threads < 10 ? " " : "", tot.t_png / tot.t_decn, tot.t_dec1 / tot.t_decn);
        printf("  encode, 1 thread   %.2f x libpng decode   (%.1f MB/s)\n",
               tot.t_png / tot.t_enc1, mbps(tot.raw, tot.t_enc1));
        printf("  encode, %u threads %s%.2f x libpng decode   (%.1f MB/s)\n", threads,
               threads < 10 ? " " : "", tot.t_png / tot.t_encn, mbps(tot.raw, tot.t_encn));
    }
    for (size_t i = 0; i < n; i++) {
        free(files[i].path);
        free(files[i].png);
    }
    free(files);
    return rc;
}
