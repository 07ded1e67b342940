"""x @ W^T for a matrix held as integer codes with a float32 scale (and optionally an offset) per 32 values
(int8_linear.c): codes one byte each (8-bit and 5-bit formats) or two to a byte (4-bit), so a one-token step reads
0.75 to 1.25 bytes a weight instead of float32's 4. Every output is computed the same way whatever the number of
rows, so a row's numbers do not depend on the rows multiplied with it."""
from __future__ import annotations

import ctypes
import functools

import numpy as np
import torch

from model.native.build import library

BLOCK = 32                 # values per scale / offset


@functools.cache
def _kernel():
    lib = library("int8_linear.c")
    if lib is None or lib.int8_linear_level() == 0:
        return None
    lib.int8_linear.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 3 + [ctypes.c_int] * 2
    lib.int8_linear.restype = ctypes.c_int
    return lib.int8_linear


def available() -> bool:
    """Whether the kernel is built and this CPU runs it (AVX2 + FMA or AVX-512)."""
    return _kernel() is not None


def int8_linear(codes: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor | None, x: np.ndarray,
                nibbles: bool) -> np.ndarray:
    """x [M, K] float32 @ W^T -> [M, N] float32 for W = codes * scales [N, K / 32] (+ offsets [N, K / 32]) per 32
    values; codes int8 [N, K], or uint8 [N, K / 2] two 4-bit codes a byte when nibbles (GGUF's Q4 order within each
    block of 16 bytes). Runs on torch's number of threads. Call only where available()."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    n, k = scales.shape[0], x.shape[-1]
    blocks = (n, k // BLOCK)
    want = (torch.uint8, (n, k // 2)) if nibbles else (torch.int8, (n, k))
    if x.ndim != 2 or k % BLOCK or (codes.dtype, tuple(codes.shape)) != want or any(
            t is not None and (tuple(t.shape) != blocks or t.dtype != torch.float32) for t in (scales, offsets)):
        raise ValueError(f"int8_linear: x [M, K] (K a multiple of {BLOCK}) {x.shape}, codes {want} and float32 "
                         f"scales {blocks} do not match: codes {codes.dtype} {tuple(codes.shape)}, scales "
                         f"{scales.dtype} {tuple(scales.shape)}")
    if not all(t is None or t.is_contiguous() for t in (codes, scales, offsets)):
        raise ValueError("int8_linear's codes, scales and offsets must be contiguous")
    out = np.empty((x.shape[0], n), np.float32)                                      # [M, N]
    status = _kernel()(codes.data_ptr(), scales.data_ptr(), None if offsets is None else offsets.data_ptr(),
                       x.ctypes.data, out.ctypes.data, x.shape[0], n, k, torch.get_num_threads(), int(nibbles))
    if status != 0:
        raise MemoryError(f"int8_linear could not allocate {x.shape[0] * k // BLOCK} block sums")
    return out
