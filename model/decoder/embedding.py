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


class QuantizedEmbedding(QuantizedMatrix):
    """A table kept quantized in its GGUF type; rows and logits equal the gguf-dequantized float32 table's."""

    @classmethod
    def of(cls, matrix: QuantizedMatrix) -> QuantizedEmbedding:
        """The same quantized data (shared, not copied) as a table."""
        table = cls.__new__(cls)
        table.__dict__.update(matrix.__dict__)
        return table

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)                                                      # [V] or [n, V]


class Q8Embedding(QuantizedEmbedding):
    """A Q8_0 table (int8 `values` [V, D / 32, 32], float32 `scale` [V, D / 32, 1]): 31 MB instead of 113 MB for
    SmolLM2."""

    def __init__(self, blocks: np.ndarray):
        n_rows, n_bytes = blocks.shape                                             # raw Q8_0 blocks [V, bytes]
        super().__init__(blocks, "Q8_0", (n_rows, n_bytes // Q8_0_BYTES * Q8_0_BLOCK))


def embedding_table(weight) -> DenseEmbedding | QuantizedEmbedding:
    """DenseEmbedding for float32 arrays, Q8Embedding for raw Q8_0 blocks (uint8), a QuantizedEmbedding for a
    QuantizedMatrix."""
    if isinstance(weight, QuantizedMatrix):
        return QuantizedEmbedding.of(weight)
    if weight.dtype == np.uint8:
        return Q8Embedding(weight)
    return DenseEmbedding(torch.from_numpy(weight))
