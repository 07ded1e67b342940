"""Dequantize GGUF tensors to float32 for the model load: whole-tensor torch kernels for the block formats the
default model uses (Q4_1, Q8_0, F16, F32), the `gguf` package's numpy code for every other format.

The gguf package walks a tensor in groups of 16 rows with several numpy passes each (0.9 s for SmolLM2's 210 Q4_1
matrices); one pass over all blocks on every core does the same arithmetic, in the same order, in ~0.15 s.
"""
from __future__ import annotations

import numpy as np
import torch

Q4_1_BLOCK = 32        # values per block
Q4_1_BYTES = 20        # fp16 scale d, fp16 minimum m, 16 bytes of 4-bit quants (low nibbles: values 0-15)
Q8_0_BLOCK = 32
Q8_0_BYTES = 34        # fp16 scale d, 32 int8 quants


def dequantize(raw: np.ndarray, type_name: str, shape: tuple[int, ...], native_order: bool = True,
               out: np.ndarray | None = None) -> np.ndarray:
    """float32 array of `shape` (numpy order, rows last) from a tensor's raw GGUF bytes / values, written into out
    (C-contiguous float32 of that shape) when given; a file in the other byte order goes through the gguf package."""
    if out is None:
        out = empty_float32(shape)
    kernel = _KERNELS.get(type_name) if native_order else None
    if kernel is None:
        import gguf

        out[...] = np.asarray(gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[type_name]),
                              dtype=np.float32).reshape(shape)
        return out
    with torch.no_grad():
        kernel(raw, torch.from_numpy(out).view(-1))
    return out


def empty_float32(shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialized float32 array from torch's allocator. numpy asks the kernel for transparent huge pages on
    arrays of 4 MB and more; where the kernel then compacts memory on first touch (THP defrag "madvise", as here)
    filling the model's 530 MB took 0.43 s instead of 0.1 s."""
    return torch.empty(shape, dtype=torch.float32).numpy()


def _blocks(raw: np.ndarray, block_bytes: int) -> torch.Tensor:
    """Own copy of the raw bytes as [n_blocks, block_bytes] uint8 (the reader's memmap is read-only)."""
    return torch.from_numpy(np.array(raw, dtype=np.uint8, copy=True).reshape(-1, block_bytes))


def _fp16_column(blocks: torch.Tensor, start: int) -> torch.Tensor:
    return blocks[:, start:start + 2].contiguous().view(torch.float16).float()        # [n_blocks, 1]


def _q4_1(raw: np.ndarray, out: torch.Tensor) -> None:
    """value = d * q + m, the first 16 values of a block from the low nibbles, the last 16 from the high ones."""
    blocks = _blocks(raw, Q4_1_BYTES)                                                # [nb, 20]
    quants = blocks[:, 4:]                                                           # [nb, 16]
    q = torch.cat((quants & 0x0F, quants >> 4), dim=1)                               # [nb, 32] uint8
    values = out.view(-1, Q4_1_BLOCK)                                                # [nb, 32]
    values.copy_(q).mul_(_fp16_column(blocks, 0)).add_(_fp16_column(blocks, 2))


def _q8_0(raw: np.ndarray, out: torch.Tensor) -> None:
    """value = q * d."""
    blocks = _blocks(raw, Q8_0_BYTES)                                                # [nb, 34]
    q = blocks[:, 2:].contiguous().view(torch.int8)                                  # [nb, 32]
    out.view(-1, Q8_0_BLOCK).copy_(q).mul_(_fp16_column(blocks, 0))


def _f16(raw: np.ndarray, out: torch.Tensor) -> None:
    out.copy_(torch.from_numpy(np.array(raw, copy=True).view(np.float16).reshape(-1)))


def _f32(raw: np.ndarray, out: torch.Tensor) -> None:
    out.copy_(torch.from_numpy(np.array(raw, copy=True).view(np.float32).reshape(-1)))


_KERNELS = {"Q4_1": _q4_1, "Q8_0": _q8_0, "F16": _f16, "F32": _f32}
