/* One new query per head attending over its sequence's cached positions (a one-token generation step), for every
sequence of a batch, grouped-query: query head h reads KV head h / (H / KV). For each head: s_j = (q . k_j) * scale,
p = softmax(s), out = sum_j p_j v_j, in float32, in a fixed order: a sequence's numbers do not depend on the other
sequences in the batch.

q: [B, H, hd]; sequence b's keys and values: k_addr[b], v_addr[b] point at [KV, *, hd] with kv_stride[b] floats from
one KV head to the next (a cache with room for more positions), positions 0..lengths[b]-1 used; pattern:
[B, H, max_len] (row b, head h: its first lengths[b] entries); out: [B, H, hd]. Built at first use by
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

void one_query_attention(const float *q, const uint64_t *k_addr, const uint64_t *v_addr, const int64_t *kv_stride,
                         const int64_t *lengths, int64_t B, int64_t H, int64_t KV, int64_t hd, int64_t max_len,
                         float scale, float *pattern, float *out) {
    for (int64_t b = 0; b < B; b++)
        attend(q + b * H * hd, (const float *)(uintptr_t)k_addr[b], (const float *)(uintptr_t)v_addr[b], H, KV,
               lengths[b], hd, kv_stride[b], scale, pattern + b * H * max_len, max_len, out + b * H * hd);
}
