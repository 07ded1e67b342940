"""Token embedding tables (also the LM head): decoder matrices (model.decoder.matrices) under the names the decoder
uses, rows(ids) to look tokens up and logits(x) = x @ table^T."""
from __future__ import annotations

import torch

from model.decoder.matrices import DenseMatrix, QuantizedMatrix


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


def embedding_table(weight) -> DenseEmbedding | QuantizedEmbedding:
    """DenseEmbedding for float32 arrays, a QuantizedEmbedding for a QuantizedMatrix."""
    if isinstance(weight, QuantizedMatrix):
        return QuantizedEmbedding.of(weight)
    return DenseEmbedding(torch.from_numpy(weight))
