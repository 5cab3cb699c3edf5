/* test_transcode.c — PNG -> L3 transcoding (codec/transcode.c) against
 * l3_encode of l3_png_decode's pixels, byte for byte: every generated format,
 * interlaced files, corrupt and truncated streams, limits and fd errors, the
 * corpus.
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

/* =================================================================
 * PNG -> L3 transcoding (codec/transcode.c): decoding and encoding
 * overlap, and the file must be byte for byte l3_encode's output for the
 * pixels l3_png_decode gives, with the same options.
 * ================================================================= */

/* l3_encode of l3_png_decode's pixels (one thread). */
static int tc_reference(const unsigned char *png, size_t n, const struct l3_encode_options *o,
                        void **ref_ret, size_t *ref_n_ret)
{
    struct l3_info info;
    void *px = NULL;
    *ref_ret = NULL;
    int st = l3_png_decode(png, n, &o->limits, &info, &px, NULL);
    if (st != L3_OK)
        return st;
    struct l3_encode_options one = *o;
    one.threads = 1;
    st = l3_encode(&info, px, 0, &one, ref_ret, ref_n_ret);
    free(px);
    return st;
}

/* Transcodes from memory and from an fd with `threads`; both must give the
 * reference's status and, when it succeeds, its bytes. */
static void tc_check(const char *name, const unsigned char *png, size_t n, unsigned threads,
                     uint32_t tw, uint32_t th)
{
    struct l3_encode_options o;
    memset(&o, 0, sizeof o);
    o.tile_width = tw;
    o.tile_height = th;
    void *ref = NULL;
    size_t ref_n = 0;
    int ref_st = tc_reference(png, n, &o, &ref, &ref_n);
    o.threads = threads;
    for (int via_fd = 0; via_fd < 2; via_fd++) {
        void *out = (void *)1;
        size_t out_n = 1;
        int st;
        if (via_fd) {
            char path[64];
            int fd = tmpfile_with(png, n, path, sizeof path);
            unlink(path);
            st = l3_transcode_png_fd(fd, &o, &out, &out_n);
            close(fd);
        } else {
            st = l3_transcode_png(png, n, &o, &out, &out_n);
        }
        cr_assert_eq(st, ref_st, "%s (%s, %u threads, tiles %ux%u): status %d, expected %d",
                     name, via_fd ? "fd" : "memory", threads, tw, th, st, ref_st);
        if (st != L3_OK) {
            cr_assert_null(out, "%s: output set on failure", name);
            cr_assert_eq(out_n, 0);
            continue;
        }
        cr_assert_eq(out_n, ref_n, "%s (%s, %u threads, tiles %ux%u): %zu bytes, expected %zu",
                     name, via_fd ? "fd" : "memory", threads, tw, th, out_n, ref_n);
        cr_assert(memcmp(out, ref, ref_n) == 0,
                  "%s (%s, %u threads, tiles %ux%u): bytes differ from l3_encode at %zu", name,
                  via_fd ? "fd" : "memory", threads, tw, th,
                  first_diff(out, ref, ref_n));
        cr_assert_eq(l3_verify(out, out_n), L3_OK, "%s", name);
        free(out);
    }
    free(ref);
}

/* A PNG large enough for many IDAT chunks and many tile bands. */
static unsigned char *tc_big_png(int interlace, size_t *n_ret)
{
    return rgb8_png(320, 240, interlace, n_ret);
}

Test(transcode, generated_every_format_byte_identical)
{
    static const struct {
        uint32_t w, h;
    } sizes[] = {{1, 1}, {37, 1}, {65, 33}, {130, 70}, {4097, 3}};
    static const unsigned threads[] = {1, 2, 4};
    struct format_seen fs;
    memset(&fs, 0, sizeof fs);
    for (size_t f = 0; f < sizeof gen_formats / sizeof gen_formats[0]; f++)
        for (int il = 0; il < 2; il++)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                struct gen_desc g;
                gen_setup(&g, gen_formats[f].ctype, gen_formats[f].depth, sizes[s].w,
                          sizes[s].h, il, (int)(s + il));
                size_t pn, n;
                unsigned char *px = gen_pixels(&g, &pn);
                unsigned char *png = gen_write(&g, px, &n);
                char name[128];
                snprintf(name, sizeof name, "ctype %d depth %d %ux%u %s", g.ctype, g.depth,
                         g.w, g.h, il ? "Adam7" : "progressive");
                for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
                    /* default tiles, and small tiles for many bands */
                    tc_check(name, png, n, threads[t], 0, 0);
                    tc_check(name, png, n, threads[t], 16, 8);
                }
                free(png);
                free(px);
                format_saw(&fs, g.ctype, g.depth, il);
            }
    format_assert_all(&fs, "transcode.generated_every_format_byte_identical");
}

Test(transcode, interlaced_falls_back_byte_identical)
{
    size_t n;
    unsigned char *png = tc_big_png(1, &n);
    for (unsigned t = 1; t <= 4; t++) {
        tc_check("320x240 Adam7", png, n, t, 0, 0);
        tc_check("320x240 Adam7", png, n, t, 32, 16);
    }
    free(png);
}

/* Flips a byte in the IDAT chunk that starts past `frac` of the file: the
 * decoder fails after earlier bands were handed to the workers. */
static void tc_corrupt_idat(unsigned char *png, size_t n, double frac, int fix)
{
    size_t off = 8;
    while (off + 12 <= n) {
        uint32_t len = get32(png + off);
        if (memcmp(png + off + 4, "IDAT", 4) == 0 && off >= (size_t)(n * frac) && len > 16) {
            png[off + 8 + len / 2] ^= 0x5a;
            if (fix)
                fix_crc(png + off);
            return;
        }
        off += 12 + (size_t)len;
    }
    cr_assert_fail("no IDAT past %.0f%% of the file", frac * 100);
}

Test(transcode, corrupt_mid_stream)
{
    size_t n;
    unsigned char *good = tc_big_png(0, &n);
    unsigned char *png = malloc(n);
    cr_assert_not_null(png);
    static const double fracs[] = {0.3, 0.6, 0.85};
    for (size_t i = 0; i < sizeof fracs / sizeof fracs[0]; i++)
        for (int fix = 0; fix < 2; fix++) {
            memcpy(png, good, n);
            tc_corrupt_idat(png, n, fracs[i], fix);
            struct l3_info info;
            void *px = NULL;
            int dst = l3_png_decode(png, n, NULL, &info, &px, NULL);
            free(px);
            /* a bad CRC on IDAT is always an error; with the CRC fixed the
             * deflate damage may or may not be detectable: the transcoder
             * must agree with the decoder either way */
            if (!fix)
                cr_assert_eq(dst, L3_ERR_PNG);
            for (unsigned t = 1; t <= 4; t++) {
                tc_check("corrupt IDAT", png, n, t, 0, 0);
                tc_check("corrupt IDAT", png, n, t, 64, 8);
            }
        }
    free(png);
    free(good);
}

Test(transcode, truncated)
{
    size_t n;
    unsigned char *png = tc_big_png(0, &n);
    struct l3_encode_options o;
    memset(&o, 0, sizeof o);
    for (unsigned k = 0; k < 20; k++) {
        size_t cut = k == 0 ? 7 : n * k / 20;
        for (unsigned t = 1; t <= 4; t *= 2) {
            o.threads = t;
            o.tile_height = 16;
            void *out = (void *)1;
            size_t out_n = 1;
            cr_assert_eq(l3_transcode_png(png, cut, &o, &out, &out_n), L3_ERR_PNG,
                         "cut at %zu of %zu, %u threads", cut, n, t);
            cr_assert(out == NULL && out_n == 0);
            char path[64];
            int fd = tmpfile_with(png, cut, path, sizeof path);
            unlink(path);
            out = (void *)1;
            cr_assert_eq(l3_transcode_png_fd(fd, &o, &out, &out_n), L3_ERR_PNG,
                         "fd cut at %zu of %zu, %u threads", cut, n, t);
            cr_assert_null(out);
            close(fd);
        }
    }
    free(png);
}

Test(transcode, limits_and_fd_errors)
{
    size_t n;
    unsigned char *png = tc_big_png(0, &n);
    struct l3_encode_options o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    void *out = NULL;
    size_t out_n;
    o.limits.max_pixels = 320 * 240 - 1;
    cr_assert_eq(l3_transcode_png(png, n, &o, &out, &out_n), L3_ERR_LIMIT);
    o.limits.max_pixels = 0;
    o.limits.max_memory = 4096;
    cr_assert_eq(l3_transcode_png(png, n, &o, &out, &out_n), L3_ERR_LIMIT);
    /* room for the pixels but not for the encoder: still a limit error */
    o.limits.max_memory = 320 * 240 * 3 + 64 * 1024;
    cr_assert_eq(l3_transcode_png(png, n, &o, &out, &out_n), L3_ERR_LIMIT);
    cr_assert_null(out);
    o.limits.max_memory = 0;
    cr_assert_eq(l3_transcode_png_fd(-1, &o, &out, &out_n), L3_ERR_IO);
    int dfd = open("/", O_RDONLY | O_DIRECTORY);
    cr_assert_geq(dfd, 0);
    cr_assert_eq(l3_transcode_png_fd(dfd, &o, &out, &out_n), L3_ERR_IO);
    close(dfd);
    cr_assert_eq(l3_transcode_png(NULL, 0, &o, &out, &out_n), L3_ERR_PNG);
    cr_assert_eq(l3_transcode_png(png, n, &o, NULL, &out_n), L3_ERR_INVALID_ARG);
    /* bad tile options: reported after a full decode, as l3_encode would */
    o.tile_width = 2000;
    cr_assert_eq(l3_transcode_png(png, n, &o, &out, &out_n), L3_ERR_INVALID_ARG);
    free(png);
}

static void tc_corpus(const char *sub)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/png/%s", pt_corpus_dir(), sub);
    size_t n = 0;
    char **files = pt_list_png(dir, &n);
    if (files == NULL || n == 0)
        cr_skip_test("%s absent or empty (made by scripts/fetch-corpus.sh)", dir);
    unsigned step = PT_ASAN ? 4 : 1;
    for (size_t i = 0; i < n; i += step) {
        size_t sz;
        unsigned char *d = tc_slurp(files[i], &sz);
        cr_assert_not_null(d);
        tc_check(strrchr(files[i], '/') + 1, d, sz, i % 2 ? 4 : 2, 0, 0);
        free(d);
    }
    pt_free_list(files, n);
}

Test(transcode, corpus_photos_2048, .timeout = TC_TIMEOUT(300)) { tc_corpus("photos-2048"); }
Test(transcode, corpus_renders_2048, .timeout = TC_TIMEOUT(300)) { tc_corpus("renders-2048"); }
Test(transcode, corpus_wallpapers, .timeout = TC_TIMEOUT(300)) { tc_corpus("wallpapers"); }
Test(transcode, corpus_pngsuite, .timeout = TC_TIMEOUT(300)) { tc_corpus("pngsuite"); }
