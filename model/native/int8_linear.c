/* y[m, n] = sum over 32-value blocks b of  s[n, b] * (c[n, b, :] . x[m, b, :])  +  o[n, b] * sum(x[m, b, :]),
in float32 arithmetic: x @ W^T for W[n, k] = s[n, k / 32] * c[n, k] + o[n, k / 32] (the values of Q8_0, Q4_0, Q4_1,
Q5_0 and Q5_1 blocks).

c: the codes, int8 [N, K] (nibbles = 0), or 4-bit [N, K / 2] (nibbles = 1: byte j of a block's 16 holds code j in its
low nibble and code j + 16 in its high nibble, GGUF's Q4_0 / Q4_1 order); s: float32 [N, K / 32]; o: float32
[N, K / 32] or NULL (no offsets); x: float32 [M, K]; y: float32 [M, N]. Each y[m, n] is one thread's fixed sequence of operations whatever M and the thread count (one
vector accumulators per (m, n) for even and odd blocks, the offsets in one scalar accumulator, then the lanes added),
so a row's numbers do not depend on the rows beside it. The codes are read once for every tile of up to 4 rows of x
(8-row tiles spilled registers and ran slower per row). Built at first use by
model/native/build.py; int8_linear_level() says which instruction set this CPU runs (0: none, use the fallback). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__x86_64__)
#include <immintrin.h>

#include "worker_pool.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* sum over blocks of o[b] * xs[b]: xs holds each block's sum of x (see int8_linear) */
static float offset_term(const float *o, const float *xs, int64_t B) {
    float total = 0.0f;
    #pragma omp simd reduction(+:total)
    for (int64_t b = 0; b < B; b++) total += o[b] * xs[b];
    return total;
}

/* The 32 codes of a block as two 16-lane float vectors. */
__attribute__((target("avx512f")))
ALWAYS_INLINE void widen32_avx512(const int8_t *cb, const int nibbles, __m512 *w0, __m512 *w1) {
    if (nibbles) {
        const __m128i bytes = _mm_loadu_si128((const __m128i *)cb), low = _mm_set1_epi8(0x0F);
        *w0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(bytes, low)));
        *w1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(bytes, 4), low)));
    } else {
        *w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)cb)));
        *w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(cb + 16))));
    }
}

/* Block b of output n for R rows of x, added into acc[R]. */
__attribute__((target("avx512f")))
ALWAYS_INLINE void block_avx512(const int8_t *cn, const float *sn, const float *x, int64_t K, int64_t b,
                                const int nibbles, const int R, __m512 *acc) {
    __m512 w0, w1;
    widen32_avx512(cn + b * (nibbles ? 16 : 32), nibbles, &w0, &w1);
    const __m512 scale = _mm512_set1_ps(sn[b]);
    for (int i = 0; i < R; i++) {
        const float *xb = x + i * K + b * 32;
        __m512 t = _mm512_mul_ps(w0, _mm512_loadu_ps(xb));
        t = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xb + 16), t);
        acc[i] = _mm512_fmadd_ps(scale, t, acc[i]);
    }
}

/* Output n for R rows of x (R = 1, 2 or 4, fixed at compile time so the accumulators stay in registers). Even and
odd blocks go to two accumulators (two dependency chains), added at the end: the same order for every R. */
__attribute__((target("avx512f")))
ALWAYS_INLINE void dot_rows_avx512(const int8_t *cn, const float *sn, const float *x, int64_t K, int64_t B,
                                   const int nibbles, const int R, float *out) {
    __m512 even[4], odd[4];
    for (int i = 0; i < R; i++) even[i] = odd[i] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 1 < B; b += 2) {
        block_avx512(cn, sn, x, K, b, nibbles, R, even);
        block_avx512(cn, sn, x, K, b + 1, nibbles, R, odd);
    }
    if (b < B) block_avx512(cn, sn, x, K, b, nibbles, R, even);
    for (int i = 0; i < R; i++) out[i] = _mm512_reduce_add_ps(_mm512_add_ps(even[i], odd[i]));
}


/* The 32 codes of a block as four 8-lane float vectors. */
__attribute__((target("avx2,fma")))
ALWAYS_INLINE void widen32_avx2(const int8_t *cb, const int nibbles, __m256 w[4]) {
    if (nibbles) {
        const __m128i bytes = _mm_loadu_si128((const __m128i *)cb), low = _mm_set1_epi8(0x0F);
        const __m128i lo = _mm_and_si128(bytes, low), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low);
        w[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
        w[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
        w[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
        w[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
    } else {
        for (int i = 0; i < 4; i++)
            w[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(cb + 8 * i))));
    }
}

/* Block b of output n for R rows of x, added into acc[R]. */
__attribute__((target("avx2,fma")))
ALWAYS_INLINE void block_avx2(const int8_t *cn, const float *sn, const float *x, int64_t K, int64_t b,
                              const int nibbles, const int R, __m256 *acc) {
    __m256 w[4];
    widen32_avx2(cn + b * (nibbles ? 16 : 32), nibbles, w);
    const __m256 scale = _mm256_set1_ps(sn[b]);
    for (int i = 0; i < R; i++) {
        const float *xb = x + i * K + b * 32;
        __m256 t = _mm256_mul_ps(w[0], _mm256_loadu_ps(xb));
        t = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xb + 8), t);
        t = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xb + 16), t);
        t = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xb + 24), t);
        acc[i] = _mm256_fmadd_ps(scale, t, acc[i]);
    }
}

__attribute__((target("avx2,fma")))
ALWAYS_INLINE void dot_rows_avx2(const int8_t *cn, const float *sn, const float *x, int64_t K, int64_t B,
                                 const int nibbles, const int R, float *out) {
    __m256 even[4], odd[4];
    for (int i = 0; i < R; i++) even[i] = odd[i] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 1 < B; b += 2) {
        block_avx2(cn, sn, x, K, b, nibbles, R, even);
        block_avx2(cn, sn, x, K, b + 1, nibbles, R, odd);
    }
    if (b < B) block_avx2(cn, sn, x, K, b, nibbles, R, even);
    for (int i = 0; i < R; i++) {
        const __m256 sum = _mm256_add_ps(even[i], odd[i]);
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_movehdup_ps(h));
        out[i] = _mm_cvtss_f32(h);
    }
}


/* Output n for every row of x, in tiles of 4, then fewer: a row's arithmetic is the same in any tile. One
definition per instruction set (its dot_rows_<isa>). */
#define OUTPUT(isa, target_isa)                                                                                   \
    __attribute__((target(target_isa)))                                                                           \
    ALWAYS_INLINE void output_##isa(const int8_t *c, const float *s, const float *o, const float *xs,               \
                                    const float *x, float *y, int64_t M, int64_t N, int64_t K, int64_t n,          \
                                    const int nibbles) {                                                          \
        const int64_t B = K / 32;                                                                                 \
        const int8_t *cn = c + n * (nibbles ? K / 2 : K);                                                         \
        const float *sn = s + n * B;                                                                              \
        float dots[4];                                                                                            \
        for (int64_t m = 0; m < M;) {                                                                             \
            const int64_t left = M - m;                                                                           \
            const int R = left >= 4 ? 4 : left >= 2 ? 2 : 1;                                                      \
            switch (R) {                                                                                          \
                case 4: dot_rows_##isa(cn, sn, x + m * K, K, B, nibbles, 4, dots); break;                         \
                case 2: dot_rows_##isa(cn, sn, x + m * K, K, B, nibbles, 2, dots); break;                         \
                default: dot_rows_##isa(cn, sn, x + m * K, K, B, nibbles, 1, dots);                               \
            }                                                                                                     \
            for (int i = 0; i < R; i++)                                                                           \
                y[(m + i) * N + n] = dots[i] + (o ? offset_term(o + n * B, xs + (m + i) * B, B) : 0.0f);          \
            m += R;                                                                                               \
        }                                                                                                         \
    }

OUTPUT(avx512, "avx512f")
OUTPUT(avx2, "avx2,fma")

typedef struct {
    const int8_t *c;
    const float *s, *o, *xs, *x;
    float *y;
    int64_t M, N, K;
} job_t;

/* Outputs start..stop-1 of a job, one function per instruction set and code width: the width is a constant where
the block loop is compiled (a run-time flag there left it branchy and spilling). */
#define OUTPUT_RANGE(name, isa, target_isa, nibbles)                                                                \
    __attribute__((target(target_isa)))                                                                           \
    static void name(const void *p, int64_t start, int64_t stop) {                                                 \
        const job_t *j = p;                                                                                       \
        for (int64_t n = start; n < stop; n++)                                                                    \
            output_##isa(j->c, j->s, j->o, j->xs, j->x, j->y, j->M, j->N, j->K, n, nibbles);                      \
    }

OUTPUT_RANGE(outputs_avx512_q8, avx512, "avx512f", 0)
OUTPUT_RANGE(outputs_avx512_q4, avx512, "avx512f", 1)
OUTPUT_RANGE(outputs_avx2_q8, avx2, "avx2,fma", 0)
OUTPUT_RANGE(outputs_avx2_q4, avx2, "avx2,fma", 1)

int int8_linear_level(void) {
    static int level = -1;
    if (level < 0) {
        __builtin_cpu_init();
        level = __builtin_cpu_supports("avx512f") ? 2
              : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
    }
    return level;
}

/* Returns 0, or -1 when the block sums (M * K / 32 floats, for offsets) could not be allocated. */
int int8_linear(const int8_t *c, const float *s, const float *o, const float *x, float *y,
                int64_t M, int64_t N, int64_t K, int threads, int nibbles) {
    const int64_t B = K / 32;
    float *xs = NULL;
    if (o) {
        xs = malloc((size_t)(M * B) * sizeof(float));
        if (!xs) return -1;
        for (int64_t i = 0; i < M * B; i++) {
            float total = 0.0f;
            for (int j = 0; j < 32; j++) total += x[i * 32 + j];
            xs[i] = total;
        }
    }
    const job_t job = {c, s, o, xs, x, y, M, N, K};
    if (int8_linear_level() == 2) parallel_range(nibbles ? outputs_avx512_q4 : outputs_avx512_q8, &job, N, threads);
    else if (int8_linear_level() == 1) parallel_range(nibbles ? outputs_avx2_q4 : outputs_avx2_q8, &job, N, threads);
    free(xs);
    return 0;
}

#else

#define VARIANT(name, body, target)                                                                              \
    __attribute__((target(target)))                                                                              \
    static void name(const int8_t *c, const float *s, const float *o, const float *xs, const float *x, float *y,   \
                     int64_t M, int64_t N, int64_t K, int threads, int nibbles) {                                  \
        if (nibbles) body(c, s, o, xs, x, y, M, N, K, threads, 1);                                                \
        else body(c, s, o, xs, x, y, M, N, K, threads, 0);                                                        \
    }
VARIANT(run_avx512, linear_avx512, "avx512f")
VARIANT(run_avx2, linear_avx2, "avx2,fma")

int int8_linear_level(void) { return 0; }

int int8_linear(const int8_t *c, const float *s, const float *o, const float *x, float *y,
                int64_t M, int64_t N, int64_t K, int threads, int nibbles) {
    (void)c; (void)s; (void)o; (void)x; (void)y; (void)M; (void)N; (void)K; (void)threads; (void)nibbles;
    return -1;
}

#endif
