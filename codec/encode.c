/* encode.c — the L3 encoder: l3_encode and its streaming form (l3_enc_begin,
 * l3_enc_tile, l3_enc_finish): limits, buffers and workers, then the file
 * assembled from the tiles. One tile is encoded by enc_tile.c. */
#include <stdlib.h>
#include <string.h>

#include "l3_xxh.h"
#include "enc_lz.h"
#include "enc_simd.h"
#include "enc_tile.h"
#include "l3_internal.h"

struct l3_enc {
    struct l3_info info;
    struct enc e;
    uint8_t *buf; /* header + tile slots */
    uint64_t tiles, hsize;
    unsigned threads;
};

void l3_enc_free(struct l3_enc *x)
{
    if (x == NULL)
        return;
    free(x->e.scratch);
    free(x->e.wbuf);
    free(x->e.lzs);
    free(x->e.lzmem);
    free(x->e.tile_bytes);
    free(x->buf);
    free(x);
}

int l3_enc_begin(const struct l3_info *info_in, const void *pixels, size_t stride,
                 const struct l3_encode_options *opts, struct l3_enc **enc_ret)
{
    if (!info_in || !pixels || !enc_ret)
        return L3_ERR_INVALID_ARG;
    *enc_ret = NULL;
    struct l3_info info = *info_in;
    if (l3_check_info(&info))
        return L3_ERR_INVALID_ARG;
    uint32_t tw = opts && opts->tile_width ? opts->tile_width : L3_DEFAULT_TILE;
    uint32_t th = opts && opts->tile_height ? opts->tile_height : L3_DEFAULT_TILE;
    uint64_t tiles, hsize;
    if (l3_geometry(&info, tw, th, &tiles, &hsize))
        return L3_ERR_INVALID_ARG;
    info.tile_width = tw;
    info.tile_height = th;
    info.tiles_x = (info.width + tw - 1) / tw;
    info.tiles_y = (info.height + th - 1) / th;
    if (info.color != L3_COLOR_PALETTE)
        memset(info.palette, 0, sizeof info.palette);
    size_t row = l3_row_bytes(&info);
    if (stride == 0)
        stride = row;
    if (stride < row)
        return L3_ERR_INVALID_ARG;
    if (stride % l3_sample_bytes(&info))
        return L3_ERR_INVALID_ARG;

    uint64_t max_pixels;
    size_t max_memory;
    l3_limits_resolve(opts ? &opts->limits : NULL, &max_pixels, &max_memory);
    if ((uint64_t)info.width * info.height > max_pixels)
        return L3_ERR_LIMIT;

    unsigned threads = l3_thread_count(opts ? opts->threads : 1, tiles);
    const unsigned P = info.channels;
    size_t area = (size_t)tw * th;
    size_t scratch_per = l3_tile_scratch_elems(tw, th);
    uint64_t slot = L3_TILE_HEADER_BYTES(P) + (uint64_t)P * l3_plane_max_bytes(tw, th,
                                                                                 info.bit_depth);
    /* memory: header + slots, tile sizes, scratch */
    uint64_t mem = hsize + slot * tiles + 8 * tiles + (uint64_t)scratch_per * 2 * threads;
    if (mem > max_memory || mem > SIZE_MAX)
        return L3_ERR_LIMIT;
    size_t wbuf_per = l3_tile_stream_bytes(tw, th, info.bit_depth);
    unsigned hash_bits;
    size_t lz_per = l3_lz_words(area, &hash_bits);
    mem += (uint64_t)wbuf_per * L3_TILE_STREAM_BUFS * threads + (uint64_t)lz_per * 4 * threads;
    if (mem > max_memory || mem > SIZE_MAX)
        return L3_ERR_LIMIT;

    struct l3_enc *x = calloc(1, sizeof *x);
    if (x == NULL)
        return L3_ERR_NOMEM;
    x->info = info;
    x->tiles = tiles;
    x->hsize = hsize;
    x->threads = threads;
    struct enc *e = &x->e;
    e->info = &x->info;
    e->pixels = pixels;
    e->stride = stride;
    e->planes = P;
    e->slot_size = (size_t)slot;
    e->area = area;
    e->scratch_per = scratch_per;
    e->exact = opts && opts->effort >= 2;
    e->simd = l3_enc_simd_available();
    e->grad_bias = e->exact ? 0 : 3;
    e->short_bias = e->exact ? 0 : 1;
    e->wbuf_per = wbuf_per;
    e->lz = !(opts && opts->effort < 0);
    e->lz_bias = 2;
    x->buf = malloc((size_t)(hsize + slot * tiles));
    e->wbuf = malloc(e->wbuf_per * L3_TILE_STREAM_BUFS * threads);
    e->lzs = calloc(threads, sizeof *e->lzs);
    e->lzmem = malloc(lz_per * 4 * threads);
    if (e->lzs && e->lzmem)
        for (unsigned i = 0; i < threads; i++) {
            l3_lz_init(&e->lzs[i], e->lzmem + lz_per * i, area, hash_bits);
            e->lzs[i].simd = e->simd;
        }
    e->tile_bytes = malloc(8 * (size_t)tiles);
    e->scratch = malloc(scratch_per * 2 * threads);
    if (!x->buf || !e->tile_bytes || !e->scratch || !e->wbuf || !e->lzs || !e->lzmem) {
        l3_enc_free(x);
        return L3_ERR_NOMEM;
    }
    e->slots = x->buf + hsize;
    *enc_ret = x;
    return L3_OK;
}

void l3_enc_use_portable(struct l3_enc *x)
{
    x->e.simd = 0;
    for (unsigned i = 0; i < x->threads; i++)
        x->e.lzs[i].simd = 0;
}

const struct l3_info *l3_enc_info(const struct l3_enc *x)
{
    return &x->info;
}

unsigned l3_enc_threads(const struct l3_enc *x)
{
    return x->threads;
}

uint64_t l3_enc_tiles(const struct l3_enc *x)
{
    return x->tiles;
}

int l3_enc_tile(struct l3_enc *x, unsigned worker, uint64_t t)
{
    if (worker >= x->threads || t >= x->tiles)
        return L3_ERR_INVALID_ARG;
    return l3_encode_tile(&x->e, worker, t);
}

static int enc_tile_fn(void *arg, unsigned worker, uint64_t t)
{
    struct l3_enc *x = arg;
    return l3_encode_tile(&x->e, worker, t);
}

int l3_enc_finish(struct l3_enc *x, void **out_ret, size_t *size_ret)
{
    struct enc *e = &x->e;
    const struct l3_info *info = &x->info;
    const uint64_t tiles = x->tiles, hsize = x->hsize;
    uint8_t *buf = x->buf;
    free(e->scratch);
    e->scratch = NULL;
    free(e->wbuf);
    e->wbuf = NULL;
    free(e->lzs);
    e->lzs = NULL;
    free(e->lzmem);
    e->lzmem = NULL;
    /* compact the tiles behind the header, fill the table */
    struct l3_layout lay;
    memset(&lay, 0, sizeof lay);
    lay.header_size = (size_t)hsize;
    lay.table_offset = L3_FIXED_HEADER +
                       (info->color == L3_COLOR_PALETTE ? 4u * info->palette_len : 0);
    lay.tile_count = (uint32_t)tiles;
    lay.planes = e->planes;
    uint64_t end = 0;
    for (uint64_t t = 0; t < tiles; t++) {
        memmove(buf + hsize + end, e->slots + e->slot_size * t, (size_t)e->tile_bytes[t]);
        end += e->tile_bytes[t];
        l3_wr_u64le(buf + lay.table_offset + 8 * t, end);
    }
    lay.payload_size = end;
    lay.payload_hash = XXH3_64bits(buf + hsize, (size_t)end);
    l3_write_header(buf, info, &lay);
    size_t total = (size_t)(hsize + end);
    uint8_t *shrunk = realloc(buf, total);
    x->buf = NULL;
    *out_ret = shrunk ? shrunk : buf;
    if (size_ret)
        *size_ret = total;
    return L3_OK;
}

int l3_encode(const struct l3_info *info_in, const void *pixels, size_t stride,
              const struct l3_encode_options *opts, void **out_ret, size_t *size_ret)
{
    if (!info_in || !pixels || !out_ret)
        return L3_ERR_INVALID_ARG;
    *out_ret = NULL;
    if (size_ret)
        *size_ret = 0;
    struct l3_enc *x;
    int st = l3_enc_begin(info_in, pixels, stride, opts, &x);
    if (st)
        return st;
    st = l3_parallel_tiles(x->tiles, x->threads, enc_tile_fn, x);
    if (st == L3_OK)
        st = l3_enc_finish(x, out_ret, size_ret);
    l3_enc_free(x);
    return st;
}
