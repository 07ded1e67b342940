/* What int8_linear.c (x @ W^T: a generation step's block sums, and the entry point) and int8_made.c (a full
pass's made-weights sequence) share: the grouped layout's constants, one k's codes widened to float, a job and its
tiles of rows. */
#ifndef ATLAS_INT8_LINEAR_H
#define ATLAS_INT8_LINEAR_H

#include <stdint.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define GROUP_OUTPUTS 16        /* outputs of a group: two 8-lane vectors (AVX2) or one 16-lane vector (AVX-512) */
#define MAX_TILE 6              /* AVX2: rows of x per tile: 12 block sums, 2 vectors of codes and x[m, k] in 16
                                   registers */
#define NIBBLE_TILE 5           /* AVX2, a step's 4-bit codes: rows per tile (their mask takes the 16th register, and
                                   6 rows spilled: on a Zen 3, 12 rows in two tiles of 6 took 1.4-1.7x the time a row
                                   of 10 rows in two of 5, in three tiles of 4 1.0-1.05x) */
#define MAX_CHAINS 4            /* AVX2: groups taken together by a tile of one or two rows (more dependency chains) */
#define MAX_TILE_WIDE 12        /* AVX-512: rows per tile (one block sum a row and group in 32 registers) */
#define MAX_DOTS 16             /* a tile's accumulated groups times rows, at most (AVX2 6, AVX-512 14) */

#define MADE_TILE_WIDE 12       /* AVX-512: rows per tile (2 groups x 12 rows = 24 accumulators) */

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

/* One k's codes of a group's 16 outputs in one 16-lane vector, widened to float (exact). Nibbles: the 8 bytes in
both halves (byte j: outputs j and j + 8), the high half shifted down 4 bits, then each lane's low 4 bits pick the
float 0..15 from a table (a permute reads only those bits: no mask and no conversion; a 10-row step's Q4_1
products 4-7% faster on a Xeon). */
__attribute__((target("avx512f")))
ALWAYS_INLINE __m512 codes_at_wide(const int8_t *ck, const int nibbles) {
    if (nibbles) {
        int64_t eight;
        __builtin_memcpy(&eight, ck, sizeof eight);
        const __m512i pairs = _mm512_cvtepu8_epi32(_mm_set1_epi64x(eight));
        const __m512i shifts = _mm512_set_epi32(4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512 values = _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        return _mm512_permutexvar_ps(_mm512_srlv_epi32(pairs, shifts), values);
    }
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)ck)));
}

typedef struct {
    const int8_t *c;
    const float *s, *o, *x, *xs;   /* xs: the block sums of x (pack_block_sums), with offsets */
    float *y;
    int64_t M, N, K, ldy;          /* ldy: floats from one row of y to the next (N, or more for a part of y) */
    int max_tile;                  /* MAX_TILE, MAX_TILE_WIDE or MADE_TILE_WIDE: how x was packed */
    int64_t item_groups;           /* made weights: groups shared out at a time (made_item_groups) */
    int *failed;                   /* set when a made-weights pass could not allocate its buffer */
} job_t;

/* Rows of x in the tile starting `left` rows before the end: the rows left split evenly into as few tiles as hold
at most max_tile rows: with AVX2's 6, 10 rows are two tiles of 5, 30 five of 6; with AVX-512's 12, one of 10 and
three of 10. */
static inline int tile_rows(int64_t left, int max_tile) {
    const int64_t tiles = (left + max_tile - 1) / max_tile;
    return (int)((left + tiles - 1) / tiles);
}

/* A tile's accumulated outputs into y: C groups (past N: not stored) of R rows from m. */
static inline void store_dots(const job_t *j, const float *dots, int64_t g, int C, int64_t m, int R) {
    for (int q = 0; q < C; q++) {
        const int64_t n0 = (g + q) * GROUP_OUTPUTS;
        const int64_t width = j->N - n0 < GROUP_OUTPUTS ? j->N - n0 : GROUP_OUTPUTS;
        for (int i = 0; i < R; i++)
            for (int64_t v = 0; v < width; v++) j->y[(m + i) * j->ldy + n0 + v] = dots[(q * R + i) * GROUP_OUTPUTS + v];
    }
}

/* The made-weights product of job over its G groups (int8_made.c): level 2 the AVX-512 tiles, else AVX2. */
void int8_made_product(const job_t *job, int level, int nibbles, int64_t G, int threads);

/* Groups an item of the made-weights product holds (see int8_made.c), for a job of G groups of K and its first tile
of R0 rows. */
int64_t int8_made_item_groups(int64_t G, int64_t K, int level, int R0, int threads);

#endif
#endif
