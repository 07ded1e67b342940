"""Random valid GGUF tensors of every supported type, as a GGUF file stores them: uint8 [rows, bytes per row] (float
types: their values). gguf-py quantizes only the simple types, so blocks are random bytes with finite fp16 scales,
which also reach codes a quantizer rarely writes (Q8_0's -128, every K-quant scale)."""
from __future__ import annotations

import gguf
import numpy as np

FP16_OFFSETS = {"Q8_0": (0,), "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q2_K": (80, 82),
                "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}   # bytes of d (and dmin / m)
FLOAT_TYPES = {"F32": np.float32, "F16": np.float16}


def random_tensor(type_name: str, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """A [rows, cols] tensor of type_name with random contents: floats from a normal distribution, blocks of random
    bytes whose fp16 scales are small normal values."""
    if type_name in FLOAT_TYPES:
        return rng.normal(size=(rows, cols)).astype(FLOAT_TYPES[type_name])
    if type_name == "BF16":
        values = rng.normal(size=(rows, cols)).astype(np.float32)
        return (values.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)          # [rows, 2 * cols]
    block_values, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
    n_blocks = rows * cols // block_values
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    for offset in FP16_OFFSETS[type_name]:
        scales = rng.normal(0, 0.05, size=(n_blocks, 1)).astype(np.float16)
        blocks[:, offset:offset + 2] = scales.view(np.uint8)
    return blocks.reshape(rows, -1)


def reference(raw: np.ndarray, type_name: str, rows: int, cols: int) -> np.ndarray:
    """The gguf package's own dequantization, float32 [rows, cols]."""
    values = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[type_name])
    return np.asarray(values, dtype=np.float32).reshape(rows, cols)
