/* stress_tool.c — the C side of the l3fs stress suite.
 *
 *   stress_tool gen-tree DIR N SEED [MAXDIM]     tree of small PNGs (libpng)
 *   stress_tool gen-hostile DIR SEED [N]         hostile corpus
 *   stress_tool gen-many DIR N                   one directory with N entries
 *   stress_tool oracle SRC OUT [--skip NAME]...  expected bytes of every file
 *   stress_tool verify MNT ORACLE [opts]         every file through the mount
 *   stress_tool load MNT[,MNT2] ORACLE [opts]    N reader threads, figures
 *   stress_tool lsdir DIR                        readdir + stat timing
 *   stress_tool escape MNT FILE DIR              every kind of write -> EROFS
 *   stress_tool as-user UID GID PATH             open+read as another user
 *   stress_tool json FILE DOTTED.PATH            a number from stats.json
 *   stress_tool churn SRC MNT [opts]             readers while sources change (churn.c)
 *
 * The expected bytes of a .l3 file are computed here, independently of the
 * daemon and its cache: l3_transcode_png() of the source with the default
 * encoder parameters. `verify --pixels` also decodes what the mount served
 * and compares the pixels with libpng's own decode of the source.
 * Every check prints PASS/FAIL lines; exit status 0 only when all passed.
 */
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

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Reads a whole file; returns 0 or -errno (and which step failed). */
static int read_all(const char *path, unsigned char **buf, size_t *cap, size_t *len_ret,
                    off_t *st_size_ret, const char **step_ret)
{
    *step_ret = "open";
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    *step_ret = "fstat";
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (st_size_ret)
        *st_size_ret = st.st_size;
    size_t len = 0;
    *step_ret = "read";
    for (;;) {
        if (*cap - len < 131072) {
            size_t nc = *cap ? *cap * 2 : 262144;
            unsigned char *q = realloc(*buf, nc);
            if (!q) {
                close(fd);
                return -ENOMEM;
            }
            *buf = q;
            *cap = nc;
        }
        ssize_t r = read(fd, *buf + len, 131072);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno;
            close(fd);
            return e;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    *step_ret = "close";
    if (close(fd) < 0)
        return -errno;
    *len_ret = len;
    return 0;
}

/* ------------------------------------------------------------- watchdog */

/* Every worker publishes when its current operation started; a watchdog
 * ends the process when one takes longer than the limit (a hang). */
#define MAXW 256
static _Atomic uint64_t op_start[MAXW];
static const char *_Atomic op_path[MAXW];
static double hang_limit_s = 30;

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        sleep(1);
        uint64_t t = now_ns();
        for (int i = 0; i < MAXW; i++) {
            uint64_t s = atomic_load(&op_start[i]);
            if (s && t > s && (double)(t - s) / 1e9 > hang_limit_s) {
                const char *p = atomic_load(&op_path[i]);
                fprintf(stderr, "FAIL hang: an operation on %s has not returned after %.0f s\n",
                        p ? p : "?", hang_limit_s);
                fflush(stderr);
                _exit(3);
            }
        }
    }
    return NULL;
}

static void start_watchdog(void)
{
    pthread_t t;
    pthread_create(&t, NULL, watchdog, NULL);
    pthread_detach(t);
}

/* --------------------------------------------------------------- oracle */

enum { K_L3 = 1, K_PASS = 2, K_FIFO = 3 };

struct ent {
    int kind;
    int err;          /* expected errno (EIO) for K_L3, else 0 */
    uint64_t size;
    XXH128_hash_t h;
    char *src;        /* relative to SOURCE */
    char *mnt;        /* relative to MOUNTPOINT */
};

struct oracle {
    struct ent *e;
    size_t n, cap;
    char *srcroot;
};

static int has_png_ext(const char *name, size_t *stem)
{
    size_t n = strlen(name);
    if (n < 5 || strcasecmp(name + n - 4, ".png") != 0)
        return 0;
    *stem = n - 4;
    return 1;
}

static void add_ent(struct oracle *o, int kind, const char *src, const char *mnt)
{
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 1024;
        o->e = realloc(o->e, o->cap * sizeof *o->e);
    }
    struct ent *e = &o->e[o->n++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->src = strdup(src);
    e->mnt = strdup(mnt);
}

static char **skips;
static int nskips;

static int skipped(const char *name)
{
    for (int i = 0; i < nskips; i++)
        if (!strcmp(name, skips[i]))
            return 1;
    return 0;
}

static void walk(struct oracle *o, const char *root, const char *rel)
{
    char path[8192];
    st_fmt(path, sizeof path, "%s%s%s", root, rel[0] ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || skipped(de->d_name))
            continue;
        char r[8192], full[8192];
        st_fmt(r, sizeof r, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        st_fmt(full, sizeof full, "%s/%s", root, r);
        struct stat st;
        if (lstat(full, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk(o, root, r);
        } else if (S_ISFIFO(st.st_mode)) {
            add_ent(o, K_FIFO, r, r);
        } else if (S_ISREG(st.st_mode)) {
            size_t stem;
            unsigned char sig[8];
            int png = 0;
            if (has_png_ext(de->d_name, &stem)) {
                int fd = open(full, O_RDONLY | O_CLOEXEC);
                png = fd >= 0 && read(fd, sig, 8) == 8 && l3_is_png(sig, 8);
                if (fd >= 0)
                    close(fd);
            }
            if (png) {
                char m[8192];
                size_t rl = strlen(r);
                st_fmt(m, sizeof m, "%.*s.l3", (int)(rl - 4), r);
                add_ent(o, K_L3, r, m);
            } else {
                add_ent(o, K_PASS, r, r);
            }
        }
    }
    closedir(d);
}

static _Atomic size_t oracle_next;

static void *oracle_worker(void *arg)
{
    struct oracle *o = arg;
    unsigned char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        size_t i = atomic_fetch_add(&oracle_next, 1);
        if (i >= o->n)
            break;
        struct ent *e = &o->e[i];
        if (e->kind == K_FIFO)
            continue;
        char path[8192];
        st_fmt(path, sizeof path, "%s/%s", o->srcroot, e->src);
        size_t len;
        const char *step;
        if (read_all(path, &buf, &cap, &len, NULL, &step) < 0) {
            fprintf(stderr, "oracle: cannot read %s\n", path);
            e->err = EIO;
            continue;
        }
        if (e->kind == K_PASS) {
            e->size = len;
            e->h = XXH3_128bits(buf, len);
            continue;
        }
        struct l3_encode_options eo = {0};
        eo.threads = 1;
        void *out = NULL;
        size_t olen = 0;
        int st = l3_transcode_png(buf, len, &eo, &out, &olen);
        if (st != L3_OK) {
            e->err = EIO;
        } else {
            e->size = olen;
            e->h = XXH3_128bits(out, olen);
        }
        l3_free(out);
    }
    free(buf);
    return NULL;
}

static void oracle_free(struct oracle *o)
{
    for (size_t i = 0; i < o->n; i++) {
        free(o->e[i].src);
        free(o->e[i].mnt);
    }
    free(o->e);
    free(o->srcroot);
    memset(o, 0, sizeof *o);
}

static int oracle_save(const struct oracle *o, const char *out)
{
    FILE *f = fopen(out, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\n", o->srcroot);
    for (size_t i = 0; i < o->n; i++) {
        const struct ent *e = &o->e[i];
        fprintf(f, "%d\t%d\t%" PRIu64 "\t%016" PRIx64 "\t%016" PRIx64 "\t%s\t%s\n", e->kind,
                e->err, e->size, (uint64_t)e->h.high64, (uint64_t)e->h.low64, e->src, e->mnt);
    }
    return fclose(f);
}

static int oracle_load(struct oracle *o, const char *file)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "cannot open oracle %s: %s\n", file, strerror(errno));
        return -1;
    }
    memset(o, 0, sizeof *o);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    if (n <= 0)
        return -1;
    line[strcspn(line, "\n")] = 0;
    o->srcroot = strdup(line);
    while ((n = getline(&line, &cap, f)) > 0) {
        line[strcspn(line, "\n")] = 0;
        char *fields[7];
        char *p = line;
        for (int i = 0; i < 7; i++) {
            fields[i] = p;
            char *t = i < 6 ? strchr(p, '\t') : NULL;
            if (i < 6 && !t)
                return -1;
            if (t) {
                *t = 0;
                p = t + 1;
            }
        }
        add_ent(o, atoi(fields[0]), fields[5], fields[6]);
        struct ent *e = &o->e[o->n - 1];
        e->err = atoi(fields[1]);
        e->size = strtoull(fields[2], NULL, 10);
        e->h.high64 = strtoull(fields[3], NULL, 16);
        e->h.low64 = strtoull(fields[4], NULL, 16);
    }
    free(line);
    fclose(f);
    return 0;
}

static int cmd_oracle(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: oracle SRC OUT [--skip NAME]...\n");
        return 2;
    }
    skips = calloc((size_t)argc, sizeof *skips);
    for (int i = 3; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--skip"))
            skips[nskips++] = argv[i + 1];
    struct oracle o = {0};
    o.srcroot = realpath(argv[1], NULL);
    if (!o.srcroot)
        return 1;
    double t0 = now_s();
    walk(&o, o.srcroot, "");
    long nt = sysconf(_SC_NPROCESSORS_ONLN);
    if (nt < 1)
        nt = 1;
    pthread_t th[64];
    nt = nt > 64 ? 64 : nt;
    for (long i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, oracle_worker, &o);
    for (long i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    size_t l3 = 0, bad = 0, pass = 0, fifo = 0;
    for (size_t i = 0; i < o.n; i++) {
        l3 += o.e[i].kind == K_L3 && !o.e[i].err;
        bad += o.e[i].kind == K_L3 && o.e[i].err;
        pass += o.e[i].kind == K_PASS;
        fifo += o.e[i].kind == K_FIFO;
    }
    if (oracle_save(&o, argv[2]) != 0) {
        fprintf(stderr, "oracle: cannot write %s\n", argv[2]);
        return 1;
    }
    printf("oracle: %zu entries (%zu encodable PNGs, %zu PNGs that must give EIO, %zu "
           "pass-through, %zu FIFOs) in %.2f s\n",
           o.n, l3, bad, pass, fifo, now_s() - t0);
    oracle_free(&o);
    free(skips);
    return 0;
}

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

static int cmd_verify(int argc, char **argv)
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

/* ----------------------------------------------------------------- load */

struct lctx {
    struct ent **files;
    size_t nfiles;
    char *mnts[2];
    int nmnt;
    int pass;         /* each file once (shared counter) instead of random */
    int tolerate;     /* count errors, do not fail on them */
    double deadline;
    _Atomic size_t next;
    _Atomic uint64_t reads, bytes, mismatches, errors, enotconn;
    _Atomic int stop;
};

struct lthread {
    struct lctx *c;
    uint64_t *lat;
    size_t nlat, caplat;
    uint64_t seed;
    int id;
};

static void *load_worker(void *arg)
{
    struct lthread *t = arg;
    struct lctx *c = t->c;
    unsigned char *buf = NULL;
    size_t cap = 0;
    char path[8192];
    while (!atomic_load(&c->stop) && now_s() < c->deadline) {
        size_t i;
        if (c->pass) {
            i = atomic_fetch_add(&c->next, 1);
            if (i >= c->nfiles)
                break;
        } else {
            i = (size_t)(tc_splitmix64(&t->seed) % c->nfiles);
        }
        struct ent *e = c->files[i];
        const char *mnt = c->mnts[c->nmnt > 1 ? (int)(tc_splitmix64(&t->seed) % 2) : 0];
        st_fmt(path, sizeof path, "%s/%s", mnt, e->mnt);
        atomic_store(&op_path[t->id], e->mnt);
        uint64_t t0 = now_ns();
        atomic_store(&op_start[t->id], t0);
        size_t len = 0;
        off_t stsize;
        const char *step;
        int r = read_all(path, &buf, &cap, &len, &stsize, &step);
        uint64_t d = now_ns() - t0;
        atomic_store(&op_start[t->id], 0);
        if (r < 0) {
            uint64_t n = atomic_fetch_add(&c->errors, 1);
            if (r == -ENOTCONN || r == -ECONNABORTED)
                atomic_fetch_add(&c->enotconn, 1);
            if (n < 5 && !c->tolerate)
                fprintf(stderr, "FAIL load: %s: %s: %s\n", path, step, strerror(-r));
            if (c->tolerate && (r == -ENOTCONN || r == -ECONNABORTED))
                usleep(1000);
            continue;
        }
        XXH128_hash_t h = XXH3_128bits(buf, len);
        if (len != e->size || (uint64_t)stsize != len || !XXH128_isEqual(h, e->h)) {
            uint64_t n = atomic_fetch_add(&c->mismatches, 1);
            if (n < 5)
                fprintf(stderr, "FAIL load: %s: %zu bytes (st_size %lld), expected %" PRIu64
                                " bytes %s\n",
                        path, len, (long long)stsize, e->size,
                        len == e->size ? "with other content" : "");
            continue;
        }
        atomic_fetch_add(&c->reads, 1);
        atomic_fetch_add(&c->bytes, len);
        if (t->nlat == t->caplat) {
            t->caplat = t->caplat ? t->caplat * 2 : 4096;
            t->lat = realloc(t->lat, t->caplat * sizeof *t->lat);
        }
        t->lat[t->nlat++] = d;
    }
    free(buf);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmd_load(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: load MNT[,MNT2] ORACLE [--threads N] [--seconds S] [--pass] "
                        "[--tolerate-errors] [--label TEXT] [--timeout S]\n");
        return 2;
    }
    struct oracle o;
    if (oracle_load(&o, argv[2]) < 0)
        return 2;
    struct lctx c;
    memset(&c, 0, sizeof c);
    char *m = strdup(argv[1]);
    char *comma = strchr(m, ',');
    c.mnts[0] = m;
    c.nmnt = 1;
    if (comma) {
        *comma = 0;
        c.mnts[1] = comma + 1;
        c.nmnt = 2;
    }
    int threads = 64;
    double seconds = 10;
    const char *label = "load";
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--pass"))
            c.pass = 1;
        else if (!strcmp(argv[i], "--tolerate-errors"))
            c.tolerate = 1;
        else if (!strcmp(argv[i], "--label") && i + 1 < argc)
            label = argv[++i];
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            hang_limit_s = atof(argv[++i]);
    }
    if (threads < 1 || threads > MAXW)
        threads = 64;
    c.files = malloc(o.n * sizeof *c.files);
    for (size_t i = 0; i < o.n; i++)
        if (o.e[i].kind == K_L3 && !o.e[i].err)
            c.files[c.nfiles++] = &o.e[i];
    if (!c.nfiles) {
        fprintf(stderr, "load: no encodable files in the oracle\n");
        return 2;
    }
    /* shuffle so a pass does not walk directories in order */
    uint64_t seed = 12345;
    for (size_t i = c.nfiles - 1; i > 0; i--) {
        size_t j = (size_t)(tc_splitmix64(&seed) % (i + 1));
        struct ent *t = c.files[i];
        c.files[i] = c.files[j];
        c.files[j] = t;
    }
    start_watchdog();
    struct lthread *ts = calloc((size_t)threads, sizeof *ts);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    double t0 = now_s();
    c.deadline = t0 + seconds;
    for (int i = 0; i < threads; i++) {
        ts[i].c = &c;
        ts[i].seed = 1000 + (uint64_t)i;
        ts[i].id = i;
        pthread_create(&th[i], NULL, load_worker, &ts[i]);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    double dt = now_s() - t0;
    size_t nl = 0;
    for (int i = 0; i < threads; i++)
        nl += ts[i].nlat;
    uint64_t *all = malloc((nl ? nl : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < threads; i++) {
        if (ts[i].nlat)
            memcpy(all + k, ts[i].lat, ts[i].nlat * sizeof *all);
        k += ts[i].nlat;
        free(ts[i].lat);
    }
    qsort(all, nl, sizeof *all, cmp_u64);
#define PCT(p) (nl ? all[(size_t)((double)(nl - 1) * (p) / 100.0 + 0.5)] / 1e6 : 0.0)
    uint64_t reads = atomic_load(&c.reads), bytes = atomic_load(&c.bytes);
    uint64_t mism = atomic_load(&c.mismatches), errs = atomic_load(&c.errors);
    int fail = mism > 0 || (!c.tolerate && errs > 0);
    int unfinished = c.pass && atomic_load(&c.next) < c.nfiles && !c.tolerate;
    if (unfinished)
        fail = 1;
    printf("%s %s: %d threads, %zu files%s, %.2f s: %" PRIu64 " files read (%.0f files/s, "
           "%.1f MiB/s), latency per file p50 %.2f ms p90 %.2f ms p99 %.2f ms max %.2f ms; "
           "%" PRIu64 " wrong bytes, %" PRIu64 " errors (%" PRIu64 " ENOTCONN)%s\n",
           fail ? "FAIL" : "PASS", label, threads, c.nfiles,
           c.nmnt > 1 ? " on 2 mounts" : "", dt, reads, reads / dt, bytes / dt / 1048576.0,
           PCT(50), PCT(90), PCT(99), nl ? all[nl - 1] / 1e6 : 0.0, mism, errs,
           atomic_load(&c.enotconn),
           unfinished ? "; the pass did not finish in time" : "");
    free(all);
    free(ts);
    free(th);
    free(c.files);
    free(m);
    oracle_free(&o);
    return fail ? 1 : 0;
}

/* ---------------------------------------------------------------- lsdir */

static int cmd_lsdir(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    double t0 = now_s();
    int dfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        fprintf(stderr, "FAIL lsdir %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    size_t cap = 1024, n = 0;
    char **names = malloc(cap * sizeof *names);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (n == cap)
            names = realloc(names, (cap *= 2) * sizeof *names);
        names[n++] = strdup(de->d_name);
    }
    double t1 = now_s();
    size_t statted = 0;
    int first_err = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
            statted++;
        else if (!first_err) {
            first_err = errno;
            fprintf(stderr, "lsdir: lstat %s: %s\n", names[i], strerror(errno));
        }
        free(names[i]);
    }
    double t2 = now_s();
    closedir(d);
    free(names);
    printf("lsdir %s: %zu entries, readdir %.0f ms, lstat of every entry %.0f ms (%zu ok)\n",
           argv[1], n, (t1 - t0) * 1e3, (t2 - t1) * 1e3, statted);
    printf("entries=%zu statted=%zu\n", n, statted);
    return statted == n ? 0 : 1;
}

/* --------------------------------------------------------------- escape */

static int n_fail, n_tried;

static void expect_erofs(const char *what, int r)
{
    int e = errno;
    n_tried++;
    if (r >= 0) {
        printf("FAIL %-34s succeeded (expected EROFS)\n", what);
        n_fail++;
    } else if (e != EROFS) {
        printf("FAIL %-34s %s (expected EROFS)\n", what, strerror(e));
        n_fail++;
    } else {
        printf("PASS %-34s EROFS\n", what);
    }
}

/* escape MNT FILE DIR: FILE an existing file and DIR an existing
 * non-empty directory under MNT (relative). */
static int cmd_escape(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    char f[8192], d[8192], nn[8192], sub[8192];
    st_fmt(f, sizeof f, "%s/%s", argv[1], argv[2]);
    st_fmt(d, sizeof d, "%s/%s", argv[1], argv[3]);
    st_fmt(nn, sizeof nn, "%s/new-entry", d);
    struct stat st, dst;
    if (stat(f, &st) < 0 || stat(d, &dst) < 0) {
        printf("FAIL escape: %s or %s missing\n", f, d);
        return 1;
    }
    /* a subdirectory of d (for rmdir) and another file (for exchange) */
    char other[8192];
    sub[0] = other[0] = 0;
    const char *base = strrchr(f, '/') + 1;
    DIR *dd = opendir(d);
    struct dirent *de;
    while (dd && (de = readdir(dd))) {
        if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            !sub[0])
            st_fmt(sub, sizeof sub, "%s/%s", d, de->d_name);
        if (de->d_type == DT_REG && strcmp(de->d_name, base) && !other[0])
            st_fmt(other, sizeof other, "%s/%s", d, de->d_name);
    }
    if (dd)
        closedir(dd);
    int fd;
    expect_erofs("open(O_WRONLY)", fd = open(f, O_WRONLY));
    if (fd >= 0)
        close(fd);
    expect_erofs("open(O_RDWR)", fd = open(f, O_RDWR));
    if (fd >= 0)
        close(fd);
    expect_erofs("open(O_WRONLY|O_APPEND)", fd = open(f, O_WRONLY | O_APPEND));
    if (fd >= 0)
        close(fd);
    expect_erofs("open(O_RDONLY|O_TRUNC)", fd = open(f, O_RDONLY | O_TRUNC));
    if (fd >= 0)
        close(fd);
    expect_erofs("open(O_CREAT|O_EXCL) new", fd = open(nn, O_WRONLY | O_CREAT | O_EXCL, 0644));
    if (fd >= 0)
        close(fd);
    expect_erofs("open(O_CREAT) existing", fd = open(f, O_WRONLY | O_CREAT, 0644));
    if (fd >= 0)
        close(fd);
    expect_erofs("creat() new", fd = creat(nn, 0644));
    if (fd >= 0)
        close(fd);
    expect_erofs("truncate()", truncate(f, 0));
    expect_erofs("unlink()", unlink(f));
    expect_erofs("rename() within dir", rename(f, nn));
    if (other[0])
        expect_erofs("renameat2(RENAME_EXCHANGE)",
                     renameat2(AT_FDCWD, f, AT_FDCWD, other, RENAME_EXCHANGE));
    expect_erofs("renameat2(RENAME_NOREPLACE)",
                 renameat2(AT_FDCWD, f, AT_FDCWD, nn, RENAME_NOREPLACE));
    expect_erofs("mkdir()", mkdir(nn, 0755));
    if (sub[0])
        expect_erofs("rmdir() of a subdirectory", rmdir(sub));
    expect_erofs("rmdir() of a non-empty dir", rmdir(d));
    expect_erofs("symlink()", symlink("/etc/passwd", nn));
    expect_erofs("link()", link(f, nn));
    expect_erofs("chmod()", chmod(f, 0777));
    expect_erofs("chown() to nobody", chown(f, 65534, 65534));
    expect_erofs("chown() unchanged", chown(f, st.st_uid, st.st_gid));
    expect_erofs("utimes()", utimes(f, NULL));
    struct timespec ts[2] = {{0, 0}, {0, 0}};
    expect_erofs("utimensat(epoch)", utimensat(AT_FDCWD, f, ts, 0));
    expect_erofs("setxattr(user.x)", setxattr(f, "user.x", "1", 1, 0));
    expect_erofs("removexattr(user.x)", removexattr(f, "user.x"));
    expect_erofs("mknod(S_IFREG)", mknod(nn, S_IFREG | 0644, 0));
    expect_erofs("mknod(S_IFIFO)", mknod(nn, S_IFIFO | 0644, 0));
    expect_erofs("mknod(S_IFCHR 1:3)", mknod(nn, S_IFCHR | 0644, makedev(1, 3)));
    char ctl[8192];
    st_fmt(ctl, sizeof ctl, "%s/.l3fs/stats.json", argv[1]);
    expect_erofs("open(.l3fs/stats.json, O_WRONLY)", fd = open(ctl, O_WRONLY));
    if (fd >= 0)
        close(fd);
    /* nothing changed */
    struct stat st2;
    if (stat(f, &st2) < 0 || st2.st_size != st.st_size || st2.st_mode != st.st_mode) {
        printf("FAIL %s changed after the write attempts\n", argv[2]);
        n_fail++;
    }
    if (lstat(nn, &st2) == 0) {
        printf("FAIL %s appeared\n", nn);
        n_fail++;
    }
    printf("%s escape: %d write attempts%s\n", n_fail ? "FAIL" : "PASS", n_tried,
           n_fail ? " not all refused with EROFS" : " all refused with EROFS, nothing changed");
    return n_fail ? 1 : 0;
}

/* as-user UID GID PATH: prints and returns (as exit status) the errno of
 * open+read of PATH by that user (0 = read fine). */
static int cmd_as_user(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    uid_t uid = (uid_t)atol(argv[1]);
    gid_t gid = (gid_t)atol(argv[2]);
    pid_t p = fork();
    if (p == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
            setresuid(uid, uid, uid) < 0)
            _exit(100);
        alarm(20);
        int fd = open(argv[3], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            _exit(errno);
        char b[4096];
        ssize_t r;
        while ((r = read(fd, b, sizeof b)) > 0)
            ;
        _exit(r < 0 ? errno : 0);
    }
    int status;
    waitpid(p, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 101;
    printf("as uid %u: open+read %s -> %s\n", (unsigned)uid, argv[3],
           code == 0 ? "OK" : code == 100 ? "cannot switch user"
                          : code == 101 ? "killed" : strerror(code));
    return code;
}

/* json FILE PATH: the number at a dotted path in an l3fs stats.json. */
static int cmd_json(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    const char *step;
    if (read_all(argv[1], &buf, &cap, &len, NULL, &step) < 0)
        return 1;
    buf[len < cap ? len : cap - 1] = 0;
    double v;
    if (l3fs_json_number((char *)buf, argv[2], &v) < 0) {
        char s[256];
        if (l3fs_json_string((char *)buf, argv[2], s, sizeof s) < 0) {
            fprintf(stderr, "json: %s not found\n", argv[2]);
            return 1;
        }
        printf("%s\n", s);
    } else {
        printf("%.0f\n", v);
    }
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: stress_tool gen-tree|gen-hostile|gen-many|oracle|verify|load|"
                        "lsdir|escape|as-user|json|churn ...\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    const char *c = argv[1];
    argc--, argv++;
    if (!strcmp(c, "gen-tree"))
        return cmd_gen_tree(argc, argv);
    if (!strcmp(c, "gen-hostile"))
        return cmd_gen_hostile(argc, argv);
    if (!strcmp(c, "gen-variant"))
        return cmd_gen_variant(argc, argv);
    if (!strcmp(c, "gen-many"))
        return cmd_gen_many(argc, argv);
    if (!strcmp(c, "oracle"))
        return cmd_oracle(argc, argv);
    if (!strcmp(c, "verify"))
        return cmd_verify(argc, argv);
    if (!strcmp(c, "load"))
        return cmd_load(argc, argv);
    if (!strcmp(c, "lsdir"))
        return cmd_lsdir(argc, argv);
    if (!strcmp(c, "escape"))
        return cmd_escape(argc, argv);
    if (!strcmp(c, "as-user"))
        return cmd_as_user(argc, argv);
    if (!strcmp(c, "json"))
        return cmd_json(argc, argv);
    if (!strcmp(c, "churn"))
        return cmd_churn(argc, argv);
    fprintf(stderr, "stress_tool: unknown command %s\n", c);
    return 2;
}
