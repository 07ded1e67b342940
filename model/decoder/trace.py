"""Results of a forward pass: the whole-model trace and one layer's recomputed detail."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class ForwardTrace:
    """What one run of the decoder on a text recorded."""

    text: str
    token_ids: list[int]
    tokens: list[str]               # readable labels, one per token
    attention: np.ndarray           # [n_layers, n_heads, T, T] post-softmax; float32, float16 for long texts
    next_token_logits: np.ndarray   # [vocab_size] float32, logits after the last token
    truncated: bool                 # the text had more than max_tokens tokens and was cut
    n_tokens_total: int             # tokens in the full text before truncation
    checkpoints: dict[int, np.ndarray] = field(repr=False)  # layer -> [T, d_model] float32 input of that layer,
    #                                                         every CHECKPOINT_EVERY layers (for layer_detail)
    final_hidden: np.ndarray | None = field(default=None, repr=False)  # [T, d_model] float32 after the final norm
    allowed: np.ndarray | None = field(default=None, repr=False)  # [T, T] bool mask the pass ran under (None: causal)
    keys: np.ndarray | None = field(default=None, repr=False)    # [n_layers, n_kv_heads, T, head_dim] float32, the
    #                                                              rotated keys (causal passes only: a generation's
    #                                                              cache, see IncrementalDecoder.start_from)
    values: np.ndarray | None = field(default=None, repr=False)  # [n_layers, n_kv_heads, T, head_dim] float32
    hooked: tuple[str, ...] = ()   # the hook points the pass ran with (model/decoder/hooks.py): what it recorded is
    #                               theirs; an analysis re-running blocks from its checkpoints runs them without

    @property
    def n_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True, eq=False)
class LayerDetail:
    """One attention layer's intermediates, recomputed exactly as the forward pass did them."""

    layer: int
    q: np.ndarray       # [n_heads, T, head_dim] before RoPE
    q_rot: np.ndarray   # [n_heads, T, head_dim] after RoPE
    k: np.ndarray       # [n_kv_heads, T, head_dim] before RoPE
    k_rot: np.ndarray   # [n_kv_heads, T, head_dim] after RoPE
    v: np.ndarray       # [n_kv_heads, T, head_dim]
    scores: np.ndarray  # [n_heads, T, T] q_rot.k_rot / sqrt(head_dim), before the mask
    mask: np.ndarray    # [T, T] bool, True where attention is allowed (the causal mask j <= i, or the trace's)
    pattern: np.ndarray  # [n_heads, T, T] float32 softmax of the masked scores
