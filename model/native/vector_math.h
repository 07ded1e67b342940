/* exp on 16 (AVX-512) or 8 (AVX2) float lanes for the kernels' element-wise passes (SwiGLU, the attention softmax):
libm's scalar expf cost 9 ns an element there. Cephes' expf: the exponent split off with ln 2 in two parts, a
degree-7 polynomial, times 2^n; within 2 ulp of libm's. x is clamped to [-104, 89] first (exp 0 and inf either way;
NaN passes through), so 0, inf and NaN come out as libm's. Each lane's arithmetic is its own: the same numbers
wherever an element falls, and the same on both instruction sets (2^n in one rounding: scalef, or AVX2's two exact
powers of two, see pow2_times_avx2). vector_level() says which one runs. */
#ifndef ATLAS_VECTOR_MATH_H
#define ATLAS_VECTOR_MATH_H

#include <stdlib.h>
#include <string.h>

/* 2: AVX-512F, 1: AVX2 + FMA, 0: neither (portable C), at most what ATLAS_NATIVE_ISA names ("avx2" or "portable":
to run and test the narrower paths on a wider CPU). */
static inline int vector_level(void) {
    static int level = -1;
    if (level < 0) {
        int found = 0;
#if defined(__x86_64__)
        __builtin_cpu_init();
        found = __builtin_cpu_supports("avx512f") ? 2
              : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
#endif
        const char *cap = getenv("ATLAS_NATIVE_ISA");
        if (cap && strcmp(cap, "avx2") == 0 && found > 1) found = 1;
        if (cap && strcmp(cap, "portable") == 0) found = 0;
        level = found;
    }
    return level;
}

#if defined(__x86_64__)
#include <immintrin.h>

/* exp's constants, shared by both instruction sets' versions: the clamp, log2(e), ln 2 as two parts (the first
exact in few bits), and the polynomial's coefficients from the highest power down. */
#define EXP_LOWEST -104.0f
#define EXP_HIGHEST 89.0f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HIGH 0.693359375f
#define EXP_LN2_LOW -2.12194440e-4f
static const float EXP_POLYNOMIAL[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                                        1.6666665459e-1f, 5.0000001201e-1f};

__attribute__((target("avx512f")))
static inline __m512 exp_avx512(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(EXP_HIGHEST), _mm512_max_ps(_mm512_set1_ps(EXP_LOWEST), x));   /* NaN: kept */
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HIGH), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_LOW), r);
    __m512 p = _mm512_set1_ps(EXP_POLYNOMIAL[0]);
    for (int i = 1; i < 6; i++) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_POLYNOMIAL[i]));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* p * 2^n for integral n in [-150, 128] (float lanes): two exact powers of two, 2^(n / 2) and 2^(n - n / 2), each a
normal float, so p times the first is exact and the second rounds once, as scalef does (subnormal results included). */
__attribute__((target("avx2,fma")))
static inline __m256 pow2_times_avx2(__m256 p, __m256 n) {
    const __m256i k = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(k, 1), rest = _mm256_sub_epi32(k, half);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 first = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
    const __m256 second = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, first), second);
}

/* exp_avx512 on 8 lanes. */
__attribute__((target("avx2,fma")))
static inline __m256 exp_avx2(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(EXP_HIGHEST), _mm256_max_ps(_mm256_set1_ps(EXP_LOWEST), x));   /* NaN: kept */
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HIGH), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_LOW), r);
    __m256 p = _mm256_set1_ps(EXP_POLYNOMIAL[0]);
    for (int i = 1; i < 6; i++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_POLYNOMIAL[i]));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    return pow2_times_avx2(p, n);
}

/* An AVX2 lane mask (all bits set) of the first `count` of 8 lanes (all of them from 8). */
__attribute__((target("avx2")))
static inline __m256i first_lanes_avx2(int64_t count) {
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count >= 8 ? 8 : (int)count), index);
}

/* A mask of the first `count` of 16 lanes (all of them from 16). */
static inline __mmask16 first_lanes(int64_t count) {
    return count >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << count) - 1u);
}
#endif

#endif
