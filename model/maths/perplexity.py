"""Per-token loss and perplexity of a text under the model (pure numpy, float64)."""
from __future__ import annotations

import numpy as np


def token_losses(logprobs: np.ndarray) -> np.ndarray:
    """Cross-entropy of each actual next token, -log p(token t+1 | tokens <= t): [T - 1] in nats."""
    return -np.asarray(logprobs, dtype=np.float64)


def perplexity(logprobs: np.ndarray, start: int = 0) -> float:
    """exp of the mean loss of the predictions from position `start` on (NaN when there are none)."""
    lp = np.asarray(logprobs, dtype=np.float64)[start:]
    return float(np.exp(-lp.mean())) if lp.size else float("nan")


def moving_average(values: np.ndarray, width: int) -> np.ndarray:
    """Trailing mean of the last `width` values at each position (fewer at the start): same length as values."""
    v = np.asarray(values, dtype=np.float64)
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    sums = np.cumsum(np.concatenate(([0.0], v)))
    i = np.arange(1, v.size + 1)
    start = np.maximum(0, i - width)
    return (sums[i] - sums[start]) / (i - start)
