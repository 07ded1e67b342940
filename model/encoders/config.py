"""The shapes of the two encoder families: BertConfig (encoder-only, bidirectional) and T5Config (encoder-decoder)."""
from __future__ import annotations

from dataclasses import dataclass

POOLINGS = {0: "none", 1: "mean", 2: "cls", 3: "last"}   # {arch}.pooling_type (llama.cpp's LLAMA_POOLING_TYPE_*)
RELATIVE_MAX_DISTANCE = 128   # T5's relative_attention_max_distance: every published T5 uses 128; not in a GGUF


class OneKeyHeadPerHead:
    """What the app's shared controls read of any model's config (a decoder's ModelConfig names), for the encoder
    families: one key/value head per query head, and no RoPE."""

    group_size = 1
    uses_rope = False
    rope_theta = None

    @property
    def n_kv_heads(self) -> int:
        return self.n_heads

    def kv_head_of(self, head: int) -> int:
        return head


@dataclass(frozen=True)
class BertConfig(OneKeyHeadPerHead):
    """A BERT encoder: learned positions and token types, post-norm blocks (LayerNorm after each residual add), GELU
    (erf) MLP, biases everywhere, no mask: every token attends to every token."""

    n_layers: int
    n_heads: int
    head_dim: int
    d_model: int
    d_ff: int
    vocab_size: int
    max_positions: int
    n_token_types: int
    norm_eps: float
    pooling: str = "none"           # how the file's embedding model pools the last hidden states (POOLINGS)
    name: str = "model"
    architecture: str = "bert"
    family: str = "encoder"

    def describe(self) -> str:
        """One line for the UI."""
        return (f"bert (encoder) · {self.n_layers} layers · {self.n_heads} heads · d_model {self.d_model} · "
                f"d_ff {self.d_ff} · vocab {self.vocab_size:,}")


@dataclass(frozen=True)
class T5Config(OneKeyHeadPerHead):
    """A T5 encoder-decoder: RMSNorm (no mean, no bias) before each part, no biases, relative position buckets added
    to the scores (one table per stack, in its block 0; none for cross-attention), scores not divided by
    sqrt(head_dim), a ReLU (T5 v1.0) or gated-GELU (v1.1, Flan-T5) MLP."""

    n_layers: int                   # encoder blocks
    n_decoder_layers: int
    n_heads: int
    head_dim: int                   # d_kv: n_heads * head_dim need not be d_model
    d_model: int
    d_ff: int
    vocab_size: int
    max_positions: int              # the file's context length: the longest source or target this app runs
    norm_eps: float
    relative_buckets: int
    gated: bool                     # gated-GELU MLP (ffn_gate present) rather than ReLU
    tied_embeddings: bool           # the LM head is the embedding table
    scale_decoder_output: bool      # decoder output * d_model**-0.5 before the head (a tied T5, as transformers)
    decoder_start_token_id: int
    relative_max_distance: int = RELATIVE_MAX_DISTANCE
    name: str = "model"
    architecture: str = "t5"
    family: str = "encoder-decoder"

    def describe(self) -> str:
        """One line for the UI."""
        mlp = "gated-GELU" if self.gated else "ReLU"
        return (f"t5 (encoder-decoder) · {self.n_layers} + {self.n_decoder_layers} layers · {self.n_heads} heads · "
                f"d_model {self.d_model} · d_ff {self.d_ff} ({mlp}) · vocab {self.vocab_size:,}")
