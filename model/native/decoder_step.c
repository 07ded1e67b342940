/* Every block of a RMSNorm / RoPE / SwiGLU decoder (Llama, Qwen2, Qwen3) for the rows of a generation step, in one
call: per block, x += attention(rms_norm(x)) then x += down(silu(gate) * up) of rms_norm(x), each matrix product by
int8_linear.c, the attention over the caches by one_query_attention.c. The numbers are the numpy step's (generation.py
step_rows) up to float32 rounding of the norms' sums; each row's arithmetic is the same in any batch (norms, RoPE,
SiLU are per row; the kernels' rows do not depend on each other). Before it, ~60 small numpy operations a block
cost a quarter of a one-row step.

x: [B, D] in and out; cos, sin: [B, hd / 2] (each row's position); the caches and kept patterns as cached_attention
takes them; work: decoder_step_work_floats(...) floats. Built at first use by model/native/build.py. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vector_math.h"
#include "worker_pool.h"

int int8_linear_strided(const int8_t *c, const float *s, const float *o, const float *x, float *y, int64_t M,
                        int64_t N, int64_t K, int64_t ldy, int threads, int nibbles, int made);
void cached_attention(const float *q, const float *k_new, const float *v_new, const uint64_t *k_addr,
                      const uint64_t *v_addr, const int64_t *capacity, const int64_t *position, const int64_t *slot,
                      int64_t B, int64_t H, int64_t KV, int64_t hd, int64_t layer, int64_t n_layers, int64_t max_len,
                      float scale, float *patterns, float *scratch, float *out, int threads);

#define MAX_PARTS 3
typedef struct {                       /* a matrix stacked by rows from 1 to MAX_PARTS parts (q, k, v; gate, up) */
    const int8_t *codes[MAX_PARTS];
    const float *scales[MAX_PARTS], *offsets[MAX_PARTS];   /* offsets NULL: none */
    int64_t rows[MAX_PARTS], nibbles[MAX_PARTS], n_parts;
} matrix_t;

typedef struct {                       /* one block's weights (NULL: the block has none) */
    matrix_t qkv, o, up, down;         /* [(H + 2 KV) hd, D], [D, H hd], [2 F, D] gate then up, [D, F] */
    const float *attn_norm, *mlp_norm; /* [D] */
    const float *qkv_bias;             /* [(H + 2 KV) hd] */
    const float *o_bias;               /* [D] */
    const float *q_norm, *k_norm;      /* [hd] per-head RMSNorm (Qwen3) */
    float attn_eps, mlp_eps, qk_eps;
} block_t;

typedef struct {
    int64_t D, H, KV, hd, F, n_layers;
} shape_t;

static void rms_norm_rows(const float *x, const float *weight, float eps, int64_t rows, int64_t n, float *out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float total = 0.0f;
        #pragma omp simd reduction(+:total)
        for (int64_t i = 0; i < n; i++) total += xr[i] * xr[i];
        const float inverse = 1.0f / sqrtf(total / (float)n + eps);
        for (int64_t i = 0; i < n; i++) out[r * n + i] = xr[i] * inverse * weight[i];
    }
}

/* Half-split rotation of `heads` vectors [hd] of one row by its cos, sin [hd / 2]. */
static void rotate(float *v, int64_t heads, int64_t hd, const float *cos, const float *sin) {
    const int64_t half = hd / 2;
    for (int64_t h = 0; h < heads; h++) {
        float *x1 = v + h * hd, *x2 = x1 + half;
        for (int64_t i = 0; i < half; i++) {
            const float a = x1[i], b = x2[i];
            x1[i] = a * cos[i] - b * sin[i];
            x2[i] = a * sin[i] + b * cos[i];
        }
    }
}

typedef struct {
    const float *qkv, *cos, *sin;      /* [T, (H + 2 KV) hd]; [T, hd / 2] each */
    int64_t T, H, KV, hd;
    float *q_rot, *k_rot, *v;          /* [H, T, hd]; [KV, T, hd]; [KV, T, hd] */
} split_rotate_t;

/* Rows start..stop-1 of split_rotate: each head's half-split rotation as rotate() computes it (and torch: each
product rounded, then the sum; plain C for the baseline instruction set, which has no fused multiply-add to
contract them into). */
static void split_rotate_rows(const void *p, int64_t start, int64_t stop) {
    const split_rotate_t *a = p;
    const int64_t hd = a->hd, half = hd / 2, width = (a->H + 2 * a->KV) * hd;
    for (int64_t t = start; t < stop; t++) {
        const float *row = a->qkv + t * width, *c = a->cos + t * half, *s = a->sin + t * half;
        for (int64_t h = 0; h < a->H + a->KV; h++) {
            const float *x1 = row + h * hd, *x2 = x1 + half;
            float *out = h < a->H ? a->q_rot + (h * a->T + t) * hd : a->k_rot + ((h - a->H) * a->T + t) * hd;
            for (int64_t i = 0; i < half; i++) {
                out[i] = x1[i] * c[i] - x2[i] * s[i];
                out[half + i] = x1[i] * s[i] + x2[i] * c[i];
            }
        }
        for (int64_t g = 0; g < a->KV; g++)
            memcpy(a->v + (g * a->T + t) * hd, row + (a->H + a->KV + g) * hd, (size_t)hd * sizeof(float));
    }
}

/* A full pass's fused projection qkv [T, (H + 2 KV) hd] (q, k, v heads side by side in each row) -> its queries and
keys rotated by RoPE into q_rot [H, T, hd] and k_rot [KV, T, hd], its values copied into v [KV, T, hd]: head-major
for the attention, in one pass instead of torch's seven operations and two copies. Rows split across threads (on
torch's OpenMP team when on_torch_team). */
void split_rotate(const float *qkv, const float *cos, const float *sin, int64_t T, int64_t H, int64_t KV, int64_t hd,
                  float *q_rot, float *k_rot, float *v, int threads, int on_torch_team) {
    const split_rotate_t job = {qkv, cos, sin, T, H, KV, hd, q_rot, k_rot, v};
    if (on_torch_team) team_range(split_rotate_rows, &job, T, threads);
    else parallel_range(split_rotate_rows, &job, T, threads);
}

typedef struct {
    const float *gate_up;              /* [B, 2 F]: gate then up */
    float *act;                        /* [B, F] */
    int64_t F;
} swiglu_t;

/* silu(g) * u = g / (1 + exp(-g)) * u of one element (libm's expf). */
static float swiglu_one(float g, float u) { return g / (1.0f + expf(-g)) * u; }

#if defined(__x86_64__)
/* swiglu_one on 16 lanes (exp_avx512: within 2 ulp of libm's; its NaN, inf and -0 cases). */
__attribute__((target("avx512f")))
static __m512 swiglu_avx512(__m512 g, __m512 u) {
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

/* Elements i0..i1-1 of one row: 16 lanes at a time, the last ones masked (each element's arithmetic is the same
wherever it falls). */
__attribute__((target("avx512f")))
static void swiglu_row_avx512(const float *gate, const float *up, float *act, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i += 16) {
        const __mmask16 m = first_lanes(i1 - i);
        const __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
        _mm512_mask_storeu_ps(act + i, m, swiglu_avx512(g, u));
    }
}

/* swiglu_avx512 on 8 lanes (exp_avx2: the same numbers). */
__attribute__((target("avx2,fma")))
static __m256 swiglu_avx2(__m256 g, __m256 u) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

/* As swiglu_row_avx512, 8 lanes at a time; masked moves only for the last ones (AMD's are slow). */
__attribute__((target("avx2,fma")))
static void swiglu_row_avx2(const float *gate, const float *up, float *act, int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8)
        _mm256_storeu_ps(act + i, swiglu_avx2(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < i1) {
        const __m256i m = first_lanes_avx2(i1 - i);
        const __m256 g = _mm256_maskload_ps(gate + i, m), u = _mm256_maskload_ps(up + i, m);
        _mm256_maskstore_ps(act + i, m, swiglu_avx2(g, u));
    }
}
#else
#define swiglu_row_avx512(gate, up, act, i0, i1) ((void)0)
#define swiglu_row_avx2(gate, up, act, i0, i1) ((void)0)
#endif

/* act = silu(gate) * up for elements start..stop-1 of [B, F], row by row (an element's arithmetic does not depend
on the split). */
static void swiglu_range(const void *p, int64_t start, int64_t stop) {
    const swiglu_t *a = p;
    const int level = vector_level();
    for (int64_t e = start; e < stop;) {
        const int64_t b = e / a->F, i0 = e % a->F, i1 = stop - b * a->F < a->F ? stop - b * a->F : a->F;
        const float *gate = a->gate_up + b * 2 * a->F, *up = gate + a->F;
        float *act = a->act + b * a->F;
        if (level == 2) swiglu_row_avx512(gate, up, act, i0, i1);
        else if (level == 1) swiglu_row_avx2(gate, up, act, i0, i1);
        else
            for (int64_t i = i0; i < i1; i++) act[i] = swiglu_one(gate[i], up[i]);
        e += i1 - i0;
    }
}

/* act [B, F] = silu(gate) * up of gate_up [B, 2 F] (gate then up in each row), split across threads (on torch's
OpenMP team when on_torch_team: see worker_pool.h's team_items). */
void swiglu_rows(const float *gate_up, float *act, int64_t B, int64_t F, int threads, int on_torch_team) {
    const swiglu_t swiglu = {gate_up, act, F};
    if (on_torch_team) team_range(swiglu_range, &swiglu, B * F, B > 1 ? threads : 1);
    else parallel_range(swiglu_range, &swiglu, B * F, B > 1 ? threads : 1);
}

/* y [M, N] = x @ W^T, each part filling its columns (a kept-quantized model's q, k, v and gate, up are separate
matrices: multiplied in place, not copied into one). */
static int product(const matrix_t *m, const float *x, float *y, int64_t M, int64_t N, int64_t K, int threads) {
    int status = 0;
    for (int64_t p = 0, first = 0; p < m->n_parts && !status; first += m->rows[p], p++)
        status = int8_linear_strided(m->codes[p], m->scales[p], m->offsets[p], x, y + first, M, m->rows[p], K, N,
                                     threads, (int)m->nibbles[p], 0);
    return status;
}

int64_t decoder_step_work_floats(const shape_t *s, int64_t B) {
    const int64_t qkv = (s->H + 2 * s->KV) * s->hd;
    return B * (s->D + qkv + 2 * s->H * s->hd + 2 * s->KV * s->hd + 2 * s->F + s->F + s->D);
}

static int step_blocks(const block_t *blocks, const shape_t *s, float *x, int64_t B, const float *cos,
                       const float *sin, const uint64_t *k_addr, const uint64_t *v_addr, const int64_t *capacity,
                       const int64_t *position, const int64_t *slot, int64_t max_len, float *patterns, float *scratch,
                       float *work, int threads) {
    const int64_t D = s->D, H = s->H, KV = s->KV, hd = s->hd, F = s->F, n_qkv = (H + 2 * KV) * hd;
    float *h = work, *qkv = h + B * D, *q = qkv + B * n_qkv, *attn = q + B * H * hd, *keys = attn + B * H * hd;
    float *values = keys + B * KV * hd, *gate_up = values + B * KV * hd, *act = gate_up + B * 2 * F;
    float *down = act + B * F;
    int status;
    for (int64_t layer = 0; layer < s->n_layers; layer++) {
        const block_t *w = blocks + layer;
        rms_norm_rows(x, w->attn_norm, w->attn_eps, B, D, h);
        if ((status = product(&w->qkv, h, qkv, B, n_qkv, D, threads))) return status;
        for (int64_t b = 0; b < B; b++) {
            float *row = qkv + b * n_qkv;
            if (w->qkv_bias)
                for (int64_t i = 0; i < n_qkv; i++) row[i] += w->qkv_bias[i];
            if (w->q_norm) {
                rms_norm_rows(row, w->q_norm, w->qk_eps, H, hd, row);
                rms_norm_rows(row + H * hd, w->k_norm, w->qk_eps, KV, hd, row + H * hd);
            }
            rotate(row, H + KV, hd, cos + b * hd / 2, sin + b * hd / 2);
            memcpy(q + b * H * hd, row, (size_t)(H * hd) * sizeof(float));
            memcpy(keys + b * KV * hd, row + H * hd, (size_t)(KV * hd) * sizeof(float));
            memcpy(values + b * KV * hd, row + (H + KV) * hd, (size_t)(KV * hd) * sizeof(float));
        }
        cached_attention(q, keys, values, k_addr, v_addr, capacity, position, slot, B, H, KV, hd, layer, s->n_layers,
                         max_len, 1.0f / sqrtf((float)hd), patterns, scratch, attn, threads);
        if ((status = product(&w->o, attn, down, B, D, H * hd, threads))) return status;
        for (int64_t i = 0; i < B * D; i++) x[i] += w->o_bias ? down[i] + w->o_bias[i % D] : down[i];
        rms_norm_rows(x, w->mlp_norm, w->mlp_eps, B, D, h);
        if ((status = product(&w->up, h, gate_up, B, 2 * F, D, threads))) return status;
        swiglu_rows(gate_up, act, B, F, threads, 0);
        if ((status = product(&w->down, act, down, B, D, F, threads))) return status;
        for (int64_t i = 0; i < B * D; i++) x[i] += down[i];
    }
    return 0;
}

/* Every block for a step's B rows, the pool's workers spinning between its kernel calls (pool_spin). Returns 0, or
the first kernel's error (see int8_linear). */
int decoder_step(const block_t *blocks, const shape_t *s, float *x, int64_t B, const float *cos, const float *sin,
                 const uint64_t *k_addr, const uint64_t *v_addr, const int64_t *capacity, const int64_t *position,
                 const int64_t *slot, int64_t max_len, float *patterns, float *scratch, float *work, int threads) {
    pool_spin(1);
    const int status = step_blocks(blocks, s, x, B, cos, sin, k_addr, v_addr, capacity, position, slot, max_len,
                                   patterns, scratch, work, threads);
    pool_spin(0);
    return status;
}
