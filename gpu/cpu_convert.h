/* cpu_convert.h — fused tile conversion of the CPU batch decoder: a decoded
 * tile (its planes still in cache) goes straight into the image's output
 * slot in the batch's layout, dtype and channel count.
 *
 * The result is the same bytes as l3_convert.h's per-pixel reference
 * (l3cv_map + l3cv_store, also run by the CUDA kernel and by
 * l3gpu_cpu_convert), by construction:
 *   - each output channel is one of: a plane, the luma of R, G, B, the alpha
 *     of a tRNS key colour,
 *     or opaque; that is l3cv_map's selection, computed a row at a time;
 *   - for bit depths <= 8 every possible sample of every channel is converted
 *     once per image with l3cv_store_sample() into a 256-entry table (palette
 *     expansion, luma of palette colours and tRNS alpha are folded into it),
 *     so the per-sample work is one table load, with no division and no
 *     per-sample branch; uint8 channels whose table is the identity are plain
 *     narrowing copies;
 *   - 16-bit samples use the same scalar arithmetic (l3cv_float, the integer
 *     rescale with a constant divisor) inline.
 * The loops are instantiated per (layout, dtype, output channels), so the
 * compiler sees constant strides and element types.
 *
 * Internal to gpu/ (not installed). Tiles come from the codec's
 * l3_decode_tiles() (struct l3_tile_out), whichever tile decoder (SIMD lanes
 * or the scalar reference) made them.
 */
#ifndef L3_CPU_CONVERT_H
#define L3_CPU_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "l3_convert.h"

/* Where an output channel's samples come from (struct l3cv_fast.src). */
enum l3cv_src {
    L3CV_SRC_PLANE0 = 0, /* .. L3CV_SRC_PLANE0 + 3: that plane */
    L3CV_SRC_LUMA = 4,   /* luma of planes 0..2 */
    L3CV_SRC_KEY = 5,    /* 0 where the pixel is the tRNS key colour, else srcmax */
    L3CV_SRC_OPAQUE = 6, /* srcmax everywhere */
};

/* Per-image converter state; built by l3cv_fast_prepare(), read-only after. */
struct l3cv_fast {
    const struct l3cv_image *im; /* must outlive this */
    uint8_t src[4];              /* enum l3cv_src per output channel */
    uint8_t tabled;              /* depth <= 8: samples go through t */
    uint8_t all_ident;           /* uint8 output and every table is the identity */
    uint8_t ident[4];            /* uint8 output and t.u8[c][v] == v */
    uint8_t stream;              /* large output: rows go out with non-temporal stores */
    uint8_t simd;                /* l3cv_simd_level(): 0 portable, 1 AVX2, 2 AVX-512,
                                    3 AVX-512 VBMI */
    uint8_t whole_lines;         /* l3cv_whole_lines(): computed rows stream only
                                    when they start on a 64-byte line */
    union {
        uint8_t u8[4][256];
        uint16_t u16[4][256]; /* uint16 and float16 bits */
        float f32[4][256];
    } t;
    uint32_t w32[4][256]; /* uint8/uint16/float16 tables widened, for the gathers */
    /* HWC gathers: table offset ((16 j + i) mod C) * 256 of element i of
     * block j (mod 3) of an interleaved row */
    int32_t hwc_off[3][16];
    /* VBMI lookups (simd 3): byte k of entry v of channel c's table, the
     * table as 4 x 256 bytes that two-table byte permutes index directly */
    uint8_t tb[4][4][256];
    uint8_t same; /* every channel has the same table (tb[c] == tb[0]) */
    /* VBMI interleave of 3 rows of 64 samples into output block j (of 3):
     * permute(permute(row 0, ilv3[j][0], row 1), ilv3[j][1], row 2) */
    uint8_t ilv3[3][2][64];
    /* Computed outputs (any SIMD level, uint16 / float16 / float32; set by
     * l3cv_arith_prepare only where they equal the tables to the bit):
     * channel c is v / ar_row[c][0] * [3] - [4] / [5] (the operations of
     * ar_ops; [1] and [6] the reciprocals of [0] and [5], [2] and [7] their
     * remainders; ar_how: how the divisions are done; cpu_convert_arith.c
     * names the indices), or v * ar_m16[c] for uint16; ar_hwc / ar_hwc16
     * hold the same per element of 3 interleaved blocks of 16, as hwc_off. */
    uint8_t arith;
    uint8_t ar_ops;
    uint8_t ar_how;
    float ar_row[4][8];
    uint16_t ar_m16[4];
    float ar_hwc[3][8][16];
    uint16_t ar_hwc16[3][16];
};

/* Scratch bytes l3cv_fast_tile() needs for tiles up to tile_w wide: 3 rows
 * of samples (luma, key alpha, opaque; up to 2 bytes each), two staging rows
 * of up to 4 channels x 4 bytes, then one row of up to 4 interleaved 8-bit
 * samples (HWC lookups), each 64-byte aligned when the scratch is. */
#define L3CV_FAST_STRIDE(tile_w) (((size_t)(tile_w) + 63u) & ~(size_t)63u)
#define L3CV_FAST_SCRATCH(tile_w) (42u * L3CV_FAST_STRIDE(tile_w))

/* Outputs of at least this many bytes per image are streamed. */
#define L3CV_STREAM_MIN ((size_t)1 << 20)

/* Builds the converter of an image prepared by l3cv_prepare(); an image
 * whose output has at least stream_min bytes is written with non-temporal
 * stores (the batch decoder passes L3CV_STREAM_MIN; SIZE_MAX: never). 0 on
 * success; -1 for a combination it does not handle (the caller then converts
 * pixel by pixel with l3cv_map/l3cv_store). */
int l3cv_fast_prepare(const struct l3cv_image *im, size_t stream_min, struct l3cv_fast *fc);

/* SIMD steps (cpu_convert_simd.c). l3cv_simd_level: what this CPU runs (0
 * none, 1 AVX2, 2 AVX-512 F/BW/VL, 3 that and VBMI). l3cv_row_simd: one row of channel c (w a
 * multiple of 16 samples) through fc's table into dst, at fc->simd >= 1;
 * with `stream`, non-temporal stores (dst 32-byte aligned, 16 for uint8 and
 * for computed outputs, fc->arith).
 * l3cv_interleave_simd: C rows of w elements of es bytes (1, 2, 4; w * es a
 * multiple of 16) into w interleaved pixels at dst. l3cv_hwc_simd: w pixels
 * of C interleaved 8-bit samples (ilv; w a multiple of 16) through fc's
 * tables into w HWC pixels at dst; with `stream`, non-temporal stores when
 * dst is aligned to 16 elements (computed outputs: to 16 bytes; plain
 * stores otherwise). */
int l3cv_simd_level(void);
/* 1 where a streamed part of a 64-byte line costs a memory round trip of
 * its own (measured on AMD Zen 4: NCHW uint16 of a 3640x2400 RGBA image, 3
 * plane rows in 4 off a line, 15.9 ms streamed against 8.8 ms stored):
 * computed CHW rows that start off a line are then stored, their lines
 * asked for ahead. 0 on AMD family 1Ah (Zen 5), where the same rows
 * streamed in 16-byte halves measured 5.2 ms against 5.3 for HWC uint8. */
int l3cv_whole_lines(void);
/* Byte shuffles that place element k of 16-byte block j of C=3 output from
 * channel row c: [element size 1, 2, 4][block][channel][k] (-128: none). */
extern const int8_t l3cv_shuf3[3][3][3][16];
void l3cv_row_simd(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                   void *dst, int stream);
void l3cv_interleave_simd(const void *const rows[4], unsigned C, size_t es, uint32_t w,
                          void *dst);
void l3cv_hwc_simd(const struct l3cv_fast *fc, const uint8_t *ilv, unsigned C, uint32_t w,
                   void *dst, int stream);

/* VBMI step (fc->simd >= 3), the tables as byte planes (no gathers).
 * l3cv_vbmi_prepare: fills fc->tb and fc->same (at prepare time, any level).
 * l3cv_row_vbmi: w >= 1 samples u of channel c through its table into dst
 * (uint8, uint16, float16 or float32); with `stream`, non-temporal stores
 * where dst is 64-byte aligned. l3cv_interleave3_vbmi: 3 rows of w samples
 * (bytes) into w interleaved pixels at dst. Masked loads and stores: nothing
 * past w is touched. */
void l3cv_vbmi_prepare(struct l3cv_fast *fc);
void l3cv_row_vbmi(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                   void *dst, int stream);
void l3cv_interleave3_vbmi(const struct l3cv_fast *fc, const uint8_t *const rows[3],
                           uint32_t w, uint8_t *dst);

/* Computed step (cpu_convert_arith.c), used by l3cv_row_simd and
 * l3cv_hwc_simd in place of their gathers where fc->arith is set.
 * l3cv_arith_prepare: at every simd level >= 1 (AVX2 and FMA; float16 also
 * needs F16C), sets fc->arith when the computed outputs of every sample
 * value of every channel equal the tables, as rows and interleaved; else
 * clears it. l3cv_row_arith / l3cv_hwc_arith: as l3cv_row_simd /
 * l3cv_hwc_simd for those outputs. l3cv_hwc3_arith: l3cv_interleave_simd of
 * three 8-bit rows followed by l3cv_hwc_arith, in registers (the same
 * bytes; w a multiple of 16). */
void l3cv_arith_prepare(struct l3cv_fast *fc);
void l3cv_row_arith(const struct l3cv_fast *fc, unsigned c, const uint8_t *u, uint32_t w,
                    void *dst, int stream);
void l3cv_hwc_arith(const struct l3cv_fast *fc, const uint8_t *ilv, unsigned C, uint32_t w,
                    void *dst, int stream);
void l3cv_hwc3_arith(const struct l3cv_fast *fc, const uint8_t *const rows[3], uint32_t w,
                     void *dst, int stream);

/* Converts one decoded tile (as l3_decode_tiles() hands it over: channel
 * planes, colour transform undone, uint8_t samples for depth <= 8, uint16_t
 * for 16) into `out`, the image's output slot (tightly packed, layout/dtype/
 * channels of fc->im). scratch: L3CV_FAST_SCRATCH(t->w) bytes, 16-byte
 * aligned. Thread-safe for distinct tiles of one image. */
void l3cv_fast_tile(const struct l3cv_fast *fc, const struct l3_tile_out *t, void *out,
                    void *scratch);

#endif /* L3_CPU_CONVERT_H */
