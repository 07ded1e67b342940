"""The decoder's blocks over a batch of same-length variants of one text [B, T, D], in plain torch: activation
patching's patched runs, occlusion's occluded texts, and gradient x input (differentiable when the input asks for
gradients).

The decoder's own pass runs one sequence [T, D] with its attention in a native kernel; here every tensor has a batch
axis and the attention is torch's, with the same maths: the blocks' own norms and weights, the forward's linear()
(F.linear on the dense weights when gradients are wanted: the native kernel cannot be differentiated), the same RoPE
tables and mask, softmax in float32. Batches are cut to keep the scores within BATCH_BYTES. Variants that agree on
their first n positions can hold only the later rows, attending to the first n positions' keys and values given
once (causal: those rows are the same in every variant).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from model.decoder.blocks import Block, dense, linear, rms_norm
from model.decoder.core import Decoder, Positions

BATCH_BYTES = 64 * 2**20   # float32 scores (and MLP activations) of one batch of variants


@dataclass(frozen=True)
class HeadPatch:
    """Heads whose mixed values (pattern @ v, before the output projection) are replaced, per variant."""

    heads: torch.Tensor    # [B, H] bool: which heads of variant b take the source's values
    source: torch.Tensor   # [H, T, hd] the values they take (the clean run's)


def project(x: torch.Tensor, w, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., in] @ w^T (+ bias): the forward's linear(), or F.linear on the dense weight under autograd."""
    if x.requires_grad:
        return F.linear(x, dense(w), bias)
    return linear(x, w, bias)


KeysValues = tuple[torch.Tensor, torch.Tensor]   # rotated keys and values [KV, n, hd] of positions 0..n-1


def block_forward(lm: Decoder, block: Block, x: torch.Tensor, pos: Positions, patch: HeadPatch | None = None,
                  past: KeysValues | None = None) -> tuple[torch.Tensor, torch.Tensor, KeysValues]:
    """One block over x [B, T, D] holding positions n..n+T-1 after the n positions whose keys and values every
    variant shares (past; none: n = 0): (its output [B, T, D], every head's mixed values [B, H, T, hd], the rotated
    keys and the values of x's rows [B, KV, T, hd] each)."""
    cfg, attn = lm.config, block.attn
    B, T, _ = x.shape
    H, KV, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    n = 0 if past is None else past[0].shape[1]
    qkv = project(block.attn_norm(x), attn.w_qkv, attn.b_qkv)                  # [B, T, (H + 2 KV) hd]
    q, k, v = qkv.split((H * hd, KV * hd, KV * hd), dim=-1)
    q = q.reshape(B, T, H, hd).transpose(1, 2)                                   # [B, H, T, hd]
    k = k.reshape(B, T, KV, hd).transpose(1, 2)                                  # [B, KV, T, hd]
    v = v.reshape(B, T, KV, hd).transpose(1, 2)                                  # [B, KV, T, hd]
    if attn.q_norm is not None:
        q = rms_norm(q, attn.q_norm, cfg.norm_eps)                              # [B, H, T, hd]
        k = rms_norm(k, attn.k_norm, cfg.norm_eps)                              # [B, KV, T, hd]
    cos, sin = (None, None) if pos.cos is None else (pos.cos[n:n + T], pos.sin[n:n + T])   # [T, hd/2] each
    q, k = attn.rotate(q, cos, sin), attn.rotate(k, cos, sin)
    keys, values = k, v                                                          # [B, KV, n + T, hd] each
    if past is not None:
        keys = torch.cat((past[0].expand(B, KV, n, hd), k), dim=2)
        values = torch.cat((past[1].expand(B, KV, n, hd), v), dim=2)
    keys = keys.repeat_interleave(cfg.group_size, dim=1)                         # [B, H, n + T, hd]
    values = values.repeat_interleave(cfg.group_size, dim=1)                     # [B, H, n + T, hd]
    scores = (q @ keys.transpose(-1, -2)) / math.sqrt(hd)                        # [B, H, T, n + T]
    hidden = ~pos.mask[n:n + T, :n + T]                                          # [T, n + T]
    pattern = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)   # [B, H, T, n + T]
    mixed = pattern @ values                                                     # [B, H, T, hd]
    if patch is not None:
        mixed = torch.where(patch.heads[:, :, None, None], patch.source, mixed)  # [B, H, T, hd]
    out = project(mixed.transpose(1, 2).reshape(B, T, H * hd), attn.w_o, attn.b_o)   # [B, T, D]
    mid = x + out                                                                # [B, T, D]
    return mid + _mlp(block, block.mlp_norm(mid)), mixed, (k, v)


def _mlp(block: Block, h: torch.Tensor) -> torch.Tensor:
    """The block's MLP on h [B, T, D] -> [B, T, D]: SwiGLU down(silu(gate) * up) or GELU (tanh) down(gelu(up))."""
    mlp = block.mlp
    if hasattr(mlp, "w_gate_up"):
        gate, up = project(h, mlp.w_gate_up).split(mlp.d_ff, dim=-1)             # [B, T, F] each
        return project(F.silu(gate) * up, mlp.w_down)
    return project(F.gelu(project(h, mlp.w_up, mlp.b_up), approximate="tanh"), mlp.w_down, mlp.b_down)


def run_from(lm: Decoder, x: torch.Tensor, start: int, pos: Positions, patch: HeadPatch | None = None,
             past: list[KeysValues] | None = None) -> torch.Tensor:
    """Blocks start.. over x [B, T, D] entering block `start` (patch applied in that block; past: every layer's
    shared keys and values of the positions before x's, see block_forward): the final-normed stream at the last
    position [B, D]."""
    for i in range(start, lm.config.n_layers):
        x, _, _ = block_forward(lm, lm.blocks[i], x, pos, patch if i == start else None,
                                None if past is None else past[i])
    return lm.final_norm(x[:, -1])                                               # [B, D]


def batch_size(lm: Decoder, T: int) -> int:
    """How many variants of T tokens one batch holds within BATCH_BYTES."""
    cfg = lm.config
    per_variant = 4 * T * max(2 * cfg.n_heads * T, 3 * cfg.d_ff)
    return max(1, BATCH_BYTES // per_variant)
