/* devcheck.h — the device check (gpu/bench/device_check.sh): its inputs,
 * the CPU and GPU steps and the report. C, built without meson on the GPU
 * machine (and by meson here: l3gpu_devcheck, l3gpu_devcheck_fake). */
#ifndef DEVCHECK_H
#define DEVCHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "l3.h"
#include "l3gpu.h"

/* One input image: generated here (source samples known) or a real photo
 * carried pre-encoded in .devcheck/l3/photos (reference hash of its decoded
 * pixels computed where it was prepared, after comparing with libpng). */
struct dc_image {
    char name[96];
    uint8_t *l3;
    size_t size;
    struct l3_info info;
    uint8_t *px;      /* generated: source samples (l3_decode layout), else NULL */
    size_t px_size;
    uint64_t ref;     /* photos: hash of the decoded pixels, 0 = none */
};

struct dc_set {
    struct dc_image *v;
    size_t n;
};

/* ---- devcheck_inputs.c ---- */
/* Every colour model and bit depth, palettes with and without alpha, tRNS
 * keys, edge tiles of several shapes, LZ planes: encoded on the spot. */
int dc_generate(struct dc_set *s);
/* Photo-like 8-bit RGB images of w x h (timing when no real photos). */
int dc_synth_photos(struct dc_set *s, unsigned n, uint32_t w, uint32_t h);
/* DIR/l3/photos/ *.l3 and DIR/ref.txt ("name hash" lines); 0 files is fine. */
int dc_load_photos(struct dc_set *s, const char *dir);
void dc_set_free(struct dc_set *s);
/* FNV-1a over 64-bit little-endian words (tail zero-padded), with length. */
uint64_t dc_hash(const void *p, size_t n);

/* ---- formats ---- */
struct dc_format {
    struct l3gpu_format f;
    char name[40];
};
/* Every layout x dtype x channels (x normalisation for floats): 48. */
int dc_formats(struct dc_format *out, int max);

/* ---- report (device_check.c) ---- */
extern int dc_failures;
void dc_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* One line of the final table. */
void dc_row(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- devcheck_cpu.c ---- */
/* Native decode == source samples (generated), == reference (photos); the
 * CPU batch decoder == l3gpu_cpu_convert of l3_decode for every format. */
void dc_cpu_checks(const struct dc_set *gen, const struct dc_set *photos, unsigned threads);
/* Writes DIR/ref.txt from the CPU decoder (devcheck_prep.sh). */
int dc_write_refs(const struct dc_set *photos, const char *dir);

/* ---- devcheck_gpu.c (only with L3_HAVE_CUDA) ---- */
/* GPU bytes and statuses == CPU batch for every format x pageable/pinned/
 * device inputs; a batch with broken images; two streams. */
void dc_gpu_checks(l3gpu_ctx *ctx, const struct dc_set *gen, const struct dc_set *photos,
                   unsigned threads);
/* A small batch in every memory kind and a few formats (compute-sanitizer,
 * ncu). */
void dc_gpu_small(l3gpu_ctx *ctx, const struct dc_set *gen);
/* The timing table: batches of photo-sized RGB images. */
void dc_gpu_timing(l3gpu_ctx *ctx, const struct dc_set *photos, const int *batches, int nb,
                   unsigned threads);

#endif
