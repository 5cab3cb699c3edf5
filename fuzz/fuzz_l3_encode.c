/* fuzz_l3_encode.c — libFuzzer harness: the encoder's AVX2 kernels
 * (codec/enc_simd.c) against its portable reference code.
 *
 * The input describes an image: byte 0 the colour model, byte 1 the bit
 * depth (one the model allows), bytes 2..3 and 4..5 width - 1 and height - 1
 * (at most 255 + 1), byte 6 the tile size (16, 24, ..., 136), byte 7 the
 * effort (-1, 0, 2); the rest are its samples, repeated to fill the image and
 * masked to the depth (palette indices below the palette's length). The image
 * is encoded with the kernels and with l3_enc_use_portable: the two files must
 * be byte for byte the same, and decode back to the samples; any difference
 * aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "l3.h"
#include "l3_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *encode(const struct l3_info *info, const void *px,
                    const struct l3_encode_options *eo, int portable, size_t *n)
{
    struct l3_enc *x = NULL;
    if (l3_enc_begin(info, px, 0, eo, &x) != L3_OK)
        abort(); /* a valid image and options: must start */
    if (portable)
        l3_enc_use_portable(x);
    for (uint64_t t = 0; t < l3_enc_tiles(x); t++)
        if (l3_enc_tile(x, 0, t) != L3_OK)
            abort();
    void *out = NULL;
    if (l3_enc_finish(x, &out, n) != L3_OK)
        abort();
    l3_enc_free(x);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t depths[5][5] = {{1, 2, 4, 8, 16}, {8, 16}, {8, 16}, {8, 16}, {1, 2, 4, 8}};
    static const uint8_t nd[5] = {5, 2, 2, 2, 4}, chans[5] = {1, 2, 3, 4, 1};
    static const int efforts[3] = {-1, 0, 2};
    if (size < 9)
        return 0;
    struct l3_info info;
    memset(&info, 0, sizeof info);
    const unsigned color = data[0] % 5;
    info.color = (uint8_t)color;
    info.channels = chans[color];
    info.bit_depth = depths[color][data[1] % nd[color]];
    info.width = 1u + (((uint32_t)data[2] << 8 | data[3]) & 0xff);
    info.height = 1u + (((uint32_t)data[4] << 8 | data[5]) & 0xff);
    uint32_t maxv = (1u << info.bit_depth) - 1;
    if (color == L3_COLOR_PALETTE) {
        info.palette_len = (uint16_t)(maxv + 1 < 256 ? maxv + 1 : 256);
        info.palette_alpha_len = info.palette_len; /* every entry has its alpha */
        for (unsigned i = 0; i < info.palette_len; i++)
            for (unsigned c = 0; c < 4; c++)
                info.palette[i][c] = (uint8_t)(i * (c + 3));
        maxv = info.palette_len - 1u;
    }
    struct l3_encode_options eo;
    memset(&eo, 0, sizeof eo);
    eo.tile_width = eo.tile_height = 16u + 8u * (data[6] % 16);
    eo.effort = efforts[data[7] % 3];
    eo.threads = 1;
    const uint8_t *s = data + 8;
    const size_t ns = size - 8;
    const size_t samples = (size_t)info.width * info.height * info.channels;
    const size_t sb = info.bit_depth > 8 ? 2 : 1;
    uint8_t *px = malloc(samples * sb);
    if (!px)
        return 0;
    for (size_t i = 0; i < samples; i++) {
        uint32_t v = s[(i * sb) % ns];
        if (sb == 2)
            v |= (uint32_t)s[(i * sb + 1) % ns] << 8;
        v &= (1u << info.bit_depth) - 1;
        if (v > maxv)
            v %= maxv + 1;
        if (sb == 1)
            px[i] = (uint8_t)v;
        else
            memcpy(px + 2 * i, &(uint16_t){(uint16_t)v}, 2);
    }
    size_t na = 0, nb = 0;
    void *a = encode(&info, px, &eo, 0, &na);
    void *b = encode(&info, px, &eo, 1, &nb);
    if (na != nb || memcmp(a, b, na) != 0)
        abort(); /* kernels and reference disagree */
    uint8_t *back = malloc(samples * sb);
    if (!back || l3_decode(a, na, back, samples * sb, 0, NULL) != L3_OK ||
        memcmp(back, px, samples * sb) != 0)
        abort(); /* not lossless */
    free(back);
    l3_free(a);
    l3_free(b);
    free(px);
    return 0;
}
