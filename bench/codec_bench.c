/* codec_bench — L3 vs libpng on a directory of PNGs, side by side in one run.
 *
 *   codec_bench [-j THREADS] [-r REPEAT] [-t TILE_W[xTILE_H]] [-e EFFORT] [-w OUTDIR]
 *               DIR|FILE...
 *
 * For every PNG: decodes it with libpng (classic API, samples kept as stored:
 * 16-bit kept, palette indices kept, sub-byte samples unpacked), encodes the
 * pixels to L3, decodes the L3 back and checks the samples are identical.
 * Prints per file and total: L3/PNG size ratio, libpng decode MB/s, L3 decode
 * MB/s (1 thread and -j threads), L3 encode MB/s (1 thread); MB/s counts
 * decoded sample bytes. Each timing is the best of REPEAT runs. Exit status 1
 * on any round-trip mismatch or error. */
#include <dirent.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "l3.h"
#include "tc_file.h"

/* Single-thread timings use the process CPU clock (robust on a loaded
 * machine); multi-thread timings use the wall clock. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct mem {
    const uint8_t *p;
    size_t n, pos;
};

static void rd(png_structp png, png_bytep out, png_size_t n)
{
    struct mem *m = png_get_io_ptr(png);
    if (m->n - m->pos < n)
        png_error(png, "truncated");
    memcpy(out, m->p + m->pos, n);
    m->pos += n;
}

/* Decodes a PNG with libpng into native samples; returns 0 on success. */
static int png_load(const uint8_t *data, size_t size, struct l3_info *info,
                    uint8_t **px_ret, size_t *px_size)
{
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop pi = png_create_info_struct(png);
    struct mem m = {data, size, 0};
    uint8_t *volatile px = NULL;
    png_bytep *volatile rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &pi, NULL);
        free(px);
        free(rows);
        return -1;
    }
    png_set_read_fn(png, &m, rd);
    png_read_info(png, pi);
    png_uint_32 w, h;
    int depth, ct, il;
    png_get_IHDR(png, pi, &w, &h, &depth, &ct, &il, NULL, NULL);
    memset(info, 0, sizeof *info);
    info->width = w;
    info->height = h;
    info->bit_depth = (uint8_t)depth;
    switch (ct) {
    case PNG_COLOR_TYPE_GRAY: info->color = L3_COLOR_GRAY; break;
    case PNG_COLOR_TYPE_GRAY_ALPHA: info->color = L3_COLOR_GRAY_ALPHA; break;
    case PNG_COLOR_TYPE_RGB: info->color = L3_COLOR_RGB; break;
    case PNG_COLOR_TYPE_RGB_ALPHA: info->color = L3_COLOR_RGBA; break;
    default: info->color = L3_COLOR_PALETTE; break;
    }
    static const uint8_t ch[] = {1, 2, 3, 4, 1};
    info->channels = ch[info->color];
    if (info->color == L3_COLOR_PALETTE) {
        png_colorp pal;
        int n = 0;
        png_get_PLTE(png, pi, &pal, &n);
        info->palette_len = (uint16_t)n;
        for (int i = 0; i < n; i++) {
            info->palette[i][0] = pal[i].red;
            info->palette[i][1] = pal[i].green;
            info->palette[i][2] = pal[i].blue;
            info->palette[i][3] = 255;
        }
        png_bytep ta;
        int nt = 0;
        png_color_16p tc;
        if (png_get_tRNS(png, pi, &ta, &nt, &tc) && nt > 0) {
            if (nt > n)
                nt = n;
            info->palette_alpha_len = (uint16_t)nt;
            for (int i = 0; i < nt; i++)
                info->palette[i][3] = ta[i];
        }
    }
    if (depth < 8)
        png_set_packing(png);
    if (depth == 16)
        png_set_swap(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, pi);
    size_t rb = png_get_rowbytes(png, pi);
    px = malloc(rb * h);
    rows = malloc(sizeof(png_bytep) * h);
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = px + rb * y;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &pi, NULL);
    free(rows);
    *px_ret = px;
    *px_size = rb * h;
    return 0;
}

struct tot {
    double png_bytes, l3_bytes, raw, t_png, t_dec1, t_decn, t_enc, t_encn, cpu_decn;
};

static int opt_threads = 2, opt_repeat = 3;
static uint32_t opt_tw, opt_th;
static const char *opt_write;
static int opt_effort; /* -e N: encoder effort */ /* -w DIR: also write the .l3 files there */

static int bench_file(const char *path, struct tot *T)
{
    size_t n;
    uint8_t *png = tc_slurp(path, &n);
    if (!png) {
        fprintf(stderr, "%s: cannot read\n", path);
        return 1;
    }
    struct l3_info info;
    uint8_t *px = NULL;
    size_t pxn;
    double t_png = 1e30, t_dec1 = 1e30, t_decn = 1e30, t_enc = 1e30, t_encn = 1e30;
    double cpu_decn = 1e30; /* CPU time of all threads of the threaded decode */
    for (int r = 0; r < opt_repeat; r++) {
        free(px);
        px = NULL;
        double t0 = now();
        if (png_load(png, n, &info, &px, &pxn)) {
            fprintf(stderr, "%s: libpng failed\n", path);
            free(png);
            return 1;
        }
        double t = now() - t0;
        if (t < t_png)
            t_png = t;
    }
    struct l3_encode_options eo = {0};
    eo.tile_width = opt_tw;
    eo.tile_height = opt_th;
    eo.effort = opt_effort;
    void *l3 = NULL;
    size_t l3n = 0;
    int st = 0;
    for (int r = 0; r < opt_repeat; r++) {
        l3_free(l3);
        double t0 = now();
        st = l3_encode(&info, px, 0, &eo, &l3, &l3n);
        double t = now() - t0;
        if (st) {
            fprintf(stderr, "%s: l3_encode: %s\n", path, l3_strerror(st));
            free(png);
            free(px);
            return 1;
        }
        if (t < t_enc)
            t_enc = t;
    }
    if (opt_write) {
        const char *b = strrchr(path, '/');
        char name[4096];
        snprintf(name, sizeof name, "%s/%s.l3", opt_write, b ? b + 1 : path);
        FILE *f = fopen(name, "wb");
        if (!f || fwrite(l3, 1, l3n, f) != l3n)
            fprintf(stderr, "%s: cannot write\n", name);
        if (f)
            fclose(f);
    }
    eo.threads = (unsigned)opt_threads;
    for (int r = 0; r < opt_repeat; r++) {
        void *l3b;
        size_t l3bn;
        double t0 = wall();
        st = l3_encode(&info, px, 0, &eo, &l3b, &l3bn);
        double t = wall() - t0;
        if (st || l3bn != l3n || memcmp(l3b, l3, l3n)) {
            fprintf(stderr, "%s: threaded encode differs\n", path);
            st = 1;
        }
        l3_free(l3b);
        if (t < t_encn)
            t_encn = t;
    }
    uint8_t *dec = malloc(pxn);
    int bad = st != 0;
    struct l3_decode_options d1 = {0}, dn = {0};
    dn.threads = (unsigned)opt_threads;
    for (int r = 0; r < opt_repeat; r++) {
        memset(dec, 0xa5, pxn);
        double t0 = now();
        st = l3_decode(l3, l3n, dec, pxn, 0, &d1);
        double t = now() - t0;
        if (st || memcmp(dec, px, pxn)) {
            fprintf(stderr, "%s: round trip mismatch (%s)\n", path, l3_strerror(st));
            bad = 1;
        }
        if (t < t_dec1)
            t_dec1 = t;
        memset(dec, 0x5a, pxn);
        double c0 = now();
        t0 = wall();
        st = l3_decode(l3, l3n, dec, pxn, 0, &dn);
        t = wall() - t0;
        double c = now() - c0;
        if (c < cpu_decn)
            cpu_decn = c;
        if (st || memcmp(dec, px, pxn)) {
            fprintf(stderr, "%s: threaded round trip mismatch\n", path);
            bad = 1;
        }
        if (t < t_decn)
            t_decn = t;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    double mb = pxn / 1e6;
    printf("%-44.44s %5ux%-5u c%u d%-2u %8zu %6.3f  png %7.1f  l3 %7.1f (x%.2f)  l3-j%d %7.1f  "
           "enc %7.1f (x%.2f) enc-j%d %7.1f\n",
           base, info.width, info.height, info.color, info.bit_depth, n, (double)l3n / n,
           mb / t_png, mb / t_dec1, t_png / t_dec1, opt_threads, mb / t_decn, mb / t_enc,
           t_png / t_enc, opt_threads, mb / t_encn);
    T->png_bytes += n;
    T->l3_bytes += l3n;
    T->raw += pxn;
    T->t_png += t_png;
    T->t_dec1 += t_dec1;
    T->t_decn += t_decn;
    T->cpu_decn += cpu_decn;
    T->t_enc += t_enc;
    T->t_encn += t_encn;
    free(dec);
    free(px);
    free(png);
    l3_free(l3);
    return bad;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-j") && i + 1 < argc)
            opt_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            opt_repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-e") && i + 1 < argc)
            opt_effort = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-w") && i + 1 < argc)
            opt_write = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) {
            unsigned a = 0, b = 0;
            int k = sscanf(argv[++i], "%ux%u", &a, &b);
            opt_tw = a;
            opt_th = k == 2 ? b : a;
        } else {
            fprintf(stderr, "usage: codec_bench [-j N] [-r REPEAT] [-t WxH] [-e EFFORT] [-w OUTDIR] DIR|FILE...\n");
            return 2;
        }
    }
    if (i >= argc || opt_repeat < 1 || opt_threads < 1) {
        fprintf(stderr, "usage: codec_bench [-j N] [-r REPEAT] [-t WxH] DIR|FILE...\n");
        return 2;
    }
    struct tot T = {0};
    int bad = 0, files = 0;
    for (; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb)) {
            fprintf(stderr, "%s: not found\n", argv[i]);
            bad = 1;
            continue;
        }
        if (!S_ISDIR(sb.st_mode)) {
            bad |= bench_file(argv[i], &T);
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        char **names = NULL;
        size_t nn = 0;
        struct dirent *de;
        while (d && (de = readdir(d))) {
            size_t l = strlen(de->d_name);
            if (l > 4 && !strcmp(de->d_name + l - 4, ".png")) {
                names = realloc(names, (nn + 1) * sizeof *names);
                size_t pl = strlen(argv[i]) + l + 2;
                names[nn] = malloc(pl);
                snprintf(names[nn], pl, "%s/%s", argv[i], de->d_name);
                nn++;
            }
        }
        if (d)
            closedir(d);
        if (nn)
            qsort(names, nn, sizeof *names, cmp);
        for (size_t k = 0; k < nn; k++) {
            bad |= bench_file(names[k], &T);
            files++;
            free(names[k]);
        }
        free(names);
    }
    if (files) {
        double mb = T.raw / 1e6;
        printf("TOTAL %d files: size L3/PNG %.4f (L3 %.0f B, PNG %.0f B)\n", files,
               T.l3_bytes / T.png_bytes, T.l3_bytes, T.png_bytes);
        printf("TOTAL decode MB/s: libpng %.1f, L3 1 thread %.1f (x%.2f libpng), L3 %d threads %.1f "
               "(x%.2f)\n",
               mb / T.t_png, mb / T.t_dec1, T.t_png / T.t_dec1, opt_threads, mb / T.t_decn,
               T.t_png / T.t_decn);
        printf("TOTAL threaded decode: CPU time of all %d threads / 1-thread CPU time = %.3f "
               "(1.000 = no parallel overhead; wall-clock scaling needs idle cores)\n",
               opt_threads, T.cpu_decn / T.t_dec1);
        printf("TOTAL encode MB/s: L3 1 thread %.1f (x%.2f libpng decode), %d threads %.1f\n",
               mb / T.t_enc, T.t_png / T.t_enc, opt_threads, mb / T.t_encn);
    }
    return bad;
}
