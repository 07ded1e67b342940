"""Row arithmetic of a generation step, in numpy: products of a step's rows with a weight (affine: the native int8
kernel, or torch in groups of ROW_BLOCK rows so that a row's numbers never depend on its batch), RMSNorm rows, the
half-split RoPE rotation, GPT-2's GELU."""
from __future__ import annotations

import math

import numpy as np
import torch

from model.decoder.blocks import Weight
from model.decoder.int8_blocks import Int8Blocks, int8_blocks_of
from model.decoder.matrices import QuantizedMatrix

ROW_BLOCK = 8              # rows per weight product in a one-token step: a multiple of it (see affine)

StepMatrix = torch.Tensor | QuantizedMatrix | Int8Blocks | tuple   # parts stacked by rows: a tuple


def step_matrix(w: Weight) -> StepMatrix:
    """What affine multiplies by: int8 blocks where the matrix holds int8-coded values and the native kernel runs,
    else the float32 or quantized matrix as it is; parts of a matrix each."""
    if isinstance(w, tuple):
        return tuple(step_matrix(part) for part in w)
    blocks = int8_blocks_of(w)
    return w if blocks is None else blocks


def affine(w: StepMatrix, x: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """Rows x [B, in] through the matrix w [out, in] (and bias): [B, out], as products W @ X^T of ROW_BLOCK rows
    each, the rows padded with zeros to a multiple of ROW_BLOCK. MKL rounds a row's product differently for one row
    (a matrix-vector product) and, on AMD CPUs, for 8 and for 24 rows (on Intel the same for 2 to 40): products of
    one shape make a sequence's numbers the same alone and in any batch. MKL takes 64 ms for SmolLM2's 120 matrices
    and 8 rows (Intel). A quantized matrix is dequantized a chunk at a time for each group of rows. Int8Blocks need
    no padding: the native kernel computes a row the same way in any batch."""
    if isinstance(w, tuple):
        out = np.concatenate([affine(part, x, None) for part in w], axis=1)       # [B, out]
    elif isinstance(w, Int8Blocks):
        out = w.linear(x)                                                          # [B, out]
    else:
        padded = padded_rows(x)                                                        # [B padded, in]
        groups = [torch.from_numpy(padded[g:g + ROW_BLOCK]) for g in range(0, len(padded), ROW_BLOCK)]
        product = torch.cat([w.linear(rows) if isinstance(w, QuantizedMatrix) else torch.mm(w, rows.T).T
                             for rows in groups])                                 # [B padded, out]
        out = product.numpy()[:len(x)]                                             # [B, out]
    return out if bias is None else out + bias


def padded_rows(x: np.ndarray) -> np.ndarray:
    """x [B, ...] with zero rows added up to a multiple of ROW_BLOCK."""
    pad = -x.shape[0] % ROW_BLOCK
    return np.concatenate((x, np.zeros((pad, *x.shape[1:]), x.dtype))) if pad else x


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU with the tanh approximation (GPT-2's), as torch's F.gelu(approximate="tanh")."""
    return np.float32(0.5) * x * (1 + np.tanh(np.float32(math.sqrt(2 / math.pi)) * (x + np.float32(0.044715) * x ** 3)))


def as_numpy(t: torch.Tensor | None) -> np.ndarray | None:
    return None if t is None else t.numpy()




def rms_rows(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """decoder.rms_norm of each row of x [..., D] in numpy float32 (also Qwen3's per-head q/k norm). The mean is
    np.mean's own arithmetic (a float32 sum, then / D) without its Python-level overhead (a third of a norm)."""
    square_mean = np.add.reduce(x * x, axis=-1, keepdims=True)                      # [..., 1]
    square_mean /= np.float32(x.shape[-1])
    square_mean += np.float32(eps)
    return x * (np.float32(1.0) / np.sqrt(square_mean)) * weight


def rotate_half_split(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Half-split RoPE of x [..., hd] with cos, sin [..., hd/2] broadcast against it."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]                                          # [..., hd/2] each
    return np.concatenate((x1 * cos - x2 * sin, x1 * sin + x2 * cos), axis=-1)    # [..., hd]
