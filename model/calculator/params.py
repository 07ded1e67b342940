"""Exact parameter counts, weight memory, KV-cache size and forward FLOPs for any decoder-only transformer shape.

Pure Python (no torch, numpy, streamlit or plotly): every count is an exact Python int, so a 1T-parameter shape is
still exact. The layout covered is the GPT-2 / Llama family:

    token embedding [+ learned positions] -> n_layers x (norm, attention, norm, MLP) -> final norm -> lm head

Where each parameter goes (the same grouping the page and the tests use):
    embeddings  token embedding (vocab_size x d_model) + learned position embedding (max_positions x d_model)
    attention   q / k / v / o projection weights and their biases
    mlp         gelu: up + down;  swiglu: gate + up + down  (weights and biases)
    norms       two per layer (before attention, before MLP), optional per-head q/k norms, the final norm
    head        lm head (vocab_size x d_model, no bias); 0 when tied to the token embedding
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from numbers import Integral

# ---------------------------------------------------------------------------------------------------------- shape

MLP_KINDS = ("gelu", "swiglu")
NORM_KINDS = ("layernorm", "rmsnorm")
POSITIONAL_KINDS = ("learned", "sinusoidal", "rope", "alibi", "none")

# Sane upper bounds. The largest published dense models sit far inside them (Llama-3.1-405B: 126 layers, d_model
# 16,384, d_ff 53,248, 128 heads; Gemma: 256k vocab; Llama-4-Scout: 10M-token context). They exist to turn typos
# (a 10^7-layer model) into a clear message instead of a meaningless number.
LIMITS = {
    "vocab_size": 10_000_000,
    "d_model": 1_048_576,
    "n_layers": 10_000,
    "n_heads": 65_536,
    "n_kv_heads": 65_536,
    "head_dim": 1_048_576,        # as wide as d_model can be: one head of the whole width is a valid shape
    "d_ff": 16_777_216,
    "max_positions": 1_000_000_000,
}
MAX_CONTEXT = 1_000_000_000   # context length for KV-cache / FLOPs figures
MAX_BATCH = 1_000_000

LABELS = {   # plain-language names of the shape fields (the code name in brackets), for messages and forms
    "vocab_size": "vocabulary size",
    "d_model": "model width (d_model)",
    "n_layers": "number of layers",
    "n_heads": "number of heads",
    "n_kv_heads": "key/value heads",
    "head_dim": "head size (head_dim)",
    "d_ff": "MLP width (d_ff)",
    "mlp": "MLP type",
    "norm": "norm type",
    "positional": "positional encoding",
    "max_positions": "context length",
    "tied_embeddings": "tied embeddings",
    "qkv_bias": "q/k/v bias",
    "out_bias": "output-projection bias",
    "mlp_bias": "MLP bias",
    "qk_norm": "q/k norm",
}
REQUIRED = ("vocab_size", "d_model", "n_layers", "n_heads")
DEFAULTS = {   # n_kv_heads -> n_heads, head_dim -> d_model // n_heads, d_ff -> 4 * d_model (filled in make_shape)
    "n_kv_heads": None, "head_dim": None, "d_ff": None, "mlp": "swiglu", "norm": "rmsnorm", "positional": "rope",
    "max_positions": 2048, "tied_embeddings": False, "qkv_bias": False, "out_bias": False, "mlp_bias": False,
    "qk_norm": False,
}
FIELDS = tuple(LABELS)


class ShapeError(ValueError):
    """A shape field is missing or invalid; `.field` names it (a key of LABELS) for a form to show it there, and
    `.short` says what is wrong in a few words (for under the field; the message is the full sentence)."""

    def __init__(self, field: str, message: str, short: str | None = None):
        super().__init__(message)
        self.field = field
        self.short = short or message


@dataclass(frozen=True)
class Shape:
    """A validated model shape (build it with make_shape, which fills defaults and checks every field)."""

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    mlp: str
    norm: str
    positional: str
    max_positions: int
    tied_embeddings: bool
    qkv_bias: bool
    out_bias: bool
    mlp_bias: bool
    qk_norm: bool

    def as_dict(self) -> dict:
        return asdict(self)

    def with_kv_heads(self, n_kv_heads: int) -> Shape:
        """The same shape with another number of KV heads (MHA: n_heads, MQA: 1, GQA: in between)."""
        return make_shape(**{**self.as_dict(), "n_kv_heads": n_kv_heads})


def shape_errors(**shape) -> list[ShapeError]:
    """Every problem with a shape, one ShapeError per bad field (empty list: the shape is valid)."""
    errors: dict[str, ShapeError] = {}

    def bad(field: str, message: str, short: str | None = None) -> None:
        errors.setdefault(field, ShapeError(field, message, short))

    def name(key: str) -> str:
        return LABELS.get(key, key)

    for key in shape:
        if key not in LABELS:
            bad(key, f"Unknown shape field {key!r}; known fields: {', '.join(FIELDS)}.")
    for key in REQUIRED:
        if shape.get(key) is None:
            bad(key, f"The {name(key)} is required.", "required")
    values = {**DEFAULTS, **{k: v for k, v in shape.items() if v is not None}}

    for key in LIMITS:
        value = values.get(key)
        if value is None or key in errors:
            continue
        if isinstance(value, bool) or not isinstance(value, Integral):
            bad(key, f"The {name(key)} must be a whole number, got {value!r}.", "a whole number, please")
        elif value < 1:
            bad(key, f"The {name(key)} must be at least 1, got {value:,}.", "at least 1")
        elif value > LIMITS[key]:
            bad(key, f"The {name(key)} = {value:,} is beyond the sane upper bound {LIMITS[key]:,}.",
                f"at most {LIMITS[key]:,}")
    for key, kinds in (("mlp", MLP_KINDS), ("norm", NORM_KINDS), ("positional", POSITIONAL_KINDS)):
        if values[key] not in kinds:
            bad(key, f"The {name(key)} must be one of {', '.join(kinds)}; got {values[key]!r}.",
                f"one of {', '.join(kinds)}")
    for key in ("tied_embeddings", "qkv_bias", "out_bias", "mlp_bias", "qk_norm"):
        if not isinstance(values[key], bool):
            bad(key, f"The setting '{name(key)}' must be on or off, got {values[key]!r}.", "on or off")

    heads_ok = "n_heads" not in errors
    if heads_ok and "d_model" not in errors and values["head_dim"] is None and values["d_model"] % values["n_heads"]:
        bad("n_heads", f"The number of heads ({values['n_heads']:,}) must divide the model width "
                       f"({values['d_model']:,}) when the head size is automatic (head size = width / heads).",
            f"must divide the width {values['d_model']:,} (or set the head size)")
    if heads_ok and values["n_kv_heads"] is not None and "n_kv_heads" not in errors \
            and values["n_heads"] % values["n_kv_heads"]:
        bad("n_kv_heads", f"The key/value heads ({values['n_kv_heads']:,}) must divide the number of heads "
                          f"({values['n_heads']:,}): each key/value head serves a whole group of query heads.",
            f"must divide the {values['n_heads']:,} heads")
    return list(errors.values())


def make_shape(**shape) -> Shape:
    """Validate a shape given as keyword arguments (see LABELS), fill the defaults, and return it.

    Raises ShapeError (a ValueError with `.field`) for the first bad field; shape_errors() lists all of them.
    """
    errors = shape_errors(**shape)
    if errors:
        raise errors[0]
    values = {**DEFAULTS, **{k: v for k, v in shape.items() if v is not None}}
    for key in LIMITS:
        if values[key] is not None:
            values[key] = int(values[key])   # numpy / other Integral types -> plain int
    if values["n_kv_heads"] is None:
        values["n_kv_heads"] = values["n_heads"]
    if values["head_dim"] is None:
        values["head_dim"] = values["d_model"] // values["n_heads"]
    if values["d_ff"] is None:
        values["d_ff"] = 4 * values["d_model"]
    return Shape(**values)


# ------------------------------------------------------------------------------------------------------ breakdown

@dataclass(frozen=True)
class LayerBreakdown:
    """Parameters of one transformer block, by tensor (weights plus biases)."""

    q: int
    k: int
    v: int
    o: int
    q_norm: int
    k_norm: int
    attn_norm: int
    mlp_norm: int
    gate: int
    up: int
    down: int

    @property
    def attention(self) -> int:
        return self.q + self.k + self.v + self.o

    @property
    def mlp(self) -> int:
        return self.gate + self.up + self.down

    @property
    def norms(self) -> int:
        return self.attn_norm + self.mlp_norm + self.q_norm + self.k_norm

    @property
    def total(self) -> int:
        return self.attention + self.mlp + self.norms

    def groups(self) -> dict[str, int]:
        """attention / mlp / norms of this layer."""
        return {"attention": self.attention, "mlp": self.mlp, "norms": self.norms}

    def percentages(self) -> dict[str, float]:
        """Share of the layer (in %) for each group: the "MLPs hold most of a layer" lesson."""
        return {name: 100.0 * value / self.total for name, value in self.groups().items()}


@dataclass(frozen=True)
class Breakdown:
    """Parameter count of a whole model. `.total` is exact; `groups()` and `parts()` split it."""

    shape: Shape
    token_embedding: int
    position_embedding: int
    layer: LayerBreakdown      # one block; all n_layers blocks are identical
    final_norm: int
    lm_head: int

    @property
    def n_layers(self) -> int:
        return self.shape.n_layers

    @property
    def embeddings(self) -> int:
        return self.token_embedding + self.position_embedding

    @property
    def attention(self) -> int:
        return self.n_layers * self.layer.attention

    @property
    def mlp(self) -> int:
        return self.n_layers * self.layer.mlp

    @property
    def norms(self) -> int:
        return self.n_layers * self.layer.norms + self.final_norm

    @property
    def head(self) -> int:
        return self.lm_head

    @property
    def layers(self) -> int:
        return self.n_layers * self.layer.total

    @property
    def total(self) -> int:
        return self.embeddings + self.layers + self.final_norm + self.lm_head

    @property
    def non_embedding(self) -> int:
        """Parameters outside the token/position embeddings (and outside an untied head): the 'N' of scaling laws."""
        return self.total - self.embeddings - self.lm_head

    def groups(self) -> dict[str, int]:
        """The five main parts; they sum to .total."""
        return {"embeddings": self.embeddings, "attention": self.attention, "mlp": self.mlp, "norms": self.norms,
                "head": self.head}

    def percentages(self) -> dict[str, float]:
        """Share of the whole model (in %) for each of groups()."""
        return {name: 100.0 * value / self.total for name, value in self.groups().items()}

    def parts(self) -> dict[str, dict[str, int]]:
        """Two-level split for a treemap: group -> tensor kind -> parameters over all layers (zeros dropped)."""
        n, lay = self.n_layers, self.layer
        tree = {
            "embeddings": {"token embedding": self.token_embedding, "position embedding": self.position_embedding},
            "attention": {"q proj": n * lay.q, "k proj": n * lay.k, "v proj": n * lay.v, "o proj": n * lay.o},
            "mlp": {"gate proj": n * lay.gate, "up proj": n * lay.up, "down proj": n * lay.down},
            "norms": {"attention norms": n * lay.attn_norm, "MLP norms": n * lay.mlp_norm,
                      "q/k norms": n * (lay.q_norm + lay.k_norm), "final norm": self.final_norm},
            "head": {"lm head": self.lm_head},
        }
        return {group: {k: v for k, v in leaves.items() if v} for group, leaves in tree.items()
                if any(leaves.values())}


def count_parameters(**shape) -> Breakdown:
    """Exact parameter count of a decoder-only transformer; keyword arguments as in make_shape / LABELS.

    >>> count_parameters(vocab_size=50257, d_model=768, n_layers=12, n_heads=12, mlp="gelu", norm="layernorm",
    ...                  positional="learned", max_positions=1024, tied_embeddings=True, qkv_bias=True,
    ...                  out_bias=True, mlp_bias=True).total      # GPT-2 small
    124439808
    """
    s = make_shape(**shape)
    d, hd = s.d_model, s.head_dim
    q_width, kv_width = s.n_heads * hd, s.n_kv_heads * hd
    norm_size = (2 if s.norm == "layernorm" else 1)          # layernorm: weight + bias; rmsnorm: weight only
    mlp_bias = int(s.mlp_bias)
    up = d * s.d_ff + mlp_bias * s.d_ff
    layer = LayerBreakdown(
        q=d * q_width + int(s.qkv_bias) * q_width,
        k=d * kv_width + int(s.qkv_bias) * kv_width,
        v=d * kv_width + int(s.qkv_bias) * kv_width,
        o=q_width * d + int(s.out_bias) * d,
        q_norm=norm_size * hd if s.qk_norm else 0,          # one head_dim vector shared by all heads (Qwen3)
        k_norm=norm_size * hd if s.qk_norm else 0,
        attn_norm=norm_size * d,
        mlp_norm=norm_size * d,
        gate=up if s.mlp == "swiglu" else 0,
        up=up,
        down=s.d_ff * d + mlp_bias * d,
    )
    return Breakdown(
        shape=s,
        token_embedding=s.vocab_size * d,
        position_embedding=s.max_positions * d if s.positional == "learned" else 0,
        layer=layer,
        final_norm=norm_size * d,
        lm_head=0 if s.tied_embeddings else s.vocab_size * d,
    )


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


def kv_cache_bytes_per_token(shape, dtype: str = "bf16") -> int:
    """K and V cache for one token: 2 * n_layers * n_kv_heads * head_dim values (shape: Shape, Breakdown or dict)."""
    s = _as_shape(shape)
    return _bytes(2 * s.n_layers * s.n_kv_heads * s.head_dim, dtype)


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


# -------------------------------------------------------------------------------------------------------- presets

_GPT2 = dict(vocab_size=50257, mlp="gelu", norm="layernorm", positional="learned", max_positions=1024,
             tied_embeddings=True, qkv_bias=True, out_bias=True, mlp_bias=True)
_LLAMA = dict(mlp="swiglu", norm="rmsnorm", positional="rope")

# name -> shape keyword arguments. Each is the model's published config.json (tests rebuild them with transformers
# on the meta device and compare). Shapes from the Hugging Face repos named in PRESET_SOURCES.
PRESETS: dict[str, dict] = {
    "GPT-2 small": dict(_GPT2, d_model=768, n_layers=12, n_heads=12, d_ff=3072),
    "GPT-2 medium": dict(_GPT2, d_model=1024, n_layers=24, n_heads=16, d_ff=4096),
    "GPT-2 large": dict(_GPT2, d_model=1280, n_layers=36, n_heads=20, d_ff=5120),
    "GPT-2 XL": dict(_GPT2, d_model=1600, n_layers=48, n_heads=25, d_ff=6400),
    "Llama-2-7B": dict(_LLAMA, vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32, d_ff=11008,
                       max_positions=4096, tied_embeddings=False),
    "Llama-3-8B": dict(_LLAMA, vocab_size=128256, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336,
                       max_positions=8192, tied_embeddings=False),
    "Mistral-7B": dict(_LLAMA, vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, d_ff=14336,
                       max_positions=32768, tied_embeddings=False),
    "Qwen3-8B": dict(_LLAMA, vocab_size=151936, d_model=4096, n_layers=36, n_heads=32, n_kv_heads=8, head_dim=128,
                     d_ff=12288, max_positions=40960, tied_embeddings=False, qk_norm=True),
    "Qwen2.5-0.5B": dict(_LLAMA, vocab_size=151936, d_model=896, n_layers=24, n_heads=14, n_kv_heads=2, d_ff=4864,
                         max_positions=32768, tied_embeddings=True, qkv_bias=True),
    "TinyLlama-1.1B": dict(_LLAMA, vocab_size=32000, d_model=2048, n_layers=22, n_heads=32, n_kv_heads=4, d_ff=5632,
                           max_positions=2048, tied_embeddings=False),
    "SmolLM2-135M": dict(_LLAMA, vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, d_ff=1536,
                         max_positions=8192, tied_embeddings=True),
}
PRESET_SOURCES = {
    "GPT-2 small": "openai-community/gpt2",
    "GPT-2 medium": "openai-community/gpt2-medium",
    "GPT-2 large": "openai-community/gpt2-large",
    "GPT-2 XL": "openai-community/gpt2-xl",
    "Llama-2-7B": "meta-llama/Llama-2-7b-hf",
    "Llama-3-8B": "meta-llama/Meta-Llama-3-8B",
    "Mistral-7B": "mistralai/Mistral-7B-v0.1",
    "Qwen3-8B": "Qwen/Qwen3-8B",
    "Qwen2.5-0.5B": "Qwen/Qwen2.5-0.5B",
    "TinyLlama-1.1B": "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
    "SmolLM2-135M": "HuggingFaceTB/SmolLM2-135M",
}
CUSTOM = "custom"


def shape_from_config(config) -> Shape:
    """The Shape of a loaded model (model.decoder.config.ModelConfig): its norm, positions, MLP, biases, q/k norm."""
    return make_shape(vocab_size=config.vocab_size, d_model=config.d_model, n_layers=config.n_layers,
                      n_heads=config.n_heads, n_kv_heads=config.n_kv_heads, head_dim=config.head_dim,
                      d_ff=config.d_ff, mlp=config.mlp, norm=config.norm, positional=config.positional,
                      max_positions=config.max_positions, tied_embeddings=config.tied_embeddings,
                      qkv_bias=config.qkv_bias, out_bias=config.out_bias, mlp_bias=config.mlp_bias,
                      qk_norm=config.qk_norm)


def gguf_tensor_group(name: str) -> str:
    """Which of Breakdown.groups() a llama GGUF tensor belongs to (token_embd, blk.N.attn_q, ffn_up, output, ...)."""
    leaf = name.split(".")[-2] if name.count(".") else name
    if leaf in ("token_embd", "position_embd"):
        return "embeddings"
    if leaf == "output":
        return "head"
    if "norm" in leaf:
        return "norms"
    if leaf.startswith("attn_"):
        return "attention"
    if leaf.startswith("ffn_"):
        return "mlp"
    raise ValueError(f"unknown GGUF tensor {name!r}")


def tensor_group_sums(tensor_sizes: dict[str, int]) -> dict[str, int]:
    """Parameters per group (gguf_tensor_group; 'other' for a tensor it does not know) of a model file's tensors."""
    sums: dict[str, int] = {}
    for name, n in tensor_sizes.items():
        try:
            group = gguf_tensor_group(name)
        except ValueError:
            group = "other"
        sums[group] = sums.get(group, 0) + int(n)
    return sums


__all__ = [
    "Breakdown", "CUSTOM", "DTYPE_BITS", "FIELDS", "Flops", "LABELS", "LIMITS", "LayerBreakdown", "PRESETS",
    "PRESET_SOURCES", "Shape", "ShapeError", "attention_flops_crossover", "attention_variants", "count_parameters",
    "forward_flops_per_token", "gguf_tensor_group", "kv_cache_bytes",
    "kv_cache_bytes_per_token", "make_shape", "matmul_parameters", "shape_errors", "shape_from_config",
    "tensor_group_sums", "weight_memory",
]
