"""Token embedding tables (also the tied LM head): dense float32, or kept in Q8_0 blocks to save memory."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from model.files.quants import Q8_0_BYTES

LOGIT_CHUNK_ROWS = 256   # rows dequantized at a time for the LM head (590 kB of float32: stays in cache)


class DenseEmbedding:
    """A float32 table [V, D]."""

    def __init__(self, weight: torch.Tensor):
        self.weight = weight  # [V, D]

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        return self.weight[ids]              # [T, D]

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)      # [V]


class Q8Embedding:
    """A Q8_0 table (int8 values, one fp16 scale per 32): 31 MB instead of 113 MB for SmolLM2.

    Rows are dequantized as gguf does (float32(int8) * float32(scale)), so results equal the float32 table's.
    """

    def __init__(self, blocks: np.ndarray):
        n_rows, n_bytes = blocks.shape
        raw = torch.from_numpy(blocks).view(n_rows, n_bytes // Q8_0_BYTES, Q8_0_BYTES)  # [V, nb, 34]
        self.scale = raw[..., :2].contiguous().view(torch.float16).float()    # [V, nb, 1]
        self.values = raw[..., 2:].contiguous().view(torch.int8)              # [V, nb, 32]

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        return (self.values[ids].float() * self.scale[ids]).flatten(-2)       # [T, D]

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """x [D] or [n, D] @ table^T, dequantizing LOGIT_CHUNK_ROWS rows at a time into one reused buffer (a fresh
        buffer per chunk would cost a page fault per 4 kB where the heap maps large blocks: 3x slower)."""
        n_rows, n_blocks, block = self.values.shape
        out = torch.empty(*x.shape[:-1], n_rows)                               # [V] or [n, V]
        table = torch.empty(LOGIT_CHUNK_ROWS, n_blocks, block)                 # [chunk, nb, 32]
        for start in range(0, n_rows, LOGIT_CHUNK_ROWS):
            rows = slice(start, start + LOGIT_CHUNK_ROWS)
            chunk = table[: min(LOGIT_CHUNK_ROWS, n_rows - start)]
            torch.mul(self.values[rows], self.scale[rows], out=chunk)
            flat = chunk.view(-1, n_blocks * block)                            # [chunk, D]
            if x.dim() == 1:
                torch.mv(flat, x, out=out[rows])
            else:
                out[:, rows] = x @ flat.T                                      # [n, chunk]
        return out


def embedding_table(weight: np.ndarray):
    """DenseEmbedding for float32 arrays, Q8Embedding for raw Q8_0 blocks (uint8)."""
    if weight.dtype == np.uint8:
        return Q8Embedding(weight)
    return DenseEmbedding(torch.from_numpy(weight))
