"""GGUF tensor types this app reads, their block layouts, and dequantization to float32 bit-identical to the `gguf`
package's numpy code.

A block format is taken apart into integer codes and scales (model.files.quant_kernels); `scale_codes` then does the
reference's float32 arithmetic in its order: d * q, or (d * sc) * q per group, then + m or - dmin * mn. A tensor is
dequantized CHUNK_VALUES values at a time, so the temporaries stay in the CPU's cache.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from model.files import quant_kernels as kernels
from model.files.quant_kernels import Fields

CHUNK_VALUES = 1 << 18       # values dequantized per step (1 MB of float32)


@dataclass(frozen=True)
class QuantFormat:
    """One GGUF tensor type: block_values values stored in block_bytes bytes. Quantized formats have `split` (blocks
    -> Fields) and codes of `bits` bits whose integer is code + offset (read as int8 when `signed`), scaled per
    `group` values; float formats have `dtype` instead."""

    name: str
    block_values: int
    block_bytes: int
    split: Callable[[torch.Tensor], Fields] | None = None
    bits: int = 0
    offset: int = 0
    group: int = 0
    dtype: torch.dtype | None = None

    @property
    def signed(self) -> bool:
        return self.offset != 0 or self.bits == 8


FORMATS = {f.name: f for f in (
    QuantFormat("F32", 1, 4, dtype=torch.float32),
    QuantFormat("F16", 1, 2, dtype=torch.float16),
    QuantFormat("BF16", 1, 2, dtype=torch.bfloat16),
    QuantFormat("Q8_0", 32, 34, kernels.q8_0, bits=8, group=32),
    QuantFormat("Q4_0", 32, 18, kernels.q4_0, bits=4, offset=-8, group=32),
    QuantFormat("Q4_1", 32, 20, kernels.q4_1, bits=4, group=32),
    QuantFormat("Q5_0", 32, 22, kernels.q5_0, bits=5, offset=-16, group=32),
    QuantFormat("Q5_1", 32, 24, kernels.q5_1, bits=5, group=32),
    QuantFormat("Q2_K", 256, 84, kernels.q2_k, bits=2, group=16),
    QuantFormat("Q3_K", 256, 110, kernels.q3_k, bits=3, offset=-4, group=16),
    QuantFormat("Q4_K", 256, 144, kernels.q4_k, bits=4, group=32),
    QuantFormat("Q5_K", 256, 176, kernels.q5_k, bits=5, group=32),
    QuantFormat("Q6_K", 256, 210, kernels.q6_k, bits=6, offset=-32, group=16),
)}
SUPPORTED_TYPES = tuple(FORMATS)


def quant_format(type_name: str) -> QuantFormat:
    """The format of a GGUF type name (e.g. "Q4_K"); ValueError for a type this app does not read."""
    try:
        return FORMATS[type_name]
    except KeyError:
        raise ValueError(f"Unsupported tensor type {type_name!r}; supported types: "
                         f"{', '.join(SUPPORTED_TYPES)}") from None


def row_bytes(type_name: str, n_values: int) -> int:
    """Bytes one row of n_values values takes; ValueError unless n_values is a whole number of blocks."""
    fmt = quant_format(type_name)
    if n_values % fmt.block_values:
        raise ValueError(f"A {type_name} row holds a multiple of {fmt.block_values} values, not {n_values}")
    return n_values // fmt.block_values * fmt.block_bytes


def integers_to_float(fmt: QuantFormat, integers: torch.Tensor, out: torch.Tensor) -> None:
    """out (float32) = integers: code + offset as uint8 bits (mod 256), read as int8 for signed formats."""
    out.copy_(integers.view(torch.int8) if fmt.signed else integers)


def scale_codes(fmt: QuantFormat, values: torch.Tensor, d: torch.Tensor, sc: torch.Tensor | None,
                dmin: torch.Tensor | None, mn: torch.Tensor | None, scratch: torch.Tensor | None = None) -> None:
    """values [nb, block_values] float32 holding the integers -> the dequantized values, in place: the reference's
    float32 operations in its order (a K-quant's d * sc first, then times q, then minus dmin * mn). scratch, float32
    of at least 2 * values.numel() / group elements, holds the group scales (else they are allocated)."""
    groups = values.view(len(values), -1, fmt.group)                                             # [nb, g, group]
    if sc is None:
        groups.mul_(d[..., None])
    else:
        groups.mul_(_group_scales(d, sc, scratch, 0)[..., None])
    if mn is not None:
        groups.sub_(_group_scales(dmin, mn, scratch, 1)[..., None])
    elif dmin is not None:
        groups.add_(dmin[..., None])


def _group_scales(d: torch.Tensor, sc: torch.Tensor, scratch: torch.Tensor | None, slot: int) -> torch.Tensor:
    """d [nb, 1] * sc [nb, g] as float32 [nb, g], in slot `slot` of scratch when given."""
    n = sc.numel()
    out = torch.empty(sc.shape) if scratch is None else scratch[slot * n:(slot + 1) * n].view(sc.shape)
    return out.copy_(sc).mul_(d)


def dequantize_blocks(fmt: QuantFormat, blocks: torch.Tensor, out: torch.Tensor) -> None:
    """uint8 blocks [nb, block_bytes] -> out, float32 [nb, block_values]."""
    if fmt.dtype is not None:
        out.copy_(blocks.view(fmt.dtype))
        return
    fields = fmt.split(blocks)
    integers = fields.codes.sub_(-fmt.offset) if fmt.offset else fields.codes   # wraps: code + offset mod 256
    integers_to_float(fmt, integers, out)
    scale_codes(fmt, out, fields.d, fields.sc, fields.dmin, fields.mn)


def dequantize(raw: np.ndarray, type_name: str, shape: tuple[int, ...], native_order: bool = True,
               out: np.ndarray | None = None) -> np.ndarray:
    """float32 array of `shape` (numpy order, rows last) from a tensor's raw GGUF bytes / values, written into out
    (C-contiguous float32 of that shape) when given; a file in the other byte order goes through the gguf package."""
    fmt = quant_format(type_name)
    if out is None:
        out = empty_float32(shape)
    if not native_order:
        import gguf

        out[...] = np.asarray(gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[type_name]),
                              dtype=np.float32).reshape(shape)
        return out
    data = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)                  # [n bytes]
    n_blocks = out.size // fmt.block_values
    if out.size % fmt.block_values or len(data) != n_blocks * fmt.block_bytes:
        raise ValueError(f"{len(data)} bytes of {type_name} do not hold {out.size} values")
    blocks = data.reshape(n_blocks, fmt.block_bytes)                             # [nb, block bytes]
    values = torch.from_numpy(out).view(n_blocks, fmt.block_values)              # [nb, block values]
    step = max(1, CHUNK_VALUES // fmt.block_values)
    staging = torch.empty(min(step, n_blocks), fmt.block_bytes, dtype=torch.uint8)  # own copy: raw may be read-only
    with torch.no_grad():
        for start in range(0, n_blocks, step):
            n = min(step, n_blocks - start)
            staging.numpy()[:n] = blocks[start:start + n]
            dequantize_blocks(fmt, staging[:n], values[start:start + n])
    return out


def empty_float32(shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialized float32 array from torch's allocator. numpy asks the kernel for transparent huge pages on
    arrays of 4 MB and more; where the kernel then compacts memory on first touch (THP defrag "madvise", as here)
    filling the model's 530 MB took 0.43 s instead of 0.1 s."""
    return torch.empty(shape, dtype=torch.float32).numpy()
