/* test_png_hostile.c — libl3's PNG side on hostile input (truncation at every
 * offset, bit flips in IHDR, IDAT and CRCs, huge dimensions, empty and non-PNG
 * input), decoding from a file descriptor, and l3_png_encode (strides, bad
 * input), each against libpng's own decode.
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

/* --------------------------------------------------- hostile input */

Test(png, truncated_at_every_offset)
{
    for (int il = 0; il < 2; il++) {
        size_t n;
        unsigned char *png = small_png(&n, il);
        for (size_t cut = 0; cut < n; cut++) {
            unsigned char *copy = malloc(cut ? cut : 1); /* exact size: ASan sees overreads */
            memcpy(copy, png, cut);
            void *px = (void *)1;
            struct l3_info info;
            int st = l3_png_decode(copy, cut, NULL, &info, &px, NULL);
            cr_assert_eq(st, L3_ERR_PNG, "cut at %zu of %zu: %s", cut, n, l3_strerror(st));
            cr_assert_null(px);
            free(copy);
        }
        free(png);
    }
}

Test(png, bit_flips_ihdr_idat_crc)
{
    size_t n;
    unsigned char *png = small_png(&n, 0);
    struct ref_img ref;
    cr_assert_eq(ref_decode(png, n, &ref), 0);
    unsigned char *copy = malloc(n);
    struct l3_limits lim = {.max_pixels = 1u << 20, .max_memory = 64u << 20};
    /* Every bit of IHDR (length, type, data, CRC): the CRC catches it. */
    for (size_t bit = 8 * 8; bit < 8 * 33; bit++) {
        memcpy(copy, png, n);
        copy[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        void *px = NULL;
        int st = l3_png_decode(copy, n, &lim, NULL, &px, NULL);
        cr_assert(st == L3_ERR_PNG || st == L3_ERR_LIMIT, "IHDR bit %zu: %s", bit, l3_strerror(st));
        free(px);
    }
    /* Every bit of IHDR's data with a valid CRC: either refused or decoded
     * exactly as libpng decodes it. */
    for (size_t bit = 16 * 8; bit < 29 * 8; bit++) {
        memcpy(copy, png, n);
        copy[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        fix_crc(copy + 8);
        void *px = NULL;
        size_t pxn = 0;
        int st = l3_png_decode(copy, n, &lim, NULL, &px, &pxn);
        cr_assert(st == L3_OK || st == L3_ERR_PNG || st == L3_ERR_LIMIT, "IHDR bit %zu (CRC ok): %s",
                  bit, l3_strerror(st));
        if (st == L3_OK) {
            struct ref_img r2;
            cr_assert_eq(ref_decode(copy, n, &r2), 0, "IHDR bit %zu: only l3 accepts it", bit);
            cr_assert(r2.size == pxn && memcmp(r2.px, px, pxn) == 0, "IHDR bit %zu", bit);
            ref_free(&r2);
        }
        free(px);
    }
    /* Bits of IDAT: with the stale CRC always refused; with a fixed CRC
     * refused (zlib) or equal to libpng's decode. */
    unsigned char *idat = find_chunk(png, n, "IDAT");
    cr_assert_not_null(idat);
    size_t off = (size_t)(idat - png);
    uint32_t len = get32(idat);
    for (size_t b = 0; b < 8 * (size_t)len; b += 3) {
        for (int fix = 0; fix < 2; fix++) {
            memcpy(copy, png, n);
            copy[off + 8 + b / 8] ^= (unsigned char)(1u << (b % 8));
            if (fix)
                fix_crc(copy + off);
            void *px = NULL;
            size_t pxn = 0;
            int st = l3_png_decode(copy, n, &lim, NULL, &px, &pxn);
            if (!fix) {
                cr_assert_eq(st, L3_ERR_PNG, "IDAT bit %zu: %s", b, l3_strerror(st));
            } else {
                cr_assert(st == L3_OK || st == L3_ERR_PNG, "IDAT bit %zu: %s", b, l3_strerror(st));
                if (st == L3_OK) {
                    struct ref_img r2;
                    cr_assert_eq(ref_decode(copy, n, &r2), 0);
                    cr_assert(r2.size == pxn && memcmp(r2.px, px, pxn) == 0, "IDAT bit %zu", b);
                    ref_free(&r2);
                }
            }
            free(px);
        }
    }
    /* A bad CRC on IEND and on IDAT. */
    memcpy(copy, png, n);
    copy[n - 1] ^= 0x40;
    void *px = NULL;
    cr_assert_eq(l3_png_decode(copy, n, NULL, NULL, &px, NULL), L3_ERR_PNG);
    memcpy(copy, png, n);
    copy[off + 8 + len] ^= 0x01;
    cr_assert_eq(l3_png_decode(copy, n, NULL, NULL, &px, NULL), L3_ERR_PNG);
    cr_assert_null(px);
    free(copy);
    free(png);
    ref_free(&ref);
}

/* A PNG with a valid IHDR claiming w x h and a tiny IDAT. */
static unsigned char *claim_png(uint32_t w, uint32_t h, size_t *n_ret)
{
    size_t n;
    unsigned char *png = small_png(&n, 0);
    put32(png + 16, w);
    put32(png + 20, h);
    fix_crc(png + 8);
    *n_ret = n;
    return png;
}

Test(png, huge_dimensions_hit_limit_before_allocating)
{
    size_t n;
    unsigned char *png = claim_png(100000, 100000, &n);
    void *px = NULL;
    struct l3_info info;
    int st = l3_png_decode(png, n, NULL, &info, &px, NULL);
    cr_assert_eq(st, L3_ERR_LIMIT, "%s", l3_strerror(st));
    cr_assert_null(px);
    /* Pixel limit out of the way: the memory limit (30 GB > 4 GiB) still
     * refuses it. Had it tried to allocate, the result would be NOMEM or a
     * decode error, not LIMIT. */
    struct l3_limits lim = {.max_pixels = UINT64_MAX};
    st = l3_png_decode(png, n, &lim, &info, &px, NULL);
    cr_assert_eq(st, L3_ERR_LIMIT, "%s", l3_strerror(st));
    void *l3 = NULL;
    st = l3_transcode_png(png, n, NULL, &l3, NULL);
    cr_assert_eq(st, L3_ERR_LIMIT);
    cr_assert_null(l3);
    free(png);
    /* Over the format's dimension limit. */
    png = claim_png(L3_MAX_DIM + 1, 1, &n);
    cr_assert_eq(l3_png_decode(png, n, &lim, NULL, &px, NULL), L3_ERR_LIMIT);
    free(png);
    /* Caller's own small limits. */
    png = small_png(&n, 0);
    struct l3_limits tiny = {.max_pixels = 33 * 17 - 1};
    cr_assert_eq(l3_png_decode(png, n, &tiny, NULL, &px, NULL), L3_ERR_LIMIT);
    struct l3_limits tight = {.max_memory = 1000};
    cr_assert_eq(l3_png_decode(png, n, &tight, NULL, &px, NULL), L3_ERR_LIMIT);
    struct l3_limits exact = {.max_pixels = 33 * 17};
    cr_assert_eq(l3_png_decode(png, n, &exact, NULL, &px, NULL), L3_OK);
    free(px);
    free(png);
}

Test(png, empty_and_non_png_input)
{
    void *px = (void *)1;
    struct l3_info info;
    cr_assert_eq(l3_png_decode("", 0, NULL, &info, &px, NULL), L3_ERR_PNG);
    cr_assert_null(px);
    cr_assert_eq(l3_png_decode(NULL, 0, NULL, &info, &px, NULL), L3_ERR_PNG);
    cr_assert_eq(l3_png_decode(NULL, 5, NULL, &info, &px, NULL), L3_ERR_INVALID_ARG);
    cr_assert_eq(l3_png_decode("x", 1, NULL, &info, NULL, NULL), L3_ERR_INVALID_ARG);
    const char *text = "hello, this is not a PNG file at all\n";
    cr_assert_eq(l3_png_decode(text, strlen(text), NULL, &info, &px, NULL), L3_ERR_PNG);
    static const unsigned char jpeg[] = {0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0};
    cr_assert_eq(l3_png_decode(jpeg, sizeof jpeg, NULL, &info, &px, NULL), L3_ERR_PNG);
    /* Signature only, and signature + garbage. */
    static const unsigned char sig[] = {137, 80, 78, 71, 13, 10, 26, 10, 1, 2, 3, 4, 5, 6, 7, 8,
                                        9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    cr_assert_eq(l3_png_decode(sig, 8, NULL, &info, &px, NULL), L3_ERR_PNG);
    cr_assert_eq(l3_png_decode(sig, sizeof sig, NULL, &info, &px, NULL), L3_ERR_PNG);
    cr_assert_eq(l3_is_png(sig, 8), 1);
    cr_assert_eq(l3_is_png(sig, 7), 0);
    cr_assert_eq(l3_is_png(text, strlen(text)), 0);
    cr_assert_eq(l3_is_png(NULL, 100), 0);
    void *l3 = (void *)1;
    cr_assert_eq(l3_transcode_png(text, strlen(text), NULL, &l3, NULL), L3_ERR_PNG);
    cr_assert_null(l3);
}

/* ------------------------------------------------------------- fds */

Test(png, decode_from_fd)
{
    size_t n;
    unsigned char *png = small_png(&n, 1);
    struct l3_info mi, fi;
    void *mpx = NULL, *fpx = NULL;
    size_t mn, fn;
    cr_assert_eq(l3_png_decode(png, n, NULL, &mi, &mpx, &mn), L3_OK);

    char path[64];
    int fd = tmpfile_with(png, n, path, sizeof path);
    cr_assert_eq(l3_png_decode_fd(fd, NULL, &fi, &fpx, &fn), L3_OK);
    cr_assert(fn == mn && memcmp(fpx, mpx, mn) == 0);
    cr_assert_eq(memcmp(&fi, &mi, sizeof fi), 0);
    free(fpx);
    /* PNG -> L3 from an fd equals PNG -> L3 from memory. */
    cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
    void *l3a = NULL, *l3b = NULL;
    size_t na, nb;
    cr_assert_eq(l3_transcode_png_fd(fd, NULL, &l3a, &na), L3_OK);
    cr_assert_eq(l3_transcode_png(png, n, NULL, &l3b, &nb), L3_OK);
    cr_assert(na == nb && memcmp(l3a, l3b, na) == 0);
    l3_free(l3a);
    l3_free(l3b);
    close(fd);
    unlink(path);

    /* Through a pipe (short reads). */
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(p[0]);
        for (size_t off = 0; off < n; off += 100) {
            size_t k = n - off < 100 ? n - off : 100;
            if (write(p[1], png + off, k) != (ssize_t)k)
                _exit(1);
            usleep(100);
        }
        _exit(0);
    }
    close(p[1]);
    cr_assert_eq(l3_png_decode_fd(p[0], NULL, &fi, &fpx, &fn), L3_OK);
    cr_assert(fn == mn && memcmp(fpx, mpx, mn) == 0);
    free(fpx);
    close(p[0]);
    waitpid(pid, NULL, 0);

    /* Truncated file: a PNG error, not an I/O error. */
    fd = tmpfile_with(png, n / 2, path, sizeof path);
    cr_assert_eq(l3_png_decode_fd(fd, NULL, &fi, &fpx, &fn), L3_ERR_PNG);
    cr_assert_null(fpx);
    close(fd);
    unlink(path);
    /* Empty file and a non-PNG. */
    fd = tmpfile_with("", 0, path, sizeof path);
    cr_assert_eq(l3_png_decode_fd(fd, NULL, &fi, &fpx, &fn), L3_ERR_PNG);
    close(fd);
    unlink(path);
    fd = tmpfile_with("GIF89a....", 10, path, sizeof path);
    cr_assert_eq(l3_png_decode_fd(fd, NULL, &fi, &fpx, &fn), L3_ERR_PNG);
    close(fd);
    unlink(path);

    /* Read errors: a directory, a write-only fd, a closed fd, -1. */
    fd = open("/tmp", O_RDONLY | O_DIRECTORY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(l3_png_decode_fd(fd, NULL, &fi, &fpx, &fn), L3_ERR_IO);
    close(fd);
    fd = tmpfile_with(png, n, path, sizeof path);
    int wfd = open(path, O_WRONLY);
    cr_assert_eq(l3_png_decode_fd(wfd, NULL, &fi, &fpx, &fn), L3_ERR_IO);
    close(wfd);
    close(fd);
    unlink(path);
    cr_assert_eq(l3_png_decode_fd(wfd, NULL, &fi, &fpx, &fn), L3_ERR_IO);
    cr_assert_eq(l3_png_decode_fd(-1, NULL, &fi, &fpx, &fn), L3_ERR_IO);
    void *l3 = NULL;
    cr_assert_eq(l3_transcode_png_fd(-1, NULL, &l3, NULL), L3_ERR_IO);
    cr_assert_null(l3);
    free(mpx);
    free(png);
}

/* ------------------------------------------------------ l3_png_encode */

Test(png, encode_stride_and_bad_input)
{
    struct l3_info info;
    memset(&info, 0, sizeof info);
    info.width = 5;
    info.height = 3;
    info.color = L3_COLOR_RGB;
    info.channels = 3;
    info.bit_depth = 16;
    uint16_t px[3][8 * 3]; /* stride 8 pixels, 5 used */
    for (int y = 0; y < 3; y++)
        for (int i = 0; i < 24; i++)
            px[y][i] = (uint16_t)(y * 1000 + i * 2500 + 1);
    void *png = NULL;
    size_t n = 0;
    cr_assert_eq(l3_png_encode(&info, px, sizeof px[0], &png, &n), L3_OK);
    struct ref_img r;
    cr_assert_eq(ref_decode(png, n, &r), 0);
    cr_assert(r.w == 5 && r.h == 3 && r.depth == 16 && r.ctype == PNG_COLOR_TYPE_RGB);
    for (int y = 0; y < 3; y++)
        cr_assert(memcmp(r.px + y * r.row, px[y], 30) == 0, "row %d", y);
    ref_free(&r);
    free(png);

    /* Bad descriptions and out-of-range samples. */
    cr_assert_eq(l3_png_encode(&info, px, 10, &png, &n), L3_ERR_INVALID_ARG); /* stride < row */
    cr_assert_eq(l3_png_encode(NULL, px, 0, &png, &n), L3_ERR_INVALID_ARG);
    cr_assert_eq(l3_png_encode(&info, NULL, 0, &png, &n), L3_ERR_INVALID_ARG);
    struct l3_info bad = info;
    bad.bit_depth = 4; /* RGB at 4 bits does not exist */
    cr_assert_eq(l3_png_encode(&bad, px, 0, &png, &n), L3_ERR_INVALID_ARG);
    bad = info;
    bad.channels = 4;
    cr_assert_eq(l3_png_encode(&bad, px, 0, &png, &n), L3_ERR_INVALID_ARG);
    bad = info;
    bad.width = 0;
    cr_assert_eq(l3_png_encode(&bad, px, 0, &png, &n), L3_ERR_INVALID_ARG);

    unsigned char g2[4] = {0, 1, 3, 4}; /* 4 does not fit in 2 bits */
    struct l3_info gi;
    memset(&gi, 0, sizeof gi);
    gi.width = 4;
    gi.height = 1;
    gi.color = L3_COLOR_GRAY;
    gi.channels = 1;
    gi.bit_depth = 2;
    cr_assert_eq(l3_png_encode(&gi, g2, 0, &png, &n), L3_ERR_INVALID_ARG);
    g2[3] = 2;
    cr_assert_eq(l3_png_encode(&gi, g2, 0, &png, &n), L3_OK);
    void *dp = NULL;
    struct l3_info di;
    cr_assert_eq(l3_png_decode(png, n, NULL, &di, &dp, NULL), L3_OK);
    cr_assert(memcmp(dp, g2, 4) == 0 && di.bit_depth == 2);
    free(dp);
    free(png);

    struct l3_info pi = gi;
    pi.color = L3_COLOR_PALETTE;
    pi.palette_len = 2; /* index 2 and 3 out of range */
    cr_assert_eq(l3_png_encode(&pi, g2, 0, &png, &n), L3_ERR_INVALID_ARG);
    pi.palette_len = 4;
    pi.palette_alpha_len = 5;
    cr_assert_eq(l3_png_encode(&pi, g2, 0, &png, &n), L3_ERR_INVALID_ARG);
    pi.palette_alpha_len = 2;
    pi.palette[1][3] = 7;
    pi.palette[3][3] = 255;
    cr_assert_eq(l3_png_encode(&pi, g2, 0, &png, &n), L3_OK);
    cr_assert_eq(l3_png_decode(png, n, NULL, &di, &dp, NULL), L3_OK);
    cr_assert(di.palette_len == 4 && di.palette_alpha_len == 2 && di.palette[1][3] == 7);
    free(dp);
    free(png);

    struct l3_info ki = gi;
    ki.has_trns_key = 1;
    ki.trns_key[0] = 4; /* does not fit 2 bits */
    cr_assert_eq(l3_png_encode(&ki, g2, 0, &png, &n), L3_ERR_INVALID_ARG);
    ki.trns_key[0] = 3;
    cr_assert_eq(l3_png_encode(&ki, g2, 0, &png, &n), L3_OK);
    cr_assert_eq(l3_png_decode(png, n, NULL, &di, &dp, NULL), L3_OK);
    cr_assert(di.has_trns_key == 1 && di.trns_key[0] == 3);
    free(dp);
    free(png);
}
