/* A generation step's next-token distribution: p = softmax(logits * inv_t) in float64 and its entropy in bits, in
three passes over the vocabulary (numpy's softmax and entropy took eight, ~0.3 ms for 49,152 logits, a row of every
step). The entropy comes from the exponents: with z_i = (x_i - max) * inv_t and S = sum_i exp(z_i), log p_i = z_i -
log S, so H = (log S - sum_i p_i z_i) / log 2, no logarithm per entry. exp in float64 registers (Cody-Waite
reduction by ln 2, a degree-13 Taylor polynomial, scalef: within 2 ulp of libm's); a row's numbers depend only on
its logits. Logits that are not all finite are left to the caller (numpy's softmax handles them). Built at first use
by model/native/build.py. */
#include <math.h>
#include <stdint.h>

#if defined(__x86_64__)
#include <immintrin.h>

#include "vector_math.h"

__attribute__((target("avx512f")))
static inline __m512d exp_pd_avx512(__m512d z) {
    z = _mm512_max_pd(_mm512_set1_pd(-746.0), z);                           /* exp 0 below; z <= 0 here */
    const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(z, _mm512_set1_pd(1.4426950408889634074)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(6.93147180369123816490e-01), z);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(1.90821492927058770002e-10), r);  /* |r| <= ln 2 / 2 */
    static const double inverse_factorials[] = {
        1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
        1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0};
    __m512d p = _mm512_set1_pd(inverse_factorials[0]);
    for (int i = 1; i < 14; i++) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(inverse_factorials[i]));
    return _mm512_scalef_pd(p, n);
}

/* Returns 0 (probs and *entropy_bits written), 1 when a logit is inf or NaN, -1 on a CPU without AVX-512. */
__attribute__((target("avx512f")))
static int softmax_entropy_avx512(const float *logits, int64_t V, double inv_t, double *probs, double *entropy_bits) {
    __m512 top = _mm512_set1_ps(-INFINITY), finite = _mm512_setzero_ps();   /* x - x: 0, or NaN for inf and NaN */
    for (int64_t i = 0; i < V; i += 16) {
        const __mmask16 m = first_lanes(V - i);
        const __m512 x = _mm512_maskz_loadu_ps(m, logits + i);
        top = _mm512_mask_max_ps(top, m, top, x);
        finite = _mm512_add_ps(finite, _mm512_sub_ps(x, x));
    }
    if (_mm512_reduce_add_ps(finite) != 0.0f) return 1;
    const __m512d shift = _mm512_set1_pd((double)_mm512_reduce_max_ps(top)), scale = _mm512_set1_pd(inv_t);
    __m512d total = _mm512_setzero_pd(), weighted = _mm512_setzero_pd();     /* sum e_i, sum e_i z_i */
    for (int64_t i = 0; i < V; i += 16) {                                   /* 16 logits: two halves of 8 */
        const __mmask16 m = first_lanes(V - i);
        const __m512 x16 = _mm512_maskz_loadu_ps(m, logits + i);
        const __m256 halves[2] = {_mm512_castps512_ps256(x16),
                                  _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x16), 1))};
        for (int half = 0; half < 2; half++) {
            const __mmask8 mh = (__mmask8)(m >> (8 * half));
            const __m512d z = _mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(halves[half]), shift), scale);
            const __m512d e = _mm512_maskz_mov_pd(mh, exp_pd_avx512(z));
            _mm512_mask_storeu_pd(probs + i + 8 * half, mh, e);
            total = _mm512_add_pd(total, e);
            weighted = _mm512_fmadd_pd(e, _mm512_maskz_mov_pd(mh, z), weighted);
        }
    }
    const double sum = _mm512_reduce_add_pd(total), inverse = 1.0 / sum;
    const __m512d normal = _mm512_set1_pd(inverse);
    for (int64_t i = 0; i < V; i += 8) {
        const __mmask8 m = V - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (V - i)) - 1u);
        _mm512_mask_storeu_pd(probs + i, m, _mm512_mul_pd(_mm512_maskz_loadu_pd(m, probs + i), normal));
    }
    const double h = (log(sum) - _mm512_reduce_add_pd(weighted) * inverse) / log(2.0);
    *entropy_bits = h > 0.0 ? h : 0.0;                                      /* rounding below 0 -> 0 */
    return 0;
}

int softmax_entropy(const float *logits, int64_t V, double inv_t, double *probs, double *entropy_bits) {
    if (V < 1 || !__builtin_cpu_supports("avx512f")) return -1;
    return softmax_entropy_avx512(logits, V, inv_t, probs, entropy_bits);
}

#else

int softmax_entropy(const float *logits, int64_t V, double inv_t, double *probs, double *entropy_bits) {
    (void)logits; (void)V; (void)inv_t; (void)probs; (void)entropy_bits;
    return -1;
}

#endif
