/* png_write.c — l3_png_encode: pixels -> PNG with libpng, the inverse of
 * l3_png_decode (png.c): the same sample layout (sub-byte samples one a byte,
 * 16-bit samples native uint16_t, palette images as indices with their
 * palette). Errors from libpng are caught with setjmp/longjmp; nothing is
 * printed. */
#include "l3.h"
#include "l3_internal.h"
#include "png_glue.h"

#include <errno.h>
#include <limits.h>
#include <png.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct png_wr {
    png_structp png;
    png_infop info;
    const struct l3_info *in;
    const unsigned char *pixels;
    size_t stride;
    unsigned char *out;
    size_t out_len, out_cap;
    int status;
    png_bytep *rows;
};

static void write_mem(png_structp png, png_bytep data, size_t n)
{
    struct png_wr *wr = png_get_io_ptr(png);
    if (n > wr->out_cap - wr->out_len) {
        size_t cap = wr->out_cap ? wr->out_cap : 4096;
        while (cap - wr->out_len < n) {
            if (cap > SIZE_MAX / 2) {
                wr->status = L3_ERR_NOMEM;
                png_error(png, "too large");
            }
            cap *= 2;
        }
        unsigned char *p = realloc(wr->out, cap);
        if (p == NULL) {
            wr->status = L3_ERR_NOMEM;
            png_error(png, "out of memory");
        }
        wr->out = p;
        wr->out_cap = cap;
    }
    memcpy(wr->out + wr->out_len, data, n);
    wr->out_len += n;
}

static void flush_mem(png_structp png)
{
    (void)png;
}

/* Checks `info` and the sample values. */
static int check_encode_input(const struct l3_info *in, const void *pixels, size_t stride)
{
    if (in == NULL || pixels == NULL)
        return L3_ERR_INVALID_ARG;
    if (in->width == 0 || in->height == 0 || in->width > L3_MAX_DIM || in->height > L3_MAX_DIM)
        return L3_ERR_INVALID_ARG;
    unsigned d = in->bit_depth;
    static const uint8_t channels_of[5] = {1, 2, 3, 4, 1};
    if (in->color > L3_COLOR_PALETTE || in->channels != channels_of[in->color])
        return L3_ERR_INVALID_ARG;
    if (d != 1 && d != 2 && d != 4 && d != 8 && d != 16)
        return L3_ERR_INVALID_ARG;
    if ((in->color == L3_COLOR_GRAY_ALPHA || in->color == L3_COLOR_RGB ||
         in->color == L3_COLOR_RGBA) && d < 8)
        return L3_ERR_INVALID_ARG;
    if (in->color == L3_COLOR_PALETTE &&
        (d == 16 || in->palette_len < 1 || in->palette_len > 256 ||
         in->palette_len > (1u << d) || in->palette_alpha_len > in->palette_len))
        return L3_ERR_INVALID_ARG;
    if (in->has_trns_key) {
        if (in->color != L3_COLOR_GRAY && in->color != L3_COLOR_RGB)
            return L3_ERR_INVALID_ARG;
        unsigned maxv = d == 16 ? 65535u : (1u << d) - 1u;
        for (int c = 0; c < (in->color == L3_COLOR_GRAY ? 1 : 3); c++)
            if (in->trns_key[c] > maxv)
                return L3_ERR_INVALID_ARG;
    }
    size_t row = (size_t)in->width * in->channels * (d == 16 ? 2u : 1u);
    if (stride == 0)
        stride = row;
    if (stride < row)
        return L3_ERR_INVALID_ARG;
    if (d < 8 || in->color == L3_COLOR_PALETTE) {
        unsigned lim = in->color == L3_COLOR_PALETTE ? in->palette_len : (1u << d);
        const unsigned char *p = pixels;
        for (uint32_t y = 0; y < in->height; y++, p += stride)
            for (size_t x = 0; x < row; x++)
                if (p[x] >= lim)
                    return L3_ERR_INVALID_ARG;
    }
    return L3_OK;
}

static int write_body(struct png_wr *wr)
{
    if (setjmp(png_jmpbuf(wr->png)))
        return wr->status != L3_OK ? wr->status : L3_ERR_PNG;

    const struct l3_info *in = wr->in;
    static const int ctype_of[5] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                    PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA,
                                    PNG_COLOR_TYPE_PALETTE};
    png_set_write_fn(wr->png, wr, write_mem, flush_mem);
    png_set_IHDR(wr->png, wr->info, in->width, in->height, in->bit_depth, ctype_of[in->color],
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (in->color == L3_COLOR_PALETTE) {
        png_color pal[256];
        png_byte alpha[256];
        for (unsigned i = 0; i < in->palette_len; i++) {
            pal[i].red = in->palette[i][0];
            pal[i].green = in->palette[i][1];
            pal[i].blue = in->palette[i][2];
            alpha[i] = in->palette[i][3];
        }
        png_set_PLTE(wr->png, wr->info, pal, in->palette_len);
        if (in->palette_alpha_len > 0)
            png_set_tRNS(wr->png, wr->info, alpha, in->palette_alpha_len, NULL);
    } else if (in->has_trns_key) {
        png_color_16 key;
        memset(&key, 0, sizeof key);
        if (in->color == L3_COLOR_GRAY) {
            key.gray = in->trns_key[0];
        } else {
            key.red = in->trns_key[0];
            key.green = in->trns_key[1];
            key.blue = in->trns_key[2];
        }
        png_set_tRNS(wr->png, wr->info, NULL, 0, &key);
    }
    png_write_info(wr->png, wr->info);
    if (in->bit_depth < 8)
        png_set_packing(wr->png);
    if (in->bit_depth == 16 && host_is_little_endian())
        png_set_swap(wr->png);

    wr->rows = malloc(sizeof(png_bytep) * in->height);
    if (wr->rows == NULL) {
        wr->status = L3_ERR_NOMEM;
        png_error(wr->png, "out of memory");
    }
    /* libpng transforms a copy of each row; the caller's pixels stay const. */
    for (uint32_t y = 0; y < in->height; y++)
        wr->rows[y] = (png_bytep)(uintptr_t)(wr->pixels + (size_t)y * wr->stride);
    png_write_image(wr->png, wr->rows);
    png_write_end(wr->png, NULL);
    return L3_OK;
}

int l3_png_encode(const struct l3_info *info, const void *pixels, size_t stride,
                  void **png_ret, size_t *png_size_ret)
{
    if (png_ret == NULL)
        return L3_ERR_INVALID_ARG;
    *png_ret = NULL;
    if (png_size_ret)
        *png_size_ret = 0;
    int st = check_encode_input(info, pixels, stride);
    if (st != L3_OK)
        return st;
    struct png_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.in = info;
    wr.pixels = pixels;
    wr.stride = stride ? stride
                       : (size_t)info->width * info->channels * (info->bit_depth == 16 ? 2u : 1u);
    wr.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, error_longjmp, silent_warning);
    if (wr.png == NULL)
        return L3_ERR_NOMEM;
    wr.info = png_create_info_struct(wr.png);
    if (wr.info == NULL) {
        png_destroy_write_struct(&wr.png, NULL);
        return L3_ERR_NOMEM;
    }
    st = write_body(&wr);
    png_destroy_write_struct(&wr.png, &wr.info);
    free(wr.rows);
    if (st != L3_OK) {
        free(wr.out);
        return st;
    }
    *png_ret = wr.out;
    if (png_size_ret)
        *png_size_ret = wr.out_len;
    return L3_OK;
}
