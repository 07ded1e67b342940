"""ALiBi (Press et al. 2022): no position embedding at all; each head adds -m (i - j) to the score of key j.

Head h's slope m_h comes from a geometric sequence: for n heads (a power of 2) it starts at 2^(-8/n) and has that
ratio, so 8 heads get 1/2, 1/4, ..., 1/256. For other n the paper takes the 2^floor(log2 n) slopes of the closest
power of 2, then every other slope of twice that many heads for the rest. RoPE's side, for comparison, is the code
the model runs (model.decoder.rope) through model.maths.positional.
"""
from __future__ import annotations

import math

import numpy as np

from model.maths.positional import aligned_envelope


def _power_of_2_slopes(n: int) -> list[float]:
    start = 2.0 ** (-8.0 / n)
    return [start ** (i + 1) for i in range(n)]


def alibi_slopes(n_heads: int) -> np.ndarray:
    """The slope m_h of every head: [n_heads] float64, largest first (the paper's get_slopes)."""
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    closest = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = _power_of_2_slopes(closest)
    if closest < n_heads:
        slopes += _power_of_2_slopes(2 * closest)[0::2][: n_heads - closest]
    return np.array(slopes)


def alibi_bias(slopes: np.ndarray, T: int) -> np.ndarray:
    """The bias each head adds to its scores: -m_h (i - j) for j <= i, -inf for future keys: [H, T, T]."""
    i = np.arange(T)
    dist = (i[:, None] - i[None, :]).astype(np.float64)                     # [T, T]
    bias = -np.asarray(slopes, dtype=np.float64)[:, None, None] * dist      # [H, T, T]
    return np.where(dist >= 0, bias, -np.inf)


def alibi_weight_by_distance(slopes: np.ndarray, distances: np.ndarray) -> np.ndarray:
    """exp(-m_h Δ): how much less weight a key Δ tokens back gets than one at Δ = 0 with the same content: [H, D]."""
    return np.exp(-np.outer(np.asarray(slopes, dtype=np.float64), np.asarray(distances, dtype=np.float64)))


def rope_decay(head_dim: int, base: float, distances: np.ndarray) -> np.ndarray:
    """RoPE's long-range decay on the same distances: the score of a query and key whose every pair starts aligned
    (all-ones content), relative to distance 0 (Su et al. section 3.4.3): [D], 1 at Δ = 0, oscillating and
    shrinking, never a penalty that grows without bound."""
    ones = np.ones(head_dim)
    curve = aligned_envelope(ones, ones, np.asarray(distances), base)
    return curve / aligned_envelope(ones, ones, np.array([0]), base)[0]
