"""Multi-head, grouped-query and multi-query attention: how many key/value heads, and what their cache costs."""
from __future__ import annotations

import numpy as np

from model.calculator.costs import kv_values_per_token

KV_BYTES = 2                 # bf16 / fp16 cache entries, as inference servers store them


def cache_bytes_per_token(n_layers: int, head_dim: int, counts: dict[str, int],
                          bytes_per_value: int = KV_BYTES) -> dict[str, int]:
    """The KV cache's bytes per token for each named KV-head count ({"mha": 9, ...} -> {"mha": bytes, ...})."""
    return {name: kv_values_per_token(n_layers, n, head_dim) * bytes_per_value for name, n in counts.items()}


def kv_head_counts(n_heads: int, n_kv_heads: int) -> dict[str, int]:
    """The three ways to share KV heads for a model with n_heads query heads: {MHA, GQA (the model's), MQA}."""
    return {"mha": n_heads, "gqa": n_kv_heads, "mqa": 1}


def pool_kv_rows(weight: np.ndarray, n_kv_heads: int, n_groups: int) -> np.ndarray:
    """A k or v projection [n_kv_heads hd, D] with its heads mean-pooled into n_groups heads [n_groups hd, D]
    (the GQA paper's conversion), or repeated when n_groups is a multiple of n_kv_heads (a copy per query head)."""
    w = np.asarray(weight)
    hd = w.shape[0] // n_kv_heads
    heads = w.reshape(n_kv_heads, hd, -1)                                     # [KV, hd, D]
    if n_groups % n_kv_heads == 0:
        return np.repeat(heads, n_groups // n_kv_heads, axis=0).reshape(n_groups * hd, -1)
    if n_kv_heads % n_groups:
        raise ValueError(f"{n_kv_heads} KV heads cannot be pooled into {n_groups} equal groups")
    return heads.reshape(n_groups, n_kv_heads // n_groups, hd, -1).mean(axis=1).reshape(n_groups * hd, -1)
