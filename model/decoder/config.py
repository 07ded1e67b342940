"""ModelConfig: the shape of a Llama-style decoder."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelConfig:
    """Shape and hyper-parameters of a decoder-only transformer (Llama layout)."""

    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_model: int
    d_ff: int
    vocab_size: int
    rope_theta: float
    norm_eps: float
    max_positions: int
    tied_embeddings: bool
    name: str = "model"

    def __post_init__(self) -> None:
        for field in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "d_model", "d_ff", "vocab_size",
                      "max_positions"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ModelConfig.{field} must be a positive integer, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if not self.rope_theta > 1:
            raise ValueError(f"rope_theta must be > 1, got {self.rope_theta!r}")
        if not 0 < self.norm_eps < 1:
            raise ValueError(f"norm_eps must be in (0, 1), got {self.norm_eps!r}")

    @property
    def group_size(self) -> int:
        """Query heads per KV head (GQA): query head h reads KV head h // group_size."""
        return self.n_heads // self.n_kv_heads

    def describe(self) -> str:
        """One line for the UI: layers, heads, widths."""
        return (f"{self.n_layers} layers · {self.n_heads} heads ({self.n_kv_heads} KV) · "
                f"d_model {self.d_model} · d_ff {self.d_ff} · vocab {self.vocab_size:,}")
