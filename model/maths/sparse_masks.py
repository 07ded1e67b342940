"""Attention masks that keep fewer keys than the causal mask: [T, T] bool, True where query i may attend to key j.

Every mask here is causal (j <= i) and always allows the diagonal (a token may attend to itself), so no row is
ever empty. The model applies the same mask in every layer (Decoder.run(text, allowed=mask)).
"""
from __future__ import annotations

import numpy as np

MASK_KINDS = ("full", "window", "sink", "strided", "dilated")


def _distance(T: int) -> np.ndarray:
    """[T, T] i - j: how far back key j is from query i (negative: the future)."""
    if T < 1:
        raise ValueError(f"T must be >= 1, got {T}")
    i = np.arange(T)
    return i[:, None] - i[None, :]


def causal(T: int) -> np.ndarray:
    """Full causal attention: every key up to the query itself."""
    return _distance(T) >= 0


def sliding_window(T: int, window: int) -> np.ndarray:
    """The last `window` tokens, the query included (Longformer, Mistral): i - window < j <= i."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    dist = _distance(T)
    return (dist >= 0) & (dist < window)


def sink_window(T: int, window: int, sinks: int) -> np.ndarray:
    """A sliding window plus the first `sinks` tokens, always kept (StreamingLLM's attention sinks)."""
    if sinks < 0:
        raise ValueError(f"sinks must be >= 0, got {sinks}")
    return sliding_window(T, window) | (causal(T) & (np.arange(T) < sinks)[None, :])


def strided(T: int, stride: int) -> np.ndarray:
    """Sparse Transformer's strided pattern (Child et al. 2019): the last `stride` tokens, and every stride-th
    token before them (i - j a multiple of stride)."""
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    dist = _distance(T)
    return (dist >= 0) & ((dist < stride) | (dist % stride == 0))


def dilated(T: int, window: int, dilation: int) -> np.ndarray:
    """A dilated window (Longformer): `window` keys spaced `dilation` apart, i - m dilation for m = 0..window-1."""
    if window < 1 or dilation < 1:
        raise ValueError(f"window and dilation must be >= 1, got {window}, {dilation}")
    dist = _distance(T)
    return (dist >= 0) & (dist % dilation == 0) & (dist < window * dilation)


def build_mask(kind: str, T: int, window: int, sinks: int, stride: int) -> np.ndarray:
    """The mask of one of MASK_KINDS with these settings (each kind reads only the settings it has)."""
    if kind == "full":
        return causal(T)
    if kind == "window":
        return sliding_window(T, window)
    if kind == "sink":
        return sink_window(T, window, sinks)
    if kind == "strided":
        return strided(T, stride)
    if kind == "dilated":
        return dilated(T, window, stride)
    raise ValueError(f"kind must be one of {MASK_KINDS}, got {kind!r}")


def first_cut_row(mask: np.ndarray) -> int:
    """The first query that sees fewer keys than under the causal mask (T when none does)."""
    m = np.asarray(mask, dtype=bool)
    cut = (causal(len(m)) & ~m).any(axis=1)
    return int(np.argmax(cut)) if cut.any() else len(m)


def kept_share(mask: np.ndarray) -> float:
    """The share of the causal (query, key) pairs the mask keeps: the attention work left."""
    m = np.asarray(mask, dtype=bool)
    return float(m.sum() / causal(len(m)).sum())
