/* png_fixture.h — what the PNG tests of libl3 share (png_fixture.c): the
 * corpus and its listing, generated PNGs of every colour type, depth and
 * interlace method, the checks of one PNG against libpng's own decode
 * (png_ref.c), and byte-level tools for hostile files. For Criterion test
 * files only (the helpers assert). */
#ifndef L3_TEST_PNG_FIXTURE_H
#define L3_TEST_PNG_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <png.h>

#include "l3.h"
#include "png_ref.h"

#if defined(__SANITIZE_ADDRESS__)
#define PT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PT_ASAN 1
#endif
#endif
#ifndef PT_ASAN
#define PT_ASAN 0
#endif

/* The formats and sizes the generated-image tests go through. */
static const struct {
    int ctype, depth;
} gen_formats[] = {
    {PNG_COLOR_TYPE_GRAY, 1}, {PNG_COLOR_TYPE_GRAY, 2}, {PNG_COLOR_TYPE_GRAY, 4},
    {PNG_COLOR_TYPE_GRAY, 8}, {PNG_COLOR_TYPE_GRAY, 16}, {PNG_COLOR_TYPE_GRAY_ALPHA, 8},
    {PNG_COLOR_TYPE_GRAY_ALPHA, 16}, {PNG_COLOR_TYPE_RGB, 8}, {PNG_COLOR_TYPE_RGB, 16},
    {PNG_COLOR_TYPE_RGB_ALPHA, 8}, {PNG_COLOR_TYPE_RGB_ALPHA, 16}, {PNG_COLOR_TYPE_PALETTE, 1},
    {PNG_COLOR_TYPE_PALETTE, 2}, {PNG_COLOR_TYPE_PALETTE, 4}, {PNG_COLOR_TYPE_PALETTE, 8},
};

static const struct {
    uint32_t w, h;
} gen_sizes[] = {{1, 1}, {1, 37}, {37, 1}, {65, 33}, {4097, 3}};

/* Formats a test went through, both interlace methods each. */
struct format_seen {
    unsigned char seen[7][17][2];
};

const char *pt_corpus_dir(void);

/* Sorted list of *.png in dir; NULL when the directory does not exist. */
char **pt_list_png(const char *dir, size_t *n_ret);

void pt_free_list(char **v, size_t n);

/* Reference decoder and writer: png_ref.h. The writer must work. */
unsigned char *gen_write(const struct gen_desc *g, const unsigned char *px, size_t *n_ret);

/* PNG's CRC-32 (ISO 3309), to forge chunks with valid checksums. */
uint32_t pt_crc32(const unsigned char *p, size_t n);

/* Pixels: a mix of smooth gradients, flat runs and noise, within range. */
unsigned char *gen_pixels(const struct gen_desc *g, size_t *size_ret);

/* The description l3 gives must match libpng's view of the file. */
void check_info(const char *name, const struct l3_info *i, const struct ref_img *r);

void check_same_desc(const char *name, const char *what, const struct l3_info *a,
                     const struct l3_info *b);

size_t first_diff(const unsigned char *a, const unsigned char *b, size_t n);

/* What check_png goes through besides l3_png_decode against libpng: */
#define CHECK_PNG_REENCODE 0x1 /* l3_png_encode, decoded again by libpng */
#define CHECK_L3 0x2           /* PNG -> L3 -> pixels */
#define CHECK_L3_VARIANTS 0x4  /* the same with 2 threads and a padded stride */

/* The whole chain for one PNG. Returns 1 when checked, 0 when libpng itself
 * refuses the file (the caller decides whether that is acceptable). */
int check_png(const char *name, const unsigned char *png, size_t n, unsigned what);

void format_saw(struct format_seen *f, int ctype, int depth, int interlace);

/* Every format PNG allows was covered, progressive and Adam7. */
void format_assert_all(const struct format_seen *f, const char *test);

void gen_setup(struct gen_desc *g, int ctype, int depth, uint32_t w, uint32_t h,
               int interlace, int variant);

/* An 8-bit RGB PNG of generated pixels. */
unsigned char *rgb8_png(uint32_t w, uint32_t h, int interlace, size_t *n_ret);

unsigned char *small_png(size_t *n_ret, int interlace);

/* Big-endian 32-bit fields of a PNG. */
void put32(unsigned char *p, uint32_t v);
uint32_t get32(const unsigned char *p);

/* Recomputes the CRC of the chunk whose length field is at p. */
void fix_crc(unsigned char *p);

unsigned char *find_chunk(unsigned char *png, size_t n, const char *type);

int tmpfile_with(const void *d, size_t n, char *path, size_t pathlen);

#endif
