"""LM head and embedding rows of a table kept quantized (a Q8_0 QuantizedEmbedding, as in models too large for
float32) equal the gguf-dequantized float32 table's."""
import gguf
import numpy as np
import pytest
import torch
from gguf.quants import dequantize as gguf_dequantize

from model.decoder import matrices
from model.decoder.embedding import QuantizedEmbedding
from model.files.quants import quant_format

COLS = 96                             # 3 blocks of 32 per row
CHUNK_ROWS = 64
ROWS = 2 * CHUNK_ROWS + 37            # two whole chunks of the product and a partial one


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(matrices, "CHUNK_VALUES", CHUNK_ROWS * COLS)


def random_q8_table(rng: np.random.Generator) -> np.ndarray:
    """[ROWS, bytes per row] uint8 of valid Q8_0 blocks: random fp16 scales, random int8 values."""
    blocks = rng.integers(0, 256, size=(ROWS * COLS // 32, quant_format("Q8_0").block_bytes), dtype=np.uint8)
    blocks[:, :2] = rng.normal(0, 0.05, size=(len(blocks), 1)).astype(np.float16).view(np.uint8)
    return blocks.reshape(ROWS, -1)


def q8_table(raw: np.ndarray) -> QuantizedEmbedding:
    return QuantizedEmbedding.of(matrices.QuantizedMatrix(raw, "Q8_0", (ROWS, COLS)))


def test_logits_equal_the_dequantized_table_times_the_vector():
    rng = np.random.default_rng(11)
    raw = random_q8_table(rng)
    table = gguf_dequantize(raw, gguf.GGMLQuantizationType.Q8_0).astype(np.float64)     # [ROWS, COLS]
    x = rng.normal(size=COLS).astype(np.float32)
    ours = q8_table(raw).logits(torch.from_numpy(x)).numpy()
    reference = table @ x.astype(np.float64)
    assert ours.shape == (ROWS,) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-5 * np.abs(reference).max())


def test_rows_equal_the_gguf_package_bit_for_bit():
    raw = random_q8_table(np.random.default_rng(12))
    ids = torch.tensor([0, CHUNK_ROWS, ROWS - 1, 5])
    ours = q8_table(raw).rows(ids).numpy()
    np.testing.assert_array_equal(ours, gguf_dequantize(raw, gguf.GGMLQuantizationType.Q8_0)[ids.numpy()])
