/* cuda_fixture.h — what the test_cuda*.c rooms share (cuda_fixture.c), built
 * against the fake runtime (L3_FAKECUDA) and the real one alike: contexts
 * that skip where no GPU is usable, device buffers, uploads of generated
 * images, and the check of a batch's bytes against the CPU decoder's. */
#ifndef L3_TEST_CUDA_FIXTURE_H
#define L3_TEST_CUDA_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "gpu_gen.h"
#include "l3gpu.h"

/* Copies of the inputs in the memory kind the batch says. */
struct inputs {
    struct l3gpu_input in[8];
    void *mem[8];
    int memory;
    size_t n;
};

/* A context on `dev`, or a skip with the reason where no GPU is usable. */
l3gpu_ctx *open_ctx(int dev);

/* Fake runtime: no race and no kernel fault happened so far. */
void runtime_clean(void);

void *dev_alloc(l3gpu_ctx *ctx, size_t n, int poison);

uint8_t *download(l3gpu_ctx *ctx, const void *d, size_t n);

void inputs_make(struct inputs *x, const struct l3gpu_input *src, size_t n, int memory);

void inputs_free(struct inputs *x);

/* Decodes in[0..n) on the GPU into one contiguous output and checks bytes
 * and statuses against the CPU batch. */
void check_batch(l3gpu_ctx *ctx, const struct l3gpu_input *in, size_t n, int memory,
                 const struct l3gpu_format *f, void *stream, const char *name);

/* Three RGB8 images (64x40, 32x32 tiles). */
void rgb_set(struct gen g[3], uint64_t seed);

void to_inputs(const struct gen *g, size_t n, struct l3gpu_input *in);

#endif
