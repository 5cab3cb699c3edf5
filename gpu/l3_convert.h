/* l3_convert.h — the per-pixel conversion of batch decoding (layout, dtype,
 * channel forcing, palette expansion, scale/mean/std), shared by the CPU
 * reference (cpu.c) and the CUDA kernel (l3gpu.cu). Every function is
 * L3CV_FN (`static inline`, plus `__host__ __device__` under nvcc) or, where
 * a kernel needs it inlined with constant arguments, L3CV_FORCE. The float
 * arithmetic uses explicitly rounded single operations on the device
 * (__fdiv_rn, __fmul_rn, __fsub_rn) and plain float operations on the host,
 * which is built with -ffp-contract=off, so both give the same bits; float16
 * rounding is integer code, identical on both sides.
 *
 * Semantics are documented in l3gpu.h. Not installed.
 */
#ifndef L3_CONVERT_H
#define L3_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "l3.h"
#include "l3gpu.h"

#if defined(__CUDACC__)
#define L3CV_FN static inline __host__ __device__
#define L3CV_FORCE static __forceinline__ __host__ __device__
#elif defined(__GNUC__)
#define L3CV_FN static inline
#define L3CV_FORCE static inline __attribute__((always_inline))
#else
#define L3CV_FN static inline
#define L3CV_FORCE static inline
#endif

/* Channel selectors of struct l3cv_image.map */
#define L3CV_SEL_LUMA 4u  /* luma of channels 0..2 */
#define L3CV_SEL_ALPHA 5u /* opaque, or 0 where the pixel equals the tRNS key */

/* Everything the conversion of one image needs; plain data, copied to the
 * device as is. Built on the host by l3cv_prepare(). */
struct l3cv_image {
    uint32_t width, height;
    uint32_t srcmax;        /* largest sample value after palette expansion */
    uint8_t color;          /* enum l3_color */
    uint8_t planes;         /* decoded samples per pixel (1..4) */
    uint8_t depth;          /* source bit depth */
    uint8_t expand;         /* 1: look palette indices up in `palette` */
    uint8_t out_channels;   /* 1..4 */
    uint8_t dtype;          /* enum l3gpu_dtype */
    uint8_t layout;         /* enum l3gpu_layout */
    uint8_t normalize;      /* float dtypes: apply scale/mean/std */
    uint8_t map[4];         /* per output channel: 0..3 or L3CV_SEL_* */
    uint8_t has_key;        /* tRNS key colour present (gray, RGB) */
    uint8_t direct;         /* map[c] = c for every output channel, no palette
                             * expansion: l3cv_map returns the samples as they are */
    uint8_t pad_[2];
    uint32_t key[3];
    float scale[4], mean[4], std[4];
    uint8_t palette[256][4];
};

/* Host: fills *im for an image and a format (checked). L3GPU_OK or
 * L3GPU_ERR_INVALID_ARG. Defined in cpu.c. */
#ifdef __cplusplus
extern "C"
#endif
int l3cv_prepare(const struct l3_info *info, const struct l3gpu_format *fmt,
                 struct l3cv_image *im);

/* float32 -> float16 bits, round to nearest even (NaN stays NaN, overflow
 * gives infinity). */
L3CV_FN uint16_t l3cv_f16_bits(float f)
{
    union { float f; uint32_t u; } cv;
    cv.f = f;
    uint32_t x = cv.u;
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or NaN */
        return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) /* >= 65520: rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal half */
        uint32_t r = (ax >> 13) - (112u << 10);
        uint32_t rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    if (ax < 0x33000000u) /* below 2^-25: zero */
        return (uint16_t)sign;
    /* subnormal half: value = m * 2^-24 */
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t s = 126u - e; /* 14..24 */
    uint32_t r = m >> s;
    uint32_t rem = m & ((1u << s) - 1u);
    uint32_t half = 1u << (s - 1u);
    if (rem > half || (rem == half && (r & 1u)))
        r++;
    return (uint16_t)(sign | r);
}

/* Integer rescale of v in 0..srcmax to 0..outmax, rounding to nearest. The
 * source maxima that occur (1-, 2-, 4-, 8- and 16-bit samples) are spelled
 * out, so that each division is by a constant (a multiply and a shift on the
 * device, not a division routine); the arithmetic is the same in every case. */
L3CV_FORCE uint32_t l3cv_rescale(uint32_t v, uint32_t srcmax, uint32_t outmax)
{
    if (srcmax == outmax)
        return v;
    switch (srcmax) {
    case 1u: return v * outmax;
    case 3u: return (v * outmax + 1u) / 3u;
    case 15u: return (v * outmax + 7u) / 15u;
    case 255u: return (v * outmax + 127u) / 255u;
    case 65535u: return (v * outmax + 32767u) / 65535u;
    default: return (v * outmax + srcmax / 2u) / srcmax;
    }
}

/* Float value of output channel c. */
L3CV_FORCE float l3cv_float(const struct l3cv_image *im, uint32_t v, unsigned c)
{
#if defined(__CUDA_ARCH__)
    float t = __fdiv_rn(__uint2float_rn(v), __uint2float_rn(im->srcmax));
    if (im->normalize) {
        if (im->scale[c] != 1.0f) t = __fmul_rn(t, im->scale[c]);
        if (im->mean[c] != 0.0f) t = __fsub_rn(t, im->mean[c]);
        if (im->std[c] != 1.0f) t = __fdiv_rn(t, im->std[c]);
    }
    return t;
#else
    float t = (float)v / (float)im->srcmax;
    if (im->normalize) {
        if (im->scale[c] != 1.0f) t = t * im->scale[c];
        if (im->mean[c] != 0.0f) t = t - im->mean[c];
        if (im->std[c] != 1.0f) t = t / im->std[c];
    }
    return t;
#endif
}

/* Output samples (before dtype conversion) of one pixel, given its decoded
 * samples px[] in channel order (as l3_tile_pixel() returns them). */
L3CV_FORCE void l3cv_map(const struct l3cv_image *im, const uint32_t px[4], uint32_t v[4])
{
    uint32_t e[4];
    if (im->expand) {
        const uint8_t *p = im->palette[px[0] & 255u];
        e[0] = p[0];
        e[1] = p[1];
        e[2] = p[2];
        e[3] = p[3];
    } else {
        e[0] = px[0];
        e[1] = px[1];
        e[2] = px[2];
        e[3] = px[3];
    }
    for (unsigned c = 0; c < 4; c++) {
        unsigned s = im->map[c];
        uint32_t o;
        if (s < 4u) { /* a select, not e[s]: e[] stays in registers on the device */
            o = s == 0u ? e[0] : s == 1u ? e[1] : s == 2u ? e[2] : e[3];
        } else if (s == L3CV_SEL_LUMA) {
            o = (e[0] * 19595u + e[1] * 38470u + e[2] * 7471u + 32768u) >> 16;
        } else {
            int keyed = im->has_key && e[0] == im->key[0] &&
                        (im->planes < 3 || (e[1] == im->key[1] && e[2] == im->key[2]));
            o = keyed ? 0u : im->srcmax;
        }
        v[c] = o;
    }
}

/* Writes output sample v of channel c as element i of `out` in `dtype`:
 * the one place where a mapped sample becomes output bits. The CUDA convert
 * kernels pass a constant dtype (one kernel per layout, dtype and channel
 * count), the others im->dtype. */
L3CV_FORCE void l3cv_put(unsigned dtype, const struct l3cv_image *im, void *out, size_t i,
                         unsigned c, uint32_t v)
{
    switch (dtype) {
    case L3GPU_U8:
        ((uint8_t *)out)[i] = (uint8_t)l3cv_rescale(v, im->srcmax, 255u);
        break;
    case L3GPU_U16:
        ((uint16_t *)out)[i] = (uint16_t)l3cv_rescale(v, im->srcmax, 65535u);
        break;
    case L3GPU_F32:
        ((float *)out)[i] = l3cv_float(im, v, c);
        break;
    default:
        ((uint16_t *)out)[i] = l3cv_f16_bits(l3cv_float(im, v, c));
        break;
    }
}

/* Writes a zero as element i of `out` in `dtype` (failed images). */
L3CV_FORCE void l3cv_put_zero(unsigned dtype, void *out, size_t i)
{
    switch (dtype) {
    case L3GPU_U8: ((uint8_t *)out)[i] = 0; break;
    case L3GPU_F32: ((float *)out)[i] = 0.0f; break;
    default: ((uint16_t *)out)[i] = 0; break;
    }
}

/* Output sample v of channel c as element i of `out` (im's dtype). */
L3CV_FN void l3cv_store_sample(const struct l3cv_image *im, void *out, size_t i, unsigned c,
                               uint32_t v)
{
    l3cv_put(im->dtype, im, out, i, c, v);
}

/* Writes pixel (x, y) of an image into its output buffer `out` (the image's
 * slot: layout and dtype as im says, tightly packed). */
L3CV_FN void l3cv_store(const struct l3cv_image *im, void *out, uint32_t x, uint32_t y,
                        const uint32_t v[4])
{
    const unsigned C = im->out_channels;
    const size_t hw = (size_t)im->width * im->height;
    size_t base, step;
    if (im->layout == L3GPU_HWC) {
        base = ((size_t)y * im->width + x) * C;
        step = 1;
    } else {
        base = (size_t)y * im->width + x;
        step = hw;
    }
    for (unsigned c = 0; c < 4; c++) {
        if (c >= C)
            break;
        l3cv_store_sample(im, out, base + c * step, c, v[c]);
    }
}

/* Writes zeros for pixel (x, y) (failed images). */
L3CV_FN void l3cv_store_zero(const struct l3cv_image *im, void *out, uint32_t x,
                             uint32_t y)
{
    const unsigned C = im->out_channels;
    const size_t hw = (size_t)im->width * im->height;
    size_t base = im->layout == L3GPU_HWC ? ((size_t)y * im->width + x) * C
                                          : (size_t)y * im->width + x;
    size_t step = im->layout == L3GPU_HWC ? 1 : hw;
    for (unsigned c = 0; c < 4; c++) {
        if (c >= C)
            break;
        l3cv_put_zero(im->dtype, out, base + c * step);
    }
}

#endif /* L3_CONVERT_H */
