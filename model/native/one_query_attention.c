/* Attention of query rows over their keys, grouped-query (query head h reads KV head h / (H / KV)): for each head,
s_j = (q . k_j) * scale, p = softmax(s), out = sum_j p_j v_j, in float32, in a fixed order: a row's numbers do not
depend on the other rows, nor on which entry point computed them. Rows are split across `threads`
(model/native/worker_pool.h).

cached_attention, one layer of a generation step: row b (a new token of some sequence, at position[b]) writes its
key and value into its sequence's cache, then its query attends over positions 0..position[b]. Rows run in order,
so several rows of one sequence (a prompt's tokens, in order) each see the keys of the ones before them: every row's
key and value is written first, then the rows attend. q: [B, H, hd]; k_new, v_new: [B, KV, hd]; row b's cache:
k_addr[b], v_addr[b] point at [n_layers, KV, capacity[b], hd] float32 (C order); patterns: [kept rows, n_layers, H,
max_len], row b's softmax into slot[b] (its first position[b] + 1 entries), or into scratch [B, H, max_len] when
slot[b] < 0; out: [B, H, hd].

prompt_attention, one layer of a full pass over T tokens: query i attends keys 0..i that mask [T, T] allows (NULL:
all of them; a mask never allows a later key), the others weighing exactly 0. q: [H, T, hd]; k, v: [KV, T, hd];
pattern: [H, T, T] float32 or float16 (row i's entries past i set to 0); scores: [H, T, T] or NULL (every scaled
dot product, later keys too, as the Inside view shows them); out: [T, H, hd]. Causal rows are those of
cached_attention (the same numbers). Built at first use by model/native/build.py. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector_math.h"
#include "worker_pool.h"

/* A head's scores p[j] = (q . k_j) * scale for j < T. Portable C (compiled for AVX2 and the baseline, chosen when
the library loads). */
__attribute__((target_clones("avx2", "default")))
static void scores_portable(const float *qh, const float *kh, int64_t T, int64_t hd, float scale, float *p) {
    for (int64_t j = 0; j < T; j++) {
        const float *kj = kh + j * hd;
        float dot = 0.0f;
        #pragma omp simd reduction(+:dot)
        for (int64_t i = 0; i < hd; i++) dot += qh[i] * kj[i];
        p[j] = dot * scale;
    }
}

/* A head's output oh = sum_j p_j v_j, in order of j. */
__attribute__((target_clones("avx2", "default")))
static void mix_portable(const float *p, const float *vh, int64_t T, int64_t hd, float *oh) {
    for (int64_t i = 0; i < hd; i++) oh[i] = 0.0f;
    for (int64_t j = 0; j < T; j++) {
        const float *vj = vh + j * hd;
        for (int64_t i = 0; i < hd; i++) oh[i] += p[j] * vj[i];
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* scores_portable and mix_portable with AVX-512 for head sizes that are multiples of 16: each dot product and each
output lane's sum over positions in registers (the portable loops kept them in memory: 36 ns a head and position,
half of it saved). A dot product is 16 lanes of multiply-adds in order of i, then its lanes added in one fixed tree
(sum_lanes). Sixteen positions are taken at a time and their sixteen trees run together, transposed (sum_lanes_16:
the same pairs added, so the same numbers as one at a time, in 15 vector additions instead of 16 x 4 scalar-ish
ones: the trees were most of a head-size-64 score's time). */
__attribute__((target("avx512f")))
ALWAYS_INLINE float sum_lanes(__m512 v) {
    /* lane i + lane i + 8, then + 4, + 2, + 1: GCC's _mm512_reduce_add_ps, written out so that sum_lanes_16 can
    follow it whatever the compiler */
    const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

/* sum_lanes of d[0..15] at once: lane r of the result is sum_lanes(d[r]), each through the same pairs of lanes. */
__attribute__((target("avx512f")))
ALWAYS_INLINE __m512 sum_lanes_16(const __m512 *d) {
    __m512 a[8], b[4], c[2];
    for (int r = 0; r < 8; r++)        /* [lanes 0-7 of d 2r | of d 2r+1], each lane i + lane i + 8 */
        a[r] = _mm512_add_ps(_mm512_shuffle_f32x4(d[2 * r], d[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(d[2 * r], d[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int r = 0; r < 4; r++)        /* quarter q: lanes 0-3 of d 4r+q, each lane i + lane i + 4 */
        b[r] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * r], a[2 * r + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(a[2 * r], a[2 * r + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int r = 0; r < 2; r++)        /* quarter q: lanes 0-1 of d 8r+q, then of d 8r+q+4; each lane i + lane i + 2 */
        c[r] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * r], b[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(b[2 * r], b[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* quarter q: the sums of d q, q+4, q+8, q+12 (lane 0 + lane 1 of each); then lane 4q + m -> lane q + 4m */
    const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_ps(_mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0), sums);
}

__attribute__((target("avx512f")))
ALWAYS_INLINE float dot_avx512(const float *qh, const float *kj, int64_t hd) {
    __m512 dot = _mm512_setzero_ps();
    for (int64_t i = 0; i < hd; i += 16) dot = _mm512_fmadd_ps(_mm512_loadu_ps(qh + i), _mm512_loadu_ps(kj + i), dot);
    return sum_lanes(dot);
}

__attribute__((target("avx512f")))
static void scores_avx512(const float *qh, const float *kh, int64_t T, int64_t hd, float scale, float *p) {
    int64_t j = 0;
    const __m512 scaled = _mm512_set1_ps(scale);
    for (; j + 16 <= T; j += 16) {
        __m512 dot[16];
        for (int r = 0; r < 16; r++) dot[r] = _mm512_setzero_ps();
        for (int64_t i = 0; i < hd; i += 16) {
            const __m512 qi = _mm512_loadu_ps(qh + i);
            for (int r = 0; r < 16; r++) dot[r] = _mm512_fmadd_ps(qi, _mm512_loadu_ps(kh + (j + r) * hd + i), dot[r]);
        }
        _mm512_storeu_ps(p + j, _mm512_mul_ps(sum_lanes_16(dot), scaled));
    }
    for (; j < T; j++) p[j] = dot_avx512(qh, kh + j * hd, hd) * scale;
}

/* scores_avx512 of two query heads that read the same keys (grouped-query attention), eight positions at a time: each
key vector loaded once for both (the loads, from L2, bound the one-head loop), the sixteen dot products (8 keys x 2
heads) reduced together by sum_lanes_16 (the same numbers as one head at a time). */
__attribute__((target("avx512f")))
static void scores_pair_avx512(const float *qa, const float *qb, const float *kh, int64_t T, int64_t hd, float scale,
                               float *pa, float *pb) {
    int64_t j = 0;
    const __m512 scaled = _mm512_set1_ps(scale);
    for (; j + 8 <= T; j += 8) {
        __m512 dot[16];
        for (int r = 0; r < 16; r++) dot[r] = _mm512_setzero_ps();
        for (int64_t i = 0; i < hd; i += 16) {
            const __m512 qai = _mm512_loadu_ps(qa + i), qbi = _mm512_loadu_ps(qb + i);
            for (int r = 0; r < 8; r++) {
                const __m512 kr = _mm512_loadu_ps(kh + (j + r) * hd + i);
                dot[r] = _mm512_fmadd_ps(qai, kr, dot[r]);
                dot[8 + r] = _mm512_fmadd_ps(qbi, kr, dot[8 + r]);
            }
        }
        const __m512 sums = _mm512_mul_ps(sum_lanes_16(dot), scaled);     /* lanes 0-7: head a's, 8-15: b's */
        _mm256_storeu_ps(pa + j, _mm512_castps512_ps256(sums));
        _mm256_storeu_ps(pb + j, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sums), 1)));
    }
    for (; j < T; j++) {
        pa[j] = dot_avx512(qa, kh + j * hd, hd) * scale;
        pb[j] = dot_avx512(qb, kh + j * hd, hd) * scale;
    }
}

/* The mix of up to MIX_HEADS heads that share a KV head's values, each head's output lanes summed over positions in
order (the numbers of one head at a time), every value vector loaded once for them all: 64 lanes of NH heads in
4 NH accumulators (more chains for the multiply-adds' latency, a quarter to a third of the loads). */
#define MIX_HEADS 3
__attribute__((target("avx512f")))
ALWAYS_INLINE void mix_heads_avx512(const float *const *p, const int NH, const float *vh, int64_t T, int64_t hd,
                                    float *const *oh) {
    int64_t i = 0;
    for (; i + 64 <= hd; i += 64) {
        __m512 acc[MIX_HEADS][4];
        for (int h = 0; h < NH; h++)
            for (int r = 0; r < 4; r++) acc[h][r] = _mm512_setzero_ps();
        for (int64_t j = 0; j < T; j++) {
            __m512 vj[4];
            for (int r = 0; r < 4; r++) vj[r] = _mm512_loadu_ps(vh + j * hd + i + 16 * r);
            for (int h = 0; h < NH; h++) {
                const __m512 pj = _mm512_set1_ps(p[h][j]);
                for (int r = 0; r < 4; r++) acc[h][r] = _mm512_fmadd_ps(pj, vj[r], acc[h][r]);
            }
        }
        for (int h = 0; h < NH; h++)
            for (int r = 0; r < 4; r++) _mm512_storeu_ps(oh[h] + i + 16 * r, acc[h][r]);
    }
    for (; i < hd; i += 16) {
        __m512 acc[MIX_HEADS];
        for (int h = 0; h < NH; h++) acc[h] = _mm512_setzero_ps();
        for (int64_t j = 0; j < T; j++) {
            const __m512 vj = _mm512_loadu_ps(vh + j * hd + i);
            for (int h = 0; h < NH; h++) acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(p[h][j]), vj, acc[h]);
        }
        for (int h = 0; h < NH; h++) _mm512_storeu_ps(oh[h] + i, acc[h]);
    }
}

/* n_heads (1 to MIX_HEADS) heads' mixes. */
__attribute__((target("avx512f")))
static void mix_avx512(const float *const *p, int64_t n_heads, const float *vh, int64_t T, int64_t hd,
                       float *const *oh) {
    if (n_heads >= 3) mix_heads_avx512(p, 3, vh, T, hd, oh);
    else if (n_heads == 2) mix_heads_avx512(p, 2, vh, T, hd, oh);
    else mix_heads_avx512(p, 1, vh, T, hd, oh);
}
#define HAS_AVX512(hd) ((hd) % 16 == 0 && vector_level() == 2)
#else
#define HAS_AVX512(hd) 0
#define MIX_HEADS 1
#define scores_avx512 scores_portable
static void scores_pair_avx512(const float *qa, const float *qb, const float *kh, int64_t T, int64_t hd, float scale,
                               float *pa, float *pb) {
    scores_portable(qa, kh, T, hd, scale, pa);
    scores_portable(qb, kh, T, hd, scale, pb);
}
static void mix_avx512(const float *const *p, int64_t n_heads, const float *vh, int64_t T, int64_t hd,
                       float *const *oh) {
    (void)n_heads;
    mix_portable(p[0], vh, T, hd, oh[0]);
}
#endif

/* p[j] = exp(p[j] - top) for j < T; returns their sum. */
static float exp_sum_portable(float *p, int64_t T, float top) {
    float total = 0.0f;
    for (int64_t j = 0; j < T; j++) {
        p[j] = expf(p[j] - top);
        total += p[j];
    }
    return total;
}

#if defined(__x86_64__)
/* exp_sum_portable, 16 positions at a time (exp_avx512), their sum in 16 lanes then added across. */
__attribute__((target("avx512f")))
static float exp_sum_avx512(float *p, int64_t T, float top) {
    __m512 total = _mm512_setzero_ps();
    const __m512 shift = _mm512_set1_ps(top);
    for (int64_t j = 0; j < T; j += 16) {
        const __mmask16 m = first_lanes(T - j);
        const __m512 e = _mm512_maskz_mov_ps(m, exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p + j), shift)));
        _mm512_mask_storeu_ps(p + j, m, e);
        total = _mm512_add_ps(total, e);
    }
    return _mm512_reduce_add_ps(total);
}

/* exp_sum_avx512 on AVX2: positions j..j+7 and j+8..j+15 in two 8-lane sums, added across as
_mm512_reduce_add_ps adds its 16 lanes (the same numbers). */
__attribute__((target("avx2,fma")))
static float exp_sum_avx2(float *p, int64_t T, float top) {
    __m256 total[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256 shift = _mm256_set1_ps(top);
    for (int64_t j = 0; j < T; j += 16)
        for (int half = 0; half < 2; half++) {
            const int64_t at = j + 8 * half;
            if (T - at >= 8) {                        /* masked moves only at the end (AMD's are slow) */
                const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(p + at), shift));
                _mm256_storeu_ps(p + at, e);
                total[half] = _mm256_add_ps(total[half], e);
                continue;
            }
            const __m256i m = first_lanes_avx2(T - at > 0 ? T - at : 0);
            const __m256 x = _mm256_maskload_ps(p + at, m);
            const __m256 e = _mm256_and_ps(exp_avx2(_mm256_sub_ps(x, shift)), _mm256_castsi256_ps(m));
            _mm256_maskstore_ps(p + at, m, e);
            total[half] = _mm256_add_ps(total[half], e);
        }
    const __m256 eighth = _mm256_add_ps(total[1], total[0]);
    __m128 four = _mm_add_ps(_mm256_extractf128_ps(eighth, 1), _mm256_castps256_ps128(eighth));
    four = _mm_add_ps(four, _mm_shuffle_ps(four, four, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(four) + _mm_cvtss_f32(_mm_shuffle_ps(four, four, _MM_SHUFFLE(1, 1, 1, 1)));
}
#else
#define exp_sum_avx512 exp_sum_portable
#define exp_sum_avx2 exp_sum_portable
#endif

#if defined(__x86_64__)
/* A row's largest score over its n keys, masked keys (mask[j] == 0) first set to -inf, 16 at a time (the scalar
loop's answer: max is exact, and a NaN score is skipped as `p[j] > top` skips it). */
__attribute__((target("avx512f")))
static float masked_top_avx512(float *p, int64_t n, const uint8_t *mask) {
    __m512 top = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 x = _mm512_loadu_ps(p + j);
        if (mask) {
            const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(mask + j)));
            x = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), _mm512_test_epi32_mask(bytes, bytes), x);
            _mm512_storeu_ps(p + j, x);
        }
        top = _mm512_max_ps(x, top);                      /* NaN in x: top kept */
    }
    float best = _mm512_reduce_max_ps(top);
    for (; j < n; j++) {
        if (mask && !mask[j]) p[j] = -INFINITY;
        if (p[j] > best) best = p[j];
    }
    return best;
}

/* p[j] /= total for j < n, 16 at a time (each the same IEEE division). */
__attribute__((target("avx512f")))
static void divide_avx512(float *p, int64_t n, float total) {
    const __m512 by = _mm512_set1_ps(total);
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 m = first_lanes(n - j);
        _mm512_mask_storeu_ps(p + j, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, p + j), by));
    }
}
#else
static float masked_top_avx512(float *p, int64_t n, const uint8_t *mask) { (void)p; (void)n; (void)mask; return 0; }
static void divide_avx512(float *p, int64_t n, float total) { (void)p; (void)n; (void)total; }
#endif

/* One query row's heads over its first n_keys keys (mask[j] == 0 leaves key j out; mask NULL: none): head h's query
at q + h * q_stride, its KV head's keys and values kv_stride apart; its scores for j < n_scored (n_scored >= n_keys)
copied to scores + h * head_stride when scores is not NULL; softmax in place in pattern + h * head_stride, whose
entries n_keys..row_len - 1 are set to 0; out [H, hd] the mix of values. The AVX-512 loops where this CPU runs them
and hd % 16 == 0 (the same choice for every row of every call). */
static void attend(const float *q, int64_t q_stride, const float *k, const float *v, int64_t H, int64_t KV,
                   int64_t n_keys, int64_t n_scored, int64_t row_len, int64_t hd, int64_t kv_stride, float scale,
                   const uint8_t *mask, float *pattern, float *scores, int64_t head_stride, float *out) {
    const int64_t group = H / KV, wide = HAS_AVX512(hd), exp_level = vector_level();
    for (int64_t h = 0; h < H; h++) {
        const float *kh = k + (h / group) * kv_stride, *vh = v + (h / group) * kv_stride;
        float *p = pattern + h * head_stride;
        const int64_t in_group = h % group;                 /* AVX-512: a KV head's query heads scored in pairs */
        if (!wide) scores_portable(q + h * q_stride, kh, n_scored, hd, scale, p);
        else if (in_group % 2 == 0 && in_group + 1 < group)
            scores_pair_avx512(q + h * q_stride, q + (h + 1) * q_stride, kh, n_scored, hd, scale, p, p + head_stride);
        else if (in_group % 2 == 0) scores_avx512(q + h * q_stride, kh, n_scored, hd, scale, p);
        if (scores) memcpy(scores + h * head_stride, p, (size_t)n_scored * sizeof(float));
        float top = -INFINITY;                            /* masked keys' scores set to -inf: exp gives exactly 0 */
        if (wide) top = masked_top_avx512(p, n_keys, mask);
        else
            for (int64_t j = 0; j < n_keys; j++) {
                if (mask && !mask[j]) p[j] = -INFINITY;
                if (p[j] > top) top = p[j];
            }
        const float total = exp_level == 2 ? exp_sum_avx512(p, n_keys, top)
                          : exp_level == 1 ? exp_sum_avx2(p, n_keys, top) : exp_sum_portable(p, n_keys, top);
        if (wide) divide_avx512(p, n_keys, total);
        else
            for (int64_t j = 0; j < n_keys; j++) p[j] /= total;
        if (!wide) mix_portable(p, vh, n_keys, hd, out + h * hd);
        if (!wide || (h + 1) % group) continue;
        for (int64_t g = h + 1 - group; g <= h; g += MIX_HEADS) {       /* the KV head's query heads, together */
            const float *heads[MIX_HEADS];
            float *outs[MIX_HEADS];
            const int64_t n = h + 1 - g < MIX_HEADS ? h + 1 - g : MIX_HEADS;
            for (int64_t m = 0; m < n; m++) {
                heads[m] = pattern + (g + m) * head_stride;
                outs[m] = out + (g + m) * hd;
            }
            mix_avx512(heads, n, vh, n_keys, hd, outs);
        }
    }
    for (int64_t h = 0; h < H && row_len > n_keys; h++)
        memset(pattern + h * head_stride + n_keys, 0, (size_t)(row_len - n_keys) * sizeof(float));
}

/* While rows attend, results below float32's smallest normal (2^-126) are flushed to 0 and such inputs read as 0
(MXCSR's FTZ and DAZ, this thread only, put back after): a key scoring ~87 below its row's top gets a denormal
probability, and each one cost a microcode assist in the exp, the division and the mix (a 256-token trace of a
Qwen2.5-0.5B-shaped model: its attention 150 -> 70-100 ms). A float16 pattern holds nothing below 6e-8 anyway. */
#if defined(__x86_64__)
static unsigned flush_denormals(void) {
    const unsigned was = _mm_getcsr();
    _mm_setcsr(was | 0x8040u);
    return was;
}
static void restore_denormals(unsigned was) { _mm_setcsr(was); }
#else
static unsigned flush_denormals(void) { return 0; }
static void restore_denormals(unsigned was) { (void)was; }
#endif

typedef struct {
    const float *q;
    const uint64_t *k_addr, *v_addr;
    const int64_t *capacity, *position, *slot;
    int64_t H, KV, hd, layer, n_layers, max_len;
    float scale;
    float *patterns, *scratch, *out;
} job_t;

/* Rows start..stop-1 of a job attend (their keys are in the caches already). */
static void attend_rows(const void *p, int64_t start, int64_t stop) {
    const job_t *j = p;
    const unsigned mxcsr = flush_denormals();
    for (int64_t b = start; b < stop; b++) {
        const int64_t kv_stride = j->capacity[b] * j->hd, layer_offset = j->layer * j->KV * kv_stride;
        float *pattern = j->slot[b] >= 0 ? j->patterns + (j->slot[b] * j->n_layers + j->layer) * j->H * j->max_len
                                         : j->scratch + b * j->H * j->max_len;
        const int64_t n = j->position[b] + 1;
        attend(j->q + b * j->H * j->hd, j->hd, (const float *)(uintptr_t)j->k_addr[b] + layer_offset,
               (const float *)(uintptr_t)j->v_addr[b] + layer_offset, j->H, j->KV, n, n, n, j->hd, kv_stride,
               j->scale, NULL, pattern, NULL, j->max_len, j->out + b * j->H * j->hd);
    }
    restore_denormals(mxcsr);
}

void cached_attention(const float *q, const float *k_new, const float *v_new, const uint64_t *k_addr,
                      const uint64_t *v_addr, const int64_t *capacity, const int64_t *position, const int64_t *slot,
                      int64_t B, int64_t H, int64_t KV, int64_t hd, int64_t layer, int64_t n_layers, int64_t max_len,
                      float scale, float *patterns, float *scratch, float *out, int threads) {
    for (int64_t b = 0; b < B; b++) {
        const int64_t pos = position[b], kv_stride = capacity[b] * hd;
        float *k = (float *)(uintptr_t)k_addr[b] + layer * KV * kv_stride;
        float *v = (float *)(uintptr_t)v_addr[b] + layer * KV * kv_stride;
        for (int64_t kv = 0; kv < KV; kv++)
            for (int64_t i = 0; i < hd; i++) {
                k[kv * kv_stride + pos * hd + i] = k_new[(b * KV + kv) * hd + i];
                v[kv * kv_stride + pos * hd + i] = v_new[(b * KV + kv) * hd + i];
            }
    }
    const job_t job = {q, k_addr, v_addr, capacity, position, slot, H, KV, hd, layer, n_layers, max_len, scale,
                       patterns, scratch, out};
    parallel_range(attend_rows, &job, B, threads);
}

void float16_from_float32(const float *x, int64_t n, uint16_t *out, int portable);   /* half_rows.c */

typedef struct {
    const float *q, *k, *v;
    const uint8_t *mask;
    int64_t T, H, KV, hd;
    float scale;
    float *pattern, *scores, *out;
    uint16_t *half_pattern;
    int *failed;
} prompt_job_t;

/* Items start..stop-1 of a pass: item t is row T - 1 - t (the longest rows first, the short ones to fill in). A
float16 pattern's row is made in float32 first, then converted as torch converts (half_rows.c). */
static void attend_prompt_rows(const void *p, int64_t start, int64_t stop) {
    const prompt_job_t *j = p;
    const int64_t T = j->T, H = j->H;
    float *row = j->half_pattern ? malloc((size_t)(H * T) * sizeof(float)) : NULL;
    if (j->half_pattern && !row) {
        *j->failed = 1;
        return;
    }
    const unsigned mxcsr = flush_denormals();
    for (int64_t t = start; t < stop; t++) {
        const int64_t i = T - 1 - t;
        attend(j->q + i * j->hd, T * j->hd, j->k, j->v, H, j->KV, i + 1, j->scores ? T : i + 1, T, j->hd, T * j->hd,
               j->scale, j->mask ? j->mask + i * T : NULL, row ? row : j->pattern + i * T,
               j->scores ? j->scores + i * T : NULL, row ? T : T * T, j->out + i * H * j->hd);
        for (int64_t h = 0; row && h < H; h++)
            float16_from_float32(row + h * T, T, j->half_pattern + (h * T + i) * T, 0);
    }
    restore_denormals(mxcsr);
    free(row);
}

/* Returns 0, or -2 when a float16 pattern's row buffer could not be allocated. pattern: float32, or NULL with
half_pattern (float16 bits [H, T, T]; then scores must be NULL). on_torch_team: the rows shared out on torch's OpenMP
team (team_items), else on the pool. */
int prompt_attention(const float *q, const float *k, const float *v, const uint8_t *mask, int64_t T, int64_t H,
                     int64_t KV, int64_t hd, float scale, float *pattern, uint16_t *half_pattern, float *scores,
                     float *out, int threads, int on_torch_team) {
    int failed = 0;
    const prompt_job_t job = {q, k, v, mask, T, H, KV, hd, scale, pattern, half_pattern ? NULL : scores, out,
                              half_pattern, &failed};
    if (on_torch_team) team_items(attend_prompt_rows, &job, T, threads);
    else parallel_items(attend_prompt_rows, &job, T, threads);
    return failed ? -2 : 0;
}
