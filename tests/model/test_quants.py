"""model.files.quants (the load's dequantization) against the gguf package's own numpy dequantization, the reference
llama.cpp's Python tools use, and model.files.gguf's reader against the stock GGUFReader on the real file."""
import gguf
import numpy as np
import pytest
from gguf.quants import dequantize as gguf_dequantize

from model.files.gguf import _open_reader
from model.files.package import installed_model_path
from model.files.quants import dequantize

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


def test_dequantize_writes_into_a_given_buffer():
    raw = random_blocks("Q4_1", np.random.default_rng(11))
    buffer = np.full((2 * ROWS, COLS), np.nan, dtype=np.float32)
    out = dequantize(raw, "Q4_1", (ROWS, COLS), out=buffer[ROWS:])
    assert np.shares_memory(out, buffer)
    np.testing.assert_array_equal(buffer[ROWS:], gguf_dequantize(raw, gguf.GGMLQuantizationType.Q4_1))
    assert np.isnan(buffer[:ROWS]).all()                              # the rows around it untouched


def half_split_rows(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp stores each head's rows with the RoPE pairs interleaved (row 2i and 2i + 1 of a head are the
    pair (i, i + hd/2)); put them back half-split, one row at a time."""
    hd = weight.shape[0] // n_heads
    out = np.empty_like(weight)
    for h in range(n_heads):
        for i in range(hd // 2):
            out[h * hd + i] = weight[h * hd + 2 * i]
            out[h * hd + hd // 2 + i] = weight[h * hd + 2 * i + 1]
    return out


def test_loaded_fused_matrices_are_the_files_tensors_stacked(lm):
    """The decoder's W_qkv and W_gate_up (dequantized straight into one buffer each) against the gguf package's
    dequantization of the separate tensors, Q and K put back in half-split order row by row."""
    stock = gguf.GGUFReader(installed_model_path())
    tensors = {t.name: t for t in stock.tensors}
    cfg = lm.config

    def reference(name: str) -> np.ndarray:
        t = tensors[name]
        return gguf_dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), int(t.shape[0]))

    for layer in (0, cfg.n_layers - 1):
        block = lm.blocks[layer]
        q = half_split_rows(reference(f"blk.{layer}.attn_q.weight"), cfg.n_heads)
        k = half_split_rows(reference(f"blk.{layer}.attn_k.weight"), cfg.n_kv_heads)
        v = reference(f"blk.{layer}.attn_v.weight")
        np.testing.assert_array_equal(block.attn.w_qkv.numpy(), np.concatenate([q, k, v]))
        gate, up = reference(f"blk.{layer}.ffn_gate.weight"), reference(f"blk.{layer}.ffn_up.weight")
        np.testing.assert_array_equal(block.mlp.w_gate_up.numpy(), np.concatenate([gate, up]))
