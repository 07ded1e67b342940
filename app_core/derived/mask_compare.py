"""The Causal mask page's comparison: one head's pattern of a model with a causal mask (a decoder, or a T5's
decoder) beside one of a model without (a BERT, or a T5's encoder), on the same text, its first n tokens."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app_core.derived.seq2seq import seq2seq_run
from app_core.families import DECODER, family_of


@dataclass(frozen=True, eq=False)
class MaskSide:
    """One side of the comparison: a head's pattern over the text's first tokens."""

    model: str                  # the model's name
    causal: bool                # a decoder's pattern (keys after the query are masked)
    tokens: list[str]           # the first n tokens (the model's own tokenization)
    pattern: np.ndarray         # [n, n] float32
    n_tokens: int               # the text's tokens in all (rows of an encoder also look at those not shown)
    n_layers: int               # of the stack shown
    n_heads: int
    layer: int                  # the layer and head shown (cut to the stack's)
    head: int


def mask_side(ws, text: str, layer: int, head: int, n: int, t5_decoder: bool = False) -> MaskSide:
    """The workspace's model on text: its own self-attention (a T5's: its encoder's), or with t5_decoder a T5's
    decoder reading the text as its target (causal), at layer and head (each cut to the model's last), first n
    tokens."""
    if t5_decoder:
        run = ws.compute(seq2seq_run, text, text, share="traces")
        attention, tokens, causal = run.attention, run.target_tokens, True
    else:
        trace = ws.trace(text)
        attention, tokens, causal = trace.attention, trace.tokens, family_of(ws.lm) == DECODER
    L, H, T = attention.shape[0], attention.shape[1], attention.shape[-1]
    layer, head, n = min(layer, L - 1), min(head, H - 1), max(1, min(n, T))
    return MaskSide(ws.lm.name, causal, list(tokens[:n]), np.asarray(attention[layer, head, :n, :n], np.float32), T,
                    L, H, layer, head)


def shown_share(side: MaskSide) -> np.ndarray:
    """[n] each row's weight on the keys shown (1 for a causal row; an encoder's row also looks at later tokens)."""
    return side.pattern.sum(axis=-1)
