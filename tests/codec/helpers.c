/* helpers.c — deterministic image generators and checks for the codec tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "l3_tile.h"

static const uint8_t channels_of[] = {1, 2, 3, 4, 1};

void th_info(struct l3_info *info, unsigned color, unsigned depth, uint32_t w, uint32_t h)
{
    memset(info, 0, sizeof *info);
    info->width = w;
    info->height = h;
    info->color = (uint8_t)color;
    info->channels = channels_of[color];
    info->bit_depth = (uint8_t)depth;
    if (color == L3_COLOR_PALETTE) {
        unsigned n = 1u << depth;
        if (n > 200)
            n = 200; /* not a power of two: indices must stay below it */
        info->palette_len = (uint16_t)n;
        info->palette_alpha_len = (uint16_t)(n / 2);
        for (unsigned i = 0; i < n; i++) {
            info->palette[i][0] = (uint8_t)(i * 7);
            info->palette[i][1] = (uint8_t)(i * 13);
            info->palette[i][2] = (uint8_t)(i * 29);
            info->palette[i][3] = i < n / 2 ? (uint8_t)(i * 3) : 255;
        }
    }
}

void *th_image(const struct l3_info *info, enum th_pattern pat, uint64_t seed,
               size_t *size_ret)
{
    size_t n = (size_t)info->width * info->height * info->channels;
    size_t sb = info->bit_depth > 8 ? 2 : 1;
    uint8_t *px = malloc(n * sb + 1);
    uint32_t maxv = info->color == L3_COLOR_PALETTE ? info->palette_len - 1u
                                                    : (1u << info->bit_depth) - 1;
    uint64_t s = seed * 2654435761u + 1;
    uint32_t flat = (uint32_t)(tc_splitmix64(&s) % (maxv + 1));
    for (uint32_t y = 0; y < info->height; y++)
        for (uint32_t x = 0; x < info->width; x++)
            for (unsigned c = 0; c < info->channels; c++) {
                uint32_t v;
                switch (pat) {
                case TH_NOISE: v = (uint32_t)(tc_splitmix64(&s) % (maxv + 1)); break;
                case TH_GRADIENT:
                    v = (uint32_t)(((uint64_t)(x * 3 + y * 2 + c * 50) * (maxv + 1)) /
                                   (3u * info->width + 2u * info->height + 200)) % (maxv + 1);
                    break;
                case TH_FLAT: v = flat; break;
                case TH_MAX: v = maxv; break;
                default: { /* flat areas, gradients, noise blocks */
                    uint32_t blk = ((x / 23) + (y / 17) * 3) % 4;
                    if (blk == 0) v = flat;
                    else if (blk == 1) v = (x + y * 5 + c) % (maxv + 1);
                    else if (blk == 2) v = (uint32_t)(tc_splitmix64(&s) % (maxv + 1));
                    else v = (x * x + y) % (maxv + 1);
                } break;
                }
                size_t i = ((size_t)y * info->width + x) * info->channels + c;
                if (sb == 2)
                    ((uint16_t *)px)[i] = (uint16_t)v;
                else
                    px[i] = (uint8_t)v;
            }
    if (size_ret)
        *size_ret = n * sb;
    return px;
}

int th_roundtrip(const struct l3_info *info, const void *px,
                 const struct l3_encode_options *eo, unsigned threads, char *msg,
                 size_t msglen, void **out_ret, size_t *out_size_ret)
{
    void *l3 = NULL;
    size_t n = 0;
    int st = l3_encode(info, px, 0, eo, &l3, &n);
    if (st) {
        snprintf(msg, msglen, "encode: %s", l3_strerror(st));
        return 1;
    }
    struct l3_info ri;
    size_t need = 1;
    st = l3_read_info(l3, n, &ri, &need);
    if (st || need != 0 || ri.width != info->width || ri.height != info->height ||
        ri.color != info->color || ri.channels != info->channels ||
        ri.bit_depth != info->bit_depth || ri.palette_len != info->palette_len ||
        ri.palette_alpha_len != info->palette_alpha_len ||
        ri.has_trns_key != info->has_trns_key ||
        memcmp(ri.trns_key, info->trns_key, sizeof ri.trns_key) ||
        memcmp(ri.palette, info->palette, 4u * info->palette_len)) {
        snprintf(msg, msglen, "read_info mismatch (%s)", l3_strerror(st));
        l3_free(l3);
        return 2;
    }
    st = l3_verify(l3, n);
    if (st) {
        snprintf(msg, msglen, "verify: %s", l3_strerror(st));
        l3_free(l3);
        return 3;
    }
    size_t raw = l3_decoded_size(info, 0);
    for (int pass = 0; pass < 2; pass++) {
        struct l3_decode_options o = {0};
        o.threads = pass ? threads : 1;
        o.flags = pass ? L3_DECODE_VERIFY : 0;
        void *dec = NULL;
        size_t dn = 0;
        st = l3_decode_alloc(l3, n, &o, &dec, &dn, NULL);
        if (st || dn != raw || memcmp(dec, px, raw)) {
            snprintf(msg, msglen, "decode pass %d: %s%s", pass, l3_strerror(st),
                     st ? "" : " (pixels differ)");
            free(dec);
            l3_free(l3);
            return 4;
        }
        free(dec);
    }
    if (out_ret)
        *out_ret = l3;
    else
        l3_free(l3);
    if (out_size_ret)
        *out_size_ret = n;
    return 0;
}

int th_encode(const struct l3_info *info, const void *px, uint32_t tile, int effort,
              void **out_ret, size_t *n_ret)
{
    struct l3_encode_options eo = {0};
    eo.tile_width = eo.tile_height = tile;
    eo.effort = effort;
    *out_ret = NULL;
    return l3_encode(info, px, 0, &eo, out_ret, n_ret);
}

int th_plane_modes(const void *l3, size_t n, unsigned counts[256])
{
    struct l3_layout lay;
    if (l3_read_layout(l3, n, NULL, &lay, NULL) != L3_OK)
        return -1;
    const uint8_t *d = l3;
    for (uint32_t t = 0; t < lay.tile_count; t++) {
        uint64_t b, e;
        l3_tile_span(d + lay.table_offset, t, &b, &e);
        struct l3_tile_header th;
        if (l3_tile_parse(d + lay.header_size + b, (size_t)(e - b), lay.planes, &th) != L3_OK)
            return -1;
        for (unsigned p = 0; p < lay.planes; p++)
            counts[th.mode[p] & 0xffu]++;
    }
    return 0;
}

const uint8_t *th_tile(const void *l3, size_t n, uint32_t t, struct l3_tile_header *th)
{
    struct l3_layout lay;
    if (l3_read_layout(l3, n, NULL, &lay, NULL) != L3_OK || t >= lay.tile_count)
        return NULL;
    const uint8_t *d = l3;
    uint64_t b, e;
    l3_tile_span(d + lay.table_offset, t, &b, &e);
    const uint8_t *tile = d + lay.header_size + b;
    return l3_tile_parse(tile, (size_t)(e - b), lay.planes, th) == L3_OK ? tile : NULL;
}

unsigned th_lz_planes(const unsigned counts[256], unsigned kind)
{
    unsigned s = 0;
    for (unsigned m = 0; m < 256; m++)
        if ((m & L3_PLANE_LZ) && (!kind || L3_PLANE_KIND(m) == kind))
            s += counts[m];
    return s;
}

uint8_t *th_all_modes_image(void)
{
    uint8_t *px = malloc(128 * 64 * 3);
    uint64_t s = 99;
    for (uint32_t y = 0; y < 64; y++)
        for (uint32_t x = 0; x < 128; x++)
            for (int c = 0; c < 3; c++) {
                uint8_t v;
                if (x < 64 && y < 32) /* period-2 dither on a ramp */
                    v = (uint8_t)(x + y + (((x ^ y) & 1) ? 40 : 0));
                else if (x >= 64 && y < 32) /* sparse dots on flat */
                    v = (tc_splitmix64(&s) % 23 == 0) ? 200 : 10;
                else if (x < 64) /* smooth ramp + small noise */
                    v = (uint8_t)(x * 2 + y + tc_splitmix64(&s) % 3);
                else /* noise */
                    v = (uint8_t)tc_splitmix64(&s);
                px[(y * 128 + x) * 3 + c] = (uint8_t)(v + c * 7);
            }
    return px;
}

void *th_lz_image(const struct l3_info *info, uint64_t seed)
{
    const unsigned C = info->channels, sb = info->bit_depth > 8 ? 2 : 1;
    const uint32_t maxv = info->color == L3_COLOR_PALETTE ? info->palette_len - 1u
                                                          : (1u << info->bit_depth) - 1;
    uint32_t tex[8][8][4];
    uint64_t s = seed;
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 8; x++)
            for (unsigned c = 0; c < C; c++)
                tex[y][x][c] = (uint32_t)(tc_splitmix64(&s) % (maxv + 1));
    uint8_t *px = malloc((size_t)info->width * info->height * C * sb);
    for (uint32_t y = 0; y < info->height; y++)
        for (uint32_t x = 0; x < info->width; x++)
            for (unsigned c = 0; c < C; c++) {
                uint32_t v = (x / 8 * 5 + y / 8 * 3) % 16 == 7 ? (uint32_t)(tc_splitmix64(&s) % (maxv + 1))
                                                        : tex[y % 8][x % 8][c];
                size_t i = ((size_t)y * info->width + x) * C + c;
                if (sb == 2)
                    ((uint16_t *)px)[i] = (uint16_t)v;
                else
                    px[i] = (uint8_t)v;
            }
    return px;
}

void th_kind_image(int which, uint8_t *px)
{
    uint64_t s = 5;
    uint8_t tex[8][8], amp[32], row[32];
    for (int i = 0; i < 64; i++)
        tex[i / 8][i % 8] = (uint8_t)(tc_splitmix64(&s) % 4);
    for (int i = 0; i < 32; i++) {
        amp[i] = (uint8_t)(40 + tc_splitmix64(&s) % 100);
        row[i] = (uint8_t)(tc_splitmix64(&s) % 60);
    }
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 64; x++) {
            int v;
            if (which == 0) { /* bottom half repeats the top half */
                int yy = y % 16;
                v = (x & 1) ? 200 - x * 3 / 2 - yy * 2 : 20 + x + yy * 3 + x * x / 64;
            } else if (which == 1) {
                v = tex[y % 8][x % 8] + x * x / 16 + y * y / 24;
            } else {
                v = row[y] + ((x & 1) ? amp[y] : 0) + x * x / 16;
            }
            px[y * 64 + x] = (uint8_t)v;
        }
}
