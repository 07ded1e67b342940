/* y[m, n] = sum over k of  W[n, k] * x[m, k]  in float32 arithmetic, for W[n, k] = s[n, k / 32] * c[n, k] +
o[n, k / 32] (the values of Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 blocks, made in registers as gguf dequantizes them).

c: the codes, int8 [N, K] (nibbles = 0), or 4-bit [N, K / 2] (nibbles = 1: byte j of a block's 16 holds code j in its
low nibble and code j + 16 in its high nibble, GGUF's Q4_0 / Q4_1 order); s: float32 [N, K / 32]; o: float32
[N, K / 32] or NULL (no offsets); x: float32 [M, K]; y: float32 [M, N]. Each y[m, n] is one thread's fixed sequence
of operations whatever M and the thread count (each block's weights multiplied into two vector accumulators per
(m, n), then their lanes added), so a row's numbers do not depend on the rows beside it. The codes are widened and
scaled once for every tile of up to 12 rows of x (AVX-512; 5 with AVX2's 16 registers), a long row a segment at a
time with its accumulators carried between segments (the same operations); every tile takes a pass of outputs in
turn, their codes held in L2, before the next pass (PASS_BYTES). Built at first use by model/native/build.py;
int8_linear_level() says which instruction set this CPU runs (vector_level: 0, none, use the fallback). */
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

#if defined(__x86_64__)
#include <immintrin.h>

#include "vector_math.h"
#include "worker_pool.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define MAX_TILE 12             /* rows of x per tile with AVX-512 (24 accumulators; see OUTPUT_RANGE) */
#define AVX2_TILE 5              /* rows of x per tile with AVX2 (10 accumulators; see block_avx2) */

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

/* Block b's 32 weights of one output: code * scale (exact in float32: an 8-bit code times a half-precision scale
needs at most 19 bits) + offset (one rounding), the same float32 values as gguf's dequantization. */
__attribute__((target("avx512f")))
ALWAYS_INLINE void weights_avx512(const int8_t *cn, const float *sn, const float *on, int64_t b, const int nibbles,
                                  __m512 *w0, __m512 *w1) {
    widen32_avx512(cn + b * (nibbles ? 16 : 32), nibbles, w0, w1);
    const __m512 scale = _mm512_set1_ps(sn[b]);
    if (on) {         /* fused, so that no tile size's code is compiled to a separate multiply and add */
        const __m512 offset = _mm512_set1_ps(on[b]);
        *w0 = _mm512_fmadd_ps(*w0, scale, offset);
        *w1 = _mm512_fmadd_ps(*w1, scale, offset);
    } else {
        *w0 = _mm512_mul_ps(*w0, scale);
        *w1 = _mm512_mul_ps(*w1, scale);
    }
}

/* Block b of output n for R rows of x (a tile, see pack_tiles): one multiply-add per 16 values into each row's two
accumulators. */
__attribute__((target("avx512f")))
ALWAYS_INLINE void block_avx512(const int8_t *cn, const float *sn, const float *on, const float *x, int64_t b,
                                const int nibbles, const int R, __m512 *lo, __m512 *hi) {
    __m512 w0, w1;
    weights_avx512(cn, sn, on, b, nibbles, &w0, &w1);
    for (int i = 0; i < R; i++) {
        const float *xb = x + (b * R + i) * 32;
        lo[i] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xb), lo[i]);
        hi[i] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xb + 16), hi[i]);
    }
}

/* Output n for R rows of x (R fixed at compile time so the accumulators stay in registers), blocks b0..b1-1: values
0-15 and 16-31 of every block go to two accumulators (two dependency chains), added at the end: the same order for
every R. A long row's blocks run in segments (see OUTPUT_RANGE): the accumulators start from zero at block 0, else
from acc ([R][32] floats: lo, hi), are kept in acc after a segment that does not end the row, and their lanes are
added into out after the last block: each output's operations are the same whichever segments split them. */
__attribute__((target("avx512f")))
ALWAYS_INLINE void dot_rows_avx512(const int8_t *cn, const float *sn, const float *on, const float *x, int64_t b0,
                                   int64_t b1, int64_t B, const int nibbles, const int R, float *acc, float *out) {
    __m512 lo[MAX_TILE], hi[MAX_TILE];
    for (int i = 0; i < R; i++) {
        lo[i] = b0 ? _mm512_load_ps(acc + i * 32) : _mm512_setzero_ps();
        hi[i] = b0 ? _mm512_load_ps(acc + i * 32 + 16) : _mm512_setzero_ps();
    }
    for (int64_t b = b0; b < b1; b++) block_avx512(cn, sn, on, x, b, nibbles, R, lo, hi);
    for (int i = 0; i < R; i++) {
        if (b1 == B) {
            out[i] = _mm512_reduce_add_ps(_mm512_add_ps(lo[i], hi[i]));
        } else {
            _mm512_store_ps(acc + i * 32, lo[i]);
            _mm512_store_ps(acc + i * 32 + 16, hi[i]);
        }
    }
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

/* Block b's weights of one output, as weights_avx512: values 0-7, 8-15, 16-23, 24-31 in w[0..3]. */
__attribute__((target("avx2,fma")))
ALWAYS_INLINE void weights_avx2(const int8_t *cn, const float *sn, const float *on, int64_t b, const int nibbles,
                                __m256 w[4]) {
    widen32_avx2(cn + b * (nibbles ? 16 : 32), nibbles, w);
    const __m256 scale = _mm256_set1_ps(sn[b]);
    if (on) {
        const __m256 offset = _mm256_set1_ps(on[b]);
        for (int j = 0; j < 4; j++) w[j] = _mm256_fmadd_ps(w[j], scale, offset);
    } else {
        for (int j = 0; j < 4; j++) w[j] = _mm256_mul_ps(w[j], scale);
    }
}

/* Block b of output n for R rows of x, as block_avx512: values 0-7 and 16-23 into lo, 8-15 and 24-31 into hi (the
same sums in another order: AVX2 and AVX-512 results may differ in the last bits). The first half's weights go to
every row before the second half's are used, the same operations per accumulator as all four first (5-row tiles:
a step's ten rows' products 10% faster than 4-row tiles on a Zen 3, 6 rows spilled). */
__attribute__((target("avx2,fma")))
ALWAYS_INLINE void block_avx2(const int8_t *cn, const float *sn, const float *on, const float *x, int64_t b,
                              const int nibbles, const int R, __m256 *lo, __m256 *hi) {
    __m256 w[4];
    weights_avx2(cn, sn, on, b, nibbles, w);
    for (int i = 0; i < R; i++) {
        const float *xb = x + (b * R + i) * 32;
        lo[i] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(xb), lo[i]);
        hi[i] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xb + 8), hi[i]);
    }
    for (int i = 0; i < R; i++) {
        const float *xb = x + (b * R + i) * 32;
        lo[i] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xb + 16), lo[i]);
        hi[i] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xb + 24), hi[i]);
    }
}

__attribute__((target("avx2,fma")))
ALWAYS_INLINE float sum_lanes_avx2(__m256 lo, __m256 hi) {
    const __m256 sum = _mm256_add_ps(lo, hi);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* As dot_rows_avx512; R = 1, 2 or 4 (16 vector registers: 8-row tiles would spill). */
__attribute__((target("avx2,fma")))
ALWAYS_INLINE void dot_rows_avx2(const int8_t *cn, const float *sn, const float *on, const float *x, int64_t b0,
                                 int64_t b1, int64_t B, const int nibbles, const int R, float *acc, float *out) {
    __m256 lo[MAX_TILE], hi[MAX_TILE];
    for (int i = 0; i < R; i++) {
        lo[i] = b0 ? _mm256_load_ps(acc + i * 32) : _mm256_setzero_ps();
        hi[i] = b0 ? _mm256_load_ps(acc + i * 32 + 8) : _mm256_setzero_ps();
    }
    for (int64_t b = b0; b < b1; b++) block_avx2(cn, sn, on, x, b, nibbles, R, lo, hi);
    for (int i = 0; i < R; i++) {
        if (b1 == B) {
            out[i] = sum_lanes_avx2(lo[i], hi[i]);
        } else {
            _mm256_store_ps(acc + i * 32, lo[i]);
            _mm256_store_ps(acc + i * 32 + 8, hi[i]);
        }
    }
}

typedef struct {
    const int8_t *c;
    const float *s, *o, *x;
    float *y;
    int64_t M, N, K, ldy;          /* ldy: floats from one row of y to the next (N, or more for a part of y) */
} job_t;

/* Blocks of 32 values in a segment of a tile of R rows: a segment takes at most TILE_BYTES, so it stays in the L1
cache while the outputs' codes stream past it. */
#define TILE_BYTES 28672
static int64_t segment_blocks(int R) {
    const int64_t blocks = TILE_BYTES / ((int64_t)R * 32 * (int64_t)sizeof(float));
    return blocks > 0 ? blocks : 1;
}

/* The most rows in a tile: as many whole rows as TILE_BYTES holds where that is at least WHOLE_ROWS_MIN (one
segment: K = 576 gives 12, 896 gives 8), else `widest` in segments (K = 1536: 12 rows in 3 segments, not tiles of
4; K = 4864: 12 rows in 9 segments, not tiles of one row, which read the codes once a row: 2.4x slower). */
#define WHOLE_ROWS_MIN 8
static int widest_rows(int64_t K, int widest) {
    const int64_t whole = TILE_BYTES / (K * (int64_t)sizeof(float));
    return whole >= WHOLE_ROWS_MIN && whole < widest ? (int)whole : widest;
}

/* Rows of x in the tile starting `left` rows before the end: the rows left split evenly into as few tiles as hold
at most `most` rows (widest_rows): 10 rows are one tile, 16 two of 8. */
static int tile_rows(int64_t left, int most) {
    const int64_t tiles = (left + most - 1) / most;
    return (int)((left + tiles - 1) / tiles);
}

/* x [M, K] with each tile of R rows (tile_rows) laid out block by block, [K / 32][R][32], in memory aligned to
64-byte cache lines: a block's rows are contiguous and no load spans two lines (numpy's rows, 16-byte aligned, took
a third longer). */
static void pack_tiles(const float *x, float *packed, int64_t M, int64_t K, int widest) {
    for (int64_t m = 0; m < M;) {
        const int R = tile_rows(M - m, widest_rows(K, widest));
        for (int64_t b = 0; b < K / 32; b++)
            for (int i = 0; i < R; i++)
                for (int v = 0; v < 32; v++) packed[m * K + (b * R + i) * 32 + v] = x[(m + i) * K + b * 32 + v];
        m += R;
    }
}

/* Outputs start..stop-1 of a job for every row of x (packed by pack_tiles), a tile of rows at a time (1 to 12:
a row's arithmetic is the same in any tile). One function per instruction set and code width: the width is a
constant where the block loop is compiled (a run-time flag there left it branchy and spilling). Measured and not
kept: four outputs at a time for one row (more independent chains: faster with the codes in cache, slower streaming
them from memory, as a generation step does); two outputs per tile sharing each load of x (4.1 against 2.9 cycles a
row-block at 8 rows); a group of outputs' weights made into a float32 buffer first (no gain). Kept: tiles of up to 12
rows (24 accumulators; an earlier version spilled at 10): a SmolLM2 step's products for ten rows 24.7 -> 21.6 ms
(Q4_1) and 24.1 -> 21.2 ms (Q8_0) against two tiles of 5, one row unchanged; long rows in segments (widest_rows):
Qwen2.5-0.5B's 4864-wide down projection for 64 rows 10.4 -> 4.6 ms, the same numbers. */
#define TILE_CASE(isa, R)                                                                                         \
    case R:                                                                                                       \
        dot_rows_##isa(cn, sn, on, x, b0, b1, B, nibble_codes, R, acc_n, dots);                                   \
        break;

/* Outputs start..stop-1, GROUP at a time when a tile's rows take more than TILE_BYTES: for each segment of the row
(segment_blocks), each output of the group, its accumulators carried from segment to segment in acc. */
#define GROUP 32
/* Codes of the outputs that every tile of rows takes in turn, held in L2: the tiles outside the outputs read each
matrix from memory once a tile (30 rows, Zen 3, one thread: SmolLM2's 49,152 x 576 logits 51 -> 35 ms, the same
numbers). */
#define PASS_BYTES 98304
#define OUTPUT_RANGE(name, isa, target_isa, nibbles, widest)                                                          \
    __attribute__((target(target_isa)))                                                                               \
    static void name(const void *p, int64_t start, int64_t stop) {                                                    \
        const job_t *j = p;                                                                                           \
        const int nibble_codes = nibbles;                                                                             \
        const int64_t K = j->K, B = K / 32, stride = nibbles ? K / 2 : K;                                             \
        float dots[MAX_TILE];                                                                                         \
        float acc[GROUP * MAX_TILE * 32] __attribute__((aligned(64)));                                                \
        const int64_t pass = PASS_BYTES / stride > 0 ? PASS_BYTES / stride : 1;                                       \
        for (int64_t p = start; p < stop; p += pass) {                                                                \
            const int64_t p_stop = p + pass < stop ? p + pass : stop;                                                 \
            for (int64_t m = 0; m < j->M;) {                                                                          \
                const int R = tile_rows(j->M - m, widest_rows(K, widest));                                            \
                const int64_t segment = segment_blocks(R), group = B > segment ? GROUP : p_stop - p;                  \
                const float *x = j->x + m * K;                                                                        \
                for (int64_t g = p; g < p_stop; g += group) {                                                         \
                    const int64_t g_stop = g + group < p_stop ? g + group : p_stop;                                   \
                    for (int64_t b0 = 0; b0 < B; b0 += segment) {                                                     \
                        const int64_t b1 = b0 + segment < B ? b0 + segment : B;                                       \
                        for (int64_t n = g; n < g_stop; n++) {                                                        \
                            const int8_t *cn = j->c + n * stride;                                                     \
                            const float *sn = j->s + n * B, *on = j->o ? j->o + n * B : NULL;                         \
                            float *acc_n = B > segment ? acc + (n - g) * MAX_TILE * 32 : acc;                         \
                            switch (R) {                                                                              \
                                TILE_CASE(isa, 12) TILE_CASE(isa, 11) TILE_CASE(isa, 10) TILE_CASE(isa, 9)            \
                                TILE_CASE(isa, 8) TILE_CASE(isa, 7) TILE_CASE(isa, 6) TILE_CASE(isa, 5)               \
                                TILE_CASE(isa, 4) TILE_CASE(isa, 3) TILE_CASE(isa, 2)                                 \
                                default: dot_rows_##isa(cn, sn, on, x, b0, b1, B, nibbles, 1, acc_n, dots);           \
                            }                                                                                         \
                            if (b1 == B)                                                                              \
                                for (int i = 0; i < R; i++) j->y[(m + i) * j->ldy + n] = dots[i];                     \
                        }                                                                                             \
                    }                                                                                                 \
                }                                                                                                     \
                m += R;                                                                                               \
            }                                                                                                         \
        }                                                                                                             \
    }

OUTPUT_RANGE(outputs_avx512_q8, avx512, "avx512f", 0, MAX_TILE)
OUTPUT_RANGE(outputs_avx512_q4, avx512, "avx512f", 1, MAX_TILE)
OUTPUT_RANGE(outputs_avx2_q8, avx2, "avx2,fma", 0, AVX2_TILE)
OUTPUT_RANGE(outputs_avx2_q4, avx2, "avx2,fma", 1, AVX2_TILE)

int int8_linear_level(void) { return vector_level(); }

/* y [M, N] with rows ldy floats apart (ldy >= N: the columns of a wider y that one part of a stacked matrix
fills). Returns 0 (the kernel ran), -1 on a CPU without AVX2 + FMA (int8_linear_level() == 0), -2 when the packed
copy of x could not be allocated. */
int int8_linear_strided(const int8_t *c, const float *s, const float *o, const float *x, float *y, int64_t M,
                        int64_t N, int64_t K, int64_t ldy, int threads, int nibbles) {
    const int level = int8_linear_level(), widest = level == 2 ? MAX_TILE : AVX2_TILE;
    if (level == 0) return -1;
    float *packed = NULL;
    if (M > 1) {                                  /* one row is its own packing */
        packed = aligned_alloc(64, (size_t)(M * K) * sizeof(float));   /* K / 32 whole lines: every load aligned */
        if (!packed) return -2;
        pack_tiles(x, packed, M, K, widest);
    }
    const job_t job = {c, s, o, packed ? packed : x, y, M, N, K, ldy};
    if (level == 2) parallel_range(nibbles ? outputs_avx512_q4 : outputs_avx512_q8, &job, N, threads);
    else parallel_range(nibbles ? outputs_avx2_q4 : outputs_avx2_q8, &job, N, threads);
    free(packed);
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
