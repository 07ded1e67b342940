/* One new query per head attending over T cached positions (a one-token generation step), grouped-query:
query head h reads KV head h / (H / KV). For each head: s_j = (q . k_j) * scale, p = softmax(s), out = sum_j p_j v_j,
in float32, in a fixed order (a sequence's numbers do not depend on other sequences in the batch).

q: [H, hd]; k, v: [KV, *, hd] with kv_stride floats from one KV head to the next (a cache with room for more
positions), positions 0..T-1 used; pattern: [H, T]; out: [H, hd]. Built at first use by model/native/build.py. */
#include <math.h>
#include <stdint.h>

void one_query_attention(const float *q, const float *k, const float *v, int64_t H, int64_t KV, int64_t T,
                         int64_t hd, int64_t kv_stride, float scale, float *pattern, float *out) {
    const int64_t group = H / KV;
    for (int64_t h = 0; h < H; h++) {
        const float *qh = q + h * hd;
        const float *kh = k + (h / group) * kv_stride;
        const float *vh = v + (h / group) * kv_stride;
        float *p = pattern + h * T;
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
