"""What a generation step reads, made once per model and shared by every generation (steps_for): each block's
matrices as the step multiplies them (int8 blocks where the native kernel runs), norms and biases as numpy arrays,
the LM head; and the blocks as one native decoder step where the model is Llama-like throughout
(native_decoder_step)."""
from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from model.decoder.blocks import SwiGLU
from model.decoder.embedding import DenseEmbedding
from model.decoder.int8_blocks import Int8Blocks
from model.decoder.matrices import QuantizedMatrix
from model.decoder.rope import rope_cos_sin
from model.decoder.step_products import StepMatrix, affine, as_numpy, padded_rows, rms_rows, step_matrix
from model.native import attention as native_attention
from model.native import decoder_step as native_step
from model.native.decoder_step import DecoderStep

HEAD_CHUNK_ROWS = 1024     # LM-head rows converted to float32 at a time (2.4 MB)

@dataclass(frozen=True)
class NormWeights:
    """numpy views of one norm (see model.decoder.blocks.Norm)."""

    kind: str
    weight: np.ndarray            # [D]
    bias: np.ndarray | None       # [D]
    eps: float

    @classmethod
    def of(cls, norm) -> NormWeights:
        return cls(norm.kind, norm.weight.numpy(), as_numpy(norm.bias), norm.eps)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The norm of each row of x [..., D] in numpy float32 (the same formula as the decoder's)."""
        if self.kind == "rmsnorm":
            return rms_rows(x, self.weight, self.eps)
        centred = x - x.mean(-1, keepdims=True)
        return rms_rows(centred, self.weight, self.eps) + self.bias


@dataclass(frozen=True)
class BlockWeights:
    """One block's weights for the one-token step: matrices as the model holds them, norms and biases as numpy."""

    attn_norm: NormWeights
    qkv: StepMatrix               # [(H + 2 KV) hd, D]
    qkv_bias: np.ndarray | None   # [(H + 2 KV) hd]
    q_norm: np.ndarray | None     # [hd] per-head RMSNorm weights (Qwen3)
    k_norm: np.ndarray | None     # [hd]
    o: StepMatrix                 # [D, H hd]
    o_bias: np.ndarray | None     # [D]
    mlp_norm: NormWeights
    up: StepMatrix                # [2 F, D] gate and up stacked (SwiGLU), or [F, D] up (GELU)
    up_bias: np.ndarray | None    # [F] (GELU)
    down: StepMatrix              # [D, F]
    down_bias: np.ndarray | None  # [D]
    gated: bool                   # SwiGLU (True) or GELU

    @classmethod
    def of(cls, block) -> BlockWeights:
        attn, mlp = block.attn, block.mlp
        gated = isinstance(mlp, SwiGLU)
        return cls(NormWeights.of(block.attn_norm), step_matrix(attn.w_qkv), as_numpy(attn.b_qkv),
                   as_numpy(attn.q_norm), as_numpy(attn.k_norm), step_matrix(attn.w_o), as_numpy(attn.b_o),
                   NormWeights.of(block.mlp_norm), step_matrix(mlp.w_gate_up if gated else mlp.w_up),
                   None if gated else as_numpy(mlp.b_up), step_matrix(mlp.w_down),
                   None if gated else as_numpy(mlp.b_down), gated)


class StepWeights:
    """What a one-token step reads, made once per model and shared by every generation (see steps_for): the blocks,
    the final norm, GPT-2's position table and the LM head. A matrix holding int8-coded values (Q8_0 kept quantized,
    or float32 dequantized from Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1) is multiplied as int8 by the native kernel
    (model.decoder.int8_blocks); others as they are. Without the kernel, an LM head kept as Q8_0 is laid out
    block-major: each chunk of rows is then nb contiguous [chunk, 32] int8 slabs, converted and multiplied without a
    strided pass."""

    all_native: bool              # every matrix multiplied by the native int8 kernel (see feed_together)
    native_blocks: DecoderStep | None   # all blocks in one native call (RMSNorm / RoPE / SwiGLU models)
    ROPE_ROWS_MIN = 1024          # positions of the first shared RoPE table (it doubles when a cache needs more)

    def __init__(self, lm):
        cfg = lm.config
        self._rope_shape = (cfg.head_dim, cfg.rope_theta, lm.rope_factors) if cfg.uses_rope else None
        self._rope: tuple[np.ndarray, np.ndarray] | None = None                     # cos, sin [P, hd/2]
        self._rope_lock = threading.Lock()
        self.blocks = [BlockWeights.of(block) for block in lm.blocks]
        self.out_norm = NormWeights.of(lm.out_norm)
        self.positions = as_numpy(lm.position_embedding)                                # [P, D] (GPT-2) or None
        head = lm.lm_head.weight if isinstance(lm.lm_head, DenseEmbedding) else lm.lm_head   # [V, D]
        self.head = step_matrix(head)
        matrices = [m for b in self.blocks for m in (b.qkv, b.o, b.up, b.down)] + [self.head]
        self.all_native = native_attention.available() and all(
            isinstance(part, Int8Blocks) for m in matrices for part in (m if isinstance(m, tuple) else (m,)))
        self.native_blocks = native_decoder_step(self.blocks, lm) if self.all_native else None
        self.head_blocks = self.head_scales = None
        if isinstance(self.head, QuantizedMatrix) and self.head.format.name == "Q8_0":
            self.head_blocks = head.values.transpose(0, 1).contiguous()                   # [nb, V, 32] int8
            self.head_scales = head.scale[..., 0].T.contiguous()                          # [nb, V] float32

    def rope_rows(self, n: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        """cos and sin [n, hd/2] of positions 0..n-1 (lm.rope_tables' numbers), views of one table shared by every
        cache of the model (never written); None, None without RoPE. Computed per cache, they were ~6 torch
        operations, each handing the GIL on: a class's joiners each waited for it behind thirty pages' scripts."""
        if self._rope_shape is None:
            return None, None
        with self._rope_lock:
            if self._rope is None or len(self._rope[0]) < n:
                size = max(n, self.ROPE_ROWS_MIN, 2 * len(self._rope[0]) if self._rope else 0)
                self._rope = tuple(t.numpy() for t in rope_cos_sin(range(size), *self._rope_shape))
            cos, sin = self._rope
        return cos[:n], sin[:n]

    def logits(self, xn: np.ndarray) -> np.ndarray:
        """Next-token logits [B, V] float32 of final-normed rows xn [B, D]."""
        if self.head_blocks is None:
            return affine(self.head, xn, None)
        # Q8_0: logit = sum over 32-value blocks b of scale_b * (int8 values_b . x_b): the scales are applied
        # after the block dot products, so the int8 -> float32 copy is the only pass over the table.
        n_blocks, vocab, block = self.head_blocks.shape
        rows = padded_rows(xn)                                                            # [B padded, D]
        x_blocks = torch.from_numpy(rows.reshape(len(rows), n_blocks, block)).permute(1, 2, 0)  # [nb, 32, Bp]
        out = torch.empty(vocab, len(rows))                                           # [V, Bp]
        buffer = torch.empty(n_blocks, HEAD_CHUNK_ROWS, block)
        for first in range(0, vocab, HEAD_CHUNK_ROWS):
            chunk = slice(first, first + HEAD_CHUNK_ROWS)
            buf = buffer[:, :len(out[chunk])]
            buf.copy_(self.head_blocks[:, chunk])                                     # [nb, c, 32] float32
            dots = torch.matmul(buf, x_blocks)                                        # [nb, c, Bp]
            torch.sum(dots * self.head_scales[:, chunk, None], dim=0, out=out[chunk])  # [c, Bp]
        return out.T.numpy()[:len(xn)]


_STEP_WEIGHTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_STEP_WEIGHTS_LOCK = threading.Lock()


def steps_for(lm) -> StepWeights:
    """The model's StepWeights, made on first use and kept as long as the model."""
    with _STEP_WEIGHTS_LOCK:
        weights = _STEP_WEIGHTS.get(lm)
        if weights is None:
            weights = _STEP_WEIGHTS[lm] = StepWeights(lm)
        return weights


def native_decoder_step(blocks: Sequence[BlockWeights], lm) -> DecoderStep | None:
    """The blocks as one native call where the model is RMSNorm / rotary / SwiGLU throughout (Llama, Qwen2, Qwen3)
    with every matrix Int8Blocks, or q / k / v and gate / up Int8Blocks parts (a kept-quantized model's: each part
    fills its columns in place); None otherwise (GPT-2: the numpy step)."""
    cfg = lm.config
    if lm.position_embedding is not None or lm.rope_tables(range(1))[0] is None or not all(
            b.gated and b.attn_norm.kind == b.mlp_norm.kind == "rmsnorm" and b.up_bias is None and
            b.down_bias is None and all(_int8_parts(m) is not None for m in (b.qkv, b.o, b.up, b.down))
            for b in blocks):
        return None
    return DecoderStep([native_step.BlockArrays(
        _int8_parts(b.qkv), b.o.matrix, _int8_parts(b.up), b.down.matrix, b.attn_norm.weight, b.attn_norm.eps,
        b.mlp_norm.weight, b.mlp_norm.eps, b.qkv_bias, b.o_bias, b.q_norm, b.k_norm, cfg.norm_eps) for b in blocks],
        cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff)


def _int8_parts(m: StepMatrix):
    """The native kernel's view of m (Int8Blocks) or a tuple of its parts' (every part Int8Blocks), else None."""
    if isinstance(m, Int8Blocks):
        return m.matrix
    if isinstance(m, tuple) and len(m) <= native_step.MAX_PARTS and all(isinstance(p, Int8Blocks) for p in m):
        return tuple(p.matrix for p in m)
    return None
