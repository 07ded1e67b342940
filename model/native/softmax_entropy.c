/* A generation step's next-token distribution: p = softmax(logits * inv_t) in float64 and its entropy in bits, in
three passes over the vocabulary (numpy's softmax and entropy took eight, ~0.3 ms for 49,152 logits, a row of every
step). The entropy comes from the exponents: with z_i = (x_i - max) * inv_t and S = sum_i exp(z_i), log p_i = z_i -
log S, so H = (log S - sum_i p_i z_i) / log 2, no logarithm per entry. exp in float64 registers (Cody-Waite
reduction by ln 2, a degree-13 Taylor polynomial, times 2^n: within 2 ulp of libm's); a row's numbers depend only on
its logits, and are the same with AVX-512 and AVX2 (the same operations per entry, the sums in the same order).
Logits that are not all finite are left to the caller (numpy's softmax handles them). Built at first use
by model/native/build.py. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "worker_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "vector_math.h"

/* The float64 exp's constants, shared by both instruction sets' versions: the clamp (exp 0 below; z <= 0 here),
log2(e), ln 2 as two parts (|r| <= ln 2 / 2 after both), and 1 / k! from k = 13 down. */
#define EXP_PD_LOWEST -746.0
#define EXP_PD_LOG2E 1.4426950408889634074
#define EXP_PD_LN2_HIGH 6.93147180369123816490e-01
#define EXP_PD_LN2_LOW 1.90821492927058770002e-10
static const double INVERSE_FACTORIALS[14] = {
    1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
    1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0};

__attribute__((target("avx512f")))
static inline __m512d exp_pd_avx512(__m512d z) {
    z = _mm512_max_pd(_mm512_set1_pd(EXP_PD_LOWEST), z);
    const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(z, _mm512_set1_pd(EXP_PD_LOG2E)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(EXP_PD_LN2_HIGH), z);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(EXP_PD_LN2_LOW), r);
    __m512d p = _mm512_set1_pd(INVERSE_FACTORIALS[0]);
    for (int i = 1; i < 14; i++) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(INVERSE_FACTORIALS[i]));
    return _mm512_scalef_pd(p, n);
}

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

/* exp_pd_avx512 on 4 lanes: the same operations, 2^n as two exact powers of two (n in [-1077, 0]: each half a
normal double, so one rounding, as scalef). */
__attribute__((target("avx2,fma")))
static inline __m256d exp_pd_avx2(__m256d z) {
    z = _mm256_max_pd(_mm256_set1_pd(EXP_PD_LOWEST), z);
    const __m256d n = _mm256_round_pd(_mm256_mul_pd(z, _mm256_set1_pd(EXP_PD_LOG2E)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(EXP_PD_LN2_HIGH), z);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(EXP_PD_LN2_LOW), r);
    __m256d p = _mm256_set1_pd(INVERSE_FACTORIALS[0]);
    for (int i = 1; i < 14; i++) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(INVERSE_FACTORIALS[i]));
    const __m128i k = _mm256_cvtpd_epi32(n), k_half = _mm_srai_epi32(k, 1);
    const __m256i half = _mm256_cvtepi32_epi64(k_half), rest = _mm256_cvtepi32_epi64(_mm_sub_epi32(k, k_half));
    const __m256i bias = _mm256_set1_epi64x(1023);
    const __m256d first = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(half, bias), 52));
    const __m256d second = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(rest, bias), 52));
    return _mm256_mul_pd(_mm256_mul_pd(p, first), second);
}

/* The sum of 8 double lanes held as lo (0-3) and hi (4-7), in _mm512_reduce_add_pd's order. */
__attribute__((target("avx2")))
static inline double reduce_add_pd_avx2(__m256d lo, __m256d hi) {
    const __m256d quarter = _mm256_add_pd(hi, lo);
    const __m128d pair = _mm_add_pd(_mm256_extractf128_pd(quarter, 1), _mm256_castpd256_pd128(quarter));
    return _mm_cvtsd_f64(pair) + _mm_cvtsd_f64(_mm_unpackhi_pd(pair, pair));
}

/* Logits i..i+7 as 8 floats, past V as 0 (plain loads where all 8 are there: AMD's masked moves are slow). */
__attribute__((target("avx2")))
static inline __m256 load8_avx2(const float *logits, int64_t i, int64_t V) {
    if (V - i >= 8) return _mm256_loadu_ps(logits + i);
    float tail[8] = {0};
    memcpy(tail, logits + i, (size_t)(V - i) * sizeof(float));
    return _mm256_loadu_ps(tail);
}

/* softmax_entropy_avx512 on AVX2: 8 logits at a time, as two halves of 4 doubles; the sums kept in 8 lanes (lo, hi)
and added as AVX-512's are, so both give the same numbers. */
__attribute__((target("avx2,fma")))
static int softmax_entropy_avx2(const float *logits, int64_t V, double inv_t, double *probs, double *entropy_bits) {
    __m256 top = _mm256_set1_ps(-INFINITY), finite = _mm256_setzero_ps();
    for (int64_t i = 0; i < V; i += 8) {
        const __m256 m = _mm256_castsi256_ps(first_lanes_avx2(V - i)), x = load8_avx2(logits, i, V);
        top = _mm256_blendv_ps(top, _mm256_max_ps(top, x), m);
        finite = _mm256_add_ps(finite, _mm256_sub_ps(x, x));
    }
    __m128 f = _mm_add_ps(_mm256_extractf128_ps(finite, 1), _mm256_castps256_ps128(finite));
    f = _mm_add_ps(f, _mm_movehl_ps(f, f));
    if (_mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f))) != 0.0f) return 1;
    __m128 t = _mm_max_ps(_mm256_extractf128_ps(top, 1), _mm256_castps256_ps128(top));
    t = _mm_max_ps(t, _mm_movehl_ps(t, t));
    t = _mm_max_ss(t, _mm_movehdup_ps(t));
    const __m256d shift = _mm256_set1_pd((double)_mm_cvtss_f32(t)), scale = _mm256_set1_pd(inv_t);
    __m256d total[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};       /* lanes 0-3, 4-7: sum e_i */
    __m256d weighted[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};    /* sum e_i z_i */
    int64_t whole = 0;
    for (; whole + 16 <= V; whole += 16) {    /* 16 logits: four exps at once (each a chain of 13 fmas), then the
                                                 sums in the order of two 8-logit steps below */
        __m256d z[4], e[4];
        for (int q = 0; q < 4; q++) {
            z[q] = _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(logits + whole + 4 * q)), shift), scale);
            e[q] = exp_pd_avx2(z[q]);
        }
        for (int q = 0; q < 4; q++) {
            _mm256_storeu_pd(probs + whole + 4 * q, e[q]);
            total[q % 2] = _mm256_add_pd(total[q % 2], e[q]);
            weighted[q % 2] = _mm256_fmadd_pd(e[q], z[q], weighted[q % 2]);
        }
    }
    for (int64_t i = whole; i < V; i += 8) {
        const __m256i m = first_lanes_avx2(V - i);
        const __m256 x8 = load8_avx2(logits, i, V);
        double e8[8];
        for (int half = 0; half < 2; half++) {
            const __m256d mh = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(half ? _mm256_extracti128_si256(m, 1)
                                                                              : _mm256_castsi256_si128(m)));
            const __m256d z = _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(half ? _mm256_extractf128_ps(x8, 1)
                                                                                : _mm256_castps256_ps128(x8)),
                                                          shift), scale);
            const __m256d e = _mm256_and_pd(exp_pd_avx2(z), mh);
            _mm256_storeu_pd(V - i >= 8 ? probs + i + 4 * half : e8 + 4 * half, e);
            total[half] = _mm256_add_pd(total[half], e);
            weighted[half] = _mm256_fmadd_pd(e, _mm256_and_pd(z, mh), weighted[half]);
        }
        if (V - i < 8) memcpy(probs + i, e8, (size_t)(V - i) * sizeof(double));
    }
    const double sum = reduce_add_pd_avx2(total[0], total[1]), inverse = 1.0 / sum;
    const __m256d normal = _mm256_set1_pd(inverse);
    int64_t i = 0;
    for (; i + 4 <= V; i += 4) _mm256_storeu_pd(probs + i, _mm256_mul_pd(_mm256_loadu_pd(probs + i), normal));
    for (; i < V; i++) probs[i] *= inverse;
    const double h = (log(sum) - reduce_add_pd_avx2(weighted[0], weighted[1]) * inverse) / log(2.0);
    *entropy_bits = h > 0.0 ? h : 0.0;
    return 0;
}

/* Returns 0 (probs and *entropy_bits written), 1 when a logit is inf or NaN, -1 on a CPU without AVX2 + FMA. */
int softmax_entropy(const float *logits, int64_t V, double inv_t, double *probs, double *entropy_bits) {
    const int level = vector_level();
    if (V < 1 || level == 0) return -1;
    return level == 2 ? softmax_entropy_avx512(logits, V, inv_t, probs, entropy_bits)
                      : softmax_entropy_avx2(logits, V, inv_t, probs, entropy_bits);
}

#else

int softmax_entropy(const float *logits, int64_t V, double inv_t, double *probs, double *entropy_bits) {
    (void)logits; (void)V; (void)inv_t; (void)probs; (void)entropy_bits;
    return -1;
}

#endif

typedef struct {
    const float *logits;               /* [rows, V] */
    const int64_t *row;                /* [n]: the logits row of each softmax */
    const double *inv_t;               /* [n] */
    double *probs, *entropy_bits;      /* [n, V], [n] */
    int *status;                       /* [n] */
    int64_t V;
} softmaxes_t;

static void softmax_items(const void *p, int64_t start, int64_t stop) {
    const softmaxes_t *a = p;
    for (int64_t i = start; i < stop; i++)
        a->status[i] = softmax_entropy(a->logits + a->row[i] * a->V, a->V, a->inv_t[i], a->probs + i * a->V,
                                       a->entropy_bits + i);
}

/* n softmaxes at once, one a thread at a time: softmax i of logits row row[i] at 1 / inv_t[i] into probs[i] and
entropy_bits[i], with softmax_entropy's status in status[i] (each the numbers of its own call). */
void softmax_entropy_rows(const float *logits, int64_t V, const int64_t *row, const double *inv_t, int64_t n,
                          double *probs, double *entropy_bits, int *status, int threads) {
    const softmaxes_t a = {logits, row, inv_t, probs, entropy_bits, status, V};
    parallel_items(softmax_items, &a, n, threads);
}
