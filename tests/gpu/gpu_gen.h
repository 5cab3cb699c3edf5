/* gpu_gen.h — generated L3 images and the format loops shared by the GPU
 * test programs (test_gpu.c: CPU batch and emulated plan; test_cuda.c: the
 * CUDA library, on a GPU or on the CPU-executed runtime). */
#ifndef GPU_GEN_H
#define GPU_GEN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "l3.h"
#include "l3gpu.h"
#include "tc_rand.h" /* tc_splitmix64 */

struct gen {
    struct l3_info info;
    void *px;       /* source samples, tight */
    size_t px_size;
    void *l3;       /* encoded */
    size_t l3_size;
};

unsigned color_planes(unsigned color);
/* Clears g and fills its info for a w x h image of color/depth (no palette
 * yet); returns the largest sample value, 2^depth - 1. */
uint32_t gen_begin(struct gen *g, unsigned color, unsigned depth, uint32_t w, uint32_t h);
/* Values < 2^depth. pattern 0: smooth gradient + noise blocks (so both coding
 * modes appear); pattern 1: an 8x8 random texture repeated, one 8x8 block in
 * 16 of noise (LZ planes). trns: a tRNS key colour (gray/RGB) that some
 * pixels match. Encoded with tile x tile tiles at `effort`. */
void gen_pattern(struct gen *g, unsigned color, unsigned depth, uint32_t w, uint32_t h,
                 uint64_t seed, unsigned tile, int trns, int pattern, int effort);
void gen_image(struct gen *g, unsigned color, unsigned depth, uint32_t w, uint32_t h,
               uint64_t seed, unsigned tile, int trns);
void gen_encode(struct gen *g, unsigned tile, int effort);
void gen_free(struct gen *g);
uint32_t src_sample(const struct gen *g, uint32_t x, uint32_t y, unsigned c);

/* Every colour model and bit depth, with and without tRNS. */
struct model { unsigned color, depth; int trns; };
extern const struct model MODELS[15];
#define NMODELS (sizeof MODELS / sizeof MODELS[0])
extern const int CHANNELS[4];
extern const float MEAN[4], STD[4], SCALE[4];

void format_name(char *buf, size_t len, const struct gen *g, const struct l3gpu_format *f);

/* Runs the statement for every layout x dtype x channels (x normalize for floats). */
#define FOR_EACH_FORMAT(f)                                                        \
    for (int lay_ = 0; lay_ < 2; lay_++)                                          \
        for (int dt_ = 0; dt_ < 4; dt_++)                                         \
            for (int ch_ = 0; ch_ < 4; ch_++)                                     \
                for (int nm_ = 0; nm_ < (dt_ >= 2 ? 2 : 1); nm_++)                 \
                    if (l3gpu_format_init(&f), f.layout = lay_, f.dtype = dt_,    \
                        f.channels = CHANNELS[ch_], f.normalize = nm_,            \
                        memcpy(f.mean, MEAN, sizeof MEAN),                        \
                        memcpy(f.std, STD, sizeof STD),                           \
                        memcpy(f.scale, SCALE, sizeof SCALE), 1)

#endif
