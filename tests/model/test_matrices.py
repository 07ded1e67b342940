"""model.decoder.matrices: a QuantizedMatrix (GGUF blocks kept in memory) multiplies, looks rows up and dequantizes
like the gguf package's float32 matrix, for every supported type, over products split into whole and partial
chunks, and from many threads at once; DenseMatrix has the same interface."""
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from harness.quant_blocks import random_tensor, reference
from model.decoder import bitplanes, matrices
from model.decoder.matrices import DenseMatrix, QuantizedMatrix, matrix_from_gguf
from model.decoder.step_products import affine
from model.files.quants import SUPPORTED_TYPES, row_bytes
from model.native import int8_linear

ROWS, COLS = 37, 512             # 7 chunks of 5 rows and a partial one of 2
CHUNK_ROWS = 5


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(matrices, "CHUNK_VALUES", CHUNK_ROWS * COLS)


@pytest.fixture(scope="module", params=SUPPORTED_TYPES)
def case(request):
    """(type name, raw tensor, the gguf package's float32 matrix)."""
    type_name = request.param
    raw = random_tensor(type_name, ROWS, COLS, np.random.default_rng(len(type_name) + ord(type_name[-1])))
    return type_name, raw, reference(raw, type_name, ROWS, COLS)


def relative_error(ours: torch.Tensor, expected: torch.Tensor) -> float:
    return float((ours.double() - expected.double()).abs().max() / expected.double().abs().max())


def assert_bit_for_bit(ours: np.ndarray, expected: np.ndarray, type_name: str) -> None:
    """Every value's float32 bits equal; only Q4_0 held in the int8 kernel's layout (codes 0..15 plus an offset of
    -8 d) may give +0 where gguf's d * (q - 8) is -0 (a negative d)."""
    same = ours.view(np.uint32) == expected.view(np.uint32)
    if type_name == "Q4_0":
        same |= (ours == 0) & (expected == 0)
    assert same.all(), f"{(~same).sum()} values differ, e.g. {ours[~same][:3]} vs {expected[~same][:3]}"


def test_dequantized_is_the_gguf_matrix_bit_for_bit(case):
    type_name, raw, expected = case
    ours = QuantizedMatrix(raw, type_name, (ROWS, COLS)).dequantized()
    assert ours.dtype == torch.float32 and ours.shape == (ROWS, COLS)
    assert_bit_for_bit(ours.numpy(), expected, type_name)


def test_rows_are_the_gguf_rows_bit_for_bit(case):
    type_name, raw, expected = case
    for ids in (torch.tensor([0, CHUNK_ROWS, ROWS - 1, 3, 3]), torch.tensor([8, 15, 16, 23, 9])):  # both nibbles
        ours = QuantizedMatrix(raw, type_name, (ROWS, COLS)).rows(ids)
        assert_bit_for_bit(ours.numpy(), expected[ids.numpy()], type_name)


def test_rows_of_a_slice_are_the_gguf_rows_bit_for_bit(case):
    """dequantize_rows over a slice that starts and ends inside a group of 16 rows of the kernel's layout."""
    type_name, raw, expected = case
    out = torch.empty(13, COLS)
    QuantizedMatrix(raw, type_name, (ROWS, COLS)).dequantize_rows(slice(9, 22), out)
    assert_bit_for_bit(out.numpy(), expected[9:22], type_name)


def test_linear_equals_f_linear_with_the_dequantized_matrix(case):
    type_name, raw, expected = case
    matrix = QuantizedMatrix(raw, type_name, (ROWS, COLS))
    weight = torch.from_numpy(expected)
    rng = torch.Generator().manual_seed(0)
    x, bias = torch.randn(6, COLS, generator=rng), torch.randn(ROWS, generator=rng)
    for args in ((x,), (x, bias), (x[2],), (x[2], bias), (x[:1],), (x.view(2, 3, COLS), bias)):
        ours = matrix.linear(*args)
        assert ours.shape == F.linear(*args[:1], weight).shape and ours.dtype == torch.float32
        assert relative_error(ours, F.linear(args[0], weight, *args[1:])) < 1e-5


def test_dense_matrix_has_the_same_interface():
    weight = torch.randn(ROWS, COLS)
    matrix = DenseMatrix(weight)
    x = torch.randn(4, COLS)
    assert matrix.shape == (ROWS, COLS) and matrix.nbytes == ROWS * COLS * 4
    torch.testing.assert_close(matrix.linear(x), x @ weight.T)
    assert torch.equal(matrix.rows(torch.tensor([2, 0])), weight[[2, 0]])
    assert torch.equal(matrix.dequantized(), weight)


def other_threads_cpu_s() -> float:
    """CPU seconds used so far by every thread of this process but the calling one (from /proc)."""
    me, ticks = threading.get_native_id(), 0
    for task in os.listdir("/proc/self/task"):
        if int(task) != me:
            fields = Path(f"/proc/self/task/{task}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])                              # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads each thread's CPU time from /proc")
def test_looking_rows_up_leaves_torchs_thread_team_idle(case):
    """A generation step looks its tokens up between native kernels that use every core: torch's indexing of a few
    rows woke its OpenMP team, whose threads then spun for ms after each call (~0.2 CPU-s over these 200 calls)."""
    type_name, raw, _ = case
    tables = [QuantizedMatrix(raw, type_name, (ROWS, COLS)), DenseMatrix(torch.randn(1024, COLS))]
    ids = torch.tensor([0, 7, 3, 3, 11, 20, 5, 30, 31, 1])
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.ones(1 << 20).sum()                                 # the team exists and has just worked
        before = other_threads_cpu_s()
        for _ in range(100):
            for table in tables:
                table.rows(ids)
                time.sleep(0.001)
        assert other_threads_cpu_s() - before < 0.08
    finally:
        torch.set_num_threads(threads)


# Bytes a matrix in the int8 kernel's layout holds per 32 values, worked by hand: its codes (4-bit two a byte, 5- and
# 8-bit a byte each), a float32 scale, and a float32 offset where the format has one (Q4_0 takes -8 d as its offset).
KERNEL_BYTES_PER_32 = {"Q8_0": 32 + 4, "Q4_0": 16 + 4 + 4, "Q4_1": 16 + 4 + 4, "Q5_0": 32 + 4, "Q5_1": 32 + 4 + 4,
                       "Q4_K": 16 + 4 + 4, "Q5_K": 32 + 4 + 4}


def test_quantized_matrices_hold_about_their_file_size():
    """Bit planes and unpacked scales at most a quarter more than the file's blocks; in the int8 kernel's layout
    (where it runs), the bytes worked out by hand, rows padded to whole groups of 16."""
    for type_name in SUPPORTED_TYPES:
        raw = random_tensor(type_name, ROWS, COLS, np.random.default_rng(1))
        matrix = QuantizedMatrix(raw, type_name, (ROWS, COLS))
        assert matrix.shape == (ROWS, COLS)
        assert (matrix.int8 is not None) == (type_name in KERNEL_BYTES_PER_32 and int8_linear.available())
        if matrix.int8 is not None:
            assert matrix.nbytes == -(-ROWS // 16) * 16 * COLS // 32 * KERNEL_BYTES_PER_32[type_name], type_name
        else:
            assert row_bytes(type_name, COLS) * ROWS <= matrix.nbytes <= 1.25 * raw.nbytes, type_name


def test_q8_0_keeps_the_int8_values_and_float32_scales_of_the_lm_head():
    type_name, rows = "Q8_0", 3
    raw = random_tensor(type_name, rows, COLS, np.random.default_rng(2))
    matrix = QuantizedMatrix(raw, type_name, (rows, COLS))
    blocks = raw.reshape(rows, COLS // 32, 34)
    assert matrix.values.dtype == torch.int8 and matrix.values.shape == (rows, COLS // 32, 32)
    np.testing.assert_array_equal(matrix.values.numpy(), blocks[..., 2:].view(np.int8))
    np.testing.assert_array_equal(matrix.scale.numpy(), blocks[..., :2].copy().view(np.float16).astype(np.float32))


def test_threads_sharing_one_matrix_get_what_each_gets_alone():
    raw = random_tensor("Q4_K", ROWS, COLS, np.random.default_rng(3))
    matrix = QuantizedMatrix(raw, "Q4_K", (ROWS, COLS))
    inputs = [torch.randn(t % 3 + 1, COLS, generator=torch.Generator().manual_seed(t)) for t in range(6)]
    alone = [matrix.linear(x) for x in inputs]
    together: dict[int, list[torch.Tensor]] = {t: [] for t in range(len(inputs))}
    start = threading.Barrier(len(inputs))

    def work(t: int) -> None:
        start.wait()
        for _ in range(20):
            together[t].append(matrix.linear(inputs[t]))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for t, results in together.items():
        assert len(results) == 20
        for result in results:
            torch.testing.assert_close(result, alone[t], rtol=1e-6, atol=0)


def test_a_product_in_inference_mode_then_one_outside_in_the_same_thread():
    """The thread's buffers are made inside inference mode the first time (the app's forward); later products
    outside it (a test, a plain call) write into them in place all the same."""
    def in_a_fresh_thread() -> None:
        raw = random_tensor("Q4_0", ROWS, COLS, np.random.default_rng(4))
        matrix = QuantizedMatrix(raw, "Q4_0", (ROWS, COLS))
        x = torch.randn(2, COLS, generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():
            inside = matrix.linear(x).clone()
        results.append((inside, matrix.linear(x), matrix.rows(torch.tensor([0, 1]))))

    results: list = []
    thread = threading.Thread(target=in_a_fresh_thread)
    thread.start()
    thread.join()
    assert results, "the product outside inference mode raised"
    inside, outside, _ = results[0]
    torch.testing.assert_close(outside, inside, rtol=0, atol=0)


@pytest.mark.parametrize("bits", sorted(bitplanes.WIDTHS))
def test_bit_planes_unpack_what_they_packed(bits):
    codes = torch.randint(0, 1 << bits, (5, COLS), dtype=torch.uint8)
    planes = bitplanes.pack(codes, bits)
    assert sum(p.numel() for p in planes) == codes.numel() * bits // 8
    out = torch.empty_like(codes)
    bitplanes.unpack([p[1:4] for p in planes], bits, out[1:4], torch.empty(2 * 3 * COLS, dtype=torch.uint8))
    assert torch.equal(out[1:4], codes[1:4])


def test_matrix_from_gguf_keeps_quantized_only_when_asked():
    raw = random_tensor("Q5_0", ROWS, COLS, np.random.default_rng(4))
    expected = reference(raw, "Q5_0", ROWS, COLS)
    kept = matrix_from_gguf(raw, "Q5_0", (ROWS, COLS), keep_quantized=True)
    dense = matrix_from_gguf(raw, "Q5_0", (ROWS, COLS), keep_quantized=False)
    assert isinstance(kept, QuantizedMatrix) and isinstance(dense, DenseMatrix)
    np.testing.assert_array_equal(dense.weight.numpy(), expected)
    floats = random_tensor("F32", ROWS, COLS, np.random.default_rng(5))
    assert isinstance(matrix_from_gguf(floats, "F32", (ROWS, COLS), keep_quantized=True), DenseMatrix)


def test_unknown_types_and_wrong_sizes_are_refused():
    with pytest.raises(ValueError, match=r"'IQ4_XS'.*Q8_0"):
        QuantizedMatrix(np.zeros((ROWS, 136), np.uint8), "IQ4_XS", (ROWS, COLS))
    raw = random_tensor("Q6_K", ROWS, COLS, np.random.default_rng(6))
    with pytest.raises(ValueError, match="do not hold"):
        QuantizedMatrix(raw, "Q6_K", (ROWS + 1, COLS))


def test_nbytes_as_planned(case):
    """quantized_nbytes (what the loader budgets before loading) is what the matrix holds."""
    type_name, raw, _ = case
    matrix = QuantizedMatrix(raw, type_name, (ROWS, COLS))
    assert matrices.quantized_nbytes(type_name, (ROWS, COLS)) == matrix.nbytes


def test_a_step_row_gets_the_same_numbers_alone_and_among_24_rows(case):
    """A generation step's product of a row (step_products.affine: padded to a multiple of 8 rows, multiplied 8 at a
    time) does not depend on the other rows: a sequence gets the same numbers alone and in any batch (MKL on an AMD
    CPU rounds a row differently among 8 and among 24 rows)."""
    type_name, raw, expected = case
    matrix = QuantizedMatrix(raw, type_name, (ROWS, COLS))
    x = torch.randn(24, COLS, generator=torch.Generator().manual_seed(4)).numpy()     # [rows, in]
    together = affine(matrix, x, None)                                                # [24, out]
    for i in (0, 7, 13, 23):
        np.testing.assert_array_equal(together[i], affine(matrix, x[i:i + 1], None)[0])
    np.testing.assert_array_equal(together[8:16], affine(matrix, x[8:16], None))
    reference_product = x.astype(np.float64) @ expected.astype(np.float64).T
    assert relative_error(torch.from_numpy(together), torch.from_numpy(reference_product)) < 1e-5
