"""Token embedding tables (also the LM head): decoder matrices (model.decoder.matrices) under the names the decoder
uses, rows(ids) to look tokens up and logits(x) = x @ table^T."""
from __future__ import annotations

import numpy as np
import torch

from model.decoder.matrices import DenseMatrix, QuantizedMatrix
from model.files.quants import Q8_0_BLOCK, Q8_0_BYTES


class DenseEmbedding(DenseMatrix):
    """A float32 table [V, D]."""

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)                                                      # [V] or [n, V]


class Q8Embedding(QuantizedMatrix):
    """A Q8_0 table kept quantized (int8 `values` [V, D / 32, 32], float32 `scale` [V, D / 32, 1]): 31 MB instead
    of 113 MB for SmolLM2; rows and logits equal the gguf-dequantized float32 table's."""

    def __init__(self, blocks: np.ndarray):
        n_rows, n_bytes = blocks.shape                                             # raw Q8_0 blocks [V, bytes]
        super().__init__(blocks, "Q8_0", (n_rows, n_bytes // Q8_0_BYTES * Q8_0_BLOCK))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)                                                      # [V] or [n, V]


def embedding_table(weight: np.ndarray) -> DenseEmbedding | Q8Embedding:
    """DenseEmbedding for float32 arrays, Q8Embedding for raw Q8_0 blocks (uint8)."""
    if weight.dtype == np.uint8:
        return Q8Embedding(weight)
    return DenseEmbedding(torch.from_numpy(weight))
