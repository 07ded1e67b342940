"""model.quants (the load's dequantization) against the gguf package's own numpy dequantization, the reference
llama.cpp's Python tools use, and model.gguf's reader against the stock GGUFReader on the real file."""
import gguf
import numpy as np
import pytest
from gguf.quants import dequantize as gguf_dequantize

from model.gguf import _open_reader, installed_model_path
from model.quants import dequantize

ROWS, COLS = 6, 96      # 3 blocks of 32 per row


def random_blocks(kind: str, rng: np.random.Generator) -> np.ndarray:
    """[ROWS, bytes per row] uint8 of valid blocks: random fp16 scales (and minimums), random quants."""
    block_bytes = {"Q4_1": 20, "Q8_0": 34}[kind]
    n_blocks = ROWS * COLS // 32
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    scales = rng.normal(0, 0.05, size=(n_blocks, 2)).astype(np.float16)   # d (and m for Q4_1)
    blocks[:, :2] = scales[:, :1].view(np.uint8)
    if kind == "Q4_1":
        blocks[:, 2:4] = scales[:, 1:].view(np.uint8)
    return blocks.reshape(ROWS, -1)


@pytest.mark.parametrize("kind", ["Q4_1", "Q8_0"])
def test_block_formats_equal_the_gguf_package_bit_for_bit(kind):
    raw = random_blocks(kind, np.random.default_rng(7))
    ours = dequantize(raw, kind, (ROWS, COLS))
    reference = gguf_dequantize(raw, gguf.GGMLQuantizationType[kind])
    assert ours.dtype == np.float32 and ours.shape == reference.shape == (ROWS, COLS)
    np.testing.assert_array_equal(ours, reference)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_float_formats_are_exact_copies(dtype):
    raw = np.random.default_rng(3).normal(size=(ROWS, COLS)).astype(dtype)
    ours = dequantize(raw, "F16" if dtype == np.float16 else "F32", (ROWS, COLS))
    np.testing.assert_array_equal(ours, raw.astype(np.float32))
    ours[0, 0] = 123.0                      # an own, writable copy: the reader's file stays untouched
    assert raw[0, 0] != 123.0


def test_other_formats_go_through_the_gguf_package():
    values = np.random.default_rng(5).normal(size=(4, 256)).astype(np.float32)
    raw = gguf.quants.quantize(values, gguf.GGMLQuantizationType.Q5_0)
    ours = dequantize(raw, "Q5_0", (4, 256))
    np.testing.assert_array_equal(ours, gguf_dequantize(raw, gguf.GGMLQuantizationType.Q5_0))
    assert np.abs(ours - values).max() <= np.abs(values).max() / 16    # 5-bit steps of max/16, error half a step


def test_real_model_reads_like_the_stock_reader():
    """Every metadata field (the 49k-entry vocab, merges and token types included) and every tensor of the
    installed SmolLM2 GGUF: same contents, types and offsets as gguf.GGUFReader, and the same dequantized values."""
    path = installed_model_path()
    ours, stock = _open_reader(path), gguf.GGUFReader(path)
    assert list(ours.fields) == list(stock.fields)
    for key, field in stock.fields.items():
        mine = ours.fields[key]
        assert (mine.types, mine.offset, mine.contents()) == (field.types, field.offset, field.contents()), key
    assert len(ours.fields["tokenizer.ggml.tokens"].data) == 49152
    assert [t.name for t in ours.tensors] == [t.name for t in stock.tensors]
    for mine, tensor in zip(ours.tensors, stock.tensors, strict=True):
        if tensor.tensor_type.name in ("Q4_1", "F32"):
            shape = tuple(int(n) for n in reversed(tensor.shape))
            np.testing.assert_array_equal(dequantize(mine.data, tensor.tensor_type.name, shape),
                                          gguf_dequantize(tensor.data, tensor.tensor_type), err_msg=tensor.name)
