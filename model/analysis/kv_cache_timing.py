"""The KV cache, measured: the time of one generation step with the cache against recomputing the whole prefix.

With the cache, a step feeds only the new token through the model and reads every earlier key and value from the
cache (model.decoder.generation.IncrementalDecoder); without it, the same prediction needs the whole text so far
through every layer again. The cache grows by the same number of bytes with every token.
"""
from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from model.calculator.costs import kv_values_per_token
from model.decoder.generation import IncrementalDecoder

CACHE_BYTES = 4                  # this app's cache keeps float32 keys and values


@dataclass(frozen=True)
class StepTiming:
    """One step of a generation, timed both ways."""

    length: int                  # tokens in the text after this step's token was fed
    cache_bytes: int             # the KV cache's size then
    cached_s: float              # the step with the cache: one token through the model
    full_s: float | None         # the same logits recomputed from the whole prefix (None: not measured this step)


def time_steps(lm, ids: Sequence[int], n_prompt: int, full_every: int = 1) -> Iterator[StepTiming]:
    """Feed ids[:n_prompt] into a cache, then each later token as one step, yielding each step's timing; every
    full_every-th step (and the last) also times a fresh pass over the whole prefix."""
    if not 1 <= n_prompt < len(ids):
        raise ValueError(f"n_prompt must be from 1 to {len(ids) - 1}, got {n_prompt}")
    cfg = lm.config
    per_token = kv_values_per_token(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim) * CACHE_BYTES
    decoder = IncrementalDecoder(lm, len(ids))
    decoder.feed(list(ids[:n_prompt]))
    for t, length in enumerate(range(n_prompt + 1, len(ids) + 1)):
        start = time.perf_counter()
        decoder.feed([ids[length - 1]])
        cached = time.perf_counter() - start
        full = None
        if t % full_every == 0 or length == len(ids):
            fresh = IncrementalDecoder(lm, length)                  # its setup is not part of the pass
            start = time.perf_counter()
            fresh.feed(list(ids[:length]))
            full = time.perf_counter() - start
        yield StepTiming(length, length * per_token, cached, full)
