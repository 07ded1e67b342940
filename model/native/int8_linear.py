"""x @ W^T for a matrix held as integer codes with a float32 scale (and optionally an offset) per 32 values
(int8_linear.c): codes one byte each (8-bit and 5-bit formats) or two to a byte (4-bit), so a one-token step reads
0.75 to 1.25 bytes a weight instead of float32's 4, laid out in groups of 16 outputs for the kernel. Every output is
the same sequence of multiply-adds over k whatever the number of rows (a generation step's, or with made=True a full
pass's), so a row's numbers do not depend on the rows multiplied with it."""
from __future__ import annotations

import ctypes
import functools

import numpy as np
import torch

from model.native.build import library
from model.native.threads import kernel_threads

BLOCK = 32                 # values per scale / offset
GROUP = 16                 # outputs of a group in the kernel's layout (int8_linear.c's GROUP_OUTPUTS)
GROUPS_AT_ONCE = 256       # groups regrouped at a time (bounds the temporaries for a large vocabulary's matrix)


@functools.cache
def _kernel():
    lib = library()
    if lib is None or lib.int8_linear_level() == 0:
        return None
    lib.int8_linear_strided.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 4 + [ctypes.c_int] * 3
    lib.int8_linear_strided.restype = ctypes.c_int
    return lib.int8_linear_strided


def available() -> bool:
    """Whether the kernel is built and this CPU runs it (AVX2 + FMA, or AVX-512: the same numbers)."""
    return _kernel() is not None


class Int8Matrix:
    """A matrix W = codes * scales [N, K / 32] (+ offsets [N, K / 32]) per 32 values, checked and laid out once,
    multiplied with little per-call work (a generation step makes ~120 products). Given codes int8 [N, K], or uint8
    [N, K / 2] with two 4-bit codes a byte when nibbles (GGUF's Q4 order within each block of 16 bytes); keeps only
    its own copy in the kernel's grouped layout (see grouped_layout), so the caller's tensors may be dropped."""

    def __init__(self, codes: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor | None, nibbles: bool):
        n, k = scales.shape[0], scales.shape[1] * BLOCK
        want = (torch.uint8, (n, k // 2)) if nibbles else (torch.int8, (n, k))
        if scales.dim() != 2 or (codes.dtype, tuple(codes.shape)) != want or scales.dtype != torch.float32 or (
                offsets is not None and (offsets.dtype != torch.float32 or offsets.shape != scales.shape)):
            raise ValueError(f"int8_linear needs codes {want} for float32 scales [N, K/{BLOCK}] {tuple(scales.shape)}, "
                             f"got codes {codes.dtype} {tuple(codes.shape)}, scales {scales.dtype}")
        self.tensors = grouped_layout(codes, scales, offsets, bool(nibbles))
        self.n, self.k, self.nibbles = n, k, int(nibbles)
        self.has_offsets = offsets is not None
        self.pointers = tuple(None if t is None else t.data_ptr() for t in self.tensors)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors if t is not None)

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None, made: bool = False) -> np.ndarray:
        """x [M, K] float32 @ W^T -> [M, N] float32, on kernel_threads(), into out when given (float32 [M, N] whose
        rows may lie further apart: the columns of a wider array that one part of a stacked matrix fills). made: the
        made-weights sequence (the float32 product of x and the dequantized matrix, in order of k: a full pass's,
        ~1.3x faster from a dozen rows), else the block sums' (a generation step's). Call only where available()."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.k:
            raise ValueError(f"x must be [M, {self.k}], got {x.shape}")
        if out is None:
            out = np.empty((x.shape[0], self.n), np.float32)                         # [M, N]
        elif out.shape != (x.shape[0], self.n) or out.dtype != np.float32 or out.strides[1] != 4 or \
                out.strides[0] % 4 or out.strides[0] < 4 * self.n or not out.flags.writeable:
            raise ValueError(f"out must be a writable float32 [{x.shape[0]}, {self.n}] with contiguous rows, got "
                             f"{out.dtype} {out.shape} strides {out.strides}")
        status = _kernel()(*self.pointers, x.ctypes.data, out.ctypes.data, x.shape[0], self.n, self.k,
                           out.strides[0] // 4, kernel_threads(), self.nibbles, int(made))
        if status == -2:
            raise MemoryError(f"int8_linear could not allocate a copy of x {x.shape} or its weights' buffer")
        if status != 0:
            raise RuntimeError("int8_linear: this CPU has no AVX2 + FMA")
        return out


def nibble_bytes(codes: torch.Tensor) -> torch.Tensor:
    """4-bit codes [b, 32] (uint8 0..15, each block's in order) -> [b, 16] uint8 as Int8Matrix takes them: byte j holds
    code j (low nibble) and code j + 16 (high)."""
    as_bytes = codes.to(torch.uint8)
    return as_bytes[:, :BLOCK // 2] | (as_bytes[:, BLOCK // 2:] << 4)


def grouped_nbytes(n: int, k: int, nibbles: bool, offsets: bool) -> int:
    """Bytes of an Int8Matrix [n, k] in the grouped layout (n padded to whole groups)."""
    padded = -(-n // GROUP) * GROUP
    return padded * k // (2 if nibbles else 1) + padded * (k // BLOCK) * 4 * (2 if offsets else 1)


def grouped_layout(codes: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor | None,
                   nibbles: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The kernel's layout of ceil(N / 16) groups of 16 outputs (the last padded with zero codes and scales): codes
    [G, K, 16] int8, or [G, K, 8] uint8 with output j's code in byte j's low nibble and output j + 8's in its high;
    scales and offsets [G, K / 32, 16]. One k's codes of a group are contiguous, for the kernel's 16-output vectors."""
    n, blocks = scales.shape
    k, groups = blocks * BLOCK, -(-n // GROUP)
    out_codes = torch.empty(groups, k, GROUP // 2 if nibbles else GROUP, dtype=codes.dtype)
    out_scales = torch.empty(groups, blocks, GROUP)
    out_offsets = None if offsets is None else torch.empty(groups, blocks, GROUP)
    for g0 in range(0, groups, GROUPS_AT_ONCE):
        g1 = min(groups, g0 + GROUPS_AT_ONCE)
        rows = slice(g0 * GROUP, min(n, g1 * GROUP))
        part = codes[rows]
        if nibbles:
            halves = part.view(-1, blocks, BLOCK // 2)                               # [r, B, 16]
            part = torch.cat([halves & 0x0F, halves >> 4], dim=2).view(-1, k)       # [r, K] codes 0..15
        part = _by_group(part, g1 - g0)                                              # [g, K, 16]
        out_codes[g0:g1] = part[..., :GROUP // 2] | (part[..., GROUP // 2:] << 4) if nibbles else part
        out_scales[g0:g1] = _by_group(scales[rows], g1 - g0)
        if offsets is not None:
            out_offsets[g0:g1] = _by_group(offsets[rows], g1 - g0)
    return out_codes, out_scales, out_offsets


def _by_group(rows: torch.Tensor, groups: int) -> torch.Tensor:
    """rows [r, w] (r <= groups * 16; missing rows are zeros) -> [groups, w, 16]: each group's 16 rows as columns."""
    padded = torch.zeros(groups * GROUP, rows.shape[1], dtype=rows.dtype)
    padded[:rows.shape[0]] = rows
    return padded.view(groups, GROUP, -1).transpose(1, 2)                            # [g, w, 16]


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


@functools.cache
def _dequantize_grouped():
    lib = library()
    if lib is None:
        return None
    lib.int8_dequantize_grouped.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * 3 + \
        [ctypes.c_void_p]
    lib.int8_dequantize_grouped.restype = None
    return lib.int8_dequantize_grouped


def dequantize_grouped_rows(matrix: Int8Matrix, rows: slice, out: torch.Tensor) -> None:
    """Rows start:stop of a Q8_0 Int8Matrix (no offsets, 8-bit codes) into out, float32 [stop - start, K]
    (contiguous): code times scale, exactly gguf's values."""
    if matrix.nibbles or matrix.has_offsets or not 0 <= rows.start <= rows.stop <= matrix.n or \
            out.dtype != torch.float32 or tuple(out.shape) != (rows.stop - rows.start, matrix.k) or \
            not out.is_contiguous():
        raise ValueError(f"dequantize_grouped_rows needs a Q8_0 matrix and a contiguous float32 out of its rows "
                         f"{rows} [{rows.stop - rows.start}, {matrix.k}], got {out.dtype} {tuple(out.shape)}")
    _dequantize_grouped()(matrix.pointers[0], matrix.pointers[1], matrix.k, rows.start, rows.stop - rows.start,
                          out.data_ptr())
