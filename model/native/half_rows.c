/* A generation step's kept attention rows as float16, every row in one call: row b's softmax [n_layers, H,
length[b]] from patterns [kept rows, n_layers, H, max_len] (slot[b], or -1: not kept) into the C-order float16
array at out_addr[b]. IEEE round to nearest even, as torch and numpy convert: F16C's conversion where the CPU has
it, else the same rounding in integer arithmetic. One call instead of a torch copy per row: each copy let the other
Python threads take the GIL first (~5 ms a row while a class's page runs wanted it, 30 rows a step). Built at first
use by model/native/build.py. */
#include <stdint.h>
#include <string.h>

#include "vector_math.h"

/* float32 -> float16 bits, round to nearest even; NaN -> the quiet NaN 0x7E00 with its sign (as torch). */
static uint16_t half_of(float value) {
    uint32_t x;
    memcpy(&x, &value, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u, magnitude = x & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);
    if (magnitude >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);            /* 65520 and up round to inf */
    if (magnitude >= 0x38800000u)                                                  /* a normal float16: 2^-14 up */
        return (uint16_t)(sign | (((magnitude + 0x0FFFu + ((magnitude >> 13) & 1u)) >> 13) - (112u << 10)));
    if (magnitude <= 0x33000000u) return (uint16_t)sign;                          /* 2^-25 and below round to 0 */
    const uint32_t shift = 126u - (magnitude >> 23);                               /* 14..24: to units of 2^-24 */
    const uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
    const uint32_t kept = significand >> shift, rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1);
    return (uint16_t)(sign | (kept + (rest > half || (rest == half && (kept & 1u)))));
}

static void halves_portable(const float *x, int64_t n, uint16_t *out) {
    for (int64_t i = 0; i < n; i++) out[i] = half_of(x[i]);
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx,f16c")))
static void halves_f16c(const float *x, int64_t n, uint16_t *out) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        out[i] = (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x[i]), _MM_FROUND_TO_NEAREST_INT), 0);
}

static int has_f16c(void) {
    static int found = -1;
    if (found < 0) {
        __builtin_cpu_init();
        found = vector_level() > 0 && __builtin_cpu_supports("f16c");
    }
    return found;
}
#else
#define halves_f16c halves_portable
static int has_f16c(void) { return 0; }
#endif

/* out [n] = x [n] as float16 bits; portable: the integer rounding even where F16C is there (for the tests). */
void float16_from_float32(const float *x, int64_t n, uint16_t *out, int portable) {
    (portable || !has_f16c() ? halves_portable : halves_f16c)(x, n, out);
}

void patterns_to_half(const float *patterns, const int64_t *slot, const int64_t *length, const uint64_t *out_addr,
                      int64_t B, int64_t n_layers, int64_t H, int64_t max_len) {
    void (*convert)(const float *, int64_t, uint16_t *) = has_f16c() ? halves_f16c : halves_portable;
    for (int64_t b = 0; b < B; b++) {
        if (slot[b] < 0 || !out_addr[b]) continue;
        uint16_t *out = (uint16_t *)(uintptr_t)out_addr[b];
        for (int64_t lh = 0; lh < n_layers * H; lh++)
            convert(patterns + (slot[b] * n_layers * H + lh) * max_len, length[b], out + lh * length[b]);
    }
}
