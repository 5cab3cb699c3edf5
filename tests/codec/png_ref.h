/* png_ref.h — the tests' own libpng reader and writer (png_read_png and
 * png_write_row directly, not codec/png.c): the reference the codec is
 * compared with, and the maker of test PNGs. No test framework inside. */
#ifndef L3_TEST_PNG_REF_H
#define L3_TEST_PNG_REF_H

#include <png.h>
#include <stddef.h>
#include <stdint.h>

/* A PNG as libpng decodes it with PNG_TRANSFORM_PACKING (one byte per
 * sub-byte sample, values unscaled) and 16-bit samples in host order: the
 * layout l3_decode writes. Palette images stay indices. */
struct ref_img {
    uint32_t w, h;
    int ctype, depth, channels; /* depth: IHDR's */
    size_t row, size;
    unsigned char *px;
    int npal;
    png_color pal[256];
    int ntrans;
    png_byte trans[256];
    int has_key;
    png_color_16 key;
};

/* 0 when libpng decodes the buffer (into *r; ref_free it), -1 when it
 * refuses it. */
int ref_decode(const void *d, size_t n, struct ref_img *r);
void ref_free(struct ref_img *r);

/* What ref_write makes: IHDR fields, PLTE, tRNS (palette alpha or key). */
struct gen_desc {
    uint32_t w, h;
    int ctype, depth, interlace;
    int npal, ntrans;
    png_color pal[256];
    png_byte trans[256];
    int has_key;
    png_color_16 key;
};

/* A PNG from unpacked samples in host order (the ref_img layout), written
 * with libpng; malloc'd, its size into *n_ret. NULL when libpng fails. */
unsigned char *ref_write(const struct gen_desc *g, const unsigned char *px, size_t *n_ret);

/* 1 on a little-endian host. */
int ref_little_endian(void);

#endif
