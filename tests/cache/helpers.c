#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "l3_le.h"

int fake_encode(void *ctx, const void *png, size_t png_size,
                const struct l3_encode_options *opts, void **out_ret, size_t *size_ret)
{
    struct fake_codec *fc = ctx;
    (void)opts;
    if (fc) {
        atomic_fetch_add(&fc->calls, 1);
        int d = atomic_load(&fc->delay_ms);
        if (d > 0) {
            struct timespec ts = {d / 1000, (long)(d % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (atomic_load(&fc->fail))
            return L3_ERR_LIMIT;
    }
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (png_size < 8 || memcmp(png, sig, 8) != 0)
        return L3_ERR_PNG;
    uint8_t *out = malloc(FAKE_HDR + png_size);
    if (!out)
        return L3_ERR_NOMEM;
    memcpy(out, "FK3\0", 4);
    memset(out + 4, 0, 4);
    l3_wr_u64le(out + 8, png_size);
    for (size_t i = 0; i < png_size; i++)
        out[FAKE_HDR + i] = ((const uint8_t *)png)[i] ^ 0x5a;
    l3_wr_u64le(out + 24, XXH3_64bits(out + FAKE_HDR, png_size));
    l3_wr_u64le(out + 16, XXH3_64bits(out, 16));
    *out_ret = out;
    *size_ret = FAKE_HDR + png_size;
    return 0;
}

int fake_check(void *ctx, const void *data, size_t size, uint64_t total, int level,
               size_t *needed_ret)
{
    (void)ctx;
    const uint8_t *p = data;
    if (size < FAKE_HDR) {
        if (total >= FAKE_HDR) {
            *needed_ret = FAKE_HDR;
            return -1;
        }
        return L3_ERR_TRUNCATED;
    }
    if (memcmp(p, "FK3\0", 4) != 0)
        return L3_ERR_BAD_MAGIC;
    if (XXH3_64bits(p, 16) != l3_rd_u64le(p + 16))
        return L3_ERR_HEADER_CHECKSUM;
    if (l3_rd_u64le(p + 8) + FAKE_HDR != total)
        return L3_ERR_TRUNCATED;
    if (level != L3CACHE_CHECK_HEADER &&
        XXH3_64bits(p + FAKE_HDR, size - FAKE_HDR) != l3_rd_u64le(p + 24))
        return L3_ERR_PAYLOAD_CHECKSUM;
    return 0;
}

int fake_payload(void *ctx, const void *prefix, size_t size, uint64_t total,
                 uint64_t *offset_ret, uint64_t *xxh3_64_ret)
{
    (void)ctx;
    (void)total;
    if (size < FAKE_HDR)
        return L3_ERR_TRUNCATED;
    *offset_ret = FAKE_HDR;
    *xxh3_64_ret = l3_rd_u64le((const uint8_t *)prefix + 24);
    return 0;
}

void fake_internal(struct l3cache_internal *in, struct fake_codec *fc)
{
    memset(in, 0, sizeof(*in));
    in->encode = fake_encode;
    in->check = fake_check;
    in->payload = fake_payload;
    in->ctx = fc;
    in->flush_interval_ms = 200;
    in->scan_interval_ms = 200;
}

int write_png(const char *path, unsigned width, unsigned height, unsigned seed, int noise)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    uint8_t *row = malloc((size_t)width * 3);
    if (!png || !info || !row || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(row);
        fclose(f);
        return -1;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    uint32_t x = seed * 2654435761u + 12345u;
    for (unsigned y = 0; y < height; y++) {
        for (unsigned i = 0; i < width * 3; i++) {
            if (noise) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                row[i] = (uint8_t)x;
            } else {
                row[i] = (uint8_t)(i * 7 + y * 3 + seed * 31);
            }
        }
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(row);
    return fclose(f) == 0 ? 0 : -1;
}

long read_fd(int fd, uint8_t **buf_ret)
{
    size_t cap = 65536, len = 0;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return -1;
    for (;;) {
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return -1;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t n = pread(fd, buf + len, cap - len, (off_t)len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            free(buf);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    *buf_ret = buf;
    return (long)len;
}

int fake_expected(const char *path, uint8_t **buf_ret, size_t *size_ret)
{
    uint8_t *src;
    size_t n;
    if ((src = tc_slurp(path, &n)) == NULL)
        return -1;
    void *out;
    size_t out_size;
    int r = fake_encode(NULL, src, n, NULL, &out, &out_size);
    free(src);
    if (r != 0)
        return -1;
    *buf_ret = out;
    *size_ret = out_size;
    return 0;
}

int get_fd(l3cache *c, int fd, struct l3cache_object *obj, int *l3_status_ret)
{
    struct l3cache_source src;
    int r = l3cache_identify(fd, "", AT_EMPTY_PATH, NULL, &src);
    if (r < 0)
        return r;
    return l3cache_get(c, fd, &src, 0, obj, l3_status_ret);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void remove_tree(const char *dir)
{
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
