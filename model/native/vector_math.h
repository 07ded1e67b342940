/* exp on 16 float lanes for the kernels' element-wise passes (SwiGLU, the attention softmax): libm's scalar expf
cost 9 ns an element there. Cephes' expf: the exponent split off with ln 2 in two parts, a degree-7 polynomial,
scalef; within 2 ulp of libm's. x is clamped to [-104, 89] first (exp 0 and inf either way; NaN passes through), so
0, inf and NaN come out as libm's. Each lane's arithmetic is its own: the same numbers wherever an element falls. */
#ifndef ATLAS_VECTOR_MATH_H
#define ATLAS_VECTOR_MATH_H

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f")))
static inline __m512 exp_avx512(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));   /* NaN: kept */
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* A mask of the first `count` of 16 lanes (all of them from 16). */
static inline __mmask16 first_lanes(int64_t count) {
    return count >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << count) - 1u);
}
#endif

#endif
