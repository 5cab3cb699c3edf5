/* make_regressions.c — made the hand-built corrupt inputs of fuzz/regressions/
 * (run once; kept to show how and to add cases): broken variants of the
 * pinned files of tests/golden/, each with its checksums made valid again so
 * that the break reaches the layer it targets (header fields, tile table,
 * tile header, each plane mode's stream), and a few broken PNGs. Writes
 * fuzz/regressions/EXPECT: the status l3_decode_alloc (L3 files) or
 * l3_png_decode (PNGs) returned for each when it was made; a case marked
 * "must fail" that decoded is refused here.
 *
 *   make_regressions GOLDEN_DIR OUT_DIR
 *
 * Every file there is also replayed through the fuzz harnesses
 * (tests/fuzz/replay.c). Never regenerate files that exist; add new names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "l3.h"
#include "l3_internal.h"
#include "tc_file.h"

static const char *golden_dir, *out_dir;
static FILE *expect;

static void die(const char *what, const char *name)
{
    fprintf(stderr, "make_regressions: %s: %s\n", name, what);
    exit(1);
}

struct file {
    uint8_t *d;
    size_t n;
    struct l3_info info;
    struct l3_layout lay;
};

static void load(const char *name, struct file *f)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", golden_dir, name);
    f->d = tc_slurp(p, &f->n);
    if (!f->d)
        die("cannot read", p);
    if (l3_read_layout(f->d, f->n, &f->info, &f->lay, NULL) != L3_OK)
        die("not a valid L3 file", p);
}

static uint64_t tile_end(const struct file *f, uint32_t t)
{
    return l3_rd_u64le(f->d + f->lay.table_offset + 8 * t);
}

/* Tile t's bytes and size. */
static uint8_t *tile_at(const struct file *f, uint32_t t, size_t *n)
{
    uint64_t b = t ? tile_end(f, t - 1) : 0, e = tile_end(f, t);
    *n = (size_t)(e - b);
    return f->d + f->lay.header_size + b;
}

/* After a change of the payload or the table: both checksums valid again. */
static void reseal(uint8_t *d, const struct file *f, uint64_t payload_size)
{
    struct l3_layout lay = f->lay;
    lay.payload_size = payload_size;
    lay.payload_hash = XXH3_64bits(d + lay.header_size, (size_t)payload_size);
    l3_write_header(d, &f->info, &lay);
}

/* The header checksum of bytes whose fields were changed by hand. */
static void reseal_header(uint8_t *d, size_t header_size)
{
    l3_wr_u64le(d + header_size - 8, XXH3_64bits(d, header_size - 8));
}

static void put(const char *name, const uint8_t *d, size_t n, int png, int must_fail)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", out_dir, name);
    if (tc_write_file(p, d, n) != 0)
        die("cannot write", p);
    int st;
    if (png) {
        struct l3_info info;
        void *px = NULL;
        size_t pn = 0;
        st = l3_png_decode(d, n, NULL, &info, &px, &pn);
        l3_free(px);
    } else {
        void *px = NULL;
        size_t pn = 0;
        st = l3_decode_alloc(d, n, NULL, &px, &pn, NULL);
        l3_free(px);
    }
    if (must_fail && st == L3_OK)
        die("decodes although it must fail", name);
    fprintf(expect, "%s %s %d (%s)\n", name, png ? "png" : "l3", st, l3_strerror(st));
}

/* A copy of f whose tile t is replaced by `tile` (n bytes). */
static void put_tile(const char *name, const struct file *f, uint32_t t, const uint8_t *tile,
                     size_t n, int must_fail)
{
    size_t old;
    const uint8_t *o = tile_at(f, t, &old);
    size_t total = f->n - old + n;
    uint8_t *d = malloc(total);
    size_t pre = (size_t)(o - f->d);
    memcpy(d, f->d, pre);
    memcpy(d + pre, tile, n);
    memcpy(d + pre + n, o + old, f->n - pre - old);
    for (uint32_t i = t; i < f->lay.tile_count; i++)
        l3_wr_u64le(d + f->lay.table_offset + 8 * i, tile_end(f, i) - old + n);
    reseal(d, f, f->lay.payload_size - old + n);
    put(name, d, total, 0, must_fail);
    free(d);
}

/* The first tile with a plane of mode `mode`: its index and the plane. */
static int find_mode(const struct file *f, unsigned mode, uint32_t *t_ret, unsigned *p_ret)
{
    for (uint32_t t = 0; t < f->lay.tile_count; t++) {
        size_t n;
        const uint8_t *tl = tile_at(f, t, &n);
        for (unsigned p = 0; p < f->lay.planes; p++)
            if (tl[1 + 5 * p] == mode) {
                *t_ret = t;
                *p_ret = p;
                return 1;
            }
    }
    return 0;
}

/* Plane p of a tile: its stream's offset in the tile and its length. */
static void plane_span(const uint8_t *tl, unsigned planes, unsigned p, size_t *off, size_t *len)
{
    size_t o = 1 + 5 * planes;
    for (unsigned i = 0; i < p; i++)
        o += l3_rd_u32le(tl + 2 + 5 * i);
    *off = o;
    *len = l3_rd_u32le(tl + 2 + 5 * p);
}

/* The plane of mode `mode` in golden file `src`: its stream cut short by
 * `cut` bytes, relabelled as mode `relabel` (< 0: unchanged), or with bit `flip`
 * of its stream flipped (flip < 0: none). */
static void plane_case(const char *name, const char *src, unsigned mode, size_t cut,
                       int relabel, long flip, int must_fail)
{
    struct file f;
    load(src, &f);
    uint32_t t;
    unsigned p;
    if (!find_mode(&f, mode, &t, &p))
        die("has no plane of that mode", src);
    size_t n;
    const uint8_t *tl = tile_at(&f, t, &n);
    uint8_t *c = malloc(n);
    memcpy(c, tl, n);
    size_t off, len;
    plane_span(c, f.lay.planes, p, &off, &len);
    if (relabel >= 0)
        c[1 + 5 * p] = (uint8_t)relabel;
    if (flip >= 0 && (size_t)flip / 8 < len)
        c[off + (size_t)flip / 8] ^= (uint8_t)(1u << (flip % 8));
    if (cut) {
        if (cut > len)
            die("stream shorter than the cut", name);
        memmove(c + off + len - cut, c + off + len, n - off - len);
        l3_wr_u32le(c + 2 + 5 * p, (uint32_t)(len - cut));
        n -= cut;
    }
    put_tile(name, &f, t, c, n, must_fail);
    free(c);
    free(f.d);
}

/* Golden file `src` with header byte `off` set to v (16 or 32 bits LE when
 * width is 2 or 4), header checksum made valid. */
static void header_case(const char *name, const char *src, size_t off, uint32_t v, int width,
                        int must_fail)
{
    struct file f;
    load(src, &f);
    if (width == 1)
        f.d[off] = (uint8_t)v;
    else if (width == 2)
        l3_wr_u16le(f.d + off, v);
    else
        l3_wr_u32le(f.d + off, v);
    reseal_header(f.d, f.lay.header_size);
    put(name, f.d, f.n, 0, must_fail);
    free(f.d);
}

static void l3_cases(void)
{
    /* every plane mode's stream cut short by one byte */
    static const struct {
        const char *name, *src;
        unsigned mode;
    } cut[] = {
        {"cut-raw.l3", "gray8.l3", L3_PLANE_RAW},
        {"cut-const.l3", "rgb16-key.l3", L3_PLANE_CONST},
        {"cut-med.l3", "med-gray8.l3", L3_PLANE_MED},
        {"cut-grad.l3", "grad-gray8.l3", L3_PLANE_GRAD},
        {"cut-left2.l3", "left2-gray8.l3", L3_PLANE_LEFT2},
        {"cut-med-short.l3", "edges-gray8.l3", L3_PLANE_MED | L3_PLANE_SHORT},
        {"cut-lz-left.l3", "gray8.l3", L3_PLANE_LEFT | L3_PLANE_LZ},
        {"cut-lz-med.l3", "lz-med.l3", L3_PLANE_MED | L3_PLANE_LZ},
        {"cut-lz-grad.l3", "lz-grad.l3", L3_PLANE_GRAD | L3_PLANE_LZ},
        {"cut-lz-left2.l3", "lz-left2.l3", L3_PLANE_LEFT2 | L3_PLANE_LZ},
        {"cut-lz-16bit.l3", "gray16.l3", L3_PLANE_LEFT | L3_PLANE_LZ},
        {"cut-lz-1bit.l3", "gray1.l3", L3_PLANE_LEFT | L3_PLANE_LZ},
    };
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++)
        plane_case(cut[i].name, cut[i].src, cut[i].mode, 1, -1, -1, 1);
    /* a stream read as another mode: invalid mode bytes must fail, the rest
     * must give a status (or pixels) and no more */
    plane_case("mode-invalid-6.l3", "gray8.l3", L3_PLANE_RAW, 0, 6, -1, 1);
    plane_case("mode-invalid-0x40.l3", "gray8.l3", L3_PLANE_RAW, 0, 0x40, -1, 1);
    plane_case("mode-left-without-lz.l3", "lz-med.l3", L3_PLANE_MED | L3_PLANE_LZ, 0,
               L3_PLANE_LEFT, -1, 1);
    plane_case("mode-med-as-lz.l3", "med-gray8.l3", L3_PLANE_MED, 0, L3_PLANE_MED | L3_PLANE_LZ,
               -1, 0);
    plane_case("mode-lz-as-med.l3", "lz-med.l3", L3_PLANE_MED | L3_PLANE_LZ, 0, L3_PLANE_MED, -1,
               0);
    plane_case("mode-lz-as-short.l3", "lz-left2.l3", L3_PLANE_LEFT2 | L3_PLANE_LZ, 0,
               L3_PLANE_LEFT2 | L3_PLANE_LZ | L3_PLANE_SHORT, -1, 0);
    plane_case("mode-raw-as-const.l3", "gray8.l3", L3_PLANE_RAW, 0, L3_PLANE_CONST, -1, 1);
    plane_case("mode-short-as-long.l3", "edges-gray8.l3", L3_PLANE_MED | L3_PLANE_SHORT, 0,
               L3_PLANE_MED, -1, 0);
    /* bit flips early in LZ streams (run lengths, copy fields) */
    for (long b = 0; b < 24; b += 3) {
        char name[64];
        snprintf(name, sizeof name, "flip-lz-med-bit%ld.l3", b);
        plane_case(name, "lz-med.l3", L3_PLANE_MED | L3_PLANE_LZ, 0, -1, b, 0);
        snprintf(name, sizeof name, "flip-lz-16bit-bit%ld.l3", b);
        plane_case(name, "gray16.l3", L3_PLANE_LEFT | L3_PLANE_LZ, 0, -1, b, 0);
    }

    /* tile header and tile table */
    struct file f;
    load("rgb8.l3", &f);
    size_t n;
    uint8_t *tl = tile_at(&f, 1, &n), *c = malloc(n + 8);
    memcpy(c, tl, n);
    c[0] = 0x80; /* an unknown tile flag */
    put_tile("tile-unknown-flag.l3", &f, 1, c, n, 1);
    memcpy(c, tl, n);
    l3_wr_u32le(c + 2, l3_rd_u32le(c + 2) + 1); /* plane lengths exceed the tile */
    put_tile("tile-plane-lengths-over.l3", &f, 1, c, n, 1);
    memcpy(c, tl, n);
    memset(c + n, 0, 8); /* 8 bytes behind the planes */
    put_tile("tile-trailing-bytes.l3", &f, 1, c, n + 8, 1);
    put_tile("tile-empty.l3", &f, 1, c, 0, 1);
    free(c);
    uint8_t *d = malloc(f.n);
    memcpy(d, f.d, f.n);
    l3_wr_u64le(d + f.lay.table_offset, tile_end(&f, 1) + 1); /* table not increasing */
    reseal(d, &f, f.lay.payload_size);
    put("table-not-increasing.l3", d, f.n, 0, 1);
    memcpy(d, f.d, f.n);
    l3_wr_u64le(d + f.lay.table_offset + 8 * (f.lay.tile_count - 1), f.lay.payload_size + 1);
    reseal(d, &f, f.lay.payload_size);
    put("table-past-payload.l3", d, f.n, 0, 1);
    free(d);
    /* the file cut in the header, in the table, in the payload */
    put("truncated-header.l3", f.d, 30, 0, 1);
    put("truncated-table.l3", f.d, f.lay.table_offset + 12, 0, 1);
    put("truncated-payload.l3", f.d, f.n - 7, 0, 1);
    free(f.d);
    load("gray8.l3", &f);
    tl = tile_at(&f, 0, &n);
    c = malloc(n);
    memcpy(c, tl, n);
    c[0] = L3_TILE_XFORM_G;
    put_tile("tile-xform-on-gray.l3", &f, 0, c, n, 1);
    free(c);
    free(f.d);

    /* header fields (header checksum valid) */
    header_case("header-huge-dims.l3", "gray8.l3", L3_OFF_WIDTH, 1u << 20, 4, 1);
    header_case("header-width-zero.l3", "gray8.l3", L3_OFF_WIDTH, 0, 4, 1);
    header_case("header-tile-zero.l3", "gray8.l3", L3_OFF_TILE_W, 0, 2, 1);
    header_case("header-tile-huge.l3", "gray8.l3", L3_OFF_TILE_H, 4096, 2, 1);
    header_case("header-depth-3.l3", "gray8.l3", L3_OFF_DEPTH, 3, 1, 1);
    header_case("header-channels-wrong.l3", "rgb8.l3", L3_OFF_CHANNELS, 4, 1, 1);
    header_case("header-color-5.l3", "gray8.l3", L3_OFF_COLOR, 5, 1, 1);
    header_case("header-version-2.l3", "gray8.l3", L3_OFF_VERSION, 2, 1, 1);
    header_case("header-palette-len-0.l3", "pal8.l3", L3_OFF_PAL_LEN, 0, 2, 1);
    header_case("header-palette-alpha-over.l3", "pal4.l3", L3_OFF_PAL_ALPHA_LEN, 300, 2, 1);
    header_case("header-payload-size-huge.l3", "gray8.l3", L3_OFF_PAYLOAD_SIZE, 0xffffffffu, 4, 1);
}

static void png_cases(void)
{
    size_t n;
    char p[4096];
    snprintf(p, sizeof p, "%s/rgb8.png", golden_dir);
    uint8_t *d = tc_slurp(p, &n);
    if (!d || n < 60)
        die("cannot read", p);
    put("png-truncated-idat.png", d, n - 20, 1, 1);
    uint8_t *c = malloc(n);
    memcpy(c, d, n);
    c[29] ^= 1; /* IHDR CRC */
    put("png-ihdr-crc.png", c, n, 1, 1);
    memcpy(c, d, n);
    l3_wr_u32le(c + 16, 0xffff7f00u); /* IHDR width (big-endian field): huge, CRC stale */
    put("png-ihdr-width-stale-crc.png", c, n, 1, 1);
    free(c);
    free(d);
    snprintf(p, sizeof p, "%s/pal4.png", golden_dir);
    d = tc_slurp(p, &n);
    if (!d)
        die("cannot read", p);
    put("png-palette-truncated.png", d, 60, 1, 1);
    free(d);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: make_regressions GOLDEN_DIR OUT_DIR\n");
        return 2;
    }
    golden_dir = argv[1];
    out_dir = argv[2];
    char p[4096];
    snprintf(p, sizeof p, "%s/EXPECT", out_dir);
    expect = fopen(p, "w");
    if (!expect)
        die("cannot create", p);
    fprintf(expect, "# FILE KIND STATUS (l3_strerror): what l3_decode_alloc (l3) or l3_png_decode\n"
                    "# (png) returned when tests/fuzz/make_regressions.c made the file;\n"
                    "# tests/codec/test_regressions.c checks that it still does.\n");
    l3_cases();
    png_cases();
    return fclose(expect) == 0 ? 0 : 1;
}
