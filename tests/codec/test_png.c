/* test_png.c — the PNG side of libl3 against libpng's own decode.
 *
 * The reference for every comparison is png_read_png() (libpng's high-level
 * reader, a separate code path from codec/png.c) with only the transforms
 * that keep sample values: PNG_TRANSFORM_PACKING (sub-byte samples to one
 * byte each) and, on little-endian hosts, PNG_TRANSFORM_SWAP_ENDIAN.
 *
 * For each image: l3_png_decode == reference; l3_png_encode -> reference
 * decode == reference; PNG -> L3 -> pixels (1 and 2 threads, padded stride)
 * == reference, with the palette/tRNS description kept.
 *
 * Here: PngSuite, generated images of every format, the real corpus.
 * test_png_hostile.c: hostile input, file descriptors, l3_png_encode;
 * test_transcode.c: PNG -> L3 transcoding.
 */
#include <criterion/criterion.h>
#include "tc_timeout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "l3.h"
#include "png_ref.h"
#include "tc_file.h"
#include "tc_rand.h"

#include "png_fixture.h"

/* ------------------------------------------------------------ PngSuite */

/* The PngSuite files in dir (at least min_files); `source` says where they
 * come from, for the skip when dir is absent. */
static void run_pngsuite(const char *dir, size_t min_files, const char *source)
{
    size_t n = 0;
    char **files = pt_list_png(dir, &n);
    if (files == NULL)
        cr_skip_test("%s absent (%s)", dir, source);
    cr_assert_geq(n, min_files, "%s: expected at least %zu PngSuite files, found %zu", dir,
                  min_files, n);
    size_t checked = 0, refused = 0;
    for (size_t i = 0; i < n; i++) {
        size_t sz;
        unsigned char *d = tc_slurp(files[i], &sz);
        cr_assert_not_null(d, "%s", files[i]);
        const char *base = strrchr(files[i], '/') + 1;
        int corrupt = base[0] == 'x'; /* PngSuite's deliberately broken files */
        if (check_png(base, d, sz, CHECK_PNG_REENCODE | CHECK_L3 | CHECK_L3_VARIANTS)) {
            checked++;
        } else {
            cr_assert(corrupt, "%s: libpng refuses a valid PngSuite file", base);
            void *px = NULL;
            struct l3_info info;
            int st = l3_png_decode(d, sz, NULL, &info, &px, NULL);
            cr_assert(st == L3_ERR_PNG || st == L3_ERR_LIMIT,
                      "%s: corrupt file gives %s", base, l3_strerror(st));
            void *l3 = NULL;
            st = l3_transcode_png(d, sz, NULL, &l3, NULL);
            cr_assert(st == L3_ERR_PNG || st == L3_ERR_LIMIT, "%s: transcode of corrupt file", base);
            cr_assert_null(l3);
            refused++;
        }
        free(d);
    }
    cr_log_info("%s: %zu files round-tripped, %zu corrupt files refused", dir, checked, refused);
    pt_free_list(files, n);
}

Test(png, pngsuite_debian_subset)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/png/pngsuite", pt_corpus_dir());
    run_pngsuite(dir, 35, "made by scripts/fetch-pngsuite.sh");
}

Test(png, pngsuite_full)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/png/pngsuite-full", pt_corpus_dir());
    /* whatever subset is there (175 in the full suite) */
    run_pngsuite(dir, 1, "the full PngSuite is in no Debian package: copied there by hand");
}

/* ------------------------------------------- generated images */
Test(png, generated_every_format_interlace_size)
{
    struct format_seen fs;
    memset(&fs, 0, sizeof fs);
    for (size_t f = 0; f < sizeof gen_formats / sizeof gen_formats[0]; f++)
        for (int il = 0; il < 2; il++)
            for (size_t s = 0; s < sizeof gen_sizes / sizeof gen_sizes[0]; s++) {
                struct gen_desc g;
                int variant = (int)(s + il);
                gen_setup(&g, gen_formats[f].ctype, gen_formats[f].depth, gen_sizes[s].w,
                          gen_sizes[s].h, il, variant);
                size_t pn, n;
                unsigned char *px = gen_pixels(&g, &pn);
                unsigned char *png = gen_write(&g, px, &n);
                char name[128];
                snprintf(name, sizeof name, "gen ctype %d depth %d %ux%u %s%s", g.ctype, g.depth,
                         g.w, g.h, il ? "Adam7" : "progressive",
                         g.ntrans || g.has_key ? " +tRNS" : "");
                cr_assert(check_png(name, png, n,
                                    CHECK_PNG_REENCODE | CHECK_L3 |
                                        (s == 3 ? CHECK_L3_VARIANTS : 0)),
                          "%s: libpng refuses its own output", name);
                /* Also the exact samples we generated (not only libpng's view). */
                void *dp = NULL;
                size_t dn = 0;
                cr_assert_eq(l3_png_decode(png, n, NULL, NULL, &dp, &dn), L3_OK, "%s", name);
                cr_assert(dn == pn && memcmp(dp, px, pn) == 0, "%s: samples changed", name);
                free(dp);
                free(png);
                free(px);
                format_saw(&fs, g.ctype, g.depth, il);
            }
    format_assert_all(&fs, "png.generated_every_format_interlace_size");
}

/* Label maps: few classes in large regions, palette indices must survive. */
Test(png, palette_label_maps)
{
    const int depths[] = {1, 2, 4, 8};
    for (size_t k = 0; k < 4; k++) {
        for (int classes = 2; classes <= 5; classes += 3) {
            struct gen_desc g;
            memset(&g, 0, sizeof g);
            g.w = 300;
            g.h = 171;
            g.ctype = PNG_COLOR_TYPE_PALETTE;
            g.depth = depths[k];
            int nc = classes < (1 << g.depth) ? classes : (1 << g.depth);
            g.npal = nc;
            for (int i = 0; i < nc; i++) {
                g.pal[i].red = (png_byte)(40 * i);
                g.pal[i].green = (png_byte)(200 - 30 * i);
                g.pal[i].blue = (png_byte)(i & 1 ? 255 : 0);
            }
            g.ntrans = 1;
            g.trans[0] = 0; /* class 0 transparent ("void") */
            unsigned char *px = malloc((size_t)g.w * g.h);
            for (uint32_t y = 0; y < g.h; y++)
                for (uint32_t x = 0; x < g.w; x++) {
                    int dx = (int)x - 150, dy = (int)y - 85;
                    int c = dx * dx + dy * dy < 60 * 60 ? 1 : (int)(y / 50);
                    px[(size_t)y * g.w + x] = (unsigned char)(c % nc);
                }
            size_t n;
            unsigned char *png = gen_write(&g, px, &n);
            char name[64];
            snprintf(name, sizeof name, "label map depth %d, %d classes", g.depth, nc);
            cr_assert(check_png(name, png, n, CHECK_PNG_REENCODE | CHECK_L3 | CHECK_L3_VARIANTS));
            void *dp = NULL;
            struct l3_info info;
            cr_assert_eq(l3_png_decode(png, n, NULL, &info, &dp, NULL), L3_OK);
            cr_assert(memcmp(dp, px, (size_t)g.w * g.h) == 0, "%s: class ids changed", name);
            cr_assert_eq(info.palette_len, nc);
            cr_assert_eq(info.palette_alpha_len, 1);
            cr_assert_eq(info.palette[0][3], 0);
            free(dp);
            free(png);
            free(px);
        }
    }
}

/* An index past the end of PLTE decodes with libpng (a warning only); the
 * palette is extended so the image stays encodable and indices survive. */
Test(png, palette_index_past_plte)
{
    struct gen_desc g;
    memset(&g, 0, sizeof g);
    g.w = 19;
    g.h = 5;
    g.ctype = PNG_COLOR_TYPE_PALETTE;
    g.depth = 8;
    g.npal = 3;
    for (int i = 0; i < 3; i++)
        g.pal[i].red = (png_byte)(i + 1);
    unsigned char px[19 * 5];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (unsigned char)(i % 7); /* indices 3..6 are past PLTE */
    size_t n;
    unsigned char *png = gen_write(&g, px, &n);
    struct l3_info info;
    void *dp = NULL;
    int st = l3_png_decode(png, n, NULL, &info, &dp, NULL);
    cr_assert_eq(st, L3_OK, "%s", l3_strerror(st));
    cr_assert(memcmp(dp, px, sizeof px) == 0);
    cr_assert_eq(info.palette_len, 7);
    cr_assert_eq(info.palette[2][0], 3);
    cr_assert(info.palette[6][0] == 0 && info.palette[6][3] == 255);
    cr_assert(check_png("index past PLTE", png, n, CHECK_PNG_REENCODE | CHECK_L3));
    free(dp);
    free(png);
}

/* A tRNS key that does not fit the bit depth matches no pixel and cannot be
 * written by libpng: it is dropped, the samples are kept. */
Test(png, trns_key_out_of_range_dropped)
{
    struct gen_desc g;
    memset(&g, 0, sizeof g);
    g.w = 9;
    g.h = 4;
    g.ctype = PNG_COLOR_TYPE_GRAY;
    g.depth = 8;
    g.has_key = 1;
    g.key.gray = 77;
    size_t pn, n;
    unsigned char *px = gen_pixels(&g, &pn);
    unsigned char *png = gen_write(&g, px, &n);
    /* Patch the tRNS value to 300 (> 255) and fix its CRC. */
    unsigned char *t = memmem(png, n, "tRNS", 4);
    cr_assert_not_null(t);
    t[4] = 0x01;
    t[5] = 0x2c;
    uint32_t crc = pt_crc32(t, 6);
    t[6] = (unsigned char)(crc >> 24);
    t[7] = (unsigned char)(crc >> 16);
    t[8] = (unsigned char)(crc >> 8);
    t[9] = (unsigned char)crc;
    struct l3_info info;
    void *dp = NULL;
    cr_assert_eq(l3_png_decode(png, n, NULL, &info, &dp, NULL), L3_OK);
    cr_assert_eq(info.has_trns_key, 0);
    cr_assert(memcmp(dp, px, pn) == 0);
    cr_assert(check_png("tRNS key 300 at depth 8", png, n, CHECK_PNG_REENCODE | CHECK_L3));
    free(dp);
    free(png);
    free(px);
}

/* ------------------------------------------------------- real corpus */

static void run_corpus(const char *sub, unsigned stride_asan)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/png/%s", pt_corpus_dir(), sub);
    size_t n = 0;
    char **files = pt_list_png(dir, &n);
    if (files == NULL || n == 0)
        cr_skip_test("%s absent or empty (made by scripts/fetch-corpus.sh)", dir);
    /* Under AddressSanitizer every stride-th file (still real images). */
    unsigned step = PT_ASAN ? stride_asan : 1;
    size_t checked = 0;
    for (size_t i = 0; i < n; i += step) {
        size_t sz;
        unsigned char *d = tc_slurp(files[i], &sz);
        cr_assert_not_null(d);
        struct l3_info info;
        void *px = NULL;
        /* PNG re-encode (zlib) is the slow step: only for smaller images. */
        unsigned what = CHECK_L3;
        size_t pxn = 0;
        if (l3_png_decode(d, sz, NULL, &info, &px, &pxn) == L3_OK &&
            (uint64_t)info.width * info.height <= 600000)
            what |= CHECK_PNG_REENCODE;
        free(px);
        cr_assert(check_png(strrchr(files[i], '/') + 1, d, sz, what), "%s: libpng refuses it",
                  files[i]);
        free(d);
        checked++;
    }
    cr_log_info("%s: %zu of %zu files round-tripped", dir, checked, n);
    pt_free_list(files, n);
}

Test(png, corpus_photos_2048, .timeout = TC_TIMEOUT(300)) { run_corpus("photos-2048", 2); }
Test(png, corpus_wallpapers, .timeout = TC_TIMEOUT(300)) { run_corpus("wallpapers", 2); }
Test(png, corpus_renders_2048, .timeout = TC_TIMEOUT(300)) { run_corpus("renders-2048", 2); }
Test(png, corpus_photos_full_size, .timeout = TC_TIMEOUT(300)) { run_corpus("photos", 3); }
