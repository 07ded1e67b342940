"""The whole-model view's head statistics (model.analysis.head_stats.head_stats) on the built-in model's longest
text, against the way they were computed before, side by side in one process.

Before: each layer copied to float32, and every statistic read the whole copy (entropy: float64 logarithms of every
cell). Now: each statistic reads only the cells it needs (a diagonal, a column, the induction targets), the entropy
only the causal triangle, and a float16 pattern (a trace of more than 249 tokens here) reads -p log2 p from a table.
Prints the medians over the rounds, with the sink shown and hidden, the ratio, and the largest difference between
the two ways' numbers.

Run (from the repository root): python -m bench.bench_head_stats [--rounds 5] [--words 400]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from bench.class_swarm import cpu_name
from model import load_model
from model.analysis import head_stats as hs
from model.maths.sampling import entropy_bits


def whole_copy_stats(attention: np.ndarray, token_ids, hide_sink: bool) -> dict[str, np.ndarray]:
    """The statistics as they were computed before: every one over a float32 copy of each whole layer."""
    L, H, T, _ = attention.shape
    targets = hs.induction_targets(token_ids)                                  # [T, T]
    repeats = int(targets.any(axis=-1).sum())
    out = {name: np.empty((L, H)) for name in hs.STATISTICS}
    for layer in range(L):
        raw = np.nan_to_num(attention[layer].astype(np.float32), nan=0.0)     # [H, T, T]
        p = hs.apply_sink(raw, hide_sink)
        out["prev_token"][layer] = np.diagonal(p, offset=-1, axis1=-2, axis2=-1).astype(np.float64).mean(-1)
        out["induction"][layer] = (p * targets).sum(axis=(-2, -1), dtype=np.float64) / repeats if repeats else np.nan
        out["sink"][layer] = raw[..., 1:, 0].astype(np.float64).mean(-1)
        out["self"][layer] = np.diagonal(p, axis1=-2, axis2=-1)[..., 1:].astype(np.float64).mean(-1)
        out["entropy"][layer] = entropy_bits(p, axis=-1)[..., 1:].mean(-1)
    return out


def median_s(fn, rounds: int, *args) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--words", type=int, default=400)
    args = parser.parse_args()
    lm = load_model()
    trace = lm.run("Text number 1: " + " ".join(f"word{(7 + j) % 997}" for j in range(args.words)))
    attention, ids = trace.attention, trace.token_ids
    print(f"{cpu_name()}; attention {list(attention.shape)} {attention.dtype}; medians of {args.rounds} rounds")
    for hide in (False, True):
        now = median_s(hs.head_stats, args.rounds, attention, ids, hide)
        before = median_s(whole_copy_stats, args.rounds, attention, ids, hide)
        got, ref = hs.head_stats(attention, ids, hide_sink=hide), whole_copy_stats(attention, ids, hide)
        diff = max(float(np.nanmax(np.abs(got[k] - ref[k]))) for k in hs.STATISTICS)
        print(f"sink {'hidden' if hide else 'shown '}: now {now:.3f} s, before {before:.3f} s "
              f"({before / now:.1f}x faster); largest difference {diff:.1e}")


if __name__ == "__main__":
    main()
