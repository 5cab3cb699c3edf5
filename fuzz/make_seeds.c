/* make_seeds.c — writes seed corpora for the fuzz harnesses.
 *
 *   make_seeds L3_DIR PNG_DIR [PNG files or directories...]
 *
 * Seeds are small so that the fuzzers stay fast:
 *  - every PNG given (directories walked recursively): a crop of at most
 *    48x32 pixels, same colour type, depth and palette, written as PNG and
 *    as L3 (default tiles and 16x16 tiles); files of at most 4 KiB (PngSuite)
 *    are also copied byte for byte, interlacing and ancillary chunks kept;
 *  - generated images of every colour model and bit depth (PNG and L3);
 *  - L3 files with LZ planes (effort 2): repeated textures for every colour
 *    model (16-bit and sub-byte depths included), and gray images on which
 *    the MED, GRAD and LEFT2 predictors win inside LZ planes.
 * Prints the number of seeds written and how many L3 seeds hold LZ planes
 * (and of which predictor kinds).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "l3.h"
#include "l3_tile.h"
#include "tc_file.h"
#include "tc_rand.h"

static const char *l3_dir, *png_dir;
static unsigned seeds, lz_seeds, lz_kinds;

/* Notes whether an L3 seed has LZ planes (and of which predictor kinds). */
static void note_lz(const void *d, size_t n)
{
    struct l3_layout lay;
    if (l3_read_layout(d, n, NULL, &lay, NULL) != L3_OK)
        return;
    const uint8_t *b = d;
    int any = 0;
    for (uint32_t t = 0; t < lay.tile_count; t++) {
        uint64_t s, e;
        l3_tile_span(b + lay.table_offset, t, &s, &e);
        struct l3_tile_header th;
        if (l3_tile_parse(b + lay.header_size + s, (size_t)(e - s), lay.planes, &th) != L3_OK)
            return;
        for (unsigned p = 0; p < lay.planes; p++)
            if (th.mode[p] & L3_PLANE_LZ) {
                any = 1;
                lz_kinds |= 1u << L3_PLANE_KIND(th.mode[p]);
            }
    }
    lz_seeds += any;
}

static void put(const char *dir, const char *name, const void *d, size_t n)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int e = tc_write_file(p, d, n);
    if (e < 0) {
        fprintf(stderr, "make_seeds: %s: %s\n", p, strerror(-e));
        exit(1);
    }
    seeds++;
}

/* Writes the L3 encoding of an image with the given effort and tile size. */
static void emit_l3(const char *tag, const struct l3_info *info, const void *px, size_t stride,
                    int effort, uint32_t tile)
{
    struct l3_encode_options eo;
    memset(&eo, 0, sizeof eo);
    eo.tile_width = eo.tile_height = tile;
    eo.effort = effort;
    void *out = NULL;
    size_t n = 0;
    if (l3_encode(info, px, stride, &eo, &out, &n) == L3_OK) {
        char name[512];
        snprintf(name, sizeof name, "%s.e%d.t%u.l3", tag, effort, tile);
        put(l3_dir, name, out, n);
        note_lz(out, n);
        l3_free(out);
    }
}

static void emit(const char *tag, const struct l3_info *info, const void *px, size_t stride)
{
    char name[512];
    void *out = NULL;
    size_t n = 0;
    if (l3_png_encode(info, px, stride, &out, &n) == L3_OK) {
        snprintf(name, sizeof name, "%s.png", tag);
        put(png_dir, name, out, n);
        free(out);
    }
    for (int t = 0; t < 2; t++) {
        struct l3_encode_options eo;
        memset(&eo, 0, sizeof eo);
        eo.tile_width = eo.tile_height = t ? 16 : 0;
        if (l3_encode(info, px, stride, &eo, &out, &n) == L3_OK) {
            snprintf(name, sizeof name, "%s.t%d.l3", tag, t ? 16 : 0);
            put(l3_dir, name, out, n);
            note_lz(out, n);
            l3_free(out);
        }
    }
}

static void from_file(const char *path)
{
    size_t n;
    unsigned char *d = tc_slurp(path, &n);
    if (d == NULL)
        return;
    if (n == 0 || n > ((size_t)64 << 20)) {
        free(d);
        return;
    }
    char tag[300];
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(tag, sizeof tag, "%.200s", base);
    char *dot = strrchr(tag, '.');
    if (dot)
        *dot = '\0';
    if (n <= 4096 && l3_is_png(d, n)) {
        char name[320];
        snprintf(name, sizeof name, "orig-%s.png", tag);
        put(png_dir, name, d, n);
    }
    struct l3_info info;
    void *px = NULL;
    if (l3_png_decode(d, n, NULL, &info, &px, NULL) == L3_OK) {
        /* A crop from the middle of the image (real content, small seed). */
        size_t sb = l3_sample_bytes(&info), row = l3_row_bytes(&info);
        uint32_t cw = info.width < 48 ? info.width : 48;
        uint32_t ch = info.height < 32 ? info.height : 32;
        uint32_t x0 = (info.width - cw) / 2, y0 = (info.height - ch) / 2;
        const unsigned char *start = (const unsigned char *)px + (size_t)y0 * row +
                                     (size_t)x0 * info.channels * sb;
        struct l3_info ci = info;
        ci.width = cw;
        ci.height = ch;
        char ctag[320];
        snprintf(ctag, sizeof ctag, "crop-%s", tag);
        emit(ctag, &ci, start, row);
    }
    free(px);
    free(d);
}

static void walk(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    if (!S_ISDIR(st.st_mode)) {
        size_t l = strlen(path);
        if (l > 4 && strcmp(path + l - 4, ".png") == 0)
            from_file(path);
        return;
    }
    DIR *dir = opendir(path);
    if (dir == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        walk(p);
    }
    closedir(dir);
}

struct model {
    uint8_t color, channels, depth;
};

/* Sets up *info for a w x h image of colour model m with no transparency; a
 * palette gets min(max_palette, 2^depth) entries (left zero for the caller to
 * fill). Returns the largest sample value the image may hold. */
static unsigned seed_info(struct l3_info *info, struct model m, uint32_t w, uint32_t h,
                          unsigned max_palette)
{
    memset(info, 0, sizeof *info);
    info->width = w;
    info->height = h;
    info->color = m.color;
    info->channels = m.channels;
    info->bit_depth = m.depth;
    unsigned maxv = m.depth == 16 ? 65535u : (1u << m.depth) - 1u;
    if (m.color == L3_COLOR_PALETTE) {
        info->palette_len = (uint16_t)(maxv + 1 > max_palette ? max_palette : maxv + 1);
        maxv = info->palette_len - 1u;
    }
    return maxv;
}

/* Stores sample i (sb bytes a sample, 16-bit ones in host order). */
static void put_sample(unsigned char *px, size_t sb, size_t i, unsigned v)
{
    if (sb == 2) {
        uint16_t v16 = (uint16_t)v;
        memcpy(px + 2 * i, &v16, 2);
    } else {
        px[i] = (unsigned char)v;
    }
}

static void generated(void)
{
    static const struct model f[] = {
        {0, 1, 1}, {0, 1, 2}, {0, 1, 4}, {0, 1, 8}, {0, 1, 16}, {1, 2, 8}, {1, 2, 16}, {2, 3, 8},
        {2, 3, 16}, {3, 4, 8}, {3, 4, 16}, {4, 1, 1}, {4, 1, 2}, {4, 1, 4}, {4, 1, 8}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
        struct l3_info info;
        unsigned maxv = seed_info(&info, f[k], 21, 13, 6);
        if (info.color == L3_COLOR_PALETTE) {
            info.palette_alpha_len = 1;
            for (unsigned i = 0; i < info.palette_len; i++) {
                info.palette[i][0] = (uint8_t)(i * 40);
                info.palette[i][1] = (uint8_t)(i * 10);
                info.palette[i][2] = (uint8_t)(255 - i);
                info.palette[i][3] = i ? 255 : 0;
            }
        }
        if (info.color == L3_COLOR_GRAY || info.color == L3_COLOR_RGB) {
            info.has_trns_key = (k & 1) != 0;
            info.trns_key[0] = info.trns_key[1] = info.trns_key[2] = (uint16_t)(maxv / 2);
        }
        size_t samples = (size_t)info.width * info.height * info.channels;
        size_t sb = f[k].depth == 16 ? 2 : 1;
        unsigned char *px = malloc(samples * sb);
        for (size_t i = 0; i < samples; i++) {
            unsigned v = (i % 29 < 10) ? 0 : (unsigned)((i * 7919u) ^ (i >> 3)) % (maxv + 1);
            put_sample(px, sb, i, v);
        }
        char tag[64];
        snprintf(tag, sizeof tag, "gen-c%u-d%u", f[k].color, f[k].depth);
        emit(tag, &info, px, 0);
        free(px);
    }
}

/* Content for LZ planes: an 8x8 random texture repeated, with one 8x8 block
 * in 16 of noise; and three gray images where the LZ coding wins with the
 * MED, GRAD and LEFT2 predictors (interleaved ramps with the bottom half
 * repeating the top; a small texture on curved ramps; a period-2 pattern
 * whose amplitude changes per row on a curved ramp). */
static void lz_generated(void)
{
    static const struct model f[] = {{0, 1, 1}, {0, 1, 2}, {0, 1, 8}, {0, 1, 16},
                                     {1, 2, 8}, {1, 2, 16}, {2, 3, 8}, {2, 3, 16},
                                     {3, 4, 8}, {3, 4, 16}, {4, 1, 2}, {4, 1, 8}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
        struct l3_info info;
        unsigned maxv = seed_info(&info, f[k], 40, 24, 12);
        for (unsigned i = 0; i < info.palette_len; i++) {
            info.palette[i][0] = (uint8_t)(i * 20);
            info.palette[i][1] = (uint8_t)(255 - i * 9);
            info.palette[i][2] = (uint8_t)(i * i);
            info.palette[i][3] = 255;
        }
        uint64_t s = 17 + k;
        unsigned tex[8][8][4];
        for (int y = 0; y < 8; y++)
            for (int x = 0; x < 8; x++)
                for (unsigned c = 0; c < info.channels; c++)
                    tex[y][x][c] = (uint32_t)tc_splitmix64(&s) % (maxv + 1);
        size_t sb = f[k].depth == 16 ? 2 : 1;
        unsigned char *px = malloc((size_t)info.width * info.height * info.channels * sb);
        for (uint32_t y = 0; y < info.height; y++)
            for (uint32_t x = 0; x < info.width; x++)
                for (unsigned c = 0; c < info.channels; c++) {
                    unsigned v = (x / 8 * 5 + y / 8 * 3) % 16 == 7 ? (uint32_t)tc_splitmix64(&s) % (maxv + 1)
                                                                  : tex[y % 8][x % 8][c];
                    put_sample(px, sb, ((size_t)y * info.width + x) * info.channels + c, v);
                }
        char tag[64];
        snprintf(tag, sizeof tag, "lz-c%u-d%u", f[k].color, f[k].depth);
        emit_l3(tag, &info, px, 0, 2, 16);
        emit_l3(tag, &info, px, 0, 0, 32);
        free(px);
    }
    for (int which = 0; which < 3; which++) {
        struct l3_info info;
        seed_info(&info, (struct model){L3_COLOR_GRAY, 1, 8}, 64, 32, 0);
        uint64_t s = 5;
        unsigned tex[8][8], amp[32], row[32];
        for (int i = 0; i < 64; i++)
            tex[i / 8][i % 8] = (uint32_t)tc_splitmix64(&s) % 4;
        for (int i = 0; i < 32; i++) {
            amp[i] = 40 + (uint32_t)tc_splitmix64(&s) % 100;
            row[i] = (uint32_t)tc_splitmix64(&s) % 60;
        }
        unsigned char px[64 * 32];
        for (int y = 0; y < 32; y++)
            for (int x = 0; x < 64; x++) {
                int v;
                if (which == 0) {
                    int yy = y % 16;
                    v = (x & 1) ? 200 - x * 3 / 2 - yy * 2 : 20 + x + yy * 3 + x * x / 64;
                } else if (which == 1) {
                    v = (int)tex[y % 8][x % 8] + x * x / 16 + y * y / 24;
                } else {
                    v = (int)row[y] + ((x & 1) ? (int)amp[y] : 0) + x * x / 16;
                }
                px[y * 64 + x] = (unsigned char)v;
            }
        static const char *names[3] = {"med", "grad", "left2"};
        char tag[64];
        snprintf(tag, sizeof tag, "lz-kind-%s", names[which]);
        emit_l3(tag, &info, px, 0, 2, 32);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: make_seeds L3_DIR PNG_DIR [PNG files or directories...]\n");
        return 2;
    }
    l3_dir = argv[1];
    png_dir = argv[2];
    mkdir(l3_dir, 0777);
    mkdir(png_dir, 0777);
    generated();
    lz_generated();
    for (int i = 3; i < argc; i++)
        walk(argv[i]);
    printf("make_seeds: %u seeds in %s and %s; %u L3 seeds with LZ planes (kinds:%s%s%s%s)\n",
           seeds, l3_dir, png_dir, lz_seeds, (lz_kinds >> L3_PLANE_MED) & 1 ? " MED" : "",
           (lz_kinds >> L3_PLANE_GRAD) & 1 ? " GRAD" : "",
           (lz_kinds >> L3_PLANE_LEFT2) & 1 ? " LEFT2" : "",
           (lz_kinds >> L3_PLANE_LEFT) & 1 ? " LEFT" : "");
    return 0;
}
