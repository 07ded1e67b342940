/* A generation step's token choice from each row's distribution p [V] (float64 after temperature; entries of 0 are
never drawn), every row of a batch in two calls, a row a thread at a time. survey_rows finds a row's n_top most
probable ids (by probability, then id), how many entries are above 0 and the sums of its DRAW_BLOCK-entry blocks, in
one pass over memory (each block read twice while in L1: its sum, then its top); draw_rows then draws with one
uniform u per row (the first index whose cumulative probability exceeds u times the total: the block by the blocks'
cumulative sums, then the entry within it; u < 0: the most probable, the first of equals) and counts the drawn
token's rank (entries more probable, and equal ones before it), in a second pass. numpy's path
(generation.choose_token, record_step) did these in ~12 passes, ~0.4 ms a row of 49,152 (a class's 30 rows: 15-19 ms
a step, holding the GIL); with each block's sum one chain of additions and the rank a branch an entry, these two
calls took 3.3 ms of a 30-row step, now ~1.5. It gives the same ids, but where u falls within rounding of a boundary
between two entries (sums added in another order). Built at first use by model/native/build.py. */
#include <stdint.h>

#include "worker_pool.h"

#define DRAW_BLOCK 512
#define MAX_TOP 64

typedef struct {
    const uint64_t *p;                 /* [n] addresses of the rows, each [V] float64 */
    const double *u;                   /* [n] (draw_rows) */
    int64_t V, n_top;
    int64_t *top;                      /* [n, n_top] */
    int64_t *positive;                 /* [n] */
    double *block_sums;                /* [n, blocks] */
    int64_t *token, *rank;             /* [n] (draw_rows) */
} choice_t;

static int64_t blocks_of(int64_t V) { return (V + DRAW_BLOCK - 1) / DRAW_BLOCK; }

/* Entry i of probability v into the row's top (best: their probabilities, decreasing; an entry equal to the last
kept stays out: a lower id holds it). */
static inline void consider(int64_t *top, double *best, int64_t *count, int64_t n_top, int64_t i, double v) {
    if (*count < n_top || v > best[*count - 1]) {
        int64_t at = *count < n_top ? (*count)++ : n_top - 1;
        for (; at > 0 && best[at - 1] < v; at--) {
            best[at] = best[at - 1];
            top[at] = top[at - 1];
        }
        best[at] = v;
        top[at] = i;
    }
}

/* The sum of p [n] as four running sums (entries 4j, 4j + 1, 4j + 2, 4j + 3), added (0 + 1) + (2 + 3), then the
last entries in turn: four chains of additions instead of one (one vector where it runs on AVX2: the same numbers);
*positive: the entries above 0. Compiled for AVX2 and the baseline. */
#if defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
double block_sum(const double *p, int64_t n, int64_t *positive) {
    double part[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t above[4] = {0, 0, 0, 0}, i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) {
            part[j] += p[i + j];
            above[j] += p[i + j] > 0.0;
        }
    double sum = (part[0] + part[1]) + (part[2] + part[3]);
    int64_t count = (above[0] + above[1]) + (above[2] + above[3]);
    for (; i < n; i++) {
        sum += p[i];
        count += p[i] > 0.0;
    }
    *positive += count;
    return sum;
}

/* The n_top most probable entries (consider), the entries above 0 and each block's sum (block_sum); four entries
below the last kept one are passed over at once. */
static void survey_row(const choice_t *a, int64_t r) {
    const double *p = (const double *)a->p[r];
    int64_t *top = a->top + r * a->n_top, count = 0, positive = 0;
    double *sums = a->block_sums + r * blocks_of(a->V);
    double best[MAX_TOP];                                   /* top's probabilities, decreasing */
    for (int64_t b0 = 0; b0 < a->V; b0 += DRAW_BLOCK) {
        const int64_t b1 = b0 + DRAW_BLOCK < a->V ? b0 + DRAW_BLOCK : a->V;
        sums[b0 / DRAW_BLOCK] = block_sum(p + b0, b1 - b0, &positive);
        int64_t i = b0;
        for (; i + 4 <= b1; i += 4) {
            const double high01 = p[i] > p[i + 1] ? p[i] : p[i + 1];
            const double high23 = p[i + 2] > p[i + 3] ? p[i + 2] : p[i + 3];
            if (count < a->n_top || (high01 > high23 ? high01 : high23) > best[count - 1])
                for (int j = 0; j < 4; j++) consider(top, best, &count, a->n_top, i + j, p[i + j]);
        }
        for (; i < b1; i++) consider(top, best, &count, a->n_top, i, p[i]);
    }
    a->positive[r] = positive;
}

/* Entries of p [V] more probable than token, and equal ones before it: two loops without branches, compiled for
AVX2 and the baseline. */
#if defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
int64_t token_rank(const double *p, int64_t V, int64_t token) {
    const double chosen = p[token];
    int64_t rank = 0;
    for (int64_t i = 0; i < V; i++) rank += p[i] > chosen;
    for (int64_t i = 0; i < token; i++) rank += p[i] == chosen;
    return rank;
}

static void draw_row(const choice_t *a, int64_t r) {
    const double *p = (const double *)a->p[r];
    const double *sums = a->block_sums + r * blocks_of(a->V);
    const int64_t n_blocks = blocks_of(a->V);
    int64_t token = -1;
    if (a->u[r] < 0.0) {
        token = a->top[r * a->n_top];
    } else {
        double total = 0.0;
        for (int64_t b = 0; b < n_blocks; b++) total += sums[b];
        const double target = a->u[r] * total;
        double before = 0.0, end = 0.0;
        int64_t block = -1;
        for (int64_t b = 0; b < n_blocks && block < 0; b++) {
            before = end;
            end += sums[b];
            if (end > target) block = b;
        }
        if (block < 0) {                                    /* past the end (rounding): the last block drawn from */
            for (block = n_blocks - 1; block > 0 && !(sums[block] > 0.0); block--) {}
            before = 0.0;
            for (int64_t b = 0; b < block; b++) before += sums[b];
        }
        const int64_t b0 = block * DRAW_BLOCK, b1 = b0 + DRAW_BLOCK < a->V ? b0 + DRAW_BLOCK : a->V;
        double running = before;
        for (int64_t i = b0; i < b1 && token < 0; i++) {
            running += p[i];
            if (running > target) token = i;
        }
        for (int64_t i = b1 - 1; token < 0 && i >= b0; i--)  /* past the block's end: its last entry above 0 */
            if (p[i] > 0.0) token = i;
        if (token < 0) token = a->top[r * a->n_top];        /* nothing above 0 (not a distribution) */
    }
    a->token[r] = token;
    a->rank[r] = token_rank(p, a->V, token);
}

static void survey_items(const void *args, int64_t start, int64_t stop) {
    for (int64_t r = start; r < stop; r++) survey_row(args, r);
}

static void draw_items(const void *args, int64_t start, int64_t stop) {
    for (int64_t r = start; r < stop; r++) draw_row(args, r);
}

int64_t token_choice_blocks(int64_t V) { return blocks_of(V); }

/* Rows p[0..n-1] (addresses of float64 [V]): top [n, n_top] (n_top <= MAX_TOP and <= V), positive [n], and
block_sums [n, token_choice_blocks(V)] for draw_rows. Returns 0, or -1 for an n_top out of range. */
int survey_rows(const uint64_t *p, int64_t V, int64_t n, int64_t n_top, int64_t *top, int64_t *positive,
                double *block_sums, int threads) {
    if (n_top < 1 || n_top > MAX_TOP || n_top > V) return -1;
    const choice_t a = {p, 0, V, n_top, top, positive, block_sums, 0, 0};
    parallel_items(survey_items, &a, n, threads);
    return 0;
}

/* After survey_rows on the same rows: token [n] drawn with u [n] (see the top), and its rank [n]. */
void draw_rows(const uint64_t *p, int64_t V, int64_t n, int64_t n_top, const int64_t *top, const double *block_sums,
               const double *u, int64_t *token, int64_t *rank, int threads) {
    const choice_t a = {p, u, V, n_top, (int64_t *)top, 0, (double *)block_sums, token, rank};
    parallel_items(draw_items, &a, n, threads);
}
