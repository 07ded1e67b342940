/* y[m, n] = sum over k of  W[n, k] * x[m, k]  in float32 arithmetic, for W[n, k] = s[n, k / 32] * c[n, k] +
o[n, k / 32] (the values of Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 blocks): a generation step's without making W (each
block's codes multiplied by x, the sum scaled), a full pass's from W made a few groups of outputs at a time.

The matrix is held in groups of GROUP_OUTPUTS outputs (int8_linear.py's grouped layout), so that one vector holds
one k's codes of 16 outputs: c [G][K][16] int8 codes (nibbles = 0), or [G][K][8] bytes with two 4-bit codes each
(nibbles = 1: byte j holds output j's code in its low nibble and output j + 8's in its high); s and o (or NULL: no
offsets) [G][K / 32][16] float32; outputs past N (the last group's padding) are not stored. x: float32 [M, K]; y:
float32 [M, N] with rows ldy apart.

Two sequences, each the same whatever M, the tile a row falls in, the thread count or the instruction set (so a
row's numbers never depend on the rows beside it): a generation step's (block sums, below) and a full pass's (made
weights, MADE_RANGE below, int8_linear_strided with made = 1: ~1.3x faster from a few dozen rows, 1.3-2.5x
slower for under a dozen).

A step's y[m, n] is one fixed sequence of operations: acc = 0; for each block b of 32 values of k in turn,
sum = 0, then sum = fma(c[n, k], x[m, k], sum) for each k of the block in turn, then acc = fma(s[n, b], sum, acc),
and with offsets acc = fma(o[n, b], xsum, acc), xsum being the block's x[m, k] added in turn from 0. That sequence
is the same whatever M, the tile a row falls in, the thread count or the instruction set, so a row's numbers do not
depend on the rows beside it. The inner loop is only multiply-adds: weights made first (code * scale, or an fma
with the offset, as gguf dequantizes) took one more multiply or fma per vector of codes, as many as the
multiply-adds of a one- or two-row tile (one row: 1.2-1.3x slower). A tile of up to MAX_TILE rows (NIBBLE_TILE
for 4-bit codes), transposed to [K][R], broadcasts each x[m, k] into the two vectors of a group's 16 codes (a
BLIS-style outer product: 12 multiply-adds per k for the codes widened once); every tile takes a pass of groups in
turn, their codes held in L2, before the next pass (PASS_BYTES). On AVX-512 a group's 16 codes are one vector and a
tile holds up to MAX_TILE_WIDE rows (half the multiply-adds, and the codes widened once for twice the rows: a 10-row
generation step's products ~1.4x faster on a Xeon), each output the same operations as on AVX2. The made-weights
sequence is in int8_made.c, what both share in int8_linear.h. Built at first use by model/native/build.py;
int8_linear_level() says whether this CPU runs it (0: use the fallback; 2: the AVX-512 path, ATLAS_NATIVE_ISA=avx2
caps it at 1). */
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

#include "int8_linear.h"
#include "vector_math.h"
#include "worker_pool.h"

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

/* tile_groups on 16-lane vectors: the same operations for each output in the same order (one vector a group instead
of two), R up to MAX_TILE_WIDE rows; out [C R][16]. */
__attribute__((target("avx512f")))
ALWAYS_INLINE void tile_groups_wide(const int8_t *c, const float *s, const float *o, const float *xt,
                                    const float *xs, int64_t g, int64_t K, const int nibbles, const int offsets,
                                    const int R, const int C, float *out) {
    const int64_t B = K / 32, stride = nibbles ? 8 : 16;
    for (int a = 0; a < R * C; a++) _mm512_store_ps(out + a * GROUP_OUTPUTS, _mm512_setzero_ps());
    for (int64_t b = 0; b < B; b++) {
        __m512 sums[MAX_DOTS];
        for (int a = 0; a < R * C; a++) sums[a] = _mm512_setzero_ps();
        for (int kk = 0; kk < 32; kk++) {
            const int64_t k = b * 32 + kk;
            for (int q = 0; q < C; q++) {
                const __m512 f = codes_at_wide(c + ((g + q) * K + k) * stride, nibbles);
                for (int i = 0; i < R; i++)
                    sums[q * R + i] = _mm512_fmadd_ps(f, _mm512_set1_ps(xt[k * R + i]), sums[q * R + i]);
            }
        }
        for (int q = 0; q < C; q++) {
            const int64_t at_b = ((g + q) * B + b) * GROUP_OUTPUTS;
            const __m512 scale = _mm512_loadu_ps(s + at_b);
            for (int i = 0; i < R; i++) {
                float *at = out + (q * R + i) * GROUP_OUTPUTS;
                __m512 y = _mm512_fmadd_ps(scale, sums[q * R + i], _mm512_load_ps(at));
                if (offsets) y = _mm512_fmadd_ps(_mm512_loadu_ps(o + at_b), _mm512_set1_ps(xs[b * R + i]), y);
                _mm512_store_ps(at, y);
            }
        }
    }
}

/* Groups a tile of R rows takes at once: more chains for few rows (a single accumulator waits on its fma's
latency). AVX2, measured on a Zen 3: 4 groups for one row, 2 for two, one from three rows (3 rows x 2 groups
spilled: 1.35x slower). AVX-512 (one vector a group): at least 8 accumulators where the registers hold them. */
static int tile_chains(int R) { return R == 1 ? 4 : R == 2 ? 2 : 1; }
static int tile_chains_wide(int R) { return R == 1 ? 8 : R == 2 ? 4 : R == 3 ? 3 : R <= 7 ? 2 : 1; }

typedef struct {
    const float *x;
    float *packed;
    int64_t M, K;
    int max_tile;
} pack_job_t;

/* Columns k0..k1-1 of every tile (see pack_tiles). */
static void pack_columns(const void *p, int64_t k0, int64_t k1) {
    const pack_job_t *j = p;
    for (int64_t m = 0; m < j->M;) {
        const int R = tile_rows(j->M - m, j->max_tile);
        for (int64_t k = k0; k < k1; k++)
            for (int i = 0; i < R; i++) j->packed[m * j->K + k * R + i] = j->x[(m + i) * j->K + k];
        m += R;
    }
}

/* x [M, K] with each tile of R rows (tile_rows) transposed, [K][R], in memory aligned to 64-byte lines: a k's
R values are contiguous for the broadcasts. Split across threads by columns for a large x (256 rows of 4864: ~1 ms
on one core, a tenth of the product). */
static void pack_tiles(const float *x, float *packed, int64_t M, int64_t K, int max_tile, int threads) {
    const pack_job_t job = {x, packed, M, K, max_tile};
    if (M * K < 65536) pack_columns(&job, 0, K);
    else parallel_range(pack_columns, &job, K, threads);
}

/* The sums of x's rows over each block of 32 values, for the offsets' term, each tile's [K / 32][R] as pack_tiles
lays x out: sum = 0, then sum = sum + x[m, k] for the block's values in order. */
static void pack_block_sums(const float *x, float *xs, int64_t M, int64_t K, int max_tile) {
    const int64_t B = K / 32;
    for (int64_t m = 0; m < M;) {
        const int R = tile_rows(M - m, max_tile);
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
    case R * 16 + C:                                                                                                  \
        tile_groups(j->c, j->s, j->o, xt, xst, g, K, nibble_codes, with_offsets, R, C, dots);                         \
        break;
#define WIDE_CASE(R, C)                                                                                               \
    case R * 16 + C:                                                                                                  \
        tile_groups_wide(j->c, j->s, j->o, xt, xst, g, K, nibble_codes, with_offsets, R, C, dots);                    \
        break;
#define TILE_CASES                                                                                                    \
    TILE_CASE(1, 4) TILE_CASE(1, 1) TILE_CASE(2, 2) TILE_CASE(2, 1) TILE_CASE(3, 1) TILE_CASE(4, 1) TILE_CASE(5, 1)   \
    TILE_CASE(6, 1)
#define WIDE_CASES                                                                                                    \
    WIDE_CASE(1, 8) WIDE_CASE(1, 1) WIDE_CASE(2, 4) WIDE_CASE(2, 1) WIDE_CASE(3, 3) WIDE_CASE(3, 1) WIDE_CASE(4, 2)   \
    WIDE_CASE(4, 1) WIDE_CASE(5, 2) WIDE_CASE(5, 1) WIDE_CASE(6, 2) WIDE_CASE(6, 1) WIDE_CASE(7, 2) WIDE_CASE(7, 1)   \
    WIDE_CASE(8, 1) WIDE_CASE(9, 1) WIDE_CASE(10, 1) WIDE_CASE(11, 1) WIDE_CASE(12, 1)

/* Groups start..stop-1 of a job for every row of x (packed by pack_tiles), a pass of groups (their codes in L2) at
a time, each tile of rows over the pass. One function per instruction set, code width and offsets or not (constants
where the loop is compiled: a test of the offsets' pointer at every k left the loop branchy). */
#define PASS_BYTES 98304
#define GROUP_RANGE(name, isa, nibbles, offsets, chains, cases)                                                       \
    __attribute__((target(isa)))                                                                                      \
    static void name(const void *p, int64_t start, int64_t stop) {                                                    \
        const job_t *j = p;                                                                                           \
        const int nibble_codes = nibbles, with_offsets = offsets;                                                     \
        const int64_t K = j->K, group_bytes = K * (nibbles ? 8 : 16);                                                 \
        const int64_t pass = PASS_BYTES / group_bytes > 0 ? PASS_BYTES / group_bytes : 1;                             \
        float dots[MAX_DOTS * GROUP_OUTPUTS] __attribute__((aligned(64)));                                            \
        for (int64_t p0 = start; p0 < stop; p0 += pass) {                                                             \
            const int64_t p1 = p0 + pass < stop ? p0 + pass : stop;                                                   \
            for (int64_t m = 0; m < j->M;) {                                                                          \
                const int R = tile_rows(j->M - m, j->max_tile);                                                       \
                const float *xt = j->x + m * K, *xst = with_offsets ? j->xs + m * (K / 32) : NULL;                    \
                for (int64_t g = p0; g < p1;) {                                                                       \
                    const int C = chains(R) <= p1 - g ? chains(R) : 1;                                                \
                    switch (R * 16 + C) { cases }                                                                     \
                    store_dots(j, dots, g, C, m, R);                                                                  \
                    g += C;                                                                                           \
                }                                                                                                     \
                m += R;                                                                                               \
            }                                                                                                         \
        }                                                                                                             \
    }

GROUP_RANGE(groups_q8, "avx2,fma", 0, 0, tile_chains, TILE_CASES)
GROUP_RANGE(groups_q8_offsets, "avx2,fma", 0, 1, tile_chains, TILE_CASES)
GROUP_RANGE(groups_q4, "avx2,fma", 1, 0, tile_chains, TILE_CASES)
GROUP_RANGE(groups_q4_offsets, "avx2,fma", 1, 1, tile_chains, TILE_CASES)
GROUP_RANGE(wide_q8, "avx512f", 0, 0, tile_chains_wide, WIDE_CASES)
GROUP_RANGE(wide_q8_offsets, "avx512f", 0, 1, tile_chains_wide, WIDE_CASES)
GROUP_RANGE(wide_q4, "avx512f", 1, 0, tile_chains_wide, WIDE_CASES)
GROUP_RANGE(wide_q4_offsets, "avx512f", 1, 1, tile_chains_wide, WIDE_CASES)

int int8_linear_level(void) { return vector_level(); }

/* y [M, N] with rows ldy floats apart (ldy >= N: the columns of a wider y that one part of a stacked matrix
fills); c, s, o in the grouped layout of ceil(N / 16) groups; made: the made-weights sequence (a full pass's), else
the block sums' (a generation step's). Returns 0 (the kernel ran), -1 on a CPU without AVX2 + FMA
(int8_linear_level() == 0), -2 when the packed copy of x (or a pass's weights) could not be allocated. */
int int8_linear_strided(const int8_t *c, const float *s, const float *o, const float *x, float *y, int64_t M,
                        int64_t N, int64_t K, int64_t ldy, int threads, int nibbles, int made) {
    const int level = int8_linear_level();
    if (level == 0) return -1;
    const int max_tile = level > 1 ? (made ? MADE_TILE_WIDE : MAX_TILE_WIDE)
                                   : (made || !nibbles ? MAX_TILE : NIBBLE_TILE);
    float *packed = NULL, *sums = NULL;
    if (M > 1 && !made) {                         /* one row is its own packing; made tiles read x's rows */
        packed = aligned_alloc(64, (size_t)(M * K) * sizeof(float));   /* K / 32 whole lines */
        if (!packed) return -2;
        pack_tiles(x, packed, M, K, max_tile, threads);
    }
    if (o && !made) {
        sums = malloc((size_t)(M * (K / 32)) * sizeof(float));
        if (!sums) {
            free(packed);
            return -2;
        }
        pack_block_sums(x, sums, M, K, max_tile);
    }
    int failed = 0;
    const int64_t G = (N + GROUP_OUTPUTS - 1) / GROUP_OUTPUTS;
    const int64_t item_groups = made ? int8_made_item_groups(G, K, level, tile_rows(M, max_tile), threads) : 0;
    const job_t job = {c, s, o, packed ? packed : x, sums, y, M, N, K, ldy, max_tile, item_groups, &failed};
    if (made)
        int8_made_product(&job, level, nibbles, G, threads);
    else
        parallel_range(level > 1 ? (nibbles ? (o ? wide_q4_offsets : wide_q4) : (o ? wide_q8_offsets : wide_q8))
                                 : (nibbles ? (o ? groups_q4_offsets : groups_q4)
                                            : (o ? groups_q8_offsets : groups_q8)),
                       &job, G, threads);
    free(packed);
    free(sums);
    return failed ? -2 : 0;
}

#else

int int8_linear_level(void) { return 0; }

int int8_linear_strided(const int8_t *c, const float *s, const float *o, const float *x, float *y, int64_t M,
                        int64_t N, int64_t K, int64_t ldy, int threads, int nibbles, int made) {
    (void)c; (void)s; (void)o; (void)x; (void)y; (void)M; (void)N; (void)K; (void)ldy; (void)threads; (void)nibbles;
    (void)made;
    return -1;
}

#endif
