/* The made-weights sequence of x @ W^T over int8 / 4-bit codes (a full forward pass's; model/native/int8_linear.c
has the layout, the generation step's block-sum sequence and the entry point int8_linear_strided). */
#include <stdint.h>
#include <stdlib.h>

#include "int8_linear.h"

#if defined(__x86_64__)
#include "worker_pool.h"

/* The made-weights product (made = 1): a full forward pass's, many rows at once. A few groups' weights (an item)
are made first into a float32 buffer the tiles share, w = fma(c, s, o) (c * s without offsets), one rounding: for
GGUF's float16 scales c * s is exact, so these are the values gguf dequantizes; then each y[m, n] is one chain
acc = fma(x[m, k], w[n, k], acc) over k in order from acc = 0 (the float32 product of x and the dequantized
matrix), the same for any M, tile, thread count or instruction set. The tiles' loop is only loads and
multiply-adds: two groups' weights times up to 12 rows (AVX-512: 24 accumulators in registers), or one group (two
8-lane vectors) times up to 6 rows (AVX2). Its weights cost a pass over the codes per call, so it is for passes
of many rows; a generation step keeps the block-sum sequence above. */
#define MADE_PASS_BYTES 393216  /* an item's made weights, held in L2 while every tile of rows runs over them */
#define MAX_MADE_DOTS 24

/* Groups g .. g + n - 1's weights for all of K into w ([n][K][16] float32). */
#define MAKE_WEIGHTS(name, isa, nibbles, offsets)                                                                    \
    __attribute__((target(isa)))                                                                                      \
    static void name(const job_t *j, int64_t g, int64_t n, float *w) {                                                \
        const int64_t K = j->K, B = K / 32, stride = nibbles ? 8 : 16;                                                \
        for (int64_t q = 0; q < n; q++)                                                                               \
            for (int64_t b = 0; b < B; b++) {                                                                         \
                const int64_t at_b = ((g + q) * B + b) * GROUP_OUTPUTS;                                               \
                const __m512 scale = _mm512_loadu_ps(j->s + at_b);                                                    \
                const __m512 offset = offsets ? _mm512_loadu_ps(j->o + at_b) : _mm512_setzero_ps();                   \
                for (int kk = 0; kk < 32; kk++) {                                                                     \
                    const int64_t k = b * 32 + kk;                                                                    \
                    const __m512 f = codes_at_wide(j->c + ((g + q) * K + k) * stride, nibbles);                       \
                    _mm512_store_ps(w + (q * K + k) * GROUP_OUTPUTS,                                                  \
                                    offsets ? _mm512_fmadd_ps(f, scale, offset) : _mm512_mul_ps(f, scale));           \
                }                                                                                                     \
            }                                                                                                         \
    }

MAKE_WEIGHTS(make_q8, "avx512f", 0, 0)
MAKE_WEIGHTS(make_q8_offsets, "avx512f", 0, 1)
MAKE_WEIGHTS(make_q4, "avx512f", 1, 0)
MAKE_WEIGHTS(make_q4_offsets, "avx512f", 1, 1)

/* AVX2 builds the same weights: the AVX-512 code needs AVX-512, so AVX2 machines make them 8 lanes at a time. */
#define MAKE_WEIGHTS_AVX2(name, nibbles, offsets)                                                                    \
    __attribute__((target("avx2,fma")))                                                                               \
    static void name(const job_t *j, int64_t g, int64_t n, float *w) {                                                \
        const int64_t K = j->K, B = K / 32, stride = nibbles ? 8 : 16;                                                \
        for (int64_t q = 0; q < n; q++)                                                                               \
            for (int64_t b = 0; b < B; b++) {                                                                         \
                const int64_t at_b = ((g + q) * B + b) * GROUP_OUTPUTS;                                               \
                const __m256 s0 = _mm256_loadu_ps(j->s + at_b), s1 = _mm256_loadu_ps(j->s + at_b + 8);                \
                const __m256 o0 = offsets ? _mm256_loadu_ps(j->o + at_b) : _mm256_setzero_ps();                       \
                const __m256 o1 = offsets ? _mm256_loadu_ps(j->o + at_b + 8) : _mm256_setzero_ps();                   \
                for (int kk = 0; kk < 32; kk++) {                                                                     \
                    const int64_t k = b * 32 + kk;                                                                    \
                    __m256 f0, f1;                                                                                    \
                    codes_at(j->c + ((g + q) * K + k) * stride, nibbles, &f0, &f1);                                   \
                    float *at = w + (q * K + k) * GROUP_OUTPUTS;                                                      \
                    _mm256_store_ps(at, offsets ? _mm256_fmadd_ps(f0, s0, o0) : _mm256_mul_ps(f0, s0));               \
                    _mm256_store_ps(at + 8, offsets ? _mm256_fmadd_ps(f1, s1, o1) : _mm256_mul_ps(f1, s1));           \
                }                                                                                                     \
            }                                                                                                         \
    }

MAKE_WEIGHTS_AVX2(make_q8_avx2, 0, 0)
MAKE_WEIGHTS_AVX2(make_q8_offsets_avx2, 0, 1)
MAKE_WEIGHTS_AVX2(make_q4_avx2, 1, 0)
MAKE_WEIGHTS_AVX2(make_q4_offsets_avx2, 1, 1)

/* C groups of made weights (w: [C][K][16]) times R rows of x (K apart: read in place, no packed copy; each k's R
values from R lines that the next 15 k's reuse) into out [C R][16]; R and C fixed at compile time so that the
accumulators stay in registers. */
__attribute__((target("avx512f")))
ALWAYS_INLINE void made_tile_wide(const float *w, const float *x, int64_t K, const int R, const int C, float *out) {
    __m512 acc[MAX_MADE_DOTS];
    for (int a = 0; a < R * C; a++) acc[a] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        __m512 wk[MAX_MADE_DOTS];
        for (int q = 0; q < C; q++) wk[q] = _mm512_load_ps(w + (q * K + k) * GROUP_OUTPUTS);
        for (int i = 0; i < R; i++) {
            const __m512 xv = _mm512_set1_ps(x[i * K + k]);           /* one broadcast for the C groups */
            for (int q = 0; q < C; q++) acc[q * R + i] = _mm512_fmadd_ps(xv, wk[q], acc[q * R + i]);
        }
    }
    for (int a = 0; a < R * C; a++) _mm512_store_ps(out + a * GROUP_OUTPUTS, acc[a]);
}

/* made_tile_wide on AVX2: one group (two 8-lane vectors) times up to MAX_TILE rows. */
__attribute__((target("avx2,fma")))
ALWAYS_INLINE void made_tile(const float *w, const float *x, int64_t K, const int R, float *out) {
    __m256 lo[MAX_TILE], hi[MAX_TILE];
    for (int i = 0; i < R; i++) lo[i] = hi[i] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        const __m256 w0 = _mm256_load_ps(w + k * GROUP_OUTPUTS), w1 = _mm256_load_ps(w + k * GROUP_OUTPUTS + 8);
        for (int i = 0; i < R; i++) {
            const __m256 xv = _mm256_broadcast_ss(x + i * K + k);
            lo[i] = _mm256_fmadd_ps(xv, w0, lo[i]);
            hi[i] = _mm256_fmadd_ps(xv, w1, hi[i]);
        }
    }
    for (int i = 0; i < R; i++) {
        _mm256_store_ps(out + i * GROUP_OUTPUTS, lo[i]);
        _mm256_store_ps(out + i * GROUP_OUTPUTS + 8, hi[i]);
    }
}

/* Groups shared out at a time by the made-weights product: as many as keep their weights within MADE_PASS_BYTES
(every tile of rows runs over them from L2), yet at most a sixteenth of the groups a thread has (a thread left with
the last large item idles the others: 7 items of 4 group pairs on 2 threads took 1.14x the time of 28 items of one),
and at least the groups the first tile takes at once; even, for the two-group tiles. */
static int64_t items_of(int64_t G, int64_t K, int least, int threads) {
    int64_t n = MADE_PASS_BYTES / (K * GROUP_OUTPUTS * (int64_t)sizeof(float));
    const int64_t share = G / (16 * (int64_t)(threads > 0 ? threads : 1));
    n = n < share ? n : share;
    n = n > least ? n : least;
    return (n + 1) / 2 * 2;
}

/* Groups a made tile of R rows takes at once (AVX-512): enough accumulators for the fma's latency. */
static int made_chains_wide(int R) { return R == 1 ? 8 : R == 2 ? 4 : R == 3 ? 3 : 2; }
static int made_chains(int R) { (void)R; return 1; }

#define MADE_WIDE_CASE(R, C)                                                                                          \
    case R * 16 + C:                                                                                                  \
        made_tile_wide(w + (g - p0) * K * GROUP_OUTPUTS, xm, K, R, C, dots);                                          \
        break;
#define MADE_CASE(R, C)                                                                                               \
    case R * 16 + C:                                                                                                  \
        made_tile(w + (g - p0) * K * GROUP_OUTPUTS, xm, K, R, dots);                                                  \
        break;
#define MADE_WIDE_CASES                                                                                               \
    MADE_WIDE_CASE(1, 8) MADE_WIDE_CASE(1, 1) MADE_WIDE_CASE(2, 4) MADE_WIDE_CASE(2, 1) MADE_WIDE_CASE(3, 3)          \
    MADE_WIDE_CASE(3, 1) MADE_WIDE_CASE(4, 2) MADE_WIDE_CASE(4, 1) MADE_WIDE_CASE(5, 2) MADE_WIDE_CASE(5, 1)          \
    MADE_WIDE_CASE(6, 2) MADE_WIDE_CASE(6, 1) MADE_WIDE_CASE(7, 2) MADE_WIDE_CASE(7, 1) MADE_WIDE_CASE(8, 2)          \
    MADE_WIDE_CASE(8, 1) MADE_WIDE_CASE(9, 2) MADE_WIDE_CASE(9, 1) MADE_WIDE_CASE(10, 2) MADE_WIDE_CASE(10, 1)        \
    MADE_WIDE_CASE(11, 2) MADE_WIDE_CASE(11, 1) MADE_WIDE_CASE(12, 2) MADE_WIDE_CASE(12, 1)
#define MADE_CASES                                                                                                    \
    MADE_CASE(1, 1) MADE_CASE(2, 1) MADE_CASE(3, 1) MADE_CASE(4, 1) MADE_CASE(5, 1) MADE_CASE(6, 1)

/* Items first..stop-1 of a job (item_groups groups each) for every row of x, read as it is (a tile's rows stay in
L1 / L2; packing 256 rows of 4864 cost more than it saved): each item's weights made into this call's buffer, then
every tile of rows over them. */
#define MADE_RANGE(name, isa, make, chains, cases)                                                                    \
    __attribute__((target(isa)))                                                                                      \
    static void name(const void *p, int64_t first, int64_t stop_item) {                                               \
        const job_t *j = p;                                                                                           \
        const int64_t K = j->K, G = (j->N + 15) / 16, pass = j->item_groups;                                          \
        const int64_t start = first * pass, stop = stop_item * pass < G ? stop_item * pass : G;                       \
        float *w = aligned_alloc(64, (size_t)(pass * K * GROUP_OUTPUTS) * sizeof(float));                             \
        float dots[MAX_MADE_DOTS * GROUP_OUTPUTS] __attribute__((aligned(64)));                                       \
        if (!w) {                                                                                                     \
            *j->failed = 1;                                                                                           \
            return;                                                                                                   \
        }                                                                                                             \
        for (int64_t p0 = start; p0 < stop; p0 += pass) {                                                             \
            const int64_t p1 = p0 + pass < stop ? p0 + pass : stop;                                                   \
            make(j, p0, p1 - p0, w);                                                                                  \
            for (int64_t m = 0; m < j->M;) {                                                                          \
                const int R = tile_rows(j->M - m, j->max_tile);                                                       \
                const float *xm = j->x + m * K;                                                                       \
                for (int64_t g = p0; g < p1;) {                                                                       \
                    const int C = chains(R) <= p1 - g ? chains(R) : 1;                                                \
                    switch (R * 16 + C) { cases }                                                                     \
                    store_dots(j, dots, g, C, m, R);                                                                  \
                    g += C;                                                                                           \
                }                                                                                                     \
                m += R;                                                                                               \
            }                                                                                                         \
        }                                                                                                             \
        free(w);                                                                                                      \
    }

MADE_RANGE(made_wide_q8, "avx512f", make_q8, made_chains_wide, MADE_WIDE_CASES)
MADE_RANGE(made_wide_q8_offsets, "avx512f", make_q8_offsets, made_chains_wide, MADE_WIDE_CASES)
MADE_RANGE(made_wide_q4, "avx512f", make_q4, made_chains_wide, MADE_WIDE_CASES)
MADE_RANGE(made_wide_q4_offsets, "avx512f", make_q4_offsets, made_chains_wide, MADE_WIDE_CASES)
MADE_RANGE(made_q8, "avx2,fma", make_q8_avx2, made_chains, MADE_CASES)
MADE_RANGE(made_q8_offsets, "avx2,fma", make_q8_offsets_avx2, made_chains, MADE_CASES)
MADE_RANGE(made_q4, "avx2,fma", make_q4_avx2, made_chains, MADE_CASES)
MADE_RANGE(made_q4_offsets, "avx2,fma", make_q4_offsets_avx2, made_chains, MADE_CASES)

int64_t int8_made_item_groups(int64_t G, int64_t K, int level, int R0, int threads) {
    return items_of(G, K, level > 1 ? made_chains_wide(R0) : made_chains(R0), threads);
}

void int8_made_product(const job_t *job, int level, int nibbles, int64_t G, int threads) {
    const int offsets = job->o != NULL;
    parallel_items(level > 1 ? (nibbles ? (offsets ? made_wide_q4_offsets : made_wide_q4)
                                        : (offsets ? made_wide_q8_offsets : made_wide_q8))
                             : (nibbles ? (offsets ? made_q4_offsets : made_q4)
                                        : (offsets ? made_q8_offsets : made_q8)),
                   job, (G + job->item_groups - 1) / job->item_groups, threads);
}

#endif
