"""Exact parameter counts of a shape, layer by layer and by group (count_parameters -> Breakdown). Pure Python:
every count is an exact int."""
from __future__ import annotations

from dataclasses import dataclass

from model.calculator.shape import Shape, make_shape

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
