/* fuzz_png.c — libFuzzer harness for the PNG path.
 *
 * PNG bytes -> l3_png_decode -> l3_encode -> l3_decode must give back the
 * same samples and description (abort otherwise), and the PNG written back
 * by l3_png_encode must decode to them too. Each input is tried as is and,
 * when that changes anything, with every chunk CRC recomputed, so that
 * mutations reach libpng's decoder instead of stopping at a CRC. Every fourth
 * input is also read through an fd (memfd): l3_png_decode_fd must agree.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "l3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_info(const struct l3_info *a, const struct l3_info *b)
{
    return a->width == b->width && a->height == b->height && a->color == b->color &&
           a->channels == b->channels && a->bit_depth == b->bit_depth &&
           a->has_trns_key == b->has_trns_key &&
           memcmp(a->trns_key, b->trns_key, sizeof a->trns_key) == 0 &&
           a->palette_len == b->palette_len && a->palette_alpha_len == b->palette_alpha_len &&
           memcmp(a->palette, b->palette, 4u * a->palette_len) == 0;
}

/* l3_png_decode_fd on the same bytes must agree with l3_png_decode. */
static void through_fd(const uint8_t *data, size_t size, const struct l3_limits *lim, int st,
                       const struct l3_info *info, const void *px, size_t n)
{
    int fd = memfd_create("fuzz_png", 0);
    if (fd < 0)
        return;
    if (write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return;
    }
    struct l3_info fi;
    void *fpx = NULL;
    size_t fn = 0;
    int fst = l3_png_decode_fd(fd, lim, &fi, &fpx, &fn);
    close(fd);
    if (fst != st)
        abort();
    if (st == L3_OK && (fn != n || memcmp(fpx, px, n) != 0 || !same_info(&fi, info)))
        abort();
    free(fpx);
}

static void round_trip(const uint8_t *data, size_t size)
{
    struct l3_limits lim = {.max_pixels = 1u << 18, .max_memory = 32u << 20};
    struct l3_info info;
    void *px = NULL;
    size_t n = 0;
    int st = l3_png_decode(data, size, &lim, &info, &px, &n);
    if ((size & 3) == 0)
        through_fd(data, size, &lim, st, &info, px, n);
    if (st != L3_OK) {
        if (px != NULL)
            abort();
        if (st != L3_ERR_PNG && st != L3_ERR_LIMIT && st != L3_ERR_NOMEM)
            abort();
        return;
    }
    if (n != l3_decoded_size(&info, 0))
        abort();

    struct l3_encode_options eo;
    memset(&eo, 0, sizeof eo);
    eo.tile_width = eo.tile_height = (size & 1) ? 16 : 0;
    eo.limits = lim;
    void *l3 = NULL;
    size_t l3n = 0;
    if (l3_encode(&info, px, 0, &eo, &l3, &l3n) != L3_OK)
        abort(); /* every image libpng decodes must encode */
    struct l3_decode_options dopt;
    memset(&dopt, 0, sizeof dopt);
    dopt.flags = L3_DECODE_VERIFY;
    dopt.limits = lim;
    void *out = NULL;
    size_t outn = 0;
    struct l3_info oi;
    if (l3_decode_alloc(l3, l3n, &dopt, &out, &outn, &oi) != L3_OK || outn != n ||
        memcmp(out, px, n) != 0 || !same_info(&info, &oi))
        abort(); /* lossless round trip broken */
    l3_free(out);
    l3_free(l3);

    /* PNG written back (what `l3 decode OUT.png` does), small images only. */
    if ((uint64_t)info.width * info.height <= 65536) {
        void *png = NULL;
        size_t pn = 0;
        if (l3_png_encode(&info, px, 0, &png, &pn) != L3_OK)
            abort();
        struct l3_info bi;
        void *bp = NULL;
        size_t bn = 0;
        if (l3_png_decode(png, pn, &lim, &bi, &bp, &bn) != L3_OK || bn != n ||
            memcmp(bp, px, n) != 0 || !same_info(&info, &bi))
            abort();
        free(bp);
        free(png);
    }
    free(px);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    round_trip(data, size);
    if (size < 8 + 12 || !l3_is_png(data, size))
        return 0;
    uint8_t *copy = malloc(size);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    size_t off = 8;
    while (off + 12 <= size) {
        uint32_t len = be32(copy + off);
        if (len > size - off - 12)
            break;
        uint32_t crc = (uint32_t)crc32(0, copy + off + 4, len + 4);
        uint8_t *c = copy + off + 8 + len;
        c[0] = (uint8_t)(crc >> 24);
        c[1] = (uint8_t)(crc >> 16);
        c[2] = (uint8_t)(crc >> 8);
        c[3] = (uint8_t)crc;
        off += 12 + (size_t)len;
    }
    if (memcmp(copy, data, size) != 0)
        round_trip(copy, size);
    free(copy);
    return 0;
}
