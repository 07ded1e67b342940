"""Per-head statistics of attention patterns, and the attention-sink switch. Pure numpy, no torch, no UI.

Every function takes post-softmax patterns shaped [..., T, T] (query rows i, key columns j, zero or NaN where the
causal mask forbids j > i) and works on all leading axes at once, so one call scores a head, a layer [H, T, T] or
the whole model [L, H, T, T]. Row 0 can only attend to itself, so the per-row means below skip it.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from model.maths.sampling import entropy_bits, softmax

# name -> (label, what it measures): the order is the order of the chooser in the app
STATISTICS: dict[str, tuple[str, str]] = {
    "prev_token": ("previous-token score",
                   "mean attention from each token to the token right before it (1 = a pure previous-token head)"),
    "induction": ("induction score",
                  "mean attention from a repeated token to the token that followed its earlier occurrence "
                  "(needs repeats in the text)"),
    "sink": ("first-token (sink) score",
             "mean attention on position 0; always measured on the raw pattern"),
    "self": ("self (diagonal) score", "mean attention of each token to itself"),
    "entropy": ("entropy (bits)",
                "how spread out each row is: 0 bits = all weight on one key, log2(i+1) = uniform over the row"),
}


def apply_sink(pattern: np.ndarray, hide_sink: bool = True) -> np.ndarray:
    """Zero key column 0 and renormalize every row i >= 1 to sum to 1 (float32 copy). Row 0 stays as is.

    NaN cells (a masked view) stay NaN and do not count in the row sums; a row with no weight left stays zero.
    With hide_sink=False the pattern comes back as float32, unchanged.
    """
    out = np.array(pattern, dtype=np.float32, copy=True)
    if not hide_sink or out.shape[-1] < 2:
        return out
    _renormalize_without_key0(out[..., 1:, :])               # [..., T-1, T] view: every row but row 0
    return out


def _renormalize_without_key0(rows: np.ndarray) -> None:
    """In place on [..., T] rows: key 0 set to 0, the other keys divided by what is left of each row (NaN cells do not
    count; a row with nothing left stays zero)."""
    rows[..., 0] = 0.0
    total = np.nansum(rows, axis=-1, keepdims=True)          # [..., 1]
    np.divide(rows, total, out=rows, where=total > 0)


def sink_hidden_row(weights: np.ndarray) -> np.ndarray:
    """One query's weights [..., T] (a query after token 0) as a figure shows them with the sink hidden: key 0 NaN,
    the other keys renormalized to sum to 1 (float32 copy)."""
    out = np.array(weights, dtype=np.float32, copy=True)
    _renormalize_without_key0(out)
    out[..., 0] = np.nan
    return out


ENTROPY_ROWS = 64      # rows per block of row_entropy_bits
SINK_BLANK_ROWS = 2     # with the sink hidden, query 0 has no key left and query 1 only itself: nothing to show


def sink_hidden_view(pattern: np.ndarray) -> np.ndarray:
    """What a figure shows with the sink hidden (float32 copy of [..., T, T]): key 0 NaN, every other row
    renormalized over keys 1..i, and rows 0 and 1 NaN (no key, or a single key whose weight is 1 by construction).

    NaN marks "not shown"; the caller knows which NaN cells are the causal mask (j > i) and which are hidden.
    """
    out = apply_sink(pattern, True)
    out[..., :, 0] = np.nan
    out[..., : SINK_BLANK_ROWS, :] = np.nan
    return out


def _finite(pattern: np.ndarray) -> np.ndarray:
    """float32 copy-or-view with NaN (masked) cells read as 0."""
    p = np.asarray(pattern, dtype=np.float32)
    return np.nan_to_num(p, nan=0.0) if np.isnan(p).any() else p


def _rows_mean(values: np.ndarray) -> np.ndarray:
    """Mean over the last axis of per-row values for rows 1..T-1 (NaN when T == 1)."""
    if values.shape[-1] < 2:
        return np.full(values.shape[:-1], np.nan, dtype=np.float64)
    return values[..., 1:].astype(np.float64).mean(axis=-1)


def row_entropy_bits(pattern: np.ndarray) -> np.ndarray:
    """sampling.entropy_bits of every row (NaN cells read as 0): [..., T, T] -> [..., T] float64. Rows go in blocks of
    ENTROPY_ROWS, each read only up to its last row's key when every key after it is zero (a causal pattern: about
    half of the cells). A long text's float16 pattern reads each cell's -p log2 p from a table of all 65,536 float16
    values: the same float64 terms summed in the same order, without converting the cells or taking their logarithms
    (which were most of a whole-model view's statistics)."""
    p = np.asarray(pattern)
    T = p.shape[-1]
    out = np.empty(p.shape[:-1], dtype=np.float64)                           # [..., T]
    for start in range(0, p.shape[-2], ENTROPY_ROWS):
        rows = p[..., start:start + ENTROPY_ROWS, :]                        # [..., n, T]
        keys = min(start + rows.shape[-2], T)
        if rows[..., keys:].any():                                          # a weight (or NaN) after the last row
            keys = T
        block = rows[..., :keys]                                            # [..., n, keys]
        if block.dtype == np.float16:
            terms = _float16_entropy_terms()[block.view(np.uint16)]         # [..., n, keys] float64
            entropy = np.maximum(terms.sum(axis=-1), 0.0)
        else:
            entropy = entropy_bits(_finite(block), axis=-1)
        out[..., start:start + rows.shape[-2]] = entropy
    return out


@functools.cache
def _float16_entropy_terms() -> np.ndarray:
    """-p log2 p in float64 for every float16 bit pattern p, 0 where p is not a positive finite number: [65536]."""
    p = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    terms = np.zeros_like(p)
    positive = np.isfinite(p) & (p > 0)
    logs = np.log2(p[positive])
    logs *= p[positive]                                                     # entropy_bits' order: log2(p) * p
    terms[positive] = -logs
    return terms


def mean_row_entropy_bits(pattern: np.ndarray) -> np.ndarray:
    """Mean row entropy in bits over query rows 1..T-1 (sampling.entropy_bits of each row): [..., T, T] -> [...]."""
    return _rows_mean(row_entropy_bits(pattern))                              # [..., T] -> [...]


def prev_token_score(pattern: np.ndarray) -> np.ndarray:
    """Mean attention on the previous token, p[i, i-1] over i >= 1: [..., T, T] -> [...]."""
    p = np.asarray(pattern)
    if p.shape[-1] < 2:
        return np.full(p.shape[:-2], np.nan)
    return _finite(np.diagonal(p, offset=-1, axis1=-2, axis2=-1)).astype(np.float64).mean(axis=-1)


def sink_score(pattern: np.ndarray) -> np.ndarray:
    """Mean attention on key 0 (the first token), p[i, 0] over i >= 1: [..., T, T] -> [...]."""
    return _rows_mean(_finite(np.asarray(pattern)[..., :, 0]))


def self_score(pattern: np.ndarray) -> np.ndarray:
    """Mean attention of a token to itself, p[i, i] over i >= 1: [..., T, T] -> [...]."""
    return _rows_mean(_finite(np.diagonal(np.asarray(pattern), axis1=-2, axis2=-1)))


def induction_targets(token_ids: Sequence[int]) -> np.ndarray:
    """[T, T] bool: True at (i, j+1) when token j is an earlier occurrence of token i and j+1 < i.

    This is where an induction head looks: "last time this token appeared, what came next?" Rows without an
    earlier occurrence are all False.
    """
    ids = np.asarray(token_ids)
    T = len(ids)
    same = (ids[:, None] == ids[None, :]) & np.tri(T, T, -2, dtype=bool)  # [T, T]: j <= i-2 and ids[j] == ids[i]
    targets = np.zeros((T, T), dtype=bool)
    targets[:, 1:] = same[:, :-1]                                          # shift: mark j+1 instead of j
    return targets


def induction_score(pattern: np.ndarray, token_ids: Sequence[int]) -> np.ndarray:
    """Mean (over rows with a repeat) attention mass on the tokens after earlier occurrences: [..., T, T] -> [...].

    NaN when the text has no repeated token (nothing to measure). On a random sequence repeated twice this is the
    usual induction score: attention from position i in the second copy to position i - n + 1.
    """
    targets = induction_targets(token_ids)                  # [T, T]
    n_rows = int(targets.any(axis=-1).sum())
    p = np.asarray(pattern)
    if n_rows == 0:
        return np.full(p.shape[:-2], np.nan)
    return _finite(p[..., targets]).sum(axis=-1, dtype=np.float64) / n_rows       # [..., targets] -> [...]


def has_repeats(token_ids: Sequence[int]) -> bool:
    """True when some token occurs again at least two positions later (the induction score is defined)."""
    return bool(induction_targets(token_ids).any())


def head_stats(attention: np.ndarray, token_ids: Sequence[int], hide_sink: bool = False) -> dict[str, np.ndarray]:
    """Every statistic of STATISTICS for every head: attention [L, H, T, T] -> {name: [L, H] float64}.

    hide_sink renormalizes without position 0 first (apply_sink); the sink score always uses the raw pattern.
    Layers are processed one at a time to keep memory at one layer's float32 copy (none without hide_sink: every
    statistic reads the cells it needs, and converting a long text's float16 layer was most of the time).
    """
    if attention.ndim != 4:
        raise ValueError(f"attention must be [layers, heads, T, T], got shape {attention.shape}")
    L, H, T, _ = attention.shape
    if len(token_ids) != T:
        raise ValueError(f"{len(token_ids)} token ids for {T} attention positions")
    out = {name: np.empty((L, H), dtype=np.float64) for name in STATISTICS}
    for layer in range(L):
        raw = attention[layer]                                # [H, T, T]
        p = apply_sink(raw, True) if hide_sink else raw       # [H, T, T]
        out["prev_token"][layer] = prev_token_score(p)
        out["induction"][layer] = induction_score(p, token_ids)
        out["sink"][layer] = sink_score(raw)
        out["self"][layer] = self_score(p)
        out["entropy"][layer] = mean_row_entropy_bits(p)
    return out


def top_predictions(logits: np.ndarray, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """The k most likely next tokens: (ids [k], probabilities [k]), highest first."""
    probs = softmax(logits)
    k = max(1, min(int(k), probs.size))
    ids = np.argpartition(-probs, k - 1)[:k]
    ids = ids[np.argsort(-probs[ids], kind="stable")]
    return ids, probs[ids]


def mean_distance_back(rows: np.ndarray) -> np.ndarray:
    """How far back each head looks from one query: rows [..., n] (the query is position n - 1; NaN = not shown)
    -> [...] the attention-weighted mean of (n - 1 - j) over the shown keys, renormalized; NaN when none is shown."""
    w = np.nan_to_num(np.asarray(rows, dtype=np.float64), nan=0.0)
    n = w.shape[-1]
    total = w.sum(axis=-1)
    back = np.arange(n - 1, -1, -1, dtype=np.float64)                       # n-1 for key 0 ... 0 for itself
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (w * back).sum(axis=-1) / total, np.nan)
