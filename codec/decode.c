/* decode.c — CPU decoder entry points: validates the file, then has
 * dec_tiles.c decode the tiles (optionally on several threads) and writes
 * them into the caller's image (or hands them to the caller's sink). */
#include <stdlib.h>
#include <string.h>

#include "l3_xxh.h"
#include "l3_internal.h"

/* Shared by decode and verify. out == NULL: check framing only. */
static int run(const uint8_t *data, size_t size, const struct l3_hdr *hdr, uint32_t flags,
               uint8_t *out, size_t stride, unsigned threads, size_t mem_left)
{
    struct l3_store s = {out, stride, l3_row_bytes(&hdr->info)};
    return l3_dec_tiles(data, size, hdr, flags, threads, mem_left, out ? l3_store_tile : NULL,
                        &s);
}

/* Header + whole-file checks common to decode and verify. */
static int open_file(const void *data, size_t size, struct l3_hdr *hdr)
{
    if (!data)
        return L3_ERR_INVALID_ARG;
    if (size == 0)
        return L3_ERR_TRUNCATED;
    int st = l3_parse_header(data, size, hdr, NULL);
    if (st)
        return st;
    uint64_t total = (uint64_t)hdr->layout.header_size + hdr->layout.payload_size;
    if (size < total)
        return L3_ERR_TRUNCATED;
    if (size > total)
        return L3_ERR_CORRUPT; /* trailing bytes */
    return L3_OK;
}

static int check_payload(const uint8_t *data, const struct l3_hdr *hdr)
{
    if (XXH3_64bits(data + hdr->layout.header_size, (size_t)hdr->layout.payload_size) !=
        hdr->layout.payload_hash)
        return L3_ERR_PAYLOAD_CHECKSUM;
    return L3_OK;
}

int l3_verify(const void *data, size_t size)
{
    struct l3_hdr hdr;
    int st = open_file(data, size, &hdr);
    if (st)
        return st;
    st = check_payload(data, &hdr);
    if (st)
        return st;
    return run(data, size, &hdr, 0, NULL, 0, 1, L3_DEFAULT_MAX_MEMORY);
}

/* What l3_decode and l3_decode_alloc check first: options, header, pixel limit. */
static int prepare(const void *data, size_t size, const struct l3_decode_options *opts,
                   struct l3_hdr *hdr, size_t *max_memory)
{
    if (opts && (opts->flags & ~(L3_DECODE_VERIFY | L3_DECODE_SCALAR | L3_DECODE_NO_AVX512)))
        return L3_ERR_INVALID_ARG;
    int st = open_file(data, size, hdr);
    if (st)
        return st;
    uint64_t max_pixels;
    l3_limits_resolve(opts ? &opts->limits : NULL, &max_pixels, max_memory);
    if ((uint64_t)hdr->info.width * hdr->info.height > max_pixels)
        return L3_ERR_LIMIT;
    return L3_OK;
}

int l3_decode(const void *data, size_t size, void *out, size_t out_size,
              size_t stride, const struct l3_decode_options *opts)
{
    if (!out)
        return L3_ERR_INVALID_ARG;
    struct l3_hdr hdr;
    size_t max_memory;
    int st = prepare(data, size, opts, &hdr, &max_memory);
    if (st)
        return st;
    size_t row = l3_row_bytes(&hdr.info);
    if (stride == 0)
        stride = row;
    if (stride < row)
        return L3_ERR_BUFFER_TOO_SMALL;
    /* 16-bit samples are stored as uint16_t: rows must stay 2-byte aligned */
    if (l3_sample_bytes(&hdr.info) == 2 && ((stride & 1) || ((uintptr_t)out & 1)))
        return L3_ERR_INVALID_ARG;
    size_t need = l3_decoded_size(&hdr.info, stride);
    if (need == 0 || out_size < need)
        return L3_ERR_BUFFER_TOO_SMALL;
    if (opts && (opts->flags & L3_DECODE_VERIFY)) {
        st = check_payload(data, &hdr);
        if (st)
            return st;
    }
    return run(data, size, &hdr, opts ? opts->flags : 0, out, stride, opts ? opts->threads : 1,
               max_memory);
}

int l3_decode_alloc(const void *data, size_t size, const struct l3_decode_options *opts,
                    void **pixels_ret, size_t *pixels_size_ret, struct l3_info *info_ret)
{
    if (!pixels_ret)
        return L3_ERR_INVALID_ARG;
    *pixels_ret = NULL;
    if (pixels_size_ret)
        *pixels_size_ret = 0;
    struct l3_hdr hdr;
    size_t max_memory;
    int st = prepare(data, size, opts, &hdr, &max_memory);
    if (st)
        return st;
    size_t need = l3_decoded_size(&hdr.info, 0);
    if (need == 0 || need > max_memory)
        return L3_ERR_LIMIT;
    if (opts && (opts->flags & L3_DECODE_VERIFY)) {
        st = check_payload(data, &hdr);
        if (st)
            return st;
    }
    void *px = malloc(need);
    if (!px)
        return L3_ERR_NOMEM;
    st = run(data, size, &hdr, opts ? opts->flags : 0, px, l3_row_bytes(&hdr.info),
             opts ? opts->threads : 1, max_memory - need);
    if (st) {
        free(px);
        return st;
    }
    *pixels_ret = px;
    if (pixels_size_ret)
        *pixels_size_ret = need;
    if (info_ret)
        *info_ret = hdr.info;
    return L3_OK;
}

int l3_decode_tiles(const void *data, size_t size, const struct l3_decode_options *opts,
                    l3_tile_sink sink, void *arg)
{
    if (!sink)
        return L3_ERR_INVALID_ARG;
    struct l3_hdr hdr;
    size_t max_memory;
    int st = prepare(data, size, opts, &hdr, &max_memory);
    if (st)
        return st;
    if (opts && (opts->flags & L3_DECODE_VERIFY)) {
        st = check_payload(data, &hdr);
        if (st)
            return st;
    }
    return l3_dec_tiles(data, size, &hdr, opts ? opts->flags : 0, opts ? opts->threads : 1,
                        max_memory, sink, arg);
}
