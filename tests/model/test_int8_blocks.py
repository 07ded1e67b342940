"""The one-token step's int8 matrices (model/decoder/int8_blocks.py, model/native/int8_linear.c): recovered exactly
from what gguf dequantizes each format into, multiplied within float32 rounding of an independent float64 product,
and a row's numbers the same whatever rows are multiplied with it (what batched == alone rests on)."""
import gguf
import numpy as np
import pytest
import torch

from harness.quant_blocks import random_tensor
from model.decoder.int8_blocks import Int8Blocks, copy_nbytes, int8_blocks_of
from model.decoder.matrices import QuantizedMatrix
from model.native import int8_linear

pytestmark = pytest.mark.skipif(not int8_linear.available(), reason="no C compiler / CPU without AVX2: torch path")

# format -> (4-bit codes stored two a byte, has offsets)
LAYOUTS = {"Q8_0": (False, False), "Q4_0": (True, True), "Q5_0": (False, False), "Q4_1": (True, True),
           "Q5_1": (False, True)}


def gguf_values(kind: str, shape=(96, 320), seed=0) -> np.ndarray:
    """Random float32 quantized to kind and dequantized by the gguf package (the reference)."""
    qtype = gguf.GGMLQuantizationType[kind]
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return gguf.dequantize(gguf.quantize(data, qtype), qtype).astype(np.float32)


@pytest.mark.parametrize("kind", list(LAYOUTS))
def test_each_format_is_recovered_and_multiplies_as_the_dequantized_matrix(kind):
    values = gguf_values(kind)
    blocks = int8_blocks_of(torch.from_numpy(values))
    assert blocks is not None and (blocks.nibbles, blocks.has_offsets) == LAYOUTS[kind]
    assert blocks.nbytes == copy_nbytes(kind, values.shape)
    x = np.random.default_rng(1).standard_normal((5, values.shape[1])).astype(np.float32)
    reference = x.astype(np.float64) @ values.astype(np.float64).T                 # [5, 96]
    got = blocks.linear(x)
    assert got.dtype == np.float32 and got.shape == (5, values.shape[0])
    assert np.abs(got - reference).max() <= 2e-6 * np.abs(reference).max()


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_1"])
@pytest.mark.parametrize("width", [256, 896, 1536, 4864])   # 8 to 152 blocks of 32 values
def test_a_row_gets_the_same_numbers_in_any_batch(kind, width):
    values = gguf_values(kind, (130, width))                                        # 130 outputs: several groups
    blocks = int8_blocks_of(torch.from_numpy(values))
    x = np.random.default_rng(2).standard_normal((25, width)).astype(np.float32)
    together = blocks.linear(x)
    reference = x.astype(np.float64) @ values.astype(np.float64).T                 # [25, 130]
    assert np.abs(together - reference).max() <= 2e-6 * np.abs(reference).max()
    for rows in (slice(0, 1), slice(3, 4), slice(0, 3), slice(2, 6), slice(1, 10), slice(0, 11), slice(0, 12),
                 slice(5, 25)):
        assert np.array_equal(blocks.linear(x[rows]), together[rows]), rows


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_1"])
def test_parts_write_their_columns_of_one_output_with_their_own_numbers(kind):
    """A stacked matrix's parts (q / k / v, gate / up) multiplied into the columns of one wider array: each part's
    columns bit for bit its own product, the columns beside them untouched."""
    parts = [int8_blocks_of(torch.from_numpy(gguf_values(kind, (n, 256), seed=n))) for n in (40, 16, 33)]
    x = np.random.default_rng(4).standard_normal((13, 256)).astype(np.float32)
    out = np.full((13, 40 + 16 + 33 + 7), np.nan, np.float32)
    first = 0
    for part in parts:
        part.linear(x, out[:, first:first + part.shape[0]])
        assert np.array_equal(out[:, first:first + part.shape[0]], part.linear(x))
        first += part.shape[0]
    assert np.isnan(out[:, first:]).all()
    with pytest.raises(ValueError, match="out must be"):
        parts[0].linear(x, out[:, :39])
    with pytest.raises(ValueError, match="out must be"):
        parts[0].linear(x, out[:, :80:2])


@pytest.mark.parametrize("values", [
    np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32),           # plain float32
    gguf_values("F16", (8, 64)),                                                     # float16 values
    np.zeros((8, 48), np.float32),                                                   # width not a multiple of 32
], ids=["float32", "float16", "width-48"])
def test_matrices_not_held_in_these_formats_stay_float32(values):
    assert int8_blocks_of(torch.from_numpy(values)) is None


def test_one_changed_value_keeps_the_matrix_float32():
    values = gguf_values("Q4_1", (16, 64))
    values[7, 40] = np.nextafter(values[7, 40], np.float32(np.inf))                  # no longer scale * code + min
    assert int8_blocks_of(torch.from_numpy(values)) is None


def test_a_q8_0_matrix_kept_quantized_is_shared_not_copied():
    data = np.random.default_rng(4).standard_normal((64, 128)).astype(np.float32)
    raw = gguf.quantize(data, gguf.GGMLQuantizationType.Q8_0)
    matrix = QuantizedMatrix(raw, "Q8_0", (64, 128))
    blocks = int8_blocks_of(matrix)
    assert isinstance(blocks, Int8Blocks) and blocks.matrix is matrix.int8
    assert matrix.nbytes == blocks.nbytes == 64 * 128 + 64 * 4 * 4                  # the codes once, float32 scales
    x = np.random.default_rng(5).standard_normal((2, 128)).astype(np.float32)
    reference = x.astype(np.float64) @ gguf.dequantize(raw, gguf.GGMLQuantizationType.Q8_0).astype(np.float64).T
    assert np.abs(blocks.linear(x) - reference).max() <= 2e-6 * np.abs(reference).max()


def test_a_matrix_kept_in_the_kernels_layout_is_shared_and_others_left_to_the_torch_path():
    rng = np.random.default_rng(5)
    for type_name in ("Q4_0", "Q5_0", "Q4_K"):
        matrix = QuantizedMatrix(random_tensor(type_name, 16, 256, rng), type_name, (16, 256))
        assert int8_blocks_of(matrix).matrix is matrix.int8, type_name                   # the same codes, not a copy
    for type_name in ("Q6_K", "Q3_K", "F16"):                                             # per-16 scales, floats
        assert int8_blocks_of(QuantizedMatrix(random_tensor(type_name, 16, 256, rng), type_name, (16, 256))) is None


def test_wrong_shapes_are_refused():
    blocks = int8_blocks_of(torch.from_numpy(gguf_values("Q8_0", (8, 64))))
    with pytest.raises(ValueError):
        blocks.linear(np.zeros((2, 32), np.float32))


def fma32(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 fma(a, b, acc), emulated in float64 (a product of two float32 is exact there), rounded once."""
    return (acc.astype(np.float64) + a.astype(np.float64) * b.astype(np.float64)).astype(np.float32)


def documented_order(x: np.ndarray, codes: np.ndarray, scales: np.ndarray, offsets: np.ndarray | None) -> np.ndarray:
    """x [M, K] @ W^T for W[n, k] = scales[n, k / 32] * codes[n, k] (+ offsets[n, k / 32]) as int8_linear.c documents
    it, float32 throughout: acc = 0; per block of 32 values of k, s = 0, s = fma(codes[n, k], x[m, k], s) in order
    of k, then acc = fma(scale, s, acc) (and, with offsets, acc = fma(offset, the block's sum of x, acc), the sum
    taken in order from 0)."""
    acc = np.zeros((x.shape[0], codes.shape[0]), np.float32)                          # [M, N]
    for b in range(codes.shape[1] // 32):
        block = slice(32 * b, 32 * b + 32)
        s = np.zeros_like(acc)
        for k in range(block.start, block.stop):
            s = fma32(s, x[:, k, None], codes[None, :, k])
        acc = fma32(acc, scales[None, :, b], s)
        if offsets is not None:
            x_sum = np.zeros(x.shape[0], np.float32)
            for k in range(block.start, block.stop):
                x_sum = x_sum + x[:, k]
            acc = fma32(acc, offsets[None, :, b], x_sum[:, None])
    return acc


def made_order(x: np.ndarray, codes: np.ndarray, scales: np.ndarray, offsets: np.ndarray | None) -> np.ndarray:
    """The made-weights sequence int8_linear.c documents for a full pass: w[n, k] = codes * scale (+ offset) rounded
    once to float32 (an fma), then acc = fma(x[m, k], w[n, k], acc) in order of k from 0."""
    per_value = np.repeat(scales, 32, axis=1).astype(np.float64)                       # [N, K]
    made = codes.astype(np.float64) * per_value
    if offsets is not None:
        made += np.repeat(offsets, 32, axis=1)
    w = made.astype(np.float32)                                                        # [N, K], one rounding
    acc = np.zeros((x.shape[0], codes.shape[0]), np.float32)                          # [M, N]
    for k in range(codes.shape[1]):
        acc = fma32(acc, x[:, k, None], w[None, :, k])
    return acc


@pytest.mark.parametrize("made", [False, True])
@pytest.mark.parametrize("nibbles, with_offsets", [(False, False), (True, True), (False, True), (True, False)])
def test_every_output_is_the_documented_sequence_of_multiply_adds(nibbles, with_offsets, made):
    """Every tile shape of both instruction sets' paths and both sequences (the step's block sums; the full pass's
    made weights), rows 1 to 30: tiles of up to 6 or 12 rows, 1 to 8 groups taken together, a last group padded,
    against the float64 emulation; the AVX2 path again in test_native_kernels.test_the_avx2_paths_pass_the_kernel_tests.
    Scales are float16 values, as in GGUF (then code * scale is exact and the made weights are gguf's)."""
    rng = np.random.default_rng(6)
    n, k = 16 * 9 + 5, 320                                                             # 10 groups, the last padded
    codes = rng.integers(0, 16, (n, k)) if nibbles else rng.integers(-128, 128, (n, k))
    scales = rng.standard_normal((n, k // 32)).astype(np.float16).astype(np.float32)
    offsets = rng.standard_normal((n, k // 32)).astype(np.float16).astype(np.float32) if with_offsets else None
    blocks = codes.reshape(n, k // 32, 32)
    stored = (blocks[:, :, :16] | blocks[:, :, 16:] << 4).astype(np.uint8).reshape(n, k // 2) if nibbles else \
        codes.astype(np.int8)                                   # GGUF's Q4 order: byte j holds codes j and j + 16
    matrix = int8_linear.Int8Matrix(torch.from_numpy(stored), torch.from_numpy(scales),
                                    None if offsets is None else torch.from_numpy(offsets), nibbles)
    x = rng.standard_normal((30, k)).astype(np.float32)
    expected = (made_order if made else documented_order)(x, codes.astype(np.float32), scales, offsets)
    for rows in (1, 2, 3, 4, 5, 7, 8, 10, 13, 25, 30):
        assert np.array_equal(matrix(x[:rows], made=made), expected[:rows]), rows
    assert np.array_equal(matrix(x[4:5], made=made), expected[4:5])


def test_the_made_weights_are_ggufs_dequantized_values():
    """A Q8_0 / Q4_1 matrix's full-pass product equals the float32 product of gguf's own dequantization taken in
    order of k (one row times an identity-like x reads the weights themselves back)."""
    for kind in ("Q8_0", "Q4_1"):
        values = gguf_values(kind, (40, 64))
        blocks = int8_blocks_of(torch.from_numpy(values))
        assert np.array_equal(blocks.linear(np.eye(64, dtype=np.float32), made=True), values.T)


def test_a_float32_matrix_is_recovered_once_and_its_copy_shared():
    w = torch.from_numpy(gguf_values("Q4_1", (64, 128)))
    assert int8_blocks_of(w) is int8_blocks_of(w)                                   # the step and the forward share it
    plain = torch.from_numpy(np.random.default_rng(5).standard_normal((8, 64)).astype(np.float32))
    assert int8_blocks_of(plain) is None and int8_blocks_of(plain) is None


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_1"])
def test_the_forward_multiplies_a_coded_matrix_natively_up_to_native_rows(kind, monkeypatch):
    from model.decoder import blocks

    monkeypatch.setattr(blocks, "kernel_threads", torch.get_num_threads)             # torch on every kernel thread
    values = gguf_values(kind, (160, 576))
    w = torch.from_numpy(values)
    bias = torch.from_numpy(np.random.default_rng(6).standard_normal(160).astype(np.float32))
    for rows in (1, 7, blocks.NATIVE_ROWS, blocks.NATIVE_ROWS + 1, 300):
        x = torch.from_numpy(np.random.default_rng(rows).standard_normal((rows, 576)).astype(np.float32))
        got = blocks.linear(x, w, bias)                                              # [rows, 160]
        reference = x.double() @ w.double().T + bias.double()
        assert got.shape == (rows, 160)
        assert (got.double() - reference).abs().max() <= 2e-6 * reference.abs().max(), rows
        native = blocks.runs_natively(w, rows)
        assert native == (rows <= blocks.NATIVE_ROWS)
        if native:                                                                  # each row as if alone
            assert torch.equal(blocks.linear(x[3:4] if rows > 3 else x[:1], w, bias), got[3:4] if rows > 3 else got[:1])
            assert torch.equal(blocks.linear(x[0], w, bias), got[0])                 # one vector: [in] -> [out]
    plain = torch.from_numpy(np.random.default_rng(7).standard_normal((16, 64)).astype(np.float32))
    assert not blocks.runs_natively(plain, 4)


def test_with_torch_on_fewer_threads_than_the_kernel_the_forward_multiplies_natively_at_any_rows(monkeypatch):
    from model.decoder import blocks

    monkeypatch.setattr(blocks, "kernel_threads", lambda: torch.get_num_threads() + 1)   # as the app: torch one below
    w = torch.from_numpy(gguf_values("Q4_1", (96, 320)))
    x = torch.from_numpy(np.random.default_rng(8).standard_normal((300, 320)).astype(np.float32))
    assert blocks.runs_natively(w, 300) and blocks.runs_natively(w, 1)
    got = blocks.linear(x, w)                                                        # [300, 96]
    reference = x.double() @ w.double().T
    assert (got.double() - reference).abs().max() <= 2e-6 * reference.abs().max()
    assert torch.equal(blocks.linear(x[299:], w), got[299:])                         # the last row as if alone
