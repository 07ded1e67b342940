"""model.files.quants for every supported GGUF type against the gguf package's numpy dequantization (the reference
llama.cpp's Python tools use): bit for bit, on random valid blocks and on blocks gguf-py quantized itself, over
several row counts so that the last step of a tensor is a partial one."""
import gguf
import numpy as np
import pytest

from harness.quant_blocks import random_tensor, reference
from model.files import quants
from model.files.quants import SUPPORTED_TYPES, dequantize, quant_format, row_bytes

COMMON_DOWNLOADS = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
GGUF_QUANTIZES = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "BF16")
COLS = 512                       # 16 simple blocks or 2 K-quant super-blocks per row


@pytest.fixture(autouse=True)
def small_steps(monkeypatch):
    """Three rows' worth of values per step: 1, 3, 7 and 10 rows end on a whole, a single or a partial step."""
    monkeypatch.setattr(quants, "CHUNK_VALUES", 3 * COLS)


def assert_bit_identical(ours: np.ndarray, expected: np.ndarray) -> None:
    assert ours.dtype == np.float32 and ours.shape == expected.shape
    assert not np.isnan(expected).any()
    np.testing.assert_array_equal(ours.view(np.uint32), expected.view(np.uint32))   # -0.0 and +0.0 differ too


def test_every_type_of_the_common_downloads_is_supported():
    assert SUPPORTED_TYPES == COMMON_DOWNLOADS


@pytest.mark.parametrize("type_name", COMMON_DOWNLOADS)
@pytest.mark.parametrize("rows", [1, 3, 7, 10])
def test_random_blocks_dequantize_like_the_gguf_package(type_name, rows):
    raw = random_tensor(type_name, rows, COLS, np.random.default_rng(rows))
    assert_bit_identical(dequantize(raw, type_name, (rows, COLS)), reference(raw, type_name, rows, COLS))


@pytest.mark.parametrize("type_name", GGUF_QUANTIZES)
def test_blocks_gguf_quantized_dequantize_like_the_gguf_package(type_name):
    values = np.random.default_rng(4).normal(size=(7, COLS)).astype(np.float32)
    raw = gguf.quants.quantize(values, gguf.GGMLQuantizationType[type_name])
    ours = dequantize(raw, type_name, (7, COLS))
    assert_bit_identical(ours, reference(raw, type_name, 7, COLS))
    assert np.abs(ours - values).max() <= 0.1 * np.abs(values).max()                  # and near the originals


def test_row_bytes_and_block_sizes_are_gguf_s():
    for type_name in SUPPORTED_TYPES:
        block_values, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
        fmt = quant_format(type_name)
        assert (fmt.block_values, fmt.block_bytes) == (block_values, block_bytes)
        assert row_bytes(type_name, 3 * 256) == 3 * 256 // block_values * block_bytes
    with pytest.raises(ValueError, match="multiple of 256"):
        row_bytes("Q4_K", 896)


@pytest.mark.parametrize("call", [lambda: quant_format("IQ2_XXS"), lambda: row_bytes("IQ2_XXS", 256),
                                  lambda: dequantize(np.zeros(66, np.uint8), "IQ2_XXS", (1, 256))])
def test_an_unknown_type_is_refused_naming_it_and_the_supported_ones(call):
    with pytest.raises(ValueError, match=r"'IQ2_XXS'.*F32, F16, BF16, Q8_0.*Q6_K"):
        call()


def test_a_tensor_of_the_wrong_size_is_refused():
    raw = random_tensor("Q4_K", 2, COLS, np.random.default_rng(0))
    with pytest.raises(ValueError, match="do not hold"):
        dequantize(raw[:, :-144], "Q4_K", (2, COLS))
