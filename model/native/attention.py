"""One query per head over each sequence's KV cache (one_query_attention.c): a one-token step's attention for the
whole batch in one call per layer instead of a dozen small torch / numpy operations per sequence."""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence

import numpy as np

from model.native.build import library


@functools.cache
def _kernel():
    lib = library("one_query_attention.c")
    if lib is None:
        return None
    fn = lib.one_query_attention
    fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 5 + [ctypes.c_float] + [ctypes.c_void_p] * 2
    fn.restype = None
    return fn


def available() -> bool:
    """Whether the kernel is built (a C compiler was found)."""
    return _kernel() is not None


def one_query_attention(q: np.ndarray, keys: Sequence[np.ndarray], values: Sequence[np.ndarray],
                        scale: float) -> tuple[np.ndarray, np.ndarray]:
    """q [B, H, hd] float32; keys[b], values[b] [KV, T_b, hd] float32 (views of caches: rows contiguous, any stride
    between KV heads) -> pattern [B, H, max T_b] (sequence b's first T_b columns: softmax((q . k) * scale)), out
    [B, H, hd] (the mix of values). Call only where available()."""
    B, H, hd = q.shape
    row = (hd * 4, 4)
    for k, v in zip(keys, values, strict=True):
        if k.dtype != np.float32 or v.dtype != np.float32 or k.shape != v.shape or k.shape[2] != hd or \
                H % k.shape[0] or k.strides[1:] != row or v.strides[1:] != row or k.strides[0] != v.strides[0]:
            raise ValueError(f"one_query_attention needs float32 keys / values [KV, T, {hd}] with contiguous rows "
                             f"for {H} query heads, got {k.shape} {k.dtype} and {v.shape} {v.dtype}")
    if len(keys) != B or len({k.shape[0] for k in keys}) > 1:
        raise ValueError(f"one_query_attention needs {B} sequences with the same number of KV heads")
    q = np.ascontiguousarray(q, dtype=np.float32)
    lengths = np.array([k.shape[1] for k in keys], np.int64)                         # [B]
    max_len = int(lengths.max())
    pattern = np.empty((B, H, max_len), np.float32)                                  # [B, H, max T]
    out = np.empty((B, H, hd), np.float32)                                           # [B, H, hd]
    k_addr = np.array([k.ctypes.data for k in keys], np.uint64)                      # [B]
    v_addr = np.array([v.ctypes.data for v in values], np.uint64)                    # [B]
    strides = np.array([k.strides[0] // 4 for k in keys], np.int64)                 # [B] floats between KV heads
    _kernel()(q.ctypes.data, k_addr.ctypes.data, v_addr.ctypes.data, strides.ctypes.data, lengths.ctypes.data, B, H,
              keys[0].shape[0], hd, max_len, scale, pattern.ctypes.data, out.ctypes.data)
    return pattern, out
