/* l3.c — header layout, validation, shared helpers of the L3 format core. */
#include <stdlib.h>
#include <string.h>

#include "l3_xxh.h"
#include "l3_internal.h"

const char *l3_strerror(int status)
{
    switch (status) {
    case L3_OK: return "success";
    case L3_ERR_INVALID_ARG: return "invalid argument";
    case L3_ERR_NOMEM: return "out of memory";
    case L3_ERR_TRUNCATED: return "input is truncated";
    case L3_ERR_BAD_MAGIC: return "not an L3 file";
    case L3_ERR_VERSION: return "unsupported L3 format version";
    case L3_ERR_BAD_HEADER: return "invalid L3 header";
    case L3_ERR_HEADER_CHECKSUM: return "L3 header checksum mismatch";
    case L3_ERR_PAYLOAD_CHECKSUM: return "L3 payload checksum mismatch";
    case L3_ERR_CORRUPT: return "corrupt L3 tile data";
    case L3_ERR_LIMIT: return "image exceeds the pixel or memory limit";
    case L3_ERR_BUFFER_TOO_SMALL: return "output buffer or stride too small";
    case L3_ERR_PNG: return "corrupt or truncated PNG";
    case L3_ERR_IO: return "read or write failed";
    case L3_ERR_UNSUPPORTED: return "unsupported input";
    case L3_ERR_THREAD: return "could not start worker threads";
    default: return "unknown status";
    }
}

void l3_free(void *p) { free(p); }

void l3_encode_options_canonical(const struct l3_encode_options *opts,
                                 struct l3_encode_options *canon_ret)
{
    struct l3_encode_options c;
    memset(&c, 0, sizeof c);
    c.tile_width = opts && opts->tile_width ? opts->tile_width : L3_DEFAULT_TILE;
    c.tile_height = opts && opts->tile_height ? opts->tile_height : L3_DEFAULT_TILE;
    /* encode.c reads effort only as "< 0" (no LZ planes) and ">= 2" (exact
     * parameter search, LZ tried everywhere) */
    int e = opts ? opts->effort : 0;
    c.effort = e < 0 ? -1 : e >= 2 ? 2 : 0;
    *canon_ret = c;
}

size_t l3_sample_bytes(const struct l3_info *info)
{
    if (!info)
        return 0;
    return info->bit_depth > 8 ? 2 : 1;
}

size_t l3_row_bytes(const struct l3_info *info)
{
    if (!info)
        return 0;
    return (size_t)info->width * info->channels * l3_sample_bytes(info);
}

size_t l3_decoded_size(const struct l3_info *info, size_t stride)
{
    if (!info || info->height == 0)
        return 0;
    size_t row = l3_row_bytes(info);
    if (stride == 0)
        stride = row;
    if (stride < row)
        return 0;
    /* overflow-safe: (h-1)*stride + row */
    uint64_t h1 = info->height - 1u;
    if (stride && h1 > (SIZE_MAX - row) / stride)
        return 0;
    return (size_t)h1 * stride + row;
}

static int depth_ok(unsigned color, unsigned depth)
{
    switch (color) {
    case L3_COLOR_GRAY:
        return depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
    case L3_COLOR_PALETTE:
        return depth == 1 || depth == 2 || depth == 4 || depth == 8;
    case L3_COLOR_GRAY_ALPHA:
    case L3_COLOR_RGB:
    case L3_COLOR_RGBA:
        return depth == 8 || depth == 16;
    default:
        return 0;
    }
}

int l3_check_info(const struct l3_info *info)
{
    if (info->width < 1 || info->width > L3_MAX_DIM || info->height < 1 ||
        info->height > L3_MAX_DIM)
        return L3_ERR_BAD_HEADER;
    if (info->color > L3_COLOR_PALETTE || info->channels != l3_planes(info->color))
        return L3_ERR_BAD_HEADER;
    if (!depth_ok(info->color, info->bit_depth))
        return L3_ERR_BAD_HEADER;
    uint32_t maxv = (1u << info->bit_depth) - 1;
    if (info->has_trns_key > 1)
        return L3_ERR_BAD_HEADER;
    if (info->has_trns_key) {
        if (info->color == L3_COLOR_GRAY) {
            if (info->trns_key[0] > maxv || info->trns_key[1] || info->trns_key[2])
                return L3_ERR_BAD_HEADER;
        } else if (info->color == L3_COLOR_RGB) {
            for (int i = 0; i < 3; i++)
                if (info->trns_key[i] > maxv)
                    return L3_ERR_BAD_HEADER;
        } else {
            return L3_ERR_BAD_HEADER;
        }
    } else if (info->trns_key[0] || info->trns_key[1] || info->trns_key[2]) {
        return L3_ERR_BAD_HEADER;
    }
    if (info->color == L3_COLOR_PALETTE) {
        if (info->palette_len < 1 || info->palette_len > 256 ||
            info->palette_alpha_len > info->palette_len)
            return L3_ERR_BAD_HEADER;
        for (unsigned i = info->palette_alpha_len; i < info->palette_len; i++)
            if (info->palette[i][3] != 255)
                return L3_ERR_BAD_HEADER;
    } else if (info->palette_len || info->palette_alpha_len) {
        return L3_ERR_BAD_HEADER;
    }
    return L3_OK;
}

int l3_geometry(const struct l3_info *info, uint32_t tw, uint32_t th,
                uint64_t *tiles_ret, uint64_t *header_size_ret)
{
    if (tw < 1 || th < 1 || tw > L3_MAX_TILE_DIM || th > L3_MAX_TILE_DIM ||
        tw * th > L3_MAX_TILE_AREA)
        return L3_ERR_BAD_HEADER;
    uint64_t tx = (info->width + (uint64_t)tw - 1) / tw;
    uint64_t ty = (info->height + (uint64_t)th - 1) / th;
    uint64_t tiles = tx * ty;
    if (tiles > UINT32_MAX)
        return L3_ERR_BAD_HEADER;
    uint64_t pal = info->color == L3_COLOR_PALETTE ? 4u * info->palette_len : 0;
    *tiles_ret = tiles;
    *header_size_ret = L3_FIXED_HEADER + pal + 8 * tiles + 8;
    return L3_OK;
}

uint64_t l3_plane_max_bytes(uint32_t w, uint32_t h, unsigned depth)
{
    uint64_t raw = ((uint64_t)w * h * depth + 7) / 8;
    return raw < 2 ? 2 : raw;
}

void l3_limits_resolve(const struct l3_limits *in, uint64_t *max_pixels,
                       size_t *max_memory)
{
    *max_pixels = in && in->max_pixels ? in->max_pixels : L3_DEFAULT_MAX_PIXELS;
    *max_memory = in && in->max_memory ? in->max_memory : L3_DEFAULT_MAX_MEMORY;
}

int l3_parse_header(const uint8_t *d, size_t size, struct l3_hdr *hdr,
                    size_t *needed_ret)
{
    if (needed_ret)
        *needed_ret = 0;
    /* magic: reject as soon as the available prefix differs */
    size_t m = size < 4 ? size : 4;
    if (memcmp(d, L3_MAGIC, m) != 0)
        return L3_ERR_BAD_MAGIC;
    if (size < L3_FIXED_HEADER) {
        if (size > L3_OFF_VERSION && d[L3_OFF_VERSION] != L3_FORMAT_VERSION)
            return L3_ERR_VERSION;
        if (needed_ret)
            *needed_ret = L3_FIXED_HEADER;
        return L3_ERR_TRUNCATED;
    }
    if (d[L3_OFF_VERSION] != L3_FORMAT_VERSION)
        return L3_ERR_VERSION;

    struct l3_info *info = &hdr->info;
    memset(hdr, 0, sizeof *hdr);
    info->color = d[L3_OFF_COLOR];
    info->channels = d[L3_OFF_CHANNELS];
    info->bit_depth = d[L3_OFF_DEPTH];
    info->width = l3_rd_u32le(d + L3_OFF_WIDTH);
    info->height = l3_rd_u32le(d + L3_OFF_HEIGHT);
    uint32_t tw = l3_rd_u16le(d + L3_OFF_TILE_W);
    uint32_t th = l3_rd_u16le(d + L3_OFF_TILE_H);
    unsigned flags = d[L3_OFF_FLAGS];
    if (flags & ~L3_HDR_FLAG_TRNS || d[L3_OFF_CODING] != 0)
        return L3_ERR_BAD_HEADER;
    info->has_trns_key = flags & L3_HDR_FLAG_TRNS;
    info->palette_len = (uint16_t)l3_rd_u16le(d + L3_OFF_PAL_LEN);
    info->palette_alpha_len = (uint16_t)l3_rd_u16le(d + L3_OFF_PAL_ALPHA_LEN);
    for (int i = 0; i < 3; i++)
        info->trns_key[i] = (uint16_t)l3_rd_u16le(d + L3_OFF_TRNS + 2 * i);
    /* palette entries are checked after the header checksum; only the
     * counts here */
    if (info->color == L3_COLOR_PALETTE) {
        if (info->palette_len < 1 || info->palette_len > 256 ||
            info->palette_alpha_len > info->palette_len)
            return L3_ERR_BAD_HEADER;
    }
    /* everything but the palette alpha rule */
    uint16_t pl = info->palette_len;
    if (info->color == L3_COLOR_PALETTE) {
        for (unsigned i = 0; i < pl; i++)
            info->palette[i][3] = 255;
    }
    int st = l3_check_info(info);
    if (st)
        return st;
    uint64_t tiles, hsize;
    st = l3_geometry(info, tw, th, &tiles, &hsize);
    if (st)
        return st;
    uint64_t payload_size = l3_rd_u64le(d + L3_OFF_PAYLOAD_SIZE);
    unsigned planes = info->channels;
    uint64_t min_tile = L3_TILE_HEADER_BYTES(planes) + planes;
    uint64_t max_tile = L3_TILE_HEADER_BYTES(planes) +
                        (uint64_t)planes * l3_plane_max_bytes(tw, th, info->bit_depth);
    if (payload_size < tiles * min_tile || payload_size > tiles * max_tile)
        return L3_ERR_BAD_HEADER;
    if (hsize > SIZE_MAX || payload_size > SIZE_MAX - hsize)
        return L3_ERR_LIMIT;
    if (size < hsize) {
        if (needed_ret)
            *needed_ret = (size_t)hsize;
        return L3_ERR_TRUNCATED;
    }
    uint64_t want = l3_rd_u64le(d + hsize - 8);
    if (XXH3_64bits(d, (size_t)(hsize - 8)) != want)
        return L3_ERR_HEADER_CHECKSUM;

    /* palette */
    const uint8_t *pal = d + L3_FIXED_HEADER;
    for (unsigned i = 0; i < pl; i++)
        for (int c = 0; c < 4; c++)
            info->palette[i][c] = pal[4 * i + c];
    st = l3_check_info(info);
    if (st)
        return st;

    /* tile table */
    const uint8_t *table = pal + (info->color == L3_COLOR_PALETTE ? 4u * pl : 0);
    uint64_t prev = 0;
    for (uint64_t i = 0; i < tiles; i++) {
        uint64_t end = l3_rd_u64le(table + 8 * i);
        if (end < prev || end - prev < min_tile || end - prev > max_tile)
            return L3_ERR_BAD_HEADER;
        prev = end;
    }
    if (prev != payload_size)
        return L3_ERR_BAD_HEADER;

    info->tile_width = tw;
    info->tile_height = th;
    info->tiles_x = (info->width + tw - 1) / tw;
    info->tiles_y = (info->height + th - 1) / th;
    hdr->layout.header_size = (size_t)hsize;
    hdr->layout.table_offset = (size_t)(table - d);
    hdr->layout.payload_size = payload_size;
    hdr->layout.payload_hash = l3_rd_u64le(d + L3_OFF_PAYLOAD_HASH);
    hdr->layout.tile_count = (uint32_t)tiles;
    hdr->layout.planes = planes;
    hdr->table = table;
    return L3_OK;
}

void l3_write_header(uint8_t *d, const struct l3_info *info,
                     const struct l3_layout *layout)
{
    memset(d, 0, L3_FIXED_HEADER);
    memcpy(d, L3_MAGIC, 4);
    d[L3_OFF_VERSION] = L3_FORMAT_VERSION;
    d[L3_OFF_COLOR] = info->color;
    d[L3_OFF_CHANNELS] = info->channels;
    d[L3_OFF_DEPTH] = info->bit_depth;
    l3_wr_u32le(d + L3_OFF_WIDTH, info->width);
    l3_wr_u32le(d + L3_OFF_HEIGHT, info->height);
    l3_wr_u16le(d + L3_OFF_TILE_W, info->tile_width);
    l3_wr_u16le(d + L3_OFF_TILE_H, info->tile_height);
    d[L3_OFF_FLAGS] = info->has_trns_key ? L3_HDR_FLAG_TRNS : 0;
    d[L3_OFF_CODING] = 0;
    l3_wr_u16le(d + L3_OFF_PAL_LEN, info->palette_len);
    l3_wr_u16le(d + L3_OFF_PAL_ALPHA_LEN, info->palette_alpha_len);
    for (int i = 0; i < 3; i++)
        l3_wr_u16le(d + L3_OFF_TRNS + 2 * i, info->trns_key[i]);
    l3_wr_u64le(d + L3_OFF_PAYLOAD_SIZE, layout->payload_size);
    l3_wr_u64le(d + L3_OFF_PAYLOAD_HASH, layout->payload_hash);
    if (info->color == L3_COLOR_PALETTE)
        for (unsigned i = 0; i < info->palette_len; i++)
            for (int c = 0; c < 4; c++)
                d[L3_FIXED_HEADER + 4 * i + c] = info->palette[i][c];
    size_t hs = layout->header_size;
    l3_wr_u64le(d + hs - 8, XXH3_64bits(d, hs - 8));
}

int l3_read_layout(const void *data, size_t size, struct l3_info *info_ret,
                   struct l3_layout *layout_ret, size_t *needed_ret)
{
    if (needed_ret)
        *needed_ret = 0;
    if (!data)
        return L3_ERR_INVALID_ARG;
    if (size == 0) {
        if (needed_ret)
            *needed_ret = L3_FIXED_HEADER;
        return L3_ERR_TRUNCATED;
    }
    struct l3_hdr hdr;
    int st = l3_parse_header(data, size, &hdr, needed_ret);
    if (st)
        return st;
    if (info_ret)
        *info_ret = hdr.info;
    if (layout_ret)
        *layout_ret = hdr.layout;
    return L3_OK;
}

int l3_read_info(const void *data, size_t size, struct l3_info *info_ret,
                 size_t *needed_ret)
{
    return l3_read_layout(data, size, info_ret, NULL, needed_ret);
}
