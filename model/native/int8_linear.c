/* y[m, n] = sum over k of  W[n, k] * x[m, k]  in float32 arithmetic, for W[n, k] = s[n, k / 32] * c[n, k] +
o[n, k / 32] (the values of Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 blocks), without making W: each block's codes are
multiplied by x, and the sum scaled.

The matrix is held in groups of GROUP_OUTPUTS outputs (int8_linear.py's grouped layout), so that one vector holds
one k's codes of 16 outputs: c [G][K][16] int8 codes (nibbles = 0), or [G][K][8] bytes with two 4-bit codes each
(nibbles = 1: byte j holds output j's code in its low nibble and output j + 8's in its high); s and o (or NULL: no
offsets) [G][K / 32][16] float32; outputs past N (the last group's padding) are not stored. x: float32 [M, K]; y:
float32 [M, N] with rows ldy apart.

Each y[m, n] is one fixed sequence of operations: acc = 0; for each block b of 32 values of k in turn,
sum = 0, then sum = fma(c[n, k], x[m, k], sum) for each k of the block in turn, then acc = fma(s[n, b], sum, acc),
and with offsets acc = fma(o[n, b], xsum, acc), xsum being the block's x[m, k] added in turn from 0. That sequence
is the same whatever M, the tile a row falls in, the thread count or the instruction set, so a row's numbers do not
depend on the rows beside it. The inner loop is only multiply-adds: weights made first (code * scale, or an fma
with the offset, as gguf dequantizes) took one more multiply or fma per vector of codes, as many as the
multiply-adds of a one- or two-row tile (one row: 1.2-1.3x slower). A tile of up to MAX_TILE rows, transposed to
[K][R], broadcasts each x[m, k] into the two vectors of a group's 16 codes (a BLIS-style outer product: 12
multiply-adds per k for the codes widened once); every tile takes a pass of groups in turn, their codes held in L2,
before the next pass (PASS_BYTES). Built at first use by model/native/build.py; int8_linear_level() says whether
this CPU runs it (0: use the fallback). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* out [n_blocks, 32] = c * s[block]: Q8_0 blocks' float32 values (code times scale, exact), as gguf dequantizes
them; for a kept-quantized matrix's product in the full forward (one pass instead of torch's conversion then
multiplication). Compiled for AVX-512, AVX2 and the baseline. */
#if defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void int8_dequantize(const int8_t *c, const float *s, int64_t n_blocks, float *out) {
    for (int64_t b = 0; b < n_blocks; b++)
        for (int v = 0; v < 32; v++) out[b * 32 + v] = (float)c[b * 32 + v] * s[b];
}

/* out [rows, K] = rows row0 .. row0 + rows - 1 of a Q8_0 matrix held in the grouped layout (codes [G][K][16],
scales [G][K / 32][16], no offsets): code times scale, exact, as int8_dequantize; for a kept-quantized matrix's
product in the full forward. */
#if defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void int8_dequantize_grouped(const int8_t *c, const float *s, int64_t K, int64_t row0, int64_t rows, float *out) {
    const int64_t B = K / 32;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t n = row0 + r, g = n / 16, j = n % 16;
        const int8_t *cn = c + g * K * 16 + j;
        const float *sn = s + g * B * 16 + j;
        for (int64_t b = 0; b < B; b++)
            for (int v = 0; v < 32; v++) out[r * K + b * 32 + v] = (float)cn[(b * 32 + v) * 16] * sn[b * 16];
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

#include "vector_math.h"
#include "worker_pool.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define GROUP_OUTPUTS 16        /* outputs of a group: two 8-lane vectors */
#define MAX_TILE 6              /* rows of x per tile: 12 block sums, 2 vectors of codes and x[m, k] in 16 registers */
#define MAX_CHAINS 4            /* groups taken together by a tile of one or two rows (more dependency chains) */

/* One k's codes of a group's 16 outputs, widened to float (exact: small integers). */
__attribute__((target("avx2,fma")))
ALWAYS_INLINE void codes_at(const int8_t *ck, const int nibbles, __m256 *f0, __m256 *f1) {
    if (nibbles) {
        const __m256i pairs = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)ck));  /* a byte a lane */
        *f0 = _mm256_cvtepi32_ps(_mm256_and_si256(pairs, _mm256_set1_epi32(0x0F)));
        *f1 = _mm256_cvtepi32_ps(_mm256_srli_epi32(pairs, 4));
    } else {
        *f0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)ck)));
        *f1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(ck + 8))));
    }
}

/* Groups g .. g + C - 1 for a tile of R rows (xt: [K][R]; xs: the rows' block sums [K / 32][R], read with
offsets), all of K, into out (the tile's accumulators, [C R][16]); R and C fixed at compile time so that the 2 R C
block sums stay in registers. Each block's codes are multiplied by x from zero, then scaled (and the offset times
the block's x sum added) into the accumulator: the inner loop is only the multiply-adds (made weights cost a
multiply or an fma per vector of codes, as many as the multiply-adds of 1 to 2 rows). */
__attribute__((target("avx2,fma")))
ALWAYS_INLINE void tile_groups(const int8_t *c, const float *s, const float *o, const float *xt, const float *xs,
                               int64_t g, int64_t K, const int nibbles, const int offsets, const int R, const int C,
                               float *out) {
    const int64_t B = K / 32, stride = nibbles ? 8 : 16;
    for (int a = 0; a < 2 * R * C; a++) _mm256_store_ps(out + a * 8, _mm256_setzero_ps());
    for (int64_t b = 0; b < B; b++) {
        __m256 lo[MAX_CHAINS * MAX_TILE], hi[MAX_CHAINS * MAX_TILE];
        for (int a = 0; a < R * C; a++) lo[a] = hi[a] = _mm256_setzero_ps();
        for (int kk = 0; kk < 32; kk++) {
            const int64_t k = b * 32 + kk;
            for (int q = 0; q < C; q++) {
                __m256 f0, f1;
                codes_at(c + ((g + q) * K + k) * stride, nibbles, &f0, &f1);
                for (int i = 0; i < R; i++) {
                    const __m256 xv = _mm256_broadcast_ss(xt + k * R + i);
                    lo[q * R + i] = _mm256_fmadd_ps(f0, xv, lo[q * R + i]);
                    hi[q * R + i] = _mm256_fmadd_ps(f1, xv, hi[q * R + i]);
                }
            }
        }
        for (int q = 0; q < C; q++) {
            const int64_t at_b = ((g + q) * B + b) * GROUP_OUTPUTS;
            const float *sb = s + at_b, *ob = offsets ? o + at_b : NULL;
            for (int i = 0; i < R; i++) {
                float *at = out + (q * R + i) * GROUP_OUTPUTS;
                __m256 y0 = _mm256_fmadd_ps(_mm256_loadu_ps(sb), lo[q * R + i], _mm256_load_ps(at));
                __m256 y1 = _mm256_fmadd_ps(_mm256_loadu_ps(sb + 8), hi[q * R + i], _mm256_load_ps(at + 8));
                if (offsets) {
                    const __m256 sum = _mm256_broadcast_ss(xs + b * R + i);
                    y0 = _mm256_fmadd_ps(_mm256_loadu_ps(ob), sum, y0);
                    y1 = _mm256_fmadd_ps(_mm256_loadu_ps(ob + 8), sum, y1);
                }
                _mm256_store_ps(at, y0);
                _mm256_store_ps(at + 8, y1);
            }
        }
    }
}

typedef struct {
    const int8_t *c;
    const float *s, *o, *x, *xs;   /* xs: the block sums of x (pack_block_sums), with offsets */
    float *y;
    int64_t M, N, K, ldy;          /* ldy: floats from one row of y to the next (N, or more for a part of y) */
} job_t;

/* Rows of x in the tile starting `left` rows before the end: the rows left split evenly into as few tiles as hold
at most MAX_TILE rows: 10 rows are two tiles of 5, 30 five of 6. */
static int tile_rows(int64_t left) {
    const int64_t tiles = (left + MAX_TILE - 1) / MAX_TILE;
    return (int)((left + tiles - 1) / tiles);
}

/* Groups a tile of R rows takes at once: more chains for one or two rows (a single accumulator pair waits on its
fma's latency); measured on a Zen 3, 4 groups for one row, 2 for two, one from three rows (3 rows x 2 groups spilled:
1.35x slower). */
static int tile_chains(int R) { return R == 1 ? 4 : R == 2 ? 2 : 1; }

/* x [M, K] with each tile of R rows (tile_rows) transposed, [K][R], in memory aligned to 64-byte lines: a k's
R values are contiguous for the broadcasts. */
static void pack_tiles(const float *x, float *packed, int64_t M, int64_t K) {
    for (int64_t m = 0; m < M;) {
        const int R = tile_rows(M - m);
        for (int64_t k = 0; k < K; k++)
            for (int i = 0; i < R; i++) packed[m * K + k * R + i] = x[(m + i) * K + k];
        m += R;
    }
}

/* The sums of x's rows over each block of 32 values, for the offsets' term, each tile's [K / 32][R] as pack_tiles
lays x out: sum = 0, then sum = sum + x[m, k] for the block's values in order. */
static void pack_block_sums(const float *x, float *xs, int64_t M, int64_t K) {
    const int64_t B = K / 32;
    for (int64_t m = 0; m < M;) {
        const int R = tile_rows(M - m);
        for (int i = 0; i < R; i++)
            for (int64_t b = 0; b < B; b++) {
                float sum = 0.0f;
                for (int v = 0; v < 32; v++) sum += x[(m + i) * K + b * 32 + v];
                xs[m * B + b * R + i] = sum;
            }
        m += R;
    }
}

#define TILE_CASE(R, C)                                                                                               \
    case R * 8 + C:                                                                                                   \
        tile_groups(j->c, j->s, j->o, xt, xst, g, K, nibble_codes, with_offsets, R, C, dots);                         \
        break;

/* Groups start..stop-1 of a job for every row of x (packed by pack_tiles), a pass of groups (their codes in L2) at
a time, each tile of rows over the pass. One function per code width and offsets or not (constants where the loop
is compiled: a test of the offsets' pointer at every k left the loop branchy). */
#define PASS_BYTES 98304
#define GROUP_RANGE(name, nibbles, offsets)                                                                           \
    __attribute__((target("avx2,fma")))                                                                               \
    static void name(const void *p, int64_t start, int64_t stop) {                                                    \
        const job_t *j = p;                                                                                           \
        const int nibble_codes = nibbles, with_offsets = offsets;                                                     \
        const int64_t K = j->K, group_bytes = K * (nibbles ? 8 : 16);                                                 \
        const int64_t pass = PASS_BYTES / group_bytes > 0 ? PASS_BYTES / group_bytes : 1;                             \
        float dots[MAX_CHAINS * MAX_TILE * GROUP_OUTPUTS] __attribute__((aligned(32)));                               \
        for (int64_t p0 = start; p0 < stop; p0 += pass) {                                                             \
            const int64_t p1 = p0 + pass < stop ? p0 + pass : stop;                                                   \
            for (int64_t m = 0; m < j->M;) {                                                                          \
                const int R = tile_rows(j->M - m);                                                                    \
                const float *xt = j->x + m * K, *xst = with_offsets ? j->xs + m * (K / 32) : NULL;                    \
                for (int64_t g = p0; g < p1;) {                                                                       \
                    const int C = tile_chains(R) <= p1 - g ? tile_chains(R) : 1;                                      \
                    switch (R * 8 + C) {                                                                              \
                        TILE_CASE(1, 4) TILE_CASE(1, 1) TILE_CASE(2, 2) TILE_CASE(2, 1)                               \
                        TILE_CASE(3, 1) TILE_CASE(4, 1) TILE_CASE(5, 1) TILE_CASE(6, 1)                               \
                    }                                                                                                 \
                    for (int q = 0; q < C; q++) {                                                                     \
                        const int64_t n0 = (g + q) * GROUP_OUTPUTS;                                                   \
                        const int64_t width = j->N - n0 < GROUP_OUTPUTS ? j->N - n0 : GROUP_OUTPUTS;                  \
                        for (int i = 0; i < R; i++)                                                                   \
                            for (int64_t v = 0; v < width; v++)                                                       \
                                j->y[(m + i) * j->ldy + n0 + v] = dots[(q * R + i) * GROUP_OUTPUTS + v];              \
                    }                                                                                                 \
                    g += C;                                                                                           \
                }                                                                                                     \
                m += R;                                                                                               \
            }                                                                                                         \
        }                                                                                                             \
    }

GROUP_RANGE(groups_q8, 0, 0)
GROUP_RANGE(groups_q8_offsets, 0, 1)
GROUP_RANGE(groups_q4, 1, 0)
GROUP_RANGE(groups_q4_offsets, 1, 1)

int int8_linear_level(void) { return vector_level(); }

/* y [M, N] with rows ldy floats apart (ldy >= N: the columns of a wider y that one part of a stacked matrix
fills); c, s, o in the grouped layout of ceil(N / 16) groups. Returns 0 (the kernel ran), -1 on a CPU without
AVX2 + FMA (int8_linear_level() == 0), -2 when the packed copy of x could not be allocated. */
int int8_linear_strided(const int8_t *c, const float *s, const float *o, const float *x, float *y, int64_t M,
                        int64_t N, int64_t K, int64_t ldy, int threads, int nibbles) {
    if (int8_linear_level() == 0) return -1;
    float *packed = NULL, *sums = NULL;
    if (M > 1) {                                  /* one row is its own packing */
        packed = aligned_alloc(64, (size_t)(M * K) * sizeof(float));   /* K / 32 whole lines */
        if (!packed) return -2;
        pack_tiles(x, packed, M, K);
    }
    if (o) {
        sums = malloc((size_t)(M * (K / 32)) * sizeof(float));
        if (!sums) {
            free(packed);
            return -2;
        }
        pack_block_sums(x, sums, M, K);
    }
    const job_t job = {c, s, o, packed ? packed : x, sums, y, M, N, K, ldy};
    const range_fn groups = nibbles ? (o ? groups_q4_offsets : groups_q4) : (o ? groups_q8_offsets : groups_q8);
    parallel_range(groups, &job, (N + GROUP_OUTPUTS - 1) / GROUP_OUTPUTS, threads);
    free(packed);
    free(sums);
    return 0;
}

/* y [M, N] = x @ W^T (see int8_linear_strided). */
int int8_linear(const int8_t *c, const float *s, const float *o, const float *x, float *y,
                int64_t M, int64_t N, int64_t K, int threads, int nibbles) {
    return int8_linear_strided(c, s, o, x, y, M, N, K, N, threads, nibbles);
}

#else

int int8_linear_level(void) { return 0; }

int int8_linear_strided(const int8_t *c, const float *s, const float *o, const float *x, float *y, int64_t M,
                        int64_t N, int64_t K, int64_t ldy, int threads, int nibbles) {
    (void)c; (void)s; (void)o; (void)x; (void)y; (void)M; (void)N; (void)K; (void)ldy; (void)threads; (void)nibbles;
    return -1;
}

int int8_linear(const int8_t *c, const float *s, const float *o, const float *x, float *y,
                int64_t M, int64_t N, int64_t K, int threads, int nibbles) {
    return int8_linear_strided(c, s, o, x, y, M, N, K, N, threads, nibbles);
}

#endif
