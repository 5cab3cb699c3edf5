/* enc_simd.h — AVX2 kernels of the encoder's hot loops (enc_simd.c, enc_simd_rice.c): the
 * same results as the portable code of enc_gather.c, enc_predict.c,
 * enc_rice.c and enc_lz.c, which stays the reference and the fallback.
 * Every kernel is integer-only and gives the same values as its reference
 * on every input it accepts (depth <= 8; the callers check), so the encoded
 * bytes do not depend on the CPU (tests/codec/test_encode_simd.c,
 * fuzz/fuzz_l3_encode.c). Not installed. */
#ifndef L3_ENC_SIMD_H
#define L3_ENC_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "enc_bits.h"

/* Whether this build and CPU run the kernels (x86-64 with AVX2). */
int l3_enc_simd_available(void);

/* One row of 8-bit RGB pixels into three planes (enc_gather.c's gather3). */
void l3_simd_gather3(const uint8_t *r8, uint32_t w, uint16_t *p0, uint16_t *p1, uint16_t *p2);
/* ... and of 8-bit 4-channel pixels into four (gather4). */
void l3_simd_gather4(const uint8_t *r8, uint32_t w, uint16_t *p0, uint16_t *p1, uint16_t *p2,
                     uint16_t *p3);

/* Residuals of row y > 0 (l3_row_residuals) and of a whole plane
 * (l3_plane_residuals); depth <= 8. */
void l3_simd_row_residuals(const uint16_t *row, const uint16_t *up, uint32_t w, unsigned depth,
                           uint16_t *zr, unsigned pred);
void l3_simd_plane_residuals(const uint16_t *src, uint32_t w, uint32_t h, unsigned depth,
                             uint16_t *z, unsigned pred);

/* Both fast plans of enc_rice.c's plane_plan_both for a plane whose width is
 * a multiple of 16 (so that no group crosses a row): n = w * h residuals. */
void l3_simd_plan_both(const uint16_t *z, size_t n, unsigned depth, uint8_t *syms16,
                       uint8_t *syms8, uint64_t *bits16, uint64_t *bits8);

/* l3_plane_estimate for a width that is a multiple of 16; zrow: w residuals
 * of scratch. */
uint64_t l3_simd_estimate(const uint16_t *src, uint32_t w, uint32_t h, unsigned depth,
                          unsigned pred, uint16_t *zrow, uint32_t step);

/* l3_plane_write_rice (depth <= 8). */
uint8_t *l3_simd_write_rice(const uint16_t *z, const uint8_t *syms, uint32_t w, uint32_t h,
                            unsigned depth, uint8_t *out, uint32_t gs);

/* bw_rice_group (depth <= 8), for the LZ writer's literal groups. */
void l3_simd_rice_group(struct bw *bw, const uint16_t *z, uint32_t n, unsigned k,
                        unsigned depth);

/* enc_lz.c's literal cost prefix sums of rows y0..y1-1 (lz_costs). */
void l3_simd_lz_costs(uint32_t *cost, const uint16_t *z, uint32_t w, uint32_t y0, uint32_t y1,
                      unsigned depth);

#endif
