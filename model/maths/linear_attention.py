"""Linear attention (Katharopoulos et al. 2020): softmax's exp(q.k) replaced by a kernel phi(q).phi(k).

With phi(x) = elu(x) + 1 (positive everywhere), causal attention becomes a running sum: the state
S_i = sum_{j<=i} phi(k_j) v_j^T [d, d_v] and z_i = sum_{j<=i} phi(k_j) [d] are updated once per token and
out_i = phi(q_i)^T S_i / phi(q_i)^T z_i. Each token then costs the same, however long the text: no KV cache that
grows, no T x T matrix. The price: the kernel is only a rough stand-in for softmax, as the real q and k show.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def elu_feature_map(x: np.ndarray) -> np.ndarray:
    """phi(x) = elu(x) + 1: x + 1 for x > 0, exp(x) otherwise (float64, > 0)."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_pattern(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The causal attention weights linear attention implies: phi(q_i).phi(k_j) / sum_{j'<=i} phi(q_i).phi(k_j'),
    q, k [T, d] -> [T, T] (0 above the diagonal)."""
    a = np.tril(elu_feature_map(q) @ elu_feature_map(k).T)                   # [T, T]
    return a / a.sum(axis=1, keepdims=True)


def linear_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Causal linear attention in its recurrent form, one token at a time with a [d, d_v] state: [T, d_v]."""
    fq, fk = elu_feature_map(q), elu_feature_map(k)                          # [T, d]
    v = np.asarray(v, dtype=np.float64)                                      # [T, d_v]
    state = np.cumsum(fk[:, :, None] * v[:, None, :], axis=0)                # [T, d, d_v] S_i
    norm = np.cumsum(fk, axis=0)                                             # [T, d] z_i
    return np.einsum("td,tde->te", fq, state) / (fq * norm).sum(axis=1, keepdims=True)


def recurrence_gap(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> float:
    """Largest difference between the recurrent form (a running state, one token at a time) and the pattern form
    (the [T, T] weights times v): the same outputs, up to float64 rounding."""
    return float(np.abs(linear_attention(q, k, v) - linear_pattern(q, k) @ np.asarray(v, dtype=np.float64)).max())


def softmax_pattern(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """One head's causal softmax attention, softmax(q k^T / sqrt(d)) with the causal mask: [T, T] float64."""
    q = np.asarray(q, dtype=np.float64)
    T, d = q.shape
    s = np.where(np.tri(T, dtype=bool), q @ np.asarray(k, dtype=np.float64).T / np.sqrt(d), -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class PatternError:
    """How far linear attention's pattern and output are from softmax's, per query row."""

    row_distance: np.ndarray     # [T] total variation 0.5 sum_j |linear - softmax|: 0 equal, 1 disjoint
    output_error: np.ndarray     # [T] |out_linear - out_softmax| / |out_softmax|
    total_output_error: float    # over every row at once: |out_linear - out_softmax|_F / |out_softmax|_F


def pattern_error(softmax_p: np.ndarray, linear_p: np.ndarray, v: np.ndarray) -> PatternError:
    """Compare two [T, T] patterns directly and through the outputs they make from v [T, d_v]."""
    v = np.asarray(v, dtype=np.float64)
    out_s, out_l = softmax_p @ v, linear_p @ v                               # [T, d_v]
    return PatternError(row_distance=0.5 * np.abs(linear_p - softmax_p).sum(axis=1),
                        output_error=np.linalg.norm(out_l - out_s, axis=1) / np.linalg.norm(out_s, axis=1),
                        total_output_error=float(np.linalg.norm(out_l - out_s) / np.linalg.norm(out_s)))


def cost_per_token(positions: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Multiply-adds to produce token t's output, for t in positions: (softmax: scores against t + 1 keys and a
    weighted sum of t + 1 values, 2 (t + 1) d; linear: update S and z, then phi(q)^T S and phi(q)^T z, 2 d^2 + 2 d)."""
    t = np.asarray(positions, dtype=np.float64)
    return 2.0 * (t + 1) * d, np.full_like(t, 2.0 * d * d + 2.0 * d)
