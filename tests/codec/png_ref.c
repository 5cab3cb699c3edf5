/* png_ref.c — the tests' libpng reader and writer (png_ref.h). */
#include "png_ref.h"

#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

int ref_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

struct ref_src {
    const unsigned char *d;
    size_t n, pos;
};

static void ref_read(png_structp png, png_bytep out, size_t n)
{
    struct ref_src *s = png_get_io_ptr(png);
    if (n > s->n - s->pos)
        png_error(png, "eof");
    memcpy(out, s->d + s->pos, n);
    s->pos += n;
}

static void ref_error(png_structp png, png_const_charp m)
{
    (void)m;
    png_longjmp(png, 1);
}

static void ref_warn(png_structp png, png_const_charp m)
{
    (void)png;
    (void)m;
}

static int ref_decode_inner(png_structp png, png_infop info, int ihdr_depth, struct ref_img *r)
{
    if (setjmp(png_jmpbuf(png)))
        return -1;
    int tf = PNG_TRANSFORM_PACKING | (ref_little_endian() ? PNG_TRANSFORM_SWAP_ENDIAN : 0);
    png_read_png(png, info, tf, NULL);
    r->w = png_get_image_width(png, info);
    r->h = png_get_image_height(png, info);
    r->ctype = png_get_color_type(png, info);
    /* After png_read_png the info reports the transformed (unpacked) depth;
     * the file's depth is IHDR's byte 24. */
    r->depth = ihdr_depth;
    r->channels = png_get_channels(png, info);
    r->row = (size_t)r->w * r->channels * (png_get_bit_depth(png, info) == 16 ? 2 : 1);
    r->size = r->row * r->h;
    r->px = malloc(r->size ? r->size : 1);
    png_bytepp rows = png_get_rows(png, info);
    for (uint32_t y = 0; y < r->h; y++)
        memcpy(r->px + y * r->row, rows[y], r->row);
    png_colorp pal;
    if (png_get_PLTE(png, info, &pal, &r->npal))
        memcpy(r->pal, pal, sizeof(png_color) * (size_t)r->npal);
    png_bytep tr;
    png_color_16p key;
    int nt = 0;
    if (png_get_tRNS(png, info, &tr, &nt, &key)) {
        if (r->ctype == PNG_COLOR_TYPE_PALETTE) {
            r->ntrans = nt;
            memcpy(r->trans, tr, (size_t)nt);
        } else {
            r->has_key = 1;
            r->key = *key;
        }
    }
    return 0;
}

int ref_decode(const void *d, size_t n, struct ref_img *r)
{
    memset(r, 0, sizeof *r);
    struct ref_src s = {d, n, 0};
    const int ihdr_depth = n > 24 ? ((const unsigned char *)d)[24] : 0;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, ref_error, ref_warn);
    png_infop info = png_create_info_struct(png);
    png_set_read_fn(png, &s, ref_read);
    int rc = ref_decode_inner(png, info, ihdr_depth, r);
    png_destroy_read_struct(&png, &info, NULL);
    return rc;
}

void ref_free(struct ref_img *r)
{
    free(r->px);
    r->px = NULL;
}


struct wbuf {
    unsigned char *d;
    size_t n, cap;
};

static void wbuf_write(png_structp png, png_bytep d, size_t n)
{
    struct wbuf *b = png_get_io_ptr(png);
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->d = realloc(b->d, b->cap);
    }
    memcpy(b->d + b->n, d, n);
    b->n += n;
}

static void wbuf_flush(png_structp png)
{
    (void)png;
}


static int gen_write_inner(png_structp png, png_infop info, const struct gen_desc *g,
                           const unsigned char *px)
{
    if (setjmp(png_jmpbuf(png)))
        return -1;
    png_set_IHDR(png, info, g->w, g->h, g->depth, g->ctype,
                 g->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (g->ctype == PNG_COLOR_TYPE_PALETTE)
        png_set_PLTE(png, info, g->pal, g->npal);
    if (g->ntrans)
        png_set_tRNS(png, info, g->trans, g->ntrans, NULL);
    if (g->has_key)
        png_set_tRNS(png, info, NULL, 0, &g->key);
#ifdef PNG_CHECK_FOR_INVALID_INDEX_SUPPORTED
    png_set_check_for_invalid_index(png, -1);
#endif
    png_write_info(png, info);
    if (g->depth < 8)
        png_set_packing(png);
    if (g->depth == 16 && ref_little_endian())
        png_set_swap(png);
    int passes = png_set_interlace_handling(png);
    int ch = png_get_channels(png, info);
    size_t row = (size_t)g->w * ch * (g->depth == 16 ? 2 : 1);
    for (int p = 0; p < passes; p++)
        for (uint32_t y = 0; y < g->h; y++)
            png_write_row(png, px + y * row);
    png_write_end(png, info);
    return 0;
}

unsigned char *ref_write(const struct gen_desc *g, const unsigned char *px, size_t *n_ret)
{
    struct wbuf b = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, ref_error, ref_warn);
    png_infop info = png_create_info_struct(png);
    png_set_write_fn(png, &b, wbuf_write, wbuf_flush);
    int rc = gen_write_inner(png, info, g, px);
    png_destroy_write_struct(&png, &info);
    if (rc != 0) {
        free(b.d);
        return NULL;
    }
    *n_ret = b.n;
    return b.d;
}
