"""GGUF tensor types this app reads, their block layouts, and whole-tensor dequantization to float32.

Every type has a torch kernel (model.files.quant_kernels) bit-identical to the `gguf` package's numpy code; a tensor
is dequantized CHUNK_VALUES values at a time, so the kernels' temporaries stay in the CPU's cache.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from model.files import quant_kernels as kernels

CHUNK_VALUES = 1 << 18       # values dequantized per kernel call (1 MB of float32)


@dataclass(frozen=True)
class QuantFormat:
    """One GGUF tensor type: block_values values are stored in block_bytes bytes."""

    name: str
    block_values: int
    block_bytes: int
    kernel: Callable[[torch.Tensor, torch.Tensor], None]   # (uint8 [nb, block_bytes], float32 [nb, block_values])


FORMATS = {f.name: f for f in (
    QuantFormat("F32", 1, 4, kernels.f32),
    QuantFormat("F16", 1, 2, kernels.f16),
    QuantFormat("BF16", 1, 2, kernels.bf16),
    QuantFormat("Q8_0", 32, 34, kernels.q8_0),
    QuantFormat("Q4_0", 32, 18, kernels.q4_0),
    QuantFormat("Q4_1", 32, 20, kernels.q4_1),
    QuantFormat("Q5_0", 32, 22, kernels.q5_0),
    QuantFormat("Q5_1", 32, 24, kernels.q5_1),
    QuantFormat("Q2_K", 256, 84, kernels.q2_k),
    QuantFormat("Q3_K", 256, 110, kernels.q3_k),
    QuantFormat("Q4_K", 256, 144, kernels.q4_k),
    QuantFormat("Q5_K", 256, 176, kernels.q5_k),
    QuantFormat("Q6_K", 256, 210, kernels.q6_k),
)}
SUPPORTED_TYPES = tuple(FORMATS)
Q8_0_BLOCK = FORMATS["Q8_0"].block_values
Q8_0_BYTES = FORMATS["Q8_0"].block_bytes


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
            fmt.kernel(staging[:n], values[start:start + n])
    return out


def empty_float32(shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialized float32 array from torch's allocator. numpy asks the kernel for transparent huge pages on
    arrays of 4 MB and more; where the kernel then compacts memory on first touch (THP defrag "madvise", as here)
    filling the model's 530 MB took 0.43 s instead of 0.1 s."""
    return torch.empty(shape, dtype=torch.float32).numpy()
