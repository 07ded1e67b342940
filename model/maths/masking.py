"""The causal mask step by step, in pure numpy: what the Causal mask page shows, as functions of real scores."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.maths.sampling import softmax


@dataclass(frozen=True)
class MaskedViews:
    """One head's scores [T, T] seen with and without the causal mask (float64)."""

    scores: np.ndarray     # [T, T] q·k / sqrt(d) for every (query i, key j), the future included
    masked: np.ndarray     # [T, T] scores with -inf where j > i
    probs: np.ndarray      # [T, T] softmax of the masked scores: the model's attention pattern
    unmasked: np.ndarray   # [T, T] softmax over every key, future included
    leak: np.ndarray       # [T] share of each unmasked row that lands on future keys


def masked_views(scores: np.ndarray, mask: np.ndarray) -> MaskedViews:
    """scores [T, T] and mask [T, T] (True where j <= i) -> the masked scores and both softmaxes."""
    s = np.asarray(scores, dtype=np.float64)
    allowed = np.asarray(mask, dtype=bool)
    masked = np.where(allowed, s, -np.inf)
    unmasked = softmax(s, axis=-1)
    return MaskedViews(scores=s, masked=masked, probs=softmax(masked, axis=-1), unmasked=unmasked,
                       leak=np.where(allowed, 0.0, unmasked).sum(axis=-1))


@dataclass(frozen=True)
class SoftmaxSteps:
    """The masked softmax of one row, one operation at a time."""

    scores: np.ndarray     # [n]
    masked: np.ndarray     # [n] -inf on the future
    exp: np.ndarray        # [n] exp(masked - max): 0 on the future
    total: float           # their sum
    probs: np.ndarray      # [n] exp / total: sums to 1


def softmax_steps(scores_row: np.ndarray, mask_row: np.ndarray) -> SoftmaxSteps:
    """The masked softmax of one query row, with every intermediate value."""
    s = np.asarray(scores_row, dtype=np.float64)
    masked = np.where(np.asarray(mask_row, dtype=bool), s, -np.inf)
    exp = np.exp(masked - masked.max())
    return SoftmaxSteps(scores=s, masked=masked, exp=exp, total=float(exp.sum()), probs=exp / exp.sum())


def most_leaking_row(leak: np.ndarray) -> int:
    """The row with both a past and a future (1 .. n-2) whose unmasked softmax leaks the most (0 for n < 3)."""
    n = len(leak)
    return 1 + int(np.argmax(leak[1 : n - 1])) if n >= 3 else 0
