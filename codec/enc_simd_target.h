/* enc_simd_target.h — what the AVX2 kernel files of the encoder
 * (enc_simd.c, enc_simd_rice.c) share: whether this build has them and the
 * target attributes they are compiled with. Not installed. */
#ifndef L3_ENC_SIMD_TARGET_H
#define L3_ENC_SIMD_TARGET_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(L3_NO_SIMD)
#define L3_ENC_AVX2 1
#include <immintrin.h>

/* BMI2 for the bit writer's variable shifts (every AVX2 CPU has it) */
#define AVX2 __attribute__((target("avx2,bmi,bmi2")))
#define AVX2_INLINE static inline __attribute__((target("avx2,bmi,bmi2"), always_inline))
#else
#define L3_ENC_AVX2 0
#endif

#endif
