"""One attention layer's arithmetic, shared by BERT and both T5 stacks: heads from projections, scores (scaled or
not, plus a position bias), a mask, softmax, the heads' mix of values, and the output projection."""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F


class AttentionParts(NamedTuple):
    """What one attention layer computed for its query rows."""

    q: torch.Tensor        # [H, Tq, hd]
    k: torch.Tensor        # [H, Tk, hd] every key attended to (a cache's earlier keys included)
    v: torch.Tensor        # [H, Tk, hd]
    scores: torch.Tensor   # [H, Tq, Tk] before the mask: q.k * scale (+ position bias)
    pattern: torch.Tensor  # [H, Tq, Tk] softmax of the masked scores
    out: torch.Tensor      # [Tq, D] after the output projection


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[T, H * hd] -> [H, T, hd]."""
    T = x.shape[0]
    return x.view(T, n_heads, -1).transpose(0, 1)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w_out: torch.Tensor, b_out: torch.Tensor | None,
           scale: float, bias: torch.Tensor | None = None, allowed: torch.Tensor | None = None) -> AttentionParts:
    """q [H, Tq, hd] against k, v [H, Tk, hd]: scores = q.k * scale (+ bias [H, Tq, Tk]), keys outside allowed
    ([Tq, Tk] bool; None: all) at -inf, softmax over the keys, the values mixed, then the output projection."""
    scores = torch.matmul(q, k.transpose(1, 2))                                     # [H, Tq, Tk]
    if scale != 1.0:
        scores = scores * scale
    if bias is not None:
        scores = scores + bias
    masked = scores if allowed is None else scores.masked_fill(~allowed, float("-inf"))
    pattern = torch.softmax(masked, dim=-1)                                         # [H, Tq, Tk]
    mixed = torch.matmul(pattern, v)                                                # [H, Tq, hd]
    merged = mixed.transpose(0, 1).reshape(q.shape[1], -1)                          # [Tq, H * hd]
    return AttentionParts(q, k, v, scores, pattern, F.linear(merged, w_out, b_out))


def causal(n_queries: int, n_keys: int) -> torch.Tensor:
    """[Tq, Tk] bool: the last n_queries positions of n_keys may attend to keys at or before their own."""
    rows = torch.arange(n_keys - n_queries, n_keys)[:, None]                         # [Tq, 1]
    return torch.arange(n_keys)[None, :] <= rows                                    # [Tq, Tk]
