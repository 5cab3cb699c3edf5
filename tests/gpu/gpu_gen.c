/* gpu_gen.c — see gpu_gen.h. */
#include "gpu_gen.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

unsigned color_planes(unsigned color)
{
    static const unsigned p[] = {1, 2, 3, 4, 1};
    return p[color];
}

uint32_t gen_begin(struct gen *g, unsigned color, unsigned depth, uint32_t w, uint32_t h)
{
    memset(g, 0, sizeof *g);
    struct l3_info *f = &g->info;
    f->width = w;
    f->height = h;
    f->color = (uint8_t)color;
    f->channels = (uint8_t)color_planes(color);
    f->bit_depth = (uint8_t)depth;
    return depth == 16 ? 65535u : (1u << depth) - 1u;
}

void gen_pattern(struct gen *g, unsigned color, unsigned depth, uint32_t w, uint32_t h,
                 uint64_t seed, unsigned tile, int trns, int pattern, int effort)
{
    uint32_t maxv = gen_begin(g, color, depth, w, h);
    struct l3_info *f = &g->info;
    if (color == L3_COLOR_PALETTE) {
        f->palette_len = (uint16_t)(maxv + 1 < 200 ? maxv + 1 : 200);
        uint64_t s = seed ^ 77;
        for (unsigned i = 0; i < f->palette_len; i++)
            for (int k = 0; k < 4; k++)
                f->palette[i][k] = (uint8_t)(k == 3 ? (i % 3 ? 255 : tc_splitmix64(&s)) : tc_splitmix64(&s));
        f->palette_alpha_len = f->palette_len;
        maxv = f->palette_len - 1u;
    }
    unsigned C = f->channels;
    size_t sb = depth == 16 ? 2 : 1;
    g->px_size = (size_t)w * h * C * sb;
    g->px = malloc(g->px_size);
    cr_assert_not_null(g->px);
    uint64_t s = seed;
    uint32_t tex[8][8][4];
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 8; x++)
            for (unsigned c = 0; c < C; c++)
                tex[y][x][c] = pattern == 1 ? (uint32_t)(tc_splitmix64(&s) % (maxv + 1)) : 0;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (unsigned c = 0; c < C; c++) {
                uint32_t v;
                if (pattern == 1)
                    v = (x / 8 * 5 + y / 8 * 3) % 16 == 7 ? (uint32_t)(tc_splitmix64(&s) % (maxv + 1))
                                                          : tex[y % 8][x % 8][c];
                else if ((x / 8 + y / 8) % 3 == 0)
                    v = (uint32_t)(tc_splitmix64(&s) % (maxv + 1));
                else
                    v = (uint32_t)(((uint64_t)(x * 3 + y * 2 + c * 40) * maxv) / (3 * w + 2 * h + 160));
                if (v > maxv) v = maxv;
                size_t i = ((size_t)y * w + x) * C + c;
                if (sb == 2) ((uint16_t *)g->px)[i] = (uint16_t)v;
                else ((uint8_t *)g->px)[i] = (uint8_t)v;
            }
    if (trns && (color == L3_COLOR_GRAY || color == L3_COLOR_RGB)) {
        /* key = the colour of pixel (1, 1), so some pixels match */
        f->has_trns_key = 1;
        for (unsigned c = 0; c < C; c++) {
            size_t i = ((size_t)1 * w + 1) * C + c;
            f->trns_key[c] = sb == 2 ? ((uint16_t *)g->px)[i] : ((uint8_t *)g->px)[i];
        }
    }
    gen_encode(g, tile, effort);
}

void gen_image(struct gen *g, unsigned color, unsigned depth, uint32_t w, uint32_t h,
               uint64_t seed, unsigned tile, int trns)
{
    gen_pattern(g, color, depth, w, h, seed, tile, trns, 0, 0);
}

void gen_encode(struct gen *g, unsigned tile, int effort)
{
    struct l3_info *f = &g->info;
    struct l3_encode_options eo;
    memset(&eo, 0, sizeof eo);
    eo.tile_width = eo.tile_height = tile;
    eo.effort = effort;
    int st = l3_encode(f, g->px, 0, &eo, &g->l3, &g->l3_size);
    cr_assert_eq(st, L3_OK, "l3_encode(color %u depth %u %ux%u): %s", f->color, f->bit_depth,
                 f->width, f->height, l3_strerror(st));
    struct l3_info back;
    cr_assert_eq(l3_read_info(g->l3, g->l3_size, &back, NULL), L3_OK);
    g->info = back;
}

void gen_free(struct gen *g)
{
    free(g->px);
    l3_free(g->l3);
}

uint32_t src_sample(const struct gen *g, uint32_t x, uint32_t y, unsigned c)
{
    size_t i = ((size_t)y * g->info.width + x) * g->info.channels + c;
    return g->info.bit_depth == 16 ? ((const uint16_t *)g->px)[i] : ((const uint8_t *)g->px)[i];
}

const struct model MODELS[15] = {
    {L3_COLOR_GRAY, 1, 0},       {L3_COLOR_GRAY, 2, 1},  {L3_COLOR_GRAY, 4, 0},
    {L3_COLOR_GRAY, 8, 1},       {L3_COLOR_GRAY, 16, 0}, {L3_COLOR_GRAY_ALPHA, 8, 0},
    {L3_COLOR_GRAY_ALPHA, 16, 0}, {L3_COLOR_RGB, 8, 0},  {L3_COLOR_RGB, 8, 1},
    {L3_COLOR_RGB, 16, 1},       {L3_COLOR_RGBA, 8, 0},  {L3_COLOR_RGBA, 16, 0},
    {L3_COLOR_PALETTE, 1, 0},    {L3_COLOR_PALETTE, 4, 0}, {L3_COLOR_PALETTE, 8, 0},
};
const int CHANNELS[4] = {0, 1, 3, 4};
const float MEAN[4] = {0.485f, 0.456f, 0.406f, 0.5f};
const float STD[4] = {0.229f, 0.224f, 0.225f, 0.25f};
const float SCALE[4] = {1.0f, 1.0f, 255.0f, 2.0f};

void format_name(char *buf, size_t len, const struct gen *g, const struct l3gpu_format *f)
{
    static const char *dt[] = {"u8", "u16", "f32", "f16"};
    snprintf(buf, len, "color %u depth %u %ux%u -> %s %s ch%d%s", g->info.color,
             g->info.bit_depth, g->info.width, g->info.height,
             f->layout == L3GPU_HWC ? "HWC" : "CHW", dt[f->dtype], f->channels,
             f->normalize ? " norm" : "");
}
