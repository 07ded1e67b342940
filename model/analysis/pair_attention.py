"""How differently each head attends in two texts of the same length (a minimal pair), position by position.

For head (l, h) and query i, the total variation distance between the two rows, 0.5 * sum_j |A[i, j] - B[i, j]|
(0: the same weights; 1: no key in common), averaged over the queries from `start` on (the positions before the first
differing token attend identically: the model is causal).
"""
from __future__ import annotations

import numpy as np


def attention_difference(a: np.ndarray, b: np.ndarray, start: int = 0) -> np.ndarray:
    """[L, H] mean over queries i >= start of 0.5 * sum_j |a[..., i, j] - b[..., i, j]|, for a, b [L, H, T, T]."""
    if a.shape != b.shape or a.ndim != 4:
        raise ValueError(f"need two [layers, heads, T, T] patterns of one shape, got {a.shape} and {b.shape}")
    T = a.shape[-1]
    if not 0 <= start < T:
        raise ValueError(f"start must be a position from 0 to {T - 1}, got {start}")
    rows = np.abs(np.asarray(a, np.float64)[..., start:, :] - np.asarray(b, np.float64)[..., start:, :])  # [L,H,R,T]
    return 0.5 * rows.sum(-1).mean(-1)
