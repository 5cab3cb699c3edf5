/* png.c — the PNG side of libl3: PNG <-> pixels with libpng.
 *
 * PNG -> L3 transcoding (which reads through the row reader below) is in
 * transcode.c, writing PNGs (l3_png_encode) in png_write.c.
 *
 * Pixels are exactly the samples libpng gives for the file with no colour
 * transform: sub-byte samples unpacked to one byte each (values kept), 16-bit
 * samples converted from PNG big-endian to native uint16_t, palette images as
 * indices with their palette, interlaced images de-interlaced.
 *
 * Errors from libpng are caught with setjmp/longjmp (libpng's classic API);
 * nothing is printed. State touched between setjmp and longjmp lives in a
 * context struct reached through a pointer, never in automatic variables.
 */
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
#include <unistd.h>

static const unsigned char png_signature[8] = {137, 80, 78, 71, 13, 10, 26, 10};

/* PNG's own limit on a dimension (2^31 - 1). */
#define PNG_DIM_MAX 0x7fffffffu
/* Largest ancillary chunk libpng may allocate (iCCP, zTXt, ...), and how many
 * ancillary chunks it keeps: guards against chunk bombs. Neither affects the
 * pixels. */
#define PNG_CHUNK_MALLOC_MAX (8u << 20)
#define PNG_CHUNK_CACHE_MAX 1000u
/* Bytes read from an fd at a time. */
#define FD_BUFFER_SIZE 65536

int l3_is_png(const void *data, size_t size)
{
    return data != NULL && size >= sizeof png_signature &&
           memcmp(data, png_signature, sizeof png_signature) == 0;
}

/* ---------------------------------------------------------------- reading */

struct png_src {
    /* memory source */
    const unsigned char *data;
    size_t size, pos;
    /* fd source (fd >= 0) */
    int fd;
    unsigned char *buf;
    size_t buf_len, buf_pos;
    int io_errno; /* set when read() failed: reported as L3_ERR_IO */
};

struct png_rd {
    png_structp png;
    png_infop info;
    struct png_src src;
    struct l3_limits limits;
    int status;            /* set before png_error / after a longjmp */
    struct l3_info out_info;
    unsigned char *pixels; /* malloc'd output */
    size_t pixels_size;
    png_bytep *rows;
};

static void read_mem(png_structp png, png_bytep out, size_t n)
{
    struct png_rd *rd = png_get_io_ptr(png);
    struct png_src *s = &rd->src;
    if (n > s->size - s->pos) {
        rd->status = L3_ERR_PNG;
        png_error(png, "truncated");
    }
    memcpy(out, s->data + s->pos, n);
    s->pos += n;
}

static void read_fd(png_structp png, png_bytep out, size_t n)
{
    struct png_rd *rd = png_get_io_ptr(png);
    struct png_src *s = &rd->src;
    while (n > 0) {
        if (s->buf_pos == s->buf_len) {
            ssize_t r;
            do {
                r = read(s->fd, s->buf, FD_BUFFER_SIZE);
            } while (r < 0 && errno == EINTR);
            if (r < 0) {
                s->io_errno = errno;
                rd->status = L3_ERR_IO;
                png_error(png, "read failed");
            }
            if (r == 0) {
                rd->status = L3_ERR_PNG;
                png_error(png, "truncated");
            }
            s->buf_len = (size_t)r;
            s->buf_pos = 0;
        }
        size_t k = s->buf_len - s->buf_pos;
        if (k > n)
            k = n;
        memcpy(out, s->buf + s->buf_pos, k);
        s->buf_pos += k;
        out += k;
        n -= k;
    }
}

/* Fills rd->out_info from IHDR/PLTE/tRNS and checks the limits. Returns a
 * status; never calls png_error itself. */
static int describe(struct png_rd *rd)
{
    png_structp png = rd->png;
    png_infop info = rd->info;
    png_uint_32 w, h;
    int depth, ctype, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);

    struct l3_info *o = &rd->out_info;
    memset(o, 0, sizeof *o);
    if (w == 0 || h == 0)
        return L3_ERR_PNG;
    if (w > L3_MAX_DIM || h > L3_MAX_DIM)
        return L3_ERR_LIMIT;
    o->width = w;
    o->height = h;
    o->bit_depth = (uint8_t)depth;
    switch (ctype) {
    case PNG_COLOR_TYPE_GRAY: o->color = L3_COLOR_GRAY; o->channels = 1; break;
    case PNG_COLOR_TYPE_GRAY_ALPHA: o->color = L3_COLOR_GRAY_ALPHA; o->channels = 2; break;
    case PNG_COLOR_TYPE_RGB: o->color = L3_COLOR_RGB; o->channels = 3; break;
    case PNG_COLOR_TYPE_RGB_ALPHA: o->color = L3_COLOR_RGBA; o->channels = 4; break;
    case PNG_COLOR_TYPE_PALETTE: o->color = L3_COLOR_PALETTE; o->channels = 1; break;
    default: return L3_ERR_PNG;
    }
    if (depth != 1 && depth != 2 && depth != 4 && depth != 8 && depth != 16)
        return L3_ERR_PNG;

    /* Limits, from IHDR alone, before any pixel memory exists. */
    uint64_t max_pixels = rd->limits.max_pixels ? rd->limits.max_pixels : L3_DEFAULT_MAX_PIXELS;
    size_t max_memory = rd->limits.max_memory ? rd->limits.max_memory : L3_DEFAULT_MAX_MEMORY;
    uint64_t pixels = (uint64_t)w * h;
    if (pixels > max_pixels)
        return L3_ERR_LIMIT;
    uint64_t sample_bytes = depth == 16 ? 2 : 1;
    uint64_t out_bytes = pixels * o->channels * sample_bytes;
    /* libpng's own row buffers: about two rows of the widest (filtered) form. */
    uint64_t png_rowbytes = ((uint64_t)w * o->channels * (uint64_t)depth + 7) / 8 + 1;
    uint64_t need = out_bytes + (uint64_t)h * sizeof(png_bytep) + 2 * png_rowbytes +
                    (uint64_t)w * o->channels * sample_bytes;
    if (need > max_memory || out_bytes > SIZE_MAX / 2)
        return L3_ERR_LIMIT;

    if (ctype == PNG_COLOR_TYPE_PALETTE) {
        png_colorp pal = NULL;
        int npal = 0;
        if (!png_get_PLTE(png, info, &pal, &npal) || npal < 1 || npal > 256)
            return L3_ERR_PNG;
        o->palette_len = (uint16_t)npal;
        for (int i = 0; i < npal; i++) {
            o->palette[i][0] = pal[i].red;
            o->palette[i][1] = pal[i].green;
            o->palette[i][2] = pal[i].blue;
            o->palette[i][3] = 255;
        }
        png_bytep alpha = NULL;
        int nalpha = 0;
        if (png_get_tRNS(png, info, &alpha, &nalpha, NULL) && alpha != NULL && nalpha > 0) {
            if (nalpha > npal)
                nalpha = npal;
            o->palette_alpha_len = (uint16_t)nalpha;
            for (int i = 0; i < nalpha; i++)
                o->palette[i][3] = alpha[i];
        }
    } else if (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_RGB) {
        png_color_16p key = NULL;
        if (png_get_tRNS(png, info, NULL, NULL, &key) && key != NULL) {
            /* libpng keeps a key that does not fit the bit depth (it only
             * warns) and refuses to write one; such a key can match no pixel,
             * so it is dropped. */
            unsigned maxv = (1u << depth) - 1u;
            if (ctype == PNG_COLOR_TYPE_GRAY) {
                o->trns_key[0] = key->gray;
            } else {
                o->trns_key[0] = key->red;
                o->trns_key[1] = key->green;
                o->trns_key[2] = key->blue;
            }
            int fits = 1;
            for (int c = 0; c < (ctype == PNG_COLOR_TYPE_GRAY ? 1 : 3); c++)
                if (o->trns_key[c] > maxv)
                    fits = 0;
            if (fits)
                o->has_trns_key = 1;
            else
                memset(o->trns_key, 0, sizeof o->trns_key);
        }
    }
    o->tile_width = o->tile_height = 0;
    o->tiles_x = o->tiles_y = 0;
    return L3_OK;
}

/* Sets up libpng, reads the header chunks, checks the limits and sets the
 * transforms (may longjmp: own setjmp). Returns a status. */
static int read_start(struct png_rd *rd)
{
    if (setjmp(png_jmpbuf(rd->png)))
        return rd->status != L3_OK ? rd->status : L3_ERR_PNG;

    png_set_user_limits(rd->png, PNG_DIM_MAX, PNG_DIM_MAX);
    png_set_chunk_cache_max(rd->png, PNG_CHUNK_CACHE_MAX);
    png_set_chunk_malloc_max(rd->png, PNG_CHUNK_MALLOC_MAX);
    /* Text and profile chunks play no part in the samples: skip them. */
    static const png_byte skip[] = "iCCP\0iTXt\0sPLT\0tEXt\0zTXt\0eXIf\0";
    png_set_keep_unknown_chunks(rd->png, PNG_HANDLE_CHUNK_NEVER, skip,
                                (int)(sizeof skip / 5));

    png_read_info(rd->png, rd->info);
    int st = describe(rd);
    if (st != L3_OK)
        return st;

    const struct l3_info *o = &rd->out_info;
    if (o->bit_depth < 8)
        png_set_packing(rd->png);
    if (o->bit_depth == 16 && host_is_little_endian())
        png_set_swap(rd->png);
    (void)png_set_interlace_handling(rd->png);
    png_read_update_info(rd->png, rd->info);

    size_t row = (size_t)o->width * o->channels * (o->bit_depth == 16 ? 2u : 1u);
    if (png_get_rowbytes(rd->png, rd->info) != row)
        return L3_ERR_PNG; /* unexpected libpng layout: refuse, do not overrun */
    return L3_OK;
}

/* Reads every row of the image (any interlacing) into rows[]. */
static int read_image(struct png_rd *rd, png_bytep *rows)
{
    if (setjmp(png_jmpbuf(rd->png)))
        return rd->status != L3_OK ? rd->status : L3_ERR_PNG;
    png_read_image(rd->png, rows);
    return L3_OK;
}

/* Reads the next n rows of a non-interlaced image. */
static int read_rows(struct png_rd *rd, png_bytep *rows, uint32_t n)
{
    if (setjmp(png_jmpbuf(rd->png)))
        return rd->status != L3_OK ? rd->status : L3_ERR_PNG;
    png_read_rows(rd->png, rows, NULL, n);
    return L3_OK;
}

/* Reads the chunks after the image data. */
static int read_end(struct png_rd *rd)
{
    if (setjmp(png_jmpbuf(rd->png)))
        return rd->status != L3_OK ? rd->status : L3_ERR_PNG;
    png_read_end(rd->png, NULL);
    return L3_OK;
}

/* An index past the palette decodes (libpng only warns). Keep the indices and
 * extend the palette with opaque black so that the image stays
 * self-consistent and encodable. */
static void palette_fixup(struct l3_info *w, const unsigned char *pixels, size_t size)
{
    if (w->color != L3_COLOR_PALETTE)
        return;
    unsigned maxi = 0;
    for (size_t i = 0; i < size; i++)
        if (pixels[i] > maxi)
            maxi = pixels[i];
    while (w->palette_len <= maxi) {
        w->palette[w->palette_len][0] = 0;
        w->palette[w->palette_len][1] = 0;
        w->palette[w->palette_len][2] = 0;
        w->palette[w->palette_len][3] = 255;
        w->palette_len++;
    }
}

/* Everything after creating the libpng structs. Returns a status. */
static int read_body(struct png_rd *rd)
{
    int st = read_start(rd);
    if (st != L3_OK)
        return st;
    const struct l3_info *o = &rd->out_info;
    size_t row = (size_t)o->width * o->channels * (o->bit_depth == 16 ? 2u : 1u);
    rd->pixels_size = row * o->height;
    rd->pixels = malloc(rd->pixels_size);
    rd->rows = malloc(sizeof(png_bytep) * o->height);
    if (rd->pixels == NULL || rd->rows == NULL)
        return L3_ERR_NOMEM;
    for (uint32_t y = 0; y < o->height; y++)
        rd->rows[y] = rd->pixels + (size_t)y * row;
    st = read_image(rd, rd->rows);
    if (st == L3_OK)
        st = read_end(rd);
    if (st != L3_OK)
        return st;
    palette_fixup(&rd->out_info, rd->pixels, rd->pixels_size);
    return L3_OK;
}

/* Creates the libpng structs for rd (source already set). */
static int read_create(struct png_rd *rd, const struct l3_limits *limits)
{
    if (limits)
        rd->limits = *limits;
    rd->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, error_longjmp, silent_warning);
    if (rd->png == NULL)
        return L3_ERR_NOMEM;
    rd->info = png_create_info_struct(rd->png);
    if (rd->info == NULL) {
        png_destroy_read_struct(&rd->png, NULL, NULL);
        return L3_ERR_NOMEM;
    }
    if (rd->src.fd >= 0)
        png_set_read_fn(rd->png, rd, read_fd);
    else
        png_set_read_fn(rd->png, rd, read_mem);
    return L3_OK;
}

static int png_read_run(struct png_rd *rd, const struct l3_limits *limits,
                        struct l3_info *info_ret, void **pixels_ret,
                        size_t *pixels_size_ret)
{
    int st = read_create(rd, limits);
    if (st != L3_OK)
        return st;
    st = read_body(rd);
    png_destroy_read_struct(&rd->png, &rd->info, NULL);
    free(rd->rows);
    rd->rows = NULL;
    if (st != L3_OK) {
        free(rd->pixels);
        rd->pixels = NULL;
        return st;
    }
    if (info_ret)
        *info_ret = rd->out_info;
    *pixels_ret = rd->pixels;
    if (pixels_size_ret)
        *pixels_size_ret = rd->pixels_size;
    rd->pixels = NULL;
    return L3_OK;
}

int l3_png_decode(const void *png, size_t png_size, const struct l3_limits *limits,
                  struct l3_info *info_ret, void **pixels_ret, size_t *pixels_size_ret)
{
    if (pixels_ret == NULL || (png == NULL && png_size != 0))
        return L3_ERR_INVALID_ARG;
    *pixels_ret = NULL;
    if (pixels_size_ret)
        *pixels_size_ret = 0;
    if (!l3_is_png(png, png_size))
        return L3_ERR_PNG;
    struct png_rd rd;
    memset(&rd, 0, sizeof rd);
    rd.src.data = png;
    rd.src.size = png_size;
    rd.src.fd = -1;
    return png_read_run(&rd, limits, info_ret, pixels_ret, pixels_size_ret);
}

/* Sets up an fd source: buffer, and the signature checked first so that a
 * non-PNG is reported as such. */
static int fd_source(struct png_rd *rd, int fd)
{
    rd->src.fd = fd;
    rd->src.buf = malloc(FD_BUFFER_SIZE);
    if (rd->src.buf == NULL)
        return L3_ERR_NOMEM;
    unsigned char sig[8];
    size_t got = 0;
    while (got < sizeof sig) {
        ssize_t r = read(fd, sig + got, sizeof sig - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return L3_ERR_IO;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    if (got < sizeof sig || !l3_is_png(sig, sizeof sig))
        return L3_ERR_PNG;
    memcpy(rd->src.buf, sig, sizeof sig);
    rd->src.buf_len = sizeof sig;
    rd->src.buf_pos = 0;
    return L3_OK;
}

int l3_png_decode_fd(int fd, const struct l3_limits *limits,
                     struct l3_info *info_ret, void **pixels_ret,
                     size_t *pixels_size_ret)
{
    if (pixels_ret == NULL)
        return L3_ERR_INVALID_ARG;
    *pixels_ret = NULL;
    if (pixels_size_ret)
        *pixels_size_ret = 0;
    if (fd < 0)
        return L3_ERR_IO;
    struct png_rd rd;
    memset(&rd, 0, sizeof rd);
    int st = fd_source(&rd, fd);
    if (st == L3_OK)
        st = png_read_run(&rd, limits, info_ret, pixels_ret, pixels_size_ret);
    free(rd.src.buf);
    return st;
}

/* ---------------------------------------------------------------- row reader
 * (l3_internal.h): the same reading, row by row, for the transcoder. */

struct l3_png_reader {
    struct png_rd rd;
    int interlaced;
};

int l3_png_reader_open(const void *png, size_t png_size, int fd,
                       const struct l3_limits *limits, struct l3_png_reader **reader_ret)
{
    *reader_ret = NULL;
    struct l3_png_reader *r = calloc(1, sizeof *r);
    if (r == NULL)
        return L3_ERR_NOMEM;
    int st;
    if (fd >= 0) {
        st = fd_source(&r->rd, fd);
    } else {
        r->rd.src.fd = -1;
        r->rd.src.data = png;
        r->rd.src.size = png_size;
        st = l3_is_png(png, png_size) ? L3_OK : L3_ERR_PNG;
    }
    if (st == L3_OK)
        st = read_create(&r->rd, limits);
    if (st == L3_OK)
        st = read_start(&r->rd);
    if (st != L3_OK) {
        l3_png_reader_close(r);
        return st;
    }
    r->interlaced = png_get_interlace_type(r->rd.png, r->rd.info) != PNG_INTERLACE_NONE;
    *reader_ret = r;
    return L3_OK;
}

const struct l3_info *l3_png_reader_info(const struct l3_png_reader *r)
{
    return &r->rd.out_info;
}

int l3_png_reader_interlaced(const struct l3_png_reader *r)
{
    return r->interlaced;
}

int l3_png_reader_rows(struct l3_png_reader *r, unsigned char **rows, uint32_t n)
{
    if (r->interlaced)
        return L3_ERR_INVALID_ARG;
    return read_rows(&r->rd, rows, n);
}

int l3_png_reader_image(struct l3_png_reader *r, unsigned char **rows)
{
    return read_image(&r->rd, rows);
}

int l3_png_reader_finish(struct l3_png_reader *r, const unsigned char *pixels, size_t size)
{
    int st = read_end(&r->rd);
    if (st == L3_OK && pixels != NULL)
        palette_fixup(&r->rd.out_info, pixels, size);
    return st;
}

void l3_png_reader_close(struct l3_png_reader *r)
{
    if (r == NULL)
        return;
    if (r->rd.png != NULL)
        png_destroy_read_struct(&r->rd.png, &r->rd.info, NULL);
    free(r->rd.src.buf);
    free(r);
}
