"""Weight memory, KV-cache bytes and forward FLOPs of a shape (exact ints)."""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

from model.calculator.counts import Breakdown
from model.calculator.shape import MAX_BATCH, MAX_CONTEXT, Shape, ShapeError, make_shape

# ---------------------------------------------------------------------------------------------- memory and compute

DTYPE_BITS = {"fp32": 32, "bf16": 16, "int8": 8, "int4": 4}


def _bytes(n_values: int, dtype: str) -> int:
    if dtype not in DTYPE_BITS:
        raise ValueError(f"dtype must be one of {', '.join(DTYPE_BITS)}, got {dtype!r}")
    return -(-n_values * DTYPE_BITS[dtype] // 8)   # ceil: an odd count of int4 values still needs a whole byte


def weight_memory(n_params: int) -> dict[str, int]:
    """Bytes to hold n_params weights at fp32 / bf16 / int8 / int4.

    Plain storage only: real quantized formats add per-block scales (e.g. GGUF Q8_0 is 8.5 bits per weight,
    Q4_1 is 5 bits), and running a model needs activations and the KV cache on top.
    """
    return {dtype: _bytes(n_params, dtype) for dtype in DTYPE_BITS}


def _as_shape(shape) -> Shape:
    return shape if isinstance(shape, Shape) else (shape.shape if isinstance(shape, Breakdown) else make_shape(**shape))


def _check_positive(name: str, value, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ShapeError(name, f"{name} must be a whole number, got {value!r}.")
    if not 1 <= value <= limit:
        raise ShapeError(name, f"{name} must be between 1 and {limit:,}, got {value:,}.")
    return int(value)


def kv_values_per_token(n_layers: int, n_kv_heads: int, head_dim: int) -> int:
    """Values one token adds to the KV cache: a key and a value of head_dim per KV head, in every layer."""
    return 2 * n_layers * n_kv_heads * head_dim


def kv_cache_bytes_per_token(shape, dtype: str = "bf16") -> int:
    """K and V cache for one token: kv_values_per_token values (shape: Shape, Breakdown or dict)."""
    s = _as_shape(shape)
    return _bytes(kv_values_per_token(s.n_layers, s.n_kv_heads, s.head_dim), dtype)


def kv_cache_bytes(shape, context_len: int, batch: int = 1, dtype: str = "bf16") -> int:
    """KV cache for `batch` sequences of `context_len` tokens each."""
    s = _as_shape(shape)
    context_len = _check_positive("context_len", context_len, MAX_CONTEXT)
    batch = _check_positive("batch", batch, MAX_BATCH)
    return _bytes(2 * s.n_layers * s.n_kv_heads * s.head_dim * context_len * batch, dtype)


def attention_variants(shape) -> dict[str, int]:
    """n_kv_heads for MHA / GQA / MQA versions of the same shape: {"MHA": n_heads, "GQA": g, "MQA": 1}.

    GQA uses the shape's own n_kv_heads when it is grouped already; otherwise the divisor of n_heads closest to
    n_heads / 4 (groups of about four query heads). GQA is left out when n_heads has no divisor strictly between
    1 and n_heads (e.g. 7 heads), and MQA == MHA is not repeated for a single-head model.
    """
    s = _as_shape(shape)
    h = s.n_heads
    variants = {"MHA": h}
    if 1 < s.n_kv_heads < h:
        variants["GQA"] = s.n_kv_heads
    else:
        divisors = [g for g in range(2, h) if h % g == 0]
        if divisors:
            variants["GQA"] = min(divisors, key=lambda g: (abs(g - h / 4), g))
    if h > 1:
        variants["MQA"] = 1
    return variants


@dataclass(frozen=True)
class Flops:
    """Forward FLOPs for one token (see forward_flops_per_token for the convention)."""

    matmul: int       # 2 x weight-matrix parameters (all projections, MLP and lm head)
    attention: int    # 2 x 2 x n_layers x n_heads x head_dim x context_len (QK^T and AV)
    context_len: int

    @property
    def total(self) -> int:
        return self.matmul + self.attention


def matmul_parameters(shape) -> int:
    """Weight-matrix parameters a token multiplies through: q, k, v, o, MLP and the lm head (even when tied).

    Excluded: the embedding lookups (a gather, no arithmetic), norms and biases (O(d) work per token).
    """
    s = _as_shape(shape)
    q_width, kv_width = s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim
    per_layer = s.d_model * (q_width + 2 * kv_width) + q_width * s.d_model          # q, k, v, o
    per_layer += s.d_model * s.d_ff * (3 if s.mlp == "swiglu" else 2)              # gate?, up, down
    return s.n_layers * per_layer + s.vocab_size * s.d_model


def forward_flops_per_token(shape, context_len: int) -> Flops:
    """Forward FLOPs to process one token that attends to `context_len` positions (itself included).

    Convention: a multiply-add is 2 FLOPs (the usual "2 x parameters per token" rule), so
      * matmul    = 2 x matmul_parameters(shape)  (projections, MLP, lm head; no embeddings lookup, norms, biases)
      * attention = 2 x 2 x n_layers x n_heads x head_dim x context_len  (q.k scores, then the weighted sum of v)
    Softmax, norms, activations and RoPE are left out (a few percent). For a whole causal sequence of length L,
    the average token attends to about L / 2 positions; this figure is for the token at position context_len.
    """
    s = _as_shape(shape)
    context_len = _check_positive("context_len", context_len, MAX_CONTEXT)
    return Flops(matmul=2 * matmul_parameters(s),
                 attention=2 * 2 * s.n_layers * s.n_heads * s.head_dim * context_len,
                 context_len=context_len)


def attention_flops_crossover(shape) -> int:
    """The context length at which the attention term reaches the matmul term (ceil)."""
    s = _as_shape(shape)
    per_position = 4 * s.n_layers * s.n_heads * s.head_dim
    return -(-2 * matmul_parameters(s) // per_position)
