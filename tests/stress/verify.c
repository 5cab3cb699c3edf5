/* verify.c — `stress_tool verify`: every file read through the mount against
 * the oracle, and with --pixels decoded and compared with libpng's own decode
 * of the source. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <png.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "l3.h"
#include "l3fs.h"
#include "stress.h"
/* --------------------------------------------------- libpng's own decode */

struct pngsrc {
    const unsigned char *p;
    size_t len, off;
};

static void png_mem_read(png_structp png, png_bytep out, png_size_t n)
{
    struct pngsrc *s = png_get_io_ptr(png);
    if (s->len - s->off < n)
        png_error(png, "truncated");
    memcpy(out, s->p + s->off, n);
    s->off += n;
}

/* Decodes with libpng to libl3's sample layout: unpacked sub-byte samples,
 * native-endian 16 bit, palette indices, no interlace, no conversions. */
static int libpng_decode(const unsigned char *data, size_t len, uint32_t *w, uint32_t *h,
                         int *channels, int *depth, unsigned char **px, size_t *pxlen)
{
    struct pngsrc s = {data, len, 0};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep *rows = NULL;
    unsigned char *volatile buf = NULL;
    if (!info)
        return -1;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(rows);
        free(buf);
        return -1;
    }
    png_set_read_fn(png, &s, png_mem_read);
    png_read_info(png, info);
    *w = png_get_image_width(png, info);
    *h = png_get_image_height(png, info);
    *depth = png_get_bit_depth(png, info);
    *channels = png_get_channels(png, info);
    if (*depth < 8)
        png_set_packing(png);
    if (*depth == 16) {
        uint16_t one = 1;
        if (*(uint8_t *)&one == 1)
            png_set_swap(png);
    }
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t row = png_get_rowbytes(png, info);
    buf = malloc(row * *h);
    rows = malloc(*h * sizeof *rows);
    if (!buf || !rows)
        png_error(png, "oom");
    for (uint32_t y = 0; y < *h; y++)
        rows[y] = buf + (size_t)y * row;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    *px = buf;
    *pxlen = row * *h;
    return 0;
}

/* --------------------------------------------------------------- verify */

struct vctx {
    struct oracle *o;
    const char *mnt;
    int pixels;
    _Atomic size_t next;
    _Atomic size_t ok_l3, ok_eio, ok_pass, ok_fifo, ok_pixels, fail;
    _Atomic uint64_t max_ns;
};

static void vfail(struct vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vfail(struct vctx *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = atomic_fetch_add(&v->fail, 1);
    if (n < 20) {
        fprintf(stderr, "FAIL ");
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
    va_end(ap);
}

static _Atomic int worker_ids;

static void verify_one(struct vctx *v, struct ent *e, unsigned char **buf, size_t *cap)
{
    char path[8192];
    st_fmt(path, sizeof path, "%s/%s", v->mnt, e->mnt);
    if (e->kind == K_FIFO) {
        struct stat st;
        if (lstat(path, &st) < 0 || !S_ISFIFO(st.st_mode))
            vfail(v, "%s: not shown as a FIFO", e->mnt);
        else
            atomic_fetch_add(&v->ok_fifo, 1);
        /* a non-blocking open of a FIFO must not hang either */
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0)
            close(fd);
        return;
    }
    size_t len = 0;
    off_t stsize = -1;
    const char *step;
    int r = read_all(path, buf, cap, &len, &stsize, &step);
    if (e->kind == K_L3 && e->err) {
        if (r == -EIO)
            atomic_fetch_add(&v->ok_eio, 1);
        else
            vfail(v, "%s: expected EIO (the source does not transcode), got %s at %s",
                  e->mnt, r ? strerror(-r) : "success", step);
        return;
    }
    if (r < 0) {
        vfail(v, "%s: %s failed: %s", e->mnt, step, strerror(-r));
        return;
    }
    XXH128_hash_t h = XXH3_128bits(*buf, len);
    if (len != e->size || !XXH128_isEqual(h, e->h)) {
        vfail(v, "%s: %zu bytes differ from the expected %" PRIu64 " bytes", e->mnt, len,
              e->size);
        return;
    }
    if ((uint64_t)stsize != len) {
        vfail(v, "%s: st_size %lld but read returned %zu bytes", e->mnt, (long long)stsize, len);
        return;
    }
    if (e->kind == K_PASS) {
        atomic_fetch_add(&v->ok_pass, 1);
        return;
    }
    atomic_fetch_add(&v->ok_l3, 1);
    if (!v->pixels)
        return;
    /* decode what the mount served; compare with libpng's decode of the source */
    void *px = NULL;
    size_t pxlen = 0;
    struct l3_info info;
    int st = l3_decode_alloc(*buf, len, NULL, &px, &pxlen, &info);
    char sp[8192];
    st_fmt(sp, sizeof sp, "%s/%s", v->o->srcroot, e->src);
    unsigned char *sbuf = NULL, *ref = NULL;
    size_t scap = 0, slen = 0, reflen = 0;
    uint32_t w = 0, hh = 0;
    int ch = 0, dp = 0;
    if (st != L3_OK) {
        vfail(v, "%s: l3_decode: %s", e->mnt, l3_strerror(st));
    } else if (read_all(sp, &sbuf, &scap, &slen, NULL, &step) < 0 ||
               libpng_decode(sbuf, slen, &w, &hh, &ch, &dp, &ref, &reflen) < 0) {
        vfail(v, "%s: libpng cannot decode the source", e->src);
    } else if (w != info.width || hh != info.height || ch != info.channels ||
               dp != info.bit_depth || reflen != pxlen || memcmp(ref, px, pxlen) != 0) {
        vfail(v, "%s: pixels differ from libpng's decode of %s", e->mnt, e->src);
    } else {
        atomic_fetch_add(&v->ok_pixels, 1);
    }
    l3_free(px);
    free(sbuf);
    free(ref);
}

static void *verify_worker(void *arg)
{
    struct vctx *v = arg;
    int id = atomic_fetch_add(&worker_ids, 1) % MAXW;
    unsigned char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        size_t i = atomic_fetch_add(&v->next, 1);
        if (i >= v->o->n)
            break;
        atomic_store(&op_path[id], v->o->e[i].mnt);
        uint64_t t0 = now_ns();
        atomic_store(&op_start[id], t0);
        verify_one(v, &v->o->e[i], &buf, &cap);
        atomic_store(&op_start[id], 0);
        uint64_t d = now_ns() - t0, m = atomic_load(&v->max_ns);
        while (d > m && !atomic_compare_exchange_weak(&v->max_ns, &m, d))
            ;
    }
    free(buf);
    return NULL;
}

int cmd_verify(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: verify MNT ORACLE [--pixels] [--threads N] [--timeout S] "
                        "[--label TEXT]\n");
        return 2;
    }
    struct vctx v;
    memset(&v, 0, sizeof v);
    struct oracle o;
    if (oracle_load(&o, argv[2]) < 0)
        return 2;
    v.o = &o;
    v.mnt = argv[1];
    int threads = 4;
    const char *label = "verify";
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--pixels"))
            v.pixels = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            hang_limit_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--label") && i + 1 < argc)
            label = argv[++i];
        else if (!strcmp(argv[i], "--prefix") && i + 1 < argc) {
            /* only the entries whose mount path starts with PREFIX */
            const char *pre = argv[++i];
            size_t k = 0;
            for (size_t j = 0; j < o.n; j++) {
                if (!strncmp(o.e[j].mnt, pre, strlen(pre))) {
                    o.e[k++] = o.e[j];
                } else {
                    free(o.e[j].src);
                    free(o.e[j].mnt);
                }
            }
            o.n = k;
        }
    }
    if (threads < 1 || threads > MAXW)
        threads = 4;
    start_watchdog();
    double t0 = now_s();
    pthread_t th[MAXW];
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, verify_worker, &v);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double dt = now_s() - t0;
    size_t fail = atomic_load(&v.fail);
    printf("%s %s: %zu entries in %.2f s (slowest %.1f ms): %zu .l3 byte-exact%s%zu, "
           "%zu EIO as expected, %zu pass-through identical, %zu FIFOs shown; %zu failures\n",
           fail ? "FAIL" : "PASS", label, o.n, dt, atomic_load(&v.max_ns) / 1e6,
           atomic_load(&v.ok_l3), v.pixels ? ", pixels = libpng " : ", pixels unchecked ",
           v.pixels ? atomic_load(&v.ok_pixels) : (size_t)0, atomic_load(&v.ok_eio),
           atomic_load(&v.ok_pass), atomic_load(&v.ok_fifo), fail);
    oracle_free(&o);
    return fail ? 1 : 0;
}
