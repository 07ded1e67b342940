"""Softmax with temperature, entropy, top-k / top-p filtering and seeded sampling, in pure numpy (float64).

Everything here is stable at both ends of the temperature range: the maximum is subtracted before dividing by the
temperature, so exp never overflows; -inf entries (masked keys) get probability exactly 0; 0 log 0 counts as 0.
The order of operations is the usual one in language-model decoding (as in Hugging Face's logits processors):
temperature first, then top-k, then top-p on the top-k survivors, then renormalize and sample.
"""
from __future__ import annotations

import numpy as np

T_MIN = 0.05
T_MAX = 10.0
TOP_BLOCK = 512            # entries per block in lower_bound_of_kth


def _check_temperature(temperature: float) -> float:
    t = float(temperature)
    if not np.isfinite(t) or t <= 0:
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    return t


def _shifted(logits, temperature: float, axis: int) -> np.ndarray:
    """(logits - max) / T in float64, a new array: the largest entry becomes 0, masked (-inf) entries stay -inf.
    Works in place on its own copy (a generation step calls it on 49,152 logits per sequence)."""
    x = np.array(logits, dtype=np.float64)
    if x.size == 0:
        raise ValueError("softmax needs at least one logit")
    t = _check_temperature(temperature)
    top = np.max(x, axis=axis, keepdims=True)
    if np.isnan(top).any():        # max propagates NaN
        raise ValueError("logits contain NaN")
    if np.isneginf(top).any():
        raise ValueError("every logit is -inf (everything is masked): there is nothing to normalize")
    pos_inf = np.isposinf(top)
    with np.errstate(over="ignore", invalid="ignore"):
        x -= top                   # <= 0 everywhere; a difference that overflows becomes -inf, i.e. weight 0
        if t != 1.0:
            x /= t
    if pos_inf.any():              # +inf logits share all the mass equally
        x = np.where(pos_inf, np.where(np.isposinf(np.asarray(logits, dtype=np.float64)), 0.0, -np.inf), x)
    return x


def softmax(logits, temperature: float = 1.0, axis: int = -1) -> np.ndarray:
    """exp(x_i / T) / sum_j exp(x_j / T) along axis, float64; -inf logits get probability 0."""
    e = _shifted(logits, temperature, axis)
    np.exp(e, out=e)
    e /= e.sum(axis=axis, keepdims=True)
    return e


def log_softmax(logits, temperature: float = 1.0, axis: int = -1) -> np.ndarray:
    """log of softmax(logits / T), float64 (-inf where the probability is exactly 0)."""
    z = _shifted(logits, temperature, axis)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def entropy_bits(probs, axis: int = -1) -> np.ndarray | float:
    """Shannon entropy -sum p log2 p in bits, with 0 log 0 = 0. Uniform over n choices gives log2(n)."""
    p = np.asarray(probs, dtype=np.float64)
    if p.size and p.min() > 0:
        logs = np.log2(p)            # the same values as below, without its masked (slower) loop
    else:
        logs = np.zeros(p.shape)
        np.log2(p, out=logs, where=p > 0)                                           # 0 where p is 0
    logs *= p                    # not p @ logs: a BLAS call wakes numpy's OpenBLAS threads, which then spin
    h = np.maximum(-logs.sum(axis=axis), 0.0)    # tiny negative rounding -> 0
    return float(h) if np.ndim(h) == 0 else h


def effective_choices(probs, axis: int = -1) -> np.ndarray | float:
    """2 ** entropy (the perplexity): how many equally likely choices the distribution is worth."""
    return np.exp2(entropy_bits(probs, axis=axis))


def temperature_grid(t_min: float = T_MIN, t_max: float = T_MAX, per_decade: int = 20) -> list[float]:
    """Log-spaced temperatures from t_min to t_max, rounded to 2 significant digits, 1.0 included exactly.

    Steps are 10^(1/per_decade) apart (about 12% for 20 per decade), so the slider moves evenly on a log scale.
    """
    if not 0 < t_min < t_max:
        raise ValueError(f"need 0 < t_min < t_max, got {t_min!r}, {t_max!r}")
    lo = int(np.floor(np.log10(t_min) * per_decade + 1e-9))
    hi = int(np.ceil(np.log10(t_max) * per_decade - 1e-9))
    values = []
    for k in range(lo, hi + 1):
        v = float(f"{10 ** (k / per_decade):.2g}")
        v = min(max(v, t_min), t_max)
        if not values or v > values[-1]:
            values.append(v)
    return values


def nearest_temperature(values: list[float], t: float) -> float:
    """The value of a log-spaced grid closest to t on a log scale (t clamped to the grid's range)."""
    if not values:
        raise ValueError("empty temperature grid")
    try:
        t = float(t)
    except (TypeError, ValueError):
        return 1.0 if 1.0 in values else values[len(values) // 2]
    if not np.isfinite(t) or t <= 0:
        t = values[0] if t <= 0 else values[-1]
    grid = np.log(np.asarray(values, dtype=np.float64))
    return values[int(np.argmin(np.abs(grid - np.log(t))))]


def temperature_sweep(logits, temperatures) -> dict[str, np.ndarray]:
    """Entropy (bits), top-1 probability and effective number of choices of softmax(logits / T) for each T.

    logits: 1-D. Returns arrays aligned with `temperatures`: "temperature", "entropy_bits", "top1", "effective".
    """
    x = np.asarray(logits, dtype=np.float64).reshape(-1)
    temps = np.asarray(temperatures, dtype=np.float64).reshape(-1)
    ent = np.empty(len(temps))
    top1 = np.empty(len(temps))
    for i, t in enumerate(temps):   # one row at a time: vocab-sized rows stay small in memory
        p = softmax(x, t)
        ent[i] = entropy_bits(p)
        top1[i] = p.max()
    return {"temperature": temps, "entropy_bits": ent, "top1": top1, "effective": np.exp2(ent)}


def _order(p: np.ndarray) -> np.ndarray:
    """Indices by decreasing probability; ties keep the lower index first (deterministic)."""
    return np.argsort(-p, kind="stable")


def lower_bound_of_kth(p: np.ndarray, k: int) -> float:
    """A value at most the k-th largest entry of p [V] (1 <= k <= V) that few entries reach: the k-th largest of
    the maxima of TOP_BLOCK-entry blocks (k of them are distinct entries at least that large). Lets the k largest be
    found among the entries >= it (two passes over p) instead of partitioning all of it."""
    blocks = len(p) // TOP_BLOCK
    if blocks <= k:
        return -np.inf
    maxima = p[:blocks * TOP_BLOCK].reshape(blocks, TOP_BLOCK).max(axis=1)              # [blocks]
    return float(np.partition(maxima, blocks - k)[blocks - k])


def top_ids(p: np.ndarray, n: int) -> np.ndarray:
    """The ids of the n largest entries of p [V], by value then id (ties at the n-th value: the lowest ids)."""
    candidates = np.flatnonzero(p >= lower_bound_of_kth(p, n))                          # >= n of them
    return candidates[np.lexsort((candidates, -p[candidates]))[:n]]


def top_k_keep(probs, k: int | None) -> np.ndarray:
    """Bool mask of the k most probable entries (ties: lower index first). k None or <= 0: keep every p > 0."""
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    support = p > 0
    if k is None or int(k) <= 0 or int(k) >= int(support.sum()):
        return support
    k = int(k)
    above = p[p >= lower_bound_of_kth(p, k)]           # holds the k largest
    kth = np.partition(above, -k)[-k]                  # the k-th largest value: O(V), no full sort
    keep = p > kth
    ties = np.flatnonzero(p == kth)[: k - int(keep.sum())]   # ties at the boundary: lower index first
    keep[ties] = True
    return keep & support


def top_p_keep(probs, top_p: float | None) -> np.ndarray:
    """Bool mask of the smallest set of most probable entries whose total mass is >= top_p (nucleus sampling).

    The most probable entry is always kept; top_p None or >= 1 keeps every entry with p > 0.
    """
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    support = p > 0
    if top_p is None or float(top_p) >= 1.0:
        return support
    if not float(top_p) > 0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    order = np.flatnonzero(support)
    order = order[_order(p[order])]                    # sort only the support (after top-k: k entries)
    mass = np.cumsum(p[order]) / p.sum()
    n_keep = int(np.searchsorted(mass, float(top_p) - 1e-12, side="left")) + 1   # first prefix reaching top_p
    keep = np.zeros(p.shape, dtype=bool)
    keep[order[: min(n_keep, len(p))]] = True
    return keep & support


def filter_probs(probs, top_k: int | None = None, top_p: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Apply top-k, then top-p on the renormalized survivors. Returns (keep mask, renormalized kept distribution).
    When top-k leaves few entries (a generation step's k = 50 of 49,152), the rest works on those alone."""
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    keep = top_k_keep(p, top_k)
    if top_k is not None and 0 < int(top_k) <= len(p) // 8:
        ids = np.flatnonzero(keep)                                          # [<= k], in index order
        after_k = p[ids]
        ids = ids[top_p_keep(after_k / after_k.sum(), top_p)]
        keep = np.zeros(len(p), dtype=bool)
        keep[ids] = True
        kept = np.zeros(len(p))
        kept[ids] = p[ids] / p[ids].sum()
        return keep, kept
    after_k = np.where(keep, p, 0.0)
    keep = keep & top_p_keep(after_k / after_k.sum(), top_p)
    kept = np.where(keep, p, 0.0)
    return keep, kept / kept.sum()


def sample(probs, n: int, seed: int) -> np.ndarray:
    """n draws (indices) from the distribution probs with a seeded generator: same seed, same draws."""
    return sample_with(probs, n, np.random.default_rng(int(seed)))


def sample_with(probs, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws (indices) from probs using the caller's generator, which advances by n uniforms (so one
    generator can serve a whole sequence of draws, e.g. one per generated token).

    Inverse-CDF sampling over the entries with p > 0, so an entry with probability 0 is never drawn.
    """
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    if int(n) < 0:
        raise ValueError(f"n must be >= 0, got {n!r}")
    if np.isnan(p).any() or (p < 0).any() or not p.sum() > 0:
        raise ValueError("probs must be non-negative with a positive sum")
    support = np.flatnonzero(p > 0)
    cdf = np.cumsum(p[support])
    cdf /= cdf[-1]
    cdf[-1] = 1.0
    u = rng.random(int(n))                                    # in [0, 1)
    return support[np.searchsorted(cdf, u, side="right")]


def sample_counts(probs, n: int, seed: int) -> np.ndarray:
    """How many of n seeded draws fell on each entry: int array shaped like probs."""
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    return np.bincount(sample(p, n, seed), minlength=len(p))


def total_variation(p, q) -> float:
    """Half the summed absolute difference of two distributions over the same buckets (0 = equal, 1 = disjoint)."""
    return 0.5 * float(np.abs(np.asarray(p, dtype=np.float64) - np.asarray(q, dtype=np.float64)).sum())


def expected_total_variation(probs, n: int) -> float:
    """About how far n samples' frequencies land from probs by chance alone (total variation, normal
    approximation: each bucket's |error| has mean sqrt(2 p (1 - p) / (pi n))); shrinks as 1/sqrt(n)."""
    p = np.asarray(probs, dtype=np.float64)
    return 0.5 * float(np.sqrt(2.0 * p * (1.0 - p) / (np.pi * max(int(n), 1))).sum())


def top_buckets(probs, counts, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The k most probable entries with p > 0, plus one bucket for all the others with p > 0: (ids [<= k],
    expected [len(ids) + 1] probabilities, observed [len(ids) + 1] frequencies of counts). The last bucket is
    "every other candidate" (0 when there is none); with few buckets the frequencies settle as the count grows."""
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    c = np.asarray(counts, dtype=np.float64).reshape(-1)
    support = _order(p)[: int((p > 0).sum())]
    ids = support[:k]
    rest = support[k:]
    n = c.sum() or 1.0
    expected = np.append(p[ids], p[rest].sum())
    observed = np.append(c[ids], c[rest].sum()) / n
    return ids, expected, observed
