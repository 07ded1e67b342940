"""Positional encodings for the lessons, as pure functions: sinusoidal PE and rotary embeddings (RoPE).

RoPE itself is model.decoder.rope, the code the model runs, so the pages explain exactly that code.
"""
from __future__ import annotations

import numpy as np

from model.decoder.rope import CONVENTIONS, apply_rope, rope_cos_sin, rope_frequencies
from model.maths.sampling import softmax


def sinusoidal_pe(n_positions: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The original Transformer's PE: [n_positions, d_model], PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i)."""
    if n_positions < 1:
        raise ValueError(f"n_positions must be >= 1, got {n_positions}")
    return sinusoidal_pe_at(np.arange(n_positions), d_model, base)


def sinusoidal_pe_at(positions, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The rows of sinusoidal_pe for the given positions only: [len(positions), d_model]."""
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be an even number >= 2, got {d_model}")
    angles = np.asarray(positions, dtype=np.float64)[:, None] * sinusoidal_frequencies(d_model, base)  # [P, d/2]
    n_positions = angles.shape[0]
    pe = np.empty((n_positions, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def sinusoidal_pe_dims(n_positions: int, d_model: int, base: float, dims) -> np.ndarray:
    """Only the chosen columns of sinusoidal_pe, as rows: [len(dims), n_positions] (cheap for big d_model)."""
    dims = np.asarray(dims, dtype=np.int64)
    if dims.size and (dims.min() < 0 or dims.max() >= d_model):
        raise ValueError(f"dims must be in 0..{d_model - 1}")
    angles = sinusoidal_frequencies(d_model, base)[dims // 2][:, None] * np.arange(n_positions)[None, :]  # [D, P]
    return np.where((dims % 2 == 0)[:, None], np.sin(angles), np.cos(angles))


def sinusoidal_frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """Angular frequency w_i = base^(-2i/d) of each sin/cos pair i: [d_model/2] float64."""
    return base ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)


def wavelengths(frequencies: np.ndarray) -> np.ndarray:
    """Tokens needed for one full turn of each pair: 2*pi / theta."""
    return 2 * np.pi / frequencies


# ---------------------------------------------------------------------------------------------------------------
# Helpers for the "Positional encodings" page: small pure functions on numpy arrays (float64 unless stated).
# ---------------------------------------------------------------------------------------------------------------

def pe_offset_dots(d_model: int, base: float, starts, max_offset: int) -> np.ndarray:
    """PE(p) . PE(p + k) for each start p and k = 0..max_offset: [len(starts), max_offset + 1].

    Each pair contributes sin(p w) sin((p+k) w) + cos(p w) cos((p+k) w) = cos(k w), so every row is the same
    function of k alone: sum_i cos(k w_i). Computed here from the PE vectors themselves, not from that identity.
    """
    starts = np.asarray(starts, dtype=np.int64)
    pe = sinusoidal_pe(int(starts.max()) + max_offset + 1, d_model, base)              # [P, d]
    return np.stack([pe[p:p + max_offset + 1] @ pe[p] for p in starts])               # [S, K+1]


def pe_similarity(pe: np.ndarray, positions=None) -> np.ndarray:
    """Dot products PE(p) . PE(q) for every pair of the given positions (default: all rows): [N, N]."""
    rows = pe if positions is None else pe[np.asarray(positions)]
    return rows @ rows.T


def rotation_path(theta: float, n_positions: int, start=(1.0, 0.0)) -> np.ndarray:
    """Where a 2-D vector lands after RoPE at positions 0..n_positions-1 (angle m*theta): [n_positions, 2]."""
    angles = np.arange(n_positions, dtype=np.float64) * theta
    c, s = np.cos(angles), np.sin(angles)
    x, y = start
    return np.stack((x * c - y * s, x * s + y * c), axis=-1)


def pair_indices(head_dim: int, convention: str = "half") -> np.ndarray:
    """The two dimensions that rotate together, for each pair i: [head_dim/2, 2] int."""
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    i = np.arange(head_dim // 2)
    if convention == "half":
        return np.stack((i, i + head_dim // 2), axis=-1)
    return np.stack((2 * i, 2 * i + 1), axis=-1)


def split_pairs(x, convention: str = "half") -> np.ndarray:
    """The 2-D pairs of the last axis of x [..., d] as [..., d/2, 2] (first, second coordinate)."""
    x = np.asarray(x)
    idx = pair_indices(x.shape[-1], convention)
    return np.stack((x[..., idx[:, 0]], x[..., idx[:, 1]]), axis=-1)


def pair_contributions(q_rot, k_rot, convention: str = "half") -> np.ndarray:
    """Each pair's share of the dot product q_rot . k_rot: [d/2] float64, summing to the full dot product."""
    qp = split_pairs(np.asarray(q_rot, dtype=np.float64), convention)                 # [d/2, 2]
    kp = split_pairs(np.asarray(k_rot, dtype=np.float64), convention)                 # [d/2, 2]
    return (qp * kp).sum(-1)


def rope_scores_at(q, k, q_positions, k_positions, base: float) -> np.ndarray:
    """q placed at each q_position and k at the matching k_position, rotated as the decoder does (float32,
    rope_cos_sin + apply_rope, half-split pairs), scored q_rot . k_rot / sqrt(d): [N] float64.

    q, k: [d] pre-RoPE vectors (the content). Positions may exceed the sequence the vectors came from.
    """
    q = np.asarray(q, dtype=np.float32)
    k = np.asarray(k, dtype=np.float32)
    d = q.shape[-1]
    q_positions = np.asarray(q_positions)
    k_positions = np.asarray(k_positions)
    cq, sq = rope_cos_sin(q_positions, d, base)                                       # [N, d/2]
    ck, sk = rope_cos_sin(k_positions, d, base)                                       # [N, d/2]
    q_rot = apply_rope(np.broadcast_to(q, (len(q_positions), d)).copy(), cq, sq)      # [N, d]
    k_rot = apply_rope(np.broadcast_to(k, (len(k_positions), d)).copy(), ck, sk)      # [N, d]
    return (q_rot * k_rot).sum(-1, dtype=np.float32).astype(np.float64) / np.sqrt(d)


def shifted_scores(q, k, m: int, n: int, shifts, base: float) -> np.ndarray:
    """Score of the same q/k content placed at positions (m + s, n + s) for each shift s: [S]."""
    shifts = np.asarray(shifts, dtype=np.int64)
    return rope_scores_at(q, k, m + shifts, n + shifts, base)


def scores_by_distance(q, k, distances, base: float) -> np.ndarray:
    """Score of the same q/k content with the key at 0 and the query at distance Δ: [D] (only Δ matters)."""
    distances = np.asarray(distances, dtype=np.int64)
    return rope_scores_at(q, k, distances, np.zeros_like(distances), base)


def aligned_envelope(q, k, distances, base: float) -> np.ndarray:
    """sum_i |q_i| |k_i| cos(Δ theta_i) / sqrt(d): the score if every pair of q and k started aligned.

    This is the long-range decay of the RoPE paper (section 3.4.3): pairs at different speeds drift out of phase.
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    d = q.shape[-1]
    weight = np.linalg.norm(split_pairs(q), axis=-1) * np.linalg.norm(split_pairs(k), axis=-1)  # [d/2]
    angles = np.asarray(distances, dtype=np.float64)[:, None] * rope_frequencies(d, base)[None, :]  # [D, d/2]
    return np.cos(angles) @ weight / np.sqrt(d)


def attention_without_rope(q: np.ndarray, k: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """One head's pattern with RoPE switched off: softmax of masked q.k / sqrt(d) on the pre-RoPE vectors.

    q: [T, d] the head's queries, k: [T, d] its KV head's keys, mask [T, T] bool -> [T, T].
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    return softmax(np.where(mask, q @ k.T / np.sqrt(q.shape[-1]), -np.inf), axis=-1)


# ------------------------------------------------------------------------------------------ what the page shows

def thin(n: int, max_n: int) -> np.ndarray:
    """Indices 0..n-1 with a constant stride so that at most max_n remain (a figure never needs more cells)."""
    return np.arange(0, n, max(1, -(-n // max_n)))


def thin_pairs(d: int, max_d: int) -> np.ndarray:
    """Dimension indices 0..d-1 thinned by whole sin/cos pairs (2i, 2i+1), so both members of a pair stay."""
    pairs = thin(d // 2, max(1, max_d // 2))
    return np.stack((2 * pairs, 2 * pairs + 1), axis=-1).reshape(-1)


def default_wave_dims(d_model: int) -> list[int]:
    """Five even (sine) dimensions from fastest to slowest."""
    return sorted({0, 2 * (d_model // 16), 2 * (d_model // 8), 2 * (d_model // 4), d_model - 2})


def pe_view(d_model: int, n_positions: int, base: float, max_cells: int):
    """What the two PE heatmaps show, thinned to <= max_cells per axis: (pe [R, C], positions [R], dims [C],
    similarity [R, R] of the shown positions over all d_model dims)."""
    positions = thin(n_positions, max_cells)
    dims = thin_pairs(d_model, max_cells)
    rows = sinusoidal_pe_at(positions, d_model, base)                               # [R, d]
    return rows[:, dims], positions, dims, pe_similarity(rows)


def pe_offsets(d_model: int, n_positions: int, base: float):
    """(starts, offsets, PE(p)·PE(p+k) [3, K]) for three start positions p: the curves that lie on each other."""
    starts = sorted({0, n_positions // 3, 2 * n_positions // 3})
    max_offset = max(1, n_positions - 1)
    return starts, np.arange(max_offset + 1), pe_offset_dots(d_model, base, starts, max_offset)


def rope_curves(q: np.ndarray, k: np.ndarray, m: int, n: int, base: float, max_distance: int, max_shift: int):
    """Scores of one real q/k content at moved positions: (shifts, {label: scores over shifts}, distances,
    scores over distance, aligned envelope). Shifted pairs keep m−n, and m−n+1, m−n+16 for contrast."""
    shifts = np.arange(0, max_shift + 1, max(1, max_shift // 400))
    distances = np.arange(max_distance + 1)
    gap = m - n
    gaps = list(dict.fromkeys((gap, gap + 1, gap + 16)))
    q_pos, k_pos = [], []                                      # all curves in one rope_scores_at call
    for g in gaps:
        q_pos.append(m + shifts if m - g >= 0 else g + shifts)
        k_pos.append(m - g + shifts if m - g >= 0 else shifts)
    q_pos.append(distances)                                    # distance curve: key at 0, query at Δ
    k_pos.append(np.zeros_like(distances))
    scores = np.split(rope_scores_at(q, k, np.concatenate(q_pos), np.concatenate(k_pos), base),
                      np.cumsum([len(p) for p in q_pos])[:-1])
    curves = {f"m−n = {g}" + (" (the real pair)" if g == gap else ""): y
              for g, y in zip(gaps, scores[:-1], strict=True)}
    return shifts, curves, distances, scores[-1], aligned_envelope(q, k, distances, base)


def strongest_key(row: np.ndarray, m: int) -> int:
    """The key a head attends to most from query m, leaving out token 0 (the sink) when there is another."""
    if m == 0:
        return 0
    return 1 + int(np.argmax(np.asarray(row)[1:m + 1]))


def learned_positions(table: np.ndarray, n_positions: int, k: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A learned position table [P, D] (GPT-2's position_embd) over its first n_positions rows: (cosine similarity
    of every pair of positions [n, n], the leading k principal components as waves over position [k, n] (each
    position's coordinate on the component), the share of the table's variance each explains [k])."""
    rows = np.asarray(table[:n_positions], dtype=np.float64)                       # [n, D]
    unit = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    centred = rows - rows.mean(axis=0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)                          # centred = u diag(s) vt
    k = min(k, len(s))
    variance = s**2
    explained = variance[:k] / variance.sum() if variance.sum() > 0 else np.zeros(k)
    return unit @ unit.T, (u[:, :k] * s[:k]).T, explained
