"""Int8Blocks: a matrix multiplied as integer codes by the native kernel (model.native.int8_linear) in the one-token
generation step: 0.75 (4-bit codes) to 1.25 bytes a weight read per step instead of float32's 4, and a row's numbers
the same in any batch.

Made from a QuantizedMatrix that holds its codes in the kernel's layout (matrices.KERNEL_TYPES: shared) or from a
float32 matrix that a Q8_0, Q4_0, Q5_0, Q4_1 or Q5_1 tensor was dequantized into (the built-in model: Q4_1 blocks, a
Q8_0 table).
In those formats every 32 values of a row are scale * code (+ offset), the codes integers: Q8_0 from -127 to 127
with the largest magnitude at +-127 (scale = amax / 127), Q4_0 / Q5_0 with the extreme value at code -8 / -16,
Q4_1 / Q5_1 from 0 to 15 / 31 with the minimum as offset and the maximum at the top code; scales and offsets are
float16. Codes, scales and offsets are recovered and checked to give back every float32 value exactly (scale * code
+ offset, as gguf dequantizes), or the matrix is not converted and the step multiplies it as float32.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np
import torch

from model.decoder.matrices import QuantizedMatrix
from model.native import int8_linear as kernel

RECOVER_CHUNK = 1 << 20       # float32 values checked at a time (4 MB and its temporaries)
SAMPLE_ROWS = 4               # rows tried in each layout before the whole matrix
_RECOVERED: dict[int, Int8Blocks | None] = {}   # id of a live float32 matrix -> its Int8Blocks or None
_RECOVERED_LOCK = threading.Lock()


@dataclass(frozen=True)
class _Layout:
    """How one format puts its 32 values on codes: symmetric (scale = extreme value / extreme_code, no offset) or
    with an offset (offset = minimum, scale = (maximum - minimum) / top)."""

    low: int
    high: int
    extreme_code: int | None = None

    @property
    def has_offset(self) -> bool:
        """Stored with offsets: Q4_1 / Q5_1, and Q4_0 (its codes -8..7 kept as 0..15, offset -8 scale)."""
        return self.extreme_code is None or self.nibbles

    @property
    def nibbles(self) -> bool:
        """4-bit codes, stored two to a byte."""
        return self.high - self.low == 15


LAYOUTS = {
    "Q8_0": _Layout(-127, 127, extreme_code=127),
    "Q4_0": _Layout(-8, 7, extreme_code=-8),
    "Q5_0": _Layout(-16, 15, extreme_code=-16),
    "Q4_1": _Layout(0, 15),
    "Q5_1": _Layout(0, 31),
}


@dataclass(frozen=True, eq=False)
class Int8Blocks:
    """A matrix [out, in] as codes times scales per 32 values (plus offsets), held by the native kernel's view in its
    grouped layout (model.native.int8_linear.Int8Matrix): int8 codes, or two 4-bit codes a byte (Q4_0 / Q4_1
    values)."""

    matrix: kernel.Int8Matrix

    @property
    def shape(self) -> tuple[int, int]:
        return self.matrix.n, self.matrix.k

    @property
    def nbytes(self) -> int:
        return self.matrix.nbytes

    @property
    def nibbles(self) -> bool:
        return bool(self.matrix.nibbles)

    @property
    def has_offsets(self) -> bool:
        return self.matrix.has_offsets

    def linear(self, x: np.ndarray, out: np.ndarray | None = None, made: bool = False) -> np.ndarray:
        """Rows x [B, in] float32 -> x @ W^T [B, out] float32 (into out when given; made: the full pass's sequence,
        see Int8Matrix); a row's numbers are the same in any batch."""
        return self.matrix(x, out, made)


def copy_nbytes(type_name: str, shape: tuple[int, int]) -> int:
    """Bytes of the Int8Blocks copy a float32 matrix dequantized from this GGUF type gets (0: none)."""
    layout = LAYOUTS.get(type_name)
    if layout is None:
        return 0
    return kernel.grouped_nbytes(int(shape[0]), int(shape[1]), layout.nibbles, layout.has_offset)


def int8_blocks_of(w) -> Int8Blocks | None:
    """w as Int8Blocks when the native kernel runs here and w is a QuantizedMatrix in its layout or float32 holding
    one of LAYOUTS' values exactly; else None (the caller multiplies w as it is). A float32 matrix's answer is found
    once and kept as long as the matrix: the generation step and the full forward (model.decoder.blocks.linear)
    share one copy."""
    if not kernel.available():
        return None
    if isinstance(w, QuantizedMatrix):
        return None if w.int8 is None else Int8Blocks(w.int8)                    # shared, not copied
    if not (isinstance(w, torch.Tensor) and w.dtype == torch.float32 and w.dim() == 2 and
            w.shape[1] % kernel.BLOCK == 0):
        return None
    key = id(w)
    with _RECOVERED_LOCK:
        if key not in _RECOVERED:
            _RECOVERED[key] = next((_recovered(w, layout) for layout in LAYOUTS.values()
                                    if _recovered(w[:SAMPLE_ROWS], layout) is not None), None)   # cheap test first
            weakref.finalize(w, _RECOVERED.pop, key, None)                     # forgotten with the matrix
        return _RECOVERED[key]


def _recovered(w: torch.Tensor, layout: _Layout) -> Int8Blocks | None:
    """The codes, scales and offsets in `layout` that give w [out, in] exactly, or None."""
    n_rows, n_cols = w.shape
    per_row = n_cols // kernel.BLOCK
    codes = torch.empty(n_rows, n_cols // 2, dtype=torch.uint8) if layout.nibbles else \
        torch.empty(n_rows, n_cols, dtype=torch.int8)                                  # [out, in / 2] or [out, in]
    scales = torch.empty(n_rows, per_row)                                              # [out, in / 32]
    offsets = torch.empty(n_rows, per_row) if layout.has_offset else None             # [out, in / 32]
    step = max(1, RECOVER_CHUNK // n_cols)
    for start in range(0, n_rows, step):
        rows = slice(start, min(start + step, n_rows))
        blocks = w[rows].reshape(-1, kernel.BLOCK)                                     # [b, 32]
        if layout.extreme_code is None:
            low, high = blocks.amin(1), blocks.amax(1)                                 # [b] each
            scale = _float16((high - low) / layout.high)                               # [b]
            offset = low
        else:
            extreme = blocks.gather(1, blocks.abs().argmax(1, keepdim=True))[:, 0]     # [b] signed
            scale = _float16(extreme / layout.extreme_code)                            # [b]
            offset = torch.zeros_like(scale)
        divisor = torch.where(scale == 0, torch.ones_like(scale), scale)[:, None]      # [b, 1]
        block_codes = torch.round((blocks - offset[:, None]) / divisor)                # [b, 32]
        if block_codes.min() < layout.low or block_codes.max() > layout.high or \
                not torch.equal(block_codes * scale[:, None] + offset[:, None], blocks):
            return None
        if layout.nibbles:
            codes[rows] = kernel.nibble_bytes(block_codes - layout.low).view(-1, n_cols // 2)
            offset = offset + layout.low * scale                                       # Q4_0: -8 scale (exact)
        else:
            codes[rows] = block_codes.to(torch.int8).view(-1, n_cols)
        scales[rows] = scale.view(-1, per_row)
        if offsets is not None:
            offsets[rows] = offset.view(-1, per_row)
    return Int8Blocks(kernel.Int8Matrix(codes, scales, offsets, layout.nibbles))


def _float16(x: torch.Tensor) -> torch.Tensor:
    """x rounded to float16, as float32 (scales are stored as float16 in every layout here)."""
    return x.to(torch.float16).to(torch.float32)
