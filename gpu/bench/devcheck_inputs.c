/* devcheck_inputs.c — the device check's inputs: images generated and
 * encoded on the spot (every colour model, depth, palette, tRNS, edge-tile
 * shape, LZ planes), photo-like images for timing, and real photos carried
 * pre-encoded with their reference hashes. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"

uint64_t dc_hash(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    uint64_t w = 0;
    for (size_t k = 0; i + k < n; k++)
        w |= (uint64_t)b[i + k] << (8 * k);
    return (h ^ w ^ n) * 0x100000001b3ull;
}

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static struct dc_image *add(struct dc_set *s)
{
    struct dc_image *v = realloc(s->v, (s->n + 1) * sizeof *v);
    if (!v)
        return NULL;
    s->v = v;
    memset(&v[s->n], 0, sizeof v[0]);
    return &v[s->n++];
}

/* Samples < 2^depth (palette: < palette_len): gradients, noise blocks, and
 * for pattern 1 a repeated 8x8 texture (LZ planes at effort 2). */
static int generate(struct dc_set *s, unsigned color, unsigned depth, int trns, uint32_t w,
                    uint32_t h, unsigned tile, int pattern, uint64_t seed)
{
    static const unsigned planes[] = {1, 2, 3, 4, 1};
    struct l3_info f;
    memset(&f, 0, sizeof f);
    f.width = w;
    f.height = h;
    f.color = (uint8_t)color;
    f.channels = (uint8_t)planes[color];
    f.bit_depth = (uint8_t)depth;
    uint32_t maxv = depth == 16 ? 65535u : (1u << depth) - 1u;
    uint64_t r = seed;
    if (color == L3_COLOR_PALETTE) {
        f.palette_len = (uint16_t)(maxv + 1 < 230 ? maxv + 1 : 230);
        for (unsigned i = 0; i < f.palette_len; i++)
            for (int k = 0; k < 4; k++)
                f.palette[i][k] = (uint8_t)(k == 3 && !trns ? 255 : mix(&r));
        f.palette_alpha_len = trns ? f.palette_len : 0;
        maxv = f.palette_len - 1u;
    }
    unsigned C = f.channels;
    size_t sb = depth == 16 ? 2 : 1;
    size_t n = (size_t)w * h * C;
    uint8_t *px = malloc(n * sb);
    if (!px)
        return -1;
    uint32_t tex[8][8][4];
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 8; x++)
            for (unsigned c = 0; c < 4; c++)
                tex[y][x][c] = (uint32_t)(mix(&r) % (maxv + 1));
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (unsigned c = 0; c < C; c++) {
                uint32_t v;
                if (pattern == 1)
                    v = (x / 8 + y / 8 * 3) % 11 == 5 ? (uint32_t)(mix(&r) % (maxv + 1))
                                                      : tex[y % 8][x % 8][c];
                else if ((x / 8 + y / 8) % 3 == 0)
                    v = (uint32_t)(mix(&r) % (maxv + 1));
                else
                    v = (uint32_t)(((uint64_t)(x * 3 + y * 2 + c * 40) * maxv) /
                                   (3 * (uint64_t)w + 2 * h + 160));
                size_t i = ((size_t)y * w + x) * C + c;
                if (sb == 2) {
                    uint16_t v16 = (uint16_t)v;
                    memcpy(px + 2 * i, &v16, 2);
                } else {
                    px[i] = (uint8_t)v;
                }
            }
    if (trns && (color == L3_COLOR_GRAY || color == L3_COLOR_RGB)) {
        f.has_trns_key = 1; /* the colour of pixel (1, 1) if it exists, so some match */
        size_t p = w > 1 && h > 1 ? (size_t)w + 1 : 0;
        for (unsigned c = 0; c < C; c++) {
            uint16_t v16 = 0;
            if (sb == 2)
                memcpy(&v16, px + 2 * (p * C + c), 2);
            else
                v16 = px[p * C + c];
            f.trns_key[c] = v16;
        }
    }
    struct l3_encode_options eo;
    memset(&eo, 0, sizeof eo);
    eo.tile_width = eo.tile_height = tile;
    eo.effort = pattern == 1 ? 2 : 0;
    eo.threads = 1;
    void *enc = NULL;
    size_t enc_size = 0;
    int st = l3_encode(&f, px, 0, &eo, &enc, &enc_size);
    struct dc_image *im = st ? NULL : add(s);
    if (!im) {
        free(px);
        l3_free(enc);
        fprintf(stderr, "devcheck: cannot generate colour %u depth %u %ux%u: %s\n", color, depth,
                w, h, st ? l3_strerror(st) : "out of memory");
        return -1;
    }
    static const char *cn[] = {"gray", "ga", "rgb", "rgba", "pal"};
    snprintf(im->name, sizeof im->name, "gen/%s%u%s-%ux%u-t%u%s", cn[color], depth,
             trns ? "-trns" : "", w, h, tile, pattern ? "-lz" : "");
    im->l3 = enc;
    im->size = enc_size;
    im->px = px;
    im->px_size = n * sb;
    return l3_read_info(enc, enc_size, &im->info, NULL) == L3_OK ? 0 : -1;
}

int dc_generate(struct dc_set *s)
{
    static const struct { unsigned color, depth; int trns; } models[] = {
        {L3_COLOR_GRAY, 1, 0},     {L3_COLOR_GRAY, 2, 1},      {L3_COLOR_GRAY, 4, 0},
        {L3_COLOR_GRAY, 8, 0},     {L3_COLOR_GRAY, 8, 1},      {L3_COLOR_GRAY, 16, 1},
        {L3_COLOR_GRAY_ALPHA, 8, 0}, {L3_COLOR_GRAY_ALPHA, 16, 0}, {L3_COLOR_RGB, 8, 0},
        {L3_COLOR_RGB, 8, 1},      {L3_COLOR_RGB, 16, 0},      {L3_COLOR_RGB, 16, 1},
        {L3_COLOR_RGBA, 8, 0},     {L3_COLOR_RGBA, 16, 0},     {L3_COLOR_PALETTE, 1, 0},
        {L3_COLOR_PALETTE, 2, 1},  {L3_COLOR_PALETTE, 4, 0},   {L3_COLOR_PALETTE, 8, 0},
        {L3_COLOR_PALETTE, 8, 1},
    };
    /* shapes: partial edge tiles in both directions, one pixel, one row, one
     * column, exact tiles, the default tile size with a thin image */
    static const struct { uint32_t w, h; unsigned tile; } shapes[] = {
        {70, 45, 32}, {1, 1, 32}, {33, 1, 16}, {1, 19, 8}, {64, 64, 32}, {300, 5, 0},
    };
    uint64_t seed = 1;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            if (generate(s, models[m].color, models[m].depth, models[m].trns, shapes[k].w,
                         shapes[k].h, shapes[k].tile, 0, seed++))
                return -1;
        if (generate(s, models[m].color, models[m].depth, models[m].trns, 70, 45, 32, 1, seed++))
            return -1;
    }
    return 0;
}

int dc_synth_photos(struct dc_set *s, unsigned n, uint32_t w, uint32_t h)
{
    for (unsigned i = 0; i < n; i++) {
        struct l3_info f;
        memset(&f, 0, sizeof f);
        f.width = w;
        f.height = h;
        f.color = L3_COLOR_RGB;
        f.channels = 3;
        f.bit_depth = 8;
        size_t bytes = (size_t)w * h * 3;
        uint8_t *px = malloc(bytes);
        if (!px)
            return -1;
        uint64_t r = 1000 + i;
        for (uint32_t y = 0; y < h; y++) /* smooth shading plus sensor-like noise */
            for (uint32_t x = 0; x < w; x++) {
                uint32_t noise = (uint32_t)(mix(&r) & 15);
                for (int c = 0; c < 3; c++) {
                    uint32_t v = (x * (3 + c + i) / 16 + y * (5 - c) / 8 + noise) & 255;
                    px[((size_t)y * w + x) * 3 + c] = (uint8_t)v;
                }
            }
        struct l3_encode_options eo;
        memset(&eo, 0, sizeof eo);
        void *enc = NULL;
        size_t enc_size = 0;
        int st = l3_encode(&f, px, 0, &eo, &enc, &enc_size);
        struct dc_image *im = st ? NULL : add(s);
        if (!im) {
            free(px);
            l3_free(enc);
            return -1;
        }
        snprintf(im->name, sizeof im->name, "synth/photo%u-%ux%u", i, w, h);
        im->l3 = enc;
        im->size = enc_size;
        im->px = px;
        im->px_size = bytes;
        if (l3_read_info(enc, enc_size, &im->info, NULL))
            return -1;
    }
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct dc_image *)a)->name, ((const struct dc_image *)b)->name);
}

int dc_load_photos(struct dc_set *s, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/l3/photos", dir);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || len > 80 || strcmp(e->d_name + len - 3, ".l3"))
            continue;
        char fp[4200];
        snprintf(fp, sizeof fp, "%.4000s/%.80s", path, e->d_name);
        FILE *f = fopen(fp, "rb");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = sz > 0 ? malloc((size_t)sz) : NULL;
        int ok = buf && fread(buf, 1, (size_t)sz, f) == (size_t)sz;
        fclose(f);
        struct dc_image *im = ok ? add(s) : NULL;
        if (!im) {
            free(buf);
            continue;
        }
        snprintf(im->name, sizeof im->name, "photos/%.80s", e->d_name);
        im->l3 = buf;
        im->size = (size_t)sz;
        if (l3_read_info(buf, im->size, &im->info, NULL) != L3_OK) {
            dc_fail("%s: not a readable .l3 file", im->name);
            free(buf);
            s->n--;
        }
    }
    closedir(d);
    qsort(s->v, s->n, sizeof s->v[0], cmp_name);
    snprintf(path, sizeof path, "%s/ref.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char name[256];
    unsigned long long h;
    while (fscanf(f, "%255s %llx", name, &h) == 2)
        for (size_t i = 0; i < s->n; i++)
            if (!strcmp(s->v[i].name, name))
                s->v[i].ref = h;
    fclose(f);
    return 0;
}

void dc_set_free(struct dc_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (!strncmp(s->v[i].name, "photos/", 7))
            free(s->v[i].l3);
        else
            l3_free(s->v[i].l3);
        free(s->v[i].px);
    }
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

int dc_formats(struct dc_format *out, int max)
{
    static const char *dt[] = {"u8", "u16", "f32", "f16"};
    static const int ch[] = {0, 1, 3, 4};
    static const float mean[4] = {0.485f, 0.456f, 0.406f, 0.5f};
    static const float std[4] = {0.229f, 0.224f, 0.225f, 0.25f};
    static const float scale[4] = {1.0f, 2.0f, 255.0f, 1.0f};
    int n = 0;
    for (int lay = 0; lay < 2; lay++)
        for (int d = 0; d < 4; d++)
            for (int c = 0; c < 4; c++)
                for (int norm = 0; norm < (d >= 2 ? 2 : 1) && n < max; norm++) {
                    struct dc_format *x = &out[n++];
                    l3gpu_format_init(&x->f);
                    x->f.layout = lay;
                    x->f.dtype = d;
                    x->f.channels = ch[c];
                    x->f.normalize = norm;
                    if (norm) {
                        memcpy(x->f.mean, mean, sizeof mean);
                        memcpy(x->f.std, std, sizeof std);
                        memcpy(x->f.scale, scale, sizeof scale);
                    }
                    snprintf(x->name, sizeof x->name, "%s-%s-c%d%s", lay ? "CHW" : "HWC", dt[d],
                             ch[c], norm ? "-norm" : "");
                }
    return n;
}
