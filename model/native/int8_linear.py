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
from model.native.threads import kernel_threads

BLOCK = 32                 # values per scale / offset


@functools.cache
def _kernel():
    lib = library()
    if lib is None or lib.int8_linear_level() == 0:
        return None
    lib.int8_linear.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 3 + [ctypes.c_int] * 2
    lib.int8_linear.restype = ctypes.c_int
    return lib.int8_linear


def available() -> bool:
    """Whether the kernel is built and this CPU runs it (AVX2 + FMA or AVX-512)."""
    return _kernel() is not None


class Int8Matrix:
    """A matrix W = codes * scales [N, K / 32] (+ offsets [N, K / 32]) per 32 values, checked once, multiplied with
    little per-call work (a generation step makes ~120 products): codes int8 [N, K], or uint8 [N, K / 2] with two
    4-bit codes a byte when nibbles (GGUF's Q4 order within each block of 16 bytes). Keeps its tensors alive."""

    def __init__(self, codes: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor | None, nibbles: bool):
        n, k = scales.shape[0], scales.shape[1] * BLOCK
        want = (torch.uint8, (n, k // 2)) if nibbles else (torch.int8, (n, k))
        if scales.dim() != 2 or (codes.dtype, tuple(codes.shape)) != want or scales.dtype != torch.float32 or (
                offsets is not None and (offsets.dtype != torch.float32 or offsets.shape != scales.shape)):
            raise ValueError(f"int8_linear needs codes {want} for float32 scales [N, K/{BLOCK}] {tuple(scales.shape)}, "
                             f"got codes {codes.dtype} {tuple(codes.shape)}, scales {scales.dtype}")
        if not all(t is None or t.is_contiguous() for t in (codes, scales, offsets)):
            raise ValueError("int8_linear's codes, scales and offsets must be contiguous")
        self.tensors = (codes, scales, offsets)
        self.n, self.k, self.nibbles = n, k, int(nibbles)
        self.pointers = (codes.data_ptr(), scales.data_ptr(), None if offsets is None else offsets.data_ptr())

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """x [M, K] float32 @ W^T -> [M, N] float32, on kernel_threads(). Call only where available()."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.k:
            raise ValueError(f"x must be [M, {self.k}], got {x.shape}")
        out = np.empty((x.shape[0], self.n), np.float32)                             # [M, N]
        status = _kernel()(*self.pointers, x.ctypes.data, out.ctypes.data, x.shape[0], self.n, self.k,
                           kernel_threads(), self.nibbles)
        if status == -2:
            raise MemoryError(f"int8_linear could not allocate a copy of x {x.shape}")
        if status != 0:
            raise RuntimeError("int8_linear: this CPU has neither AVX2 + FMA nor AVX-512")
        return out


def int8_linear(codes: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor | None, x: np.ndarray,
                nibbles: bool) -> np.ndarray:
    """x [M, K] float32 @ W^T -> [M, N] float32 for W as in Int8Matrix (checked at every call)."""
    return Int8Matrix(codes, scales, offsets, nibbles)(x)


@functools.cache
def _dequantize():
    lib = library()
    if lib is None:
        return None
    lib.int8_dequantize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    lib.int8_dequantize.restype = None
    return lib.int8_dequantize


def dequantize_q8_0(codes: torch.Tensor, scales: torch.Tensor, out: torch.Tensor) -> bool:
    """out (float32, contiguous, codes' number of values) = codes (int8 or uint8 bits, contiguous) times each 32
    values' scale (float32 [blocks] or [blocks, 1], contiguous): Q8_0's values, exactly. False (nothing written)
    where the kernels are not built."""
    fn = _dequantize()
    if fn is None:
        return False
    n_blocks = scales.numel()
    if codes.numel() != BLOCK * n_blocks or out.numel() != codes.numel() or codes.element_size() != 1 or \
            scales.dtype != torch.float32 or out.dtype != torch.float32 or \
            not (codes.is_contiguous() and scales.is_contiguous() and out.is_contiguous()):
        raise ValueError(f"dequantize_q8_0 needs contiguous codes [{BLOCK} x blocks], float32 scales [blocks] and "
                         f"a float32 out of the codes' size, got {tuple(codes.shape)}, {tuple(scales.shape)} "
                         f"{scales.dtype}, {tuple(out.shape)} {out.dtype}")
    fn(codes.data_ptr(), scales.data_ptr(), n_blocks, out.data_ptr())
    return True
