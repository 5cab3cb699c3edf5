/* gen.c — generators for the stress suite: a tree of small PNGs of every
 * type (written with libpng, not with libl3), hostile inputs, a huge
 * directory. */
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#include "stress.h"

int st_fmt(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

int st_mkdirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf)
        return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -errno;
            buf[i] = c;
        }
    }
    return 0;
}

struct membuf {
    unsigned char *p;
    size_t len, cap;
};

static void mem_write(png_structp png, png_bytep data, png_size_t len)
{
    struct membuf *m = png_get_io_ptr(png);
    if (m->len + len > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + len)
            cap *= 2;
        unsigned char *q = realloc(m->p, cap);
        if (!q)
            png_error(png, "out of memory");
        m->p = q;
        m->cap = cap;
    }
    memcpy(m->p + m->len, data, len);
    m->len += len;
}

static void mem_flush(png_structp png)
{
    (void)png;
}

int st_png_level = 1;

/* Pixels are given unpacked, one sample per byte (depth <= 8) or one
 * native-endian uint16_t (depth 16): the layout libl3 decodes to. */
int st_png_encode(const struct st_img *im, const void *pixels, unsigned char **out_ret,
                  size_t *len_ret)
{
    struct membuf m = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return -ENOMEM;
    }
    png_bytep *rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(rows);
        free(m.p);
        return -EIO;
    }
    png_set_write_fn(png, &m, mem_write, mem_flush);
    png_set_compression_level(png, st_png_level);
    png_set_IHDR(png, info, im->w, im->h, im->depth, im->ctype,
                 im->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (im->ctype == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[256];
        png_byte alpha[256];
        for (int i = 0; i < im->npal; i++) {
            pal[i].red = im->pal[i][0];
            pal[i].green = im->pal[i][1];
            pal[i].blue = im->pal[i][2];
            alpha[i] = im->pal[i][3];
        }
        png_set_PLTE(png, info, pal, im->npal);
        if (im->trns)
            png_set_tRNS(png, info, alpha, im->npal, NULL);
    } else if (im->trns && (im->ctype == PNG_COLOR_TYPE_GRAY || im->ctype == PNG_COLOR_TYPE_RGB)) {
        png_color_16 c = {0};
        c.gray = im->key[0];
        c.red = im->key[0];
        c.green = im->key[1];
        c.blue = im->key[2];
        png_set_tRNS(png, info, NULL, 0, &c);
    }
    png_write_info(png, info);
    if (im->depth < 8)
        png_set_packing(png);
    if (im->depth == 16) {
        uint16_t one = 1;
        if (*(uint8_t *)&one == 1)
            png_set_swap(png);
    }
    size_t row = (size_t)im->w * im->channels * (im->depth == 16 ? 2 : 1);
    rows = malloc(im->h * sizeof *rows);
    if (!rows)
        png_error(png, "out of memory");
    for (uint32_t y = 0; y < im->h; y++)
        rows[y] = (png_bytep)pixels + (size_t)y * row;
    png_write_image(png, rows);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(rows);
    *out_ret = m.p;
    *len_ret = m.len;
    return 0;
}

static const struct {
    int ctype, depth, channels;
} kinds[] = {
    {PNG_COLOR_TYPE_GRAY, 1, 1},       {PNG_COLOR_TYPE_GRAY, 2, 1},
    {PNG_COLOR_TYPE_GRAY, 4, 1},       {PNG_COLOR_TYPE_GRAY, 8, 1},
    {PNG_COLOR_TYPE_GRAY, 16, 1},      {PNG_COLOR_TYPE_GRAY_ALPHA, 8, 2},
    {PNG_COLOR_TYPE_GRAY_ALPHA, 16, 2}, {PNG_COLOR_TYPE_RGB, 8, 3},
    {PNG_COLOR_TYPE_RGB, 16, 3},       {PNG_COLOR_TYPE_RGB_ALPHA, 8, 4},
    {PNG_COLOR_TYPE_RGB_ALPHA, 16, 4}, {PNG_COLOR_TYPE_PALETTE, 1, 1},
    {PNG_COLOR_TYPE_PALETTE, 2, 1},    {PNG_COLOR_TYPE_PALETTE, 4, 1},
    {PNG_COLOR_TYPE_PALETTE, 8, 1},    {PNG_COLOR_TYPE_RGB, 8, 3},
    {PNG_COLOR_TYPE_RGB, 8, 3},        {PNG_COLOR_TYPE_RGB_ALPHA, 8, 4},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* A random image of kind k (or any when k < 0), at most maxdim a side. */
int st_random_png(uint64_t *seed, int k, uint32_t mindim, uint32_t maxdim,
                  unsigned char **out_ret, size_t *len_ret)
{
    struct st_img im = {0};
    if (k < 0)
        k = (int)(tc_splitmix64(seed) % NKINDS);
    im.ctype = kinds[k].ctype;
    im.depth = kinds[k].depth;
    im.channels = kinds[k].channels;
    im.w = mindim + (uint32_t)(tc_splitmix64(seed) % (maxdim - mindim + 1));
    im.h = mindim + (uint32_t)(tc_splitmix64(seed) % (maxdim - mindim + 1));
    im.interlace = tc_splitmix64(seed) % 7 == 0;
    unsigned maxv = im.depth == 16 ? 65535u : (1u << im.depth) - 1;
    if (im.ctype == PNG_COLOR_TYPE_PALETTE) {
        unsigned cap = 1u << im.depth;
        im.npal = 1 + (int)(tc_splitmix64(seed) % cap);
        maxv = (unsigned)im.npal - 1;
        for (int i = 0; i < im.npal; i++) {
            uint64_t r = tc_splitmix64(seed);
            for (int c = 0; c < 4; c++)
                im.pal[i][c] = (uint8_t)(r >> (8 * c));
        }
        im.trns = tc_splitmix64(seed) % 3 == 0;
        if (!im.trns)
            for (int i = 0; i < im.npal; i++)
                im.pal[i][3] = 255;
    } else if (im.ctype == PNG_COLOR_TYPE_GRAY || im.ctype == PNG_COLOR_TYPE_RGB) {
        im.trns = tc_splitmix64(seed) % 5 == 0;
        for (int c = 0; c < 3; c++)
            im.key[c] = (uint16_t)(tc_splitmix64(seed) % (maxv + 1));
    }
    size_t bps = im.depth == 16 ? 2 : 1;
    size_t n = (size_t)im.w * im.h * im.channels;
    void *px = malloc(n * bps);
    if (!px)
        return -ENOMEM;
    /* gradients + noise: smooth areas and hard ones for the coder */
    unsigned a = (unsigned)(tc_splitmix64(seed) % 7), b = (unsigned)(tc_splitmix64(seed) % 5);
    unsigned noise = (unsigned)(tc_splitmix64(seed) % 4);
    uint64_t ns = tc_splitmix64(seed);
    for (uint32_t y = 0; y < im.h; y++)
        for (uint32_t x = 0; x < im.w; x++)
            for (int c = 0; c < im.channels; c++) {
                size_t i = ((size_t)y * im.w + x) * im.channels + (size_t)c;
                uint64_t v = (uint64_t)x * (a + (unsigned)c) + (uint64_t)y * b;
                if (maxv > 255)
                    v *= 257;
                if (noise)
                    v += tc_splitmix64(&ns) % (noise * (maxv > 255 ? 2000u : 8u) + 1);
                v %= (uint64_t)maxv + 1;
                if (bps == 2)
                    ((uint16_t *)px)[i] = (uint16_t)v;
                else
                    ((uint8_t *)px)[i] = (uint8_t)v;
            }
    int r = st_png_encode(&im, px, out_ret, len_ret);
    free(px);
    return r;
}

/* gen-tree DIR N SEED [MAXDIM [store]]: N PNGs in DIR/dNN/ (100 per directory),
 * about 5% byte-identical duplicates of earlier files in other directories,
 * a few non-PNG files that pass through. */
int cmd_gen_tree(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: gen-tree DIR N SEED [MAXDIM [store]]\n");
        return 2;
    }
    const char *dir = argv[1];
    long n = atol(argv[2]);
    uint64_t seed = strtoull(argv[3], NULL, 0);
    uint32_t maxdim = argc > 4 ? (uint32_t)atol(argv[4]) : 96;
    if (argc > 5 && !strcmp(argv[5], "store"))
        st_png_level = 0; /* stored deflate: the size depends on the pixels' count only */
    uint32_t mindim = maxdim > 64 ? maxdim / 4 : 1;
    char path[4096];
    unsigned char **keep = calloc((size_t)n, sizeof *keep);
    size_t *keeplen = calloc((size_t)n, sizeof *keeplen);
    if (!keep || !keeplen)
        return 1;
    uint64_t total = 0, dups = 0;
    for (long i = 0; i < n; i++) {
        st_fmt(path, sizeof path, "%s/d%02ld", dir, i / 100);
        if (i % 100 == 0) {
            if (st_mkdirs(path) < 0) {
                fprintf(stderr, "gen-tree: mkdir %s: %s\n", path, strerror(errno));
                return 1;
            }
            st_fmt(path, sizeof path, "%s/d%02ld/labels.json", dir, i / 100);
            char js[128];
            int l = st_fmt(js, sizeof js, "{\"dir\": %ld, \"seed\": %llu}\n", i / 100,
                             (unsigned long long)seed);
            tc_write_file(path, js, (size_t)l);
            st_fmt(path, sizeof path, "%s/d%02ld", dir, i / 100);
        }
        unsigned char *png;
        size_t len;
        if (i >= 100 && tc_splitmix64(&seed) % 20 == 0) {
            long j = (long)(tc_splitmix64(&seed) % (uint64_t)(i - i % 100)); /* earlier dir */
            png = malloc(keeplen[j]);
            memcpy(png, keep[j], keeplen[j]);
            len = keeplen[j];
            dups++;
        } else if (st_random_png(&seed, -1, mindim, maxdim, &png, &len) < 0) {
            fprintf(stderr, "gen-tree: libpng failed\n");
            return 1;
        }
        st_fmt(path, sizeof path, "%s/d%02ld/img_%05ld.png", dir, i / 100, i);
        if (tc_write_file(path, png, len) < 0) {
            fprintf(stderr, "gen-tree: write %s: %s\n", path, strerror(errno));
            return 1;
        }
        total += len;
        keep[i] = png;
        keeplen[i] = len;
    }
    for (long i = 0; i < n; i++)
        free(keep[i]);
    free(keep);
    free(keeplen);
    printf("gen-tree: %ld PNGs (%llu duplicates), %.1f MiB in %s\n", n,
           (unsigned long long)dups, total / 1048576.0, dir);
    return 0;
}

/* PNG chunk with a correct CRC. */
static size_t put_chunk(unsigned char *p, const char *type, const void *data, uint32_t len)
{
    p[0] = (unsigned char)(len >> 24);
    p[1] = (unsigned char)(len >> 16);
    p[2] = (unsigned char)(len >> 8);
    p[3] = (unsigned char)len;
    memcpy(p + 4, type, 4);
    if (len)
        memcpy(p + 8, data, len);
    uLong crc = crc32(0, p + 4, len + 4);
    p[8 + len] = (unsigned char)(crc >> 24);
    p[9 + len] = (unsigned char)(crc >> 16);
    p[10 + len] = (unsigned char)(crc >> 8);
    p[11 + len] = (unsigned char)crc;
    return 12 + (size_t)len;
}

/* A PNG claiming w x h (gray, `depth`) with `rows` rows of zeros really
 * compressed in its IDAT (rows may be less than h: truncated stream). */
static int bomb_png(const char *path, uint32_t w, uint32_t h, int depth, uint32_t rows)
{
    size_t rowbytes = 1 + ((size_t)w * (size_t)depth + 7) / 8;
    size_t raw = rowbytes * rows;
    unsigned char *zero = calloc(1, raw ? raw : 1);
    uLongf zlen = compressBound((uLong)raw);
    unsigned char *z = malloc(zlen);
    unsigned char *buf = malloc(zlen + 256);
    if (!zero || !z || !buf)
        return -ENOMEM;
    if (compress2(z, &zlen, zero, (uLong)raw, 9) != Z_OK)
        return -EIO;
    static const unsigned char sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    size_t o = 0;
    memcpy(buf, sig, 8);
    o = 8;
    unsigned char ihdr[13] = {(unsigned char)(w >> 24), (unsigned char)(w >> 16),
                              (unsigned char)(w >> 8),  (unsigned char)w,
                              (unsigned char)(h >> 24), (unsigned char)(h >> 16),
                              (unsigned char)(h >> 8),  (unsigned char)h,
                              (unsigned char)depth, 0, 0, 0, 0};
    o += put_chunk(buf + o, "IHDR", ihdr, 13);
    o += put_chunk(buf + o, "IDAT", z, (uint32_t)zlen);
    o += put_chunk(buf + o, "IEND", NULL, 0);
    int r = tc_write_file(path, buf, o);
    free(zero);
    free(z);
    free(buf);
    return r;
}

/* gen-hostile DIR SEED: the hostile corpus (see docs/RELIABILITY.md). */
int cmd_gen_hostile(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gen-hostile DIR SEED [FUZZ_COUNT]\n");
        return 2;
    }
    const char *dir = argv[1];
    uint64_t seed = strtoull(argv[2], NULL, 0);
    int nfuzz = argc > 3 ? atoi(argv[3]) : 60;
    char path[8192];
    int count = 0;
#define P(...) st_fmt(path, sizeof path, __VA_ARGS__)
    P("%s/fuzz", dir);
    st_mkdirs(path);
    P("%s/trunc", dir);
    st_mkdirs(path);
    P("%s/flip", dir);
    st_mkdirs(path);
    P("%s/bomb", dir);
    st_mkdirs(path);
    P("%s/odd", dir);
    st_mkdirs(path);
    /* valid seeds to mutate */
    for (int i = 0; i < nfuzz; i++) {
        unsigned char *png;
        size_t len;
        if (st_random_png(&seed, -1, 8, 64, &png, &len) < 0)
            return 1;
        /* truncated at a random point (and at the signature/IHDR edges) */
        size_t cut = i == 0 ? 0 : i == 1 ? 8 : i == 2 ? 20 : i == 3 ? 33
                   : (size_t)(tc_splitmix64(&seed) % len);
        P("%s/trunc/t%03d.png", dir, i);
        tc_write_file(path, png, cut);
        count++;
        /* bit flips: 1..8 random bits anywhere (mostly caught by CRCs) */
        unsigned char *f = malloc(len);
        memcpy(f, png, len);
        int nb = 1 + (int)(tc_splitmix64(&seed) % 8);
        for (int b = 0; b < nb; b++) {
            size_t at = 8 + (size_t)(tc_splitmix64(&seed) % (len - 8));
            f[at] ^= (unsigned char)(1u << (tc_splitmix64(&seed) % 8));
        }
        P("%s/flip/f%03d.png", dir, i);
        tc_write_file(path, f, len);
        count++;
        /* bit flips inside the IDAT data with the CRC fixed, so the
         * flips reach zlib and the filter/unpack code */
        memcpy(f, png, len);
        size_t o = 8;
        while (o + 12 <= len) {
            uint32_t cl = (uint32_t)f[o] << 24 | (uint32_t)f[o + 1] << 16 |
                          (uint32_t)f[o + 2] << 8 | f[o + 3];
            if (o + 12 + cl > len)
                break;
            if (!memcmp(f + o + 4, "IDAT", 4) && cl > 2) {
                for (int b = 0; b < nb; b++) {
                    size_t at = o + 8 + 2 + (size_t)(tc_splitmix64(&seed) % (cl - 2));
                    f[at] ^= (unsigned char)(1u << (tc_splitmix64(&seed) % 8));
                }
                put_chunk(f + o, "IDAT", f + o + 8, cl);
            }
            o += 12 + cl;
        }
        P("%s/flip/c%03d.png", dir, i);
        tc_write_file(path, f, len);
        count++;
        /* random bytes after a valid signature and IHDR */
        size_t fl = 33 + (size_t)(tc_splitmix64(&seed) % 2000);
        unsigned char *r = malloc(fl);
        memcpy(r, png, 33 < len ? 33 : len);
        for (size_t k = 33; k < fl; k++)
            r[k] = (unsigned char)tc_splitmix64(&seed);
        P("%s/fuzz/z%03d.png", dir, i);
        tc_write_file(path, r, fl);
        count++;
        free(r);
        free(f);
        free(png);
    }
    /* decompression bombs */
    bomb_png((P("%s/bomb/claims_1M_x_1M.png", dir), path), 1000000, 1000000, 8, 1);
    bomb_png((P("%s/bomb/claims_2G_x_2G.png", dir), path), 0x7fffffffu, 0x7fffffffu, 16, 0);
    bomb_png((P("%s/bomb/claims_30k_x_30k.png", dir), path), 30000, 30000, 8, 4);
    bomb_png((P("%s/bomb/zeros_6000x6000.png", dir), path), 6000, 6000, 8, 6000);
    bomb_png((P("%s/bomb/short_6000x6000.png", dir), path), 6000, 6000, 8, 100);
    bomb_png((P("%s/bomb/claims_1x1M.png", dir), path), 1, 1000000, 1, 10);
    count += 6;
    /* odd entries */
    P("%s/odd/zero.png", dir);
    tc_write_file(path, "", 0);
    P("%s/odd/notpng.png", dir);
    tc_write_file(path, "this is not a PNG\n", 18);
    P("%s/odd/x.png", dir);
    mkdir(path, 0755); /* a directory named x.png */
    P("%s/odd/x.png/inner.png", dir);
    {
        unsigned char *png;
        size_t len;
        st_random_png(&seed, 7, 8, 16, &png, &len);
        tc_write_file(path, png, len);
        /* a 255-byte name: 251 + ".png", shown as 250 + ".l3" */
        char name[256];
        memset(name, 'n', 251);
        memcpy(name + 251, ".png", 5);
        P("%s/odd/%s", dir, name);
        tc_write_file(path, png, len);
        /* 255-byte name without .png (pass-through) */
        memset(name, 'p', 255);
        name[255] = 0;
        P("%s/odd/%s", dir, name);
        tc_write_file(path, png, len);
        /* 50 levels of nesting with a PNG at the bottom */
        size_t o = (size_t)P("%s/deep", dir);
        for (int l = 0; l < 50; l++)
            o += (size_t)st_fmt(path + o, sizeof path - o, "/l%02d", l);
        st_mkdirs(path);
        st_fmt(path + o, sizeof path - o, "/bottom.png");
        tc_write_file(path, png, len);
        free(png);
    }
    P("%s/odd/fifo.png", dir);
    mkfifo(path, 0644);
    P("%s/odd/x.png.fifo", dir);
    mkfifo(path, 0644);
    count += 8;
#undef P
    printf("gen-hostile: %d hostile entries in %s\n", count, dir);
    return 0;
}

/* gen-many DIR N: N entries in one directory, half of them zero-byte
 * "*.png" files (readdir has to probe those), half small text files. */
int cmd_gen_many(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gen-many DIR N\n");
        return 2;
    }
    const char *dir = argv[1];
    long n = atol(argv[2]);
    if (st_mkdirs(dir) < 0)
        return 1;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0)
        return 1;
    char name[64];
    for (long i = 0; i < n; i++) {
        st_fmt(name, sizeof name, i % 2 ? "e%07ld.png" : "e%07ld.txt", i);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "gen-many: %s: %s\n", name, strerror(errno));
            return 1;
        }
        if (i % 2 == 0 && write(fd, "x\n", 2) != 2)
            return 1;
        close(fd);
    }
    close(dfd);
    printf("gen-many: %ld entries in %s\n", n, dir);
    return 0;
}

/* gen-variant IN OUT: OUT has the image of IN with every sample inverted,
 * written the same way (stored deflate): for a tree made with
 * `gen-tree ... store` the file keeps its exact size. */
int cmd_gen_variant(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f)
        return 1;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    struct st_img im = {0};
    unsigned char *volatile px = NULL;
    png_bytep *volatile rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        fprintf(stderr, "gen-variant: libpng cannot read %s\n", argv[1]);
        return 1;
    }
    png_init_io(png, f);
    png_read_info(png, info);
    im.w = png_get_image_width(png, info);
    im.h = png_get_image_height(png, info);
    im.depth = png_get_bit_depth(png, info);
    im.ctype = png_get_color_type(png, info);
    im.channels = png_get_channels(png, info);
    im.interlace = png_get_interlace_type(png, info) != PNG_INTERLACE_NONE;
    if (im.ctype == PNG_COLOR_TYPE_PALETTE) {
        png_colorp pal;
        int n;
        png_get_PLTE(png, info, &pal, &n);
        im.npal = n;
        for (int i = 0; i < n; i++) {
            im.pal[i][0] = pal[i].red;
            im.pal[i][1] = pal[i].green;
            im.pal[i][2] = pal[i].blue;
            im.pal[i][3] = 255;
        }
        png_bytep a;
        int na;
        if (png_get_tRNS(png, info, &a, &na, NULL)) {
            im.trns = 1;
            for (int i = 0; i < na && i < n; i++)
                im.pal[i][3] = a[i];
        }
    } else {
        png_color_16p c;
        if (png_get_tRNS(png, info, NULL, NULL, &c)) {
            im.trns = 1;
            im.key[0] = im.ctype == PNG_COLOR_TYPE_GRAY ? c->gray : c->red;
            im.key[1] = c->green;
            im.key[2] = c->blue;
        }
    }
    if (im.depth < 8)
        png_set_packing(png);
    if (im.depth == 16) {
        uint16_t one = 1;
        if (*(uint8_t *)&one == 1)
            png_set_swap(png);
    }
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t row = png_get_rowbytes(png, info);
    px = malloc(row * im.h);
    rows = malloc(im.h * sizeof *rows);
    for (uint32_t y = 0; y < im.h; y++)
        rows[y] = px + (size_t)y * row;
    png_read_image(png, rows);
    png_destroy_read_struct(&png, &info, NULL);
    fclose(f);
    unsigned maxv = im.ctype == PNG_COLOR_TYPE_PALETTE ? (unsigned)im.npal - 1
                    : im.depth == 16 ? 65535u : (1u << im.depth) - 1;
    size_t n = (size_t)im.w * im.h * im.channels;
    for (size_t i = 0; i < n; i++) {
        if (im.depth == 16)
            ((uint16_t *)px)[i] = (uint16_t)(maxv - ((uint16_t *)px)[i]);
        else
            px[i] = (unsigned char)(maxv - px[i]);
    }
    st_png_level = 0;
    unsigned char *out;
    size_t len;
    if (st_png_encode(&im, px, &out, &len) < 0)
        return 1;
    int r = tc_write_file(argv[2], out, len);
    free(out);
    free(px);
    free(rows);
    return r < 0;
}
