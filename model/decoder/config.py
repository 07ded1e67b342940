"""ModelConfig: the shape of a decoder and the parts its blocks are built from (norm, positions, MLP, biases); and the
limits every run shares, decoders' and encoders' (the tokens read by default, the largest attention kept float32)."""
from __future__ import annotations

from dataclasses import dataclass

ARCHITECTURES = ("llama", "qwen2", "qwen3", "gpt2")
NORMS = ("rmsnorm", "layernorm")
POSITIONS = ("rope", "learned")
MLPS = ("swiglu", "gelu")
DEFAULT_MAX_TOKENS = 512              # tokens of a text a run reads by default (fewer where the context is shorter)
FLOAT32_ATTENTION_BYTES = 64 * 2**20  # attention kept float32 up to this size, float16 above (decoders and encoders)


@dataclass(frozen=True)
class ModelConfig:
    """Shape and hyper-parameters of a decoder-only transformer, and which parts its blocks use.

    The defaults describe a Llama block (RMSNorm, RoPE, SwiGLU, no biases); the GGUF reader sets the parts of the
    other architectures: Qwen2 adds q/k/v biases, Qwen3 a per-head RMSNorm of q and k before RoPE, GPT-2 uses
    LayerNorm with biases, learned absolute positions, a GELU MLP and biases everywhere.
    """

    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_model: int
    d_ff: int
    vocab_size: int
    rope_theta: float | None        # None: the model has no RoPE (learned positions)
    norm_eps: float
    max_positions: int
    tied_embeddings: bool
    name: str = "model"
    architecture: str = "llama"
    norm: str = "rmsnorm"
    positional: str = "rope"
    mlp: str = "swiglu"
    qkv_bias: bool = False
    out_bias: bool = False          # attention output projection bias
    mlp_bias: bool = False
    qk_norm: bool = False           # per-head RMSNorm of q and k before RoPE (Qwen3)
    rope_scaled: bool = False       # per-frequency RoPE divisors from the file (Llama 3.1 / 3.2 rope_freqs)

    def __post_init__(self) -> None:
        for field in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "d_model", "d_ff", "vocab_size",
                      "max_positions"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ModelConfig.{field} must be a positive integer, got {value!r}")
        for field, allowed in (("architecture", ARCHITECTURES), ("norm", NORMS), ("positional", POSITIONS),
                               ("mlp", MLPS)):
            if getattr(self, field) not in allowed:
                raise ValueError(f"ModelConfig.{field} must be one of {allowed}, got {getattr(self, field)!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if self.positional == "rope":
            if self.head_dim % 2:
                raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
            if self.rope_theta is None or not self.rope_theta > 1:
                raise ValueError(f"rope_theta must be > 1, got {self.rope_theta!r}")
        elif self.rope_theta is not None:
            raise ValueError("rope_theta must be None for a model without RoPE")
        if not 0 < self.norm_eps < 1:
            raise ValueError(f"norm_eps must be in (0, 1), got {self.norm_eps!r}")

    @property
    def group_size(self) -> int:
        """Query heads per KV head (GQA): query head h reads KV head h // group_size."""
        return self.n_heads // self.n_kv_heads

    def kv_head_of(self, head: int) -> int:
        """The KV head query head `head` reads."""
        return head // self.group_size

    @property
    def uses_rope(self) -> bool:
        return self.positional == "rope"

    def describe(self) -> str:
        """One line for the UI: architecture, layers, heads, widths."""
        return (f"{self.architecture} · {self.n_layers} layers · {self.n_heads} heads ({self.n_kv_heads} KV) · "
                f"d_model {self.d_model} · d_ff {self.d_ff} · vocab {self.vocab_size:,}")
