/* One layer of a step's attention over KV caches: row b (a new token of some sequence, at position[b]) writes its key
and value into its sequence's cache, then its query attends over positions 0..position[b], grouped-query: query head
h reads KV head h / (H / KV). For each head: s_j = (q . k_j) * scale, p = softmax(s), out = sum_j p_j v_j, in
float32, in a fixed order: a row's numbers do not depend on the other rows. Rows run in order, so several rows of
one sequence (a prompt's tokens, in order) each see the keys of the ones before them.

q: [B, H, hd]; k_new, v_new: [B, KV, hd]; row b's cache: k_addr[b], v_addr[b] point at [n_layers, KV, capacity[b],
hd] float32 (C order); patterns: [kept rows, n_layers, H, max_len], row b's softmax into slot[b] (its first
position[b] + 1 entries), or into scratch [H, max_len] when slot[b] < 0; out: [B, H, hd]. Built at first use by
model/native/build.py. */
#include <math.h>
#include <stdint.h>

static void attend(const float *q, const float *k, const float *v, int64_t H, int64_t KV, int64_t T, int64_t hd,
                   int64_t kv_stride, float scale, float *pattern, int64_t pattern_stride, float *out) {
    const int64_t group = H / KV;
    for (int64_t h = 0; h < H; h++) {
        const float *qh = q + h * hd;
        const float *kh = k + (h / group) * kv_stride;
        const float *vh = v + (h / group) * kv_stride;
        float *p = pattern + h * pattern_stride;
        float top = -INFINITY;
        for (int64_t j = 0; j < T; j++) {
            const float *kj = kh + j * hd;
            float dot = 0.0f;
            #pragma omp simd reduction(+:dot)
            for (int64_t i = 0; i < hd; i++) dot += qh[i] * kj[i];
            p[j] = dot * scale;
            if (p[j] > top) top = p[j];
        }
        float total = 0.0f;
        for (int64_t j = 0; j < T; j++) {
            p[j] = expf(p[j] - top);
            total += p[j];
        }
        float *oh = out + h * hd;
        for (int64_t i = 0; i < hd; i++) oh[i] = 0.0f;
        for (int64_t j = 0; j < T; j++) {
            p[j] /= total;
            const float *vj = vh + j * hd;
            for (int64_t i = 0; i < hd; i++) oh[i] += p[j] * vj[i];
        }
    }
}

void cached_attention(const float *q, const float *k_new, const float *v_new, const uint64_t *k_addr,
                      const uint64_t *v_addr, const int64_t *capacity, const int64_t *position, const int64_t *slot,
                      int64_t B, int64_t H, int64_t KV, int64_t hd, int64_t layer, int64_t n_layers, int64_t max_len,
                      float scale, float *patterns, float *scratch, float *out) {
    for (int64_t b = 0; b < B; b++) {
        const int64_t pos = position[b], kv_stride = capacity[b] * hd;
        float *k = (float *)(uintptr_t)k_addr[b] + layer * KV * kv_stride;
        float *v = (float *)(uintptr_t)v_addr[b] + layer * KV * kv_stride;
        for (int64_t kv = 0; kv < KV; kv++)
            for (int64_t i = 0; i < hd; i++) {
                k[kv * kv_stride + pos * hd + i] = k_new[(b * KV + kv) * hd + i];
                v[kv * kv_stride + pos * hd + i] = v_new[(b * KV + kv) * hd + i];
            }
        float *pattern = slot[b] >= 0 ? patterns + (slot[b] * n_layers + layer) * H * max_len : scratch;
        attend(q + b * H * hd, k, v, H, KV, pos + 1, hd, kv_stride, scale, pattern, max_len, out + b * H * hd);
    }
}
