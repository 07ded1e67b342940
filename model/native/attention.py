"""One query per head over a KV cache (one_query_attention.c): a one-token step's attention in one call per layer
and sequence instead of a dozen small torch / numpy operations."""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from model.native.build import library


@functools.cache
def _kernel():
    lib = library("one_query_attention.c")
    if lib is None:
        return None
    fn = lib.one_query_attention
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 5 + [ctypes.c_float] + [ctypes.c_void_p] * 2
    fn.restype = None
    return fn


def available() -> bool:
    """Whether the kernel is built (a C compiler was found)."""
    return _kernel() is not None


def one_query_attention(q: np.ndarray, keys: np.ndarray, values: np.ndarray,
                        scale: float) -> tuple[np.ndarray, np.ndarray]:
    """q [H, hd] over keys, values [KV, T, hd] (views of a cache: rows contiguous, any stride between KV heads)
    -> pattern [H, T], out [H, hd], float32: softmax((q . k) * scale) and its mix of values. Call only where
    available()."""
    H, hd = q.shape
    kv_heads, T, _ = keys.shape
    row = (hd * 4, 4)
    if keys.dtype != np.float32 or values.dtype != np.float32 or keys.strides[1:] != row or \
            values.strides[1:] != row or keys.strides[0] != values.strides[0] or H % kv_heads or \
            values.shape != keys.shape or keys.shape[2] != hd:
        raise ValueError(f"one_query_attention needs float32 q [H, hd] and keys / values [KV, T, hd] with "
                         f"contiguous rows, got {q.shape}, {keys.shape}, {values.shape}")
    q = np.ascontiguousarray(q, dtype=np.float32)
    pattern = np.empty((H, T), np.float32)                                           # [H, T]
    out = np.empty((H, hd), np.float32)                                              # [H, hd]
    _kernel()(q.ctypes.data, keys.ctypes.data, values.ctypes.data, H, kv_heads, T, hd, keys.strides[0] // 4,
              scale, pattern.ctypes.data, out.ctypes.data)
    return pattern, out
