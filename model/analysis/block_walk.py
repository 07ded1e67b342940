"""One token's path through one decoder block, step by step, with the forward pass's own numbers.

block_walk re-runs the blocks from the trace's nearest checkpoint and records the chosen block with Block.parts,
which performs the same operations in the same order as the forward pass (tests check bit-equality), then slices
out the chosen position: its vectors, and for attention its query row against every key.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.analysis.stream import Positions, check_layer, check_position, layer_input
from model.decoder.core import Decoder
from model.decoder.trace import ForwardTrace

NEAR_ZERO = 0.05  # |silu(gate)| below this counts as a (nearly) closed gate


@dataclass(frozen=True, eq=False)
class NormStep:
    """One RMSNorm applied to one vector: out = x / rms * weight."""

    rms: float          # sqrt(mean(x ** 2) + eps) of the input vector
    scaled: np.ndarray  # [D] x / rms (mean square 1, up to eps)
    weight: np.ndarray  # [D] the norm's learned per-dimension scale
    out: np.ndarray     # [D] scaled * weight: what the next projections read


@dataclass(frozen=True, eq=False)
class BlockWalk:
    """Every step of block `layer` for the token at `position`, in the order the block computes them (float32)."""

    layer: int
    position: int
    token_id: int
    x: np.ndarray             # [D] residual stream in (layer 0: the token's embedding row)
    attn_norm: NormStep
    q: np.ndarray             # [H, hd] this token's query per head, before RoPE
    k: np.ndarray             # [KV, T, hd] every token's key per KV head, before RoPE
    v: np.ndarray             # [KV, T, hd] every token's value per KV head
    kv_head: np.ndarray       # [H] int: the KV head each query head reads (GQA: h // group)
    rope_cos: np.ndarray      # [T, hd/2] cos of each position's rotation angle per pair (i, i + hd/2)
    rope_sin: np.ndarray      # [T, hd/2]
    q_rot: np.ndarray         # [H, hd] query after RoPE
    k_rot: np.ndarray         # [KV, T, hd] keys after RoPE
    scores: np.ndarray        # [H, T] q_rot . k_rot / sqrt(hd) against every key, before the mask
    mask: np.ndarray          # [T] bool: True for keys this token may attend to (j <= position)
    masked_scores: np.ndarray  # [H, T] scores with -inf on the future keys
    pattern: np.ndarray       # [H, T] softmax of masked_scores (== trace.attention[layer][:, position])
    mixed: np.ndarray         # [H, hd] pattern-weighted sum of the values, per head
    head_out: np.ndarray      # [H, D] each head's share of the output projection: W_o[:, h hd:(h+1) hd] @ mixed[h]
    attn_out: np.ndarray      # [D] output projection of all heads (== head_out.sum(0) up to rounding)
    mid: np.ndarray           # [D] x + attn_out
    mlp_norm: NormStep
    gate: np.ndarray          # [F] gate projection
    act: np.ndarray           # [F] silu(gate)
    up: np.ndarray            # [F] up projection
    product: np.ndarray       # [F] act * up
    mlp_out: np.ndarray       # [D] down projection of product
    out: np.ndarray           # [D] mid + mlp_out: the residual stream into the next layer

    def near_zero_share(self, threshold: float = NEAR_ZERO) -> float:
        """Share of the d_ff gates with |silu(gate)| < threshold (channels the gate nearly shuts)."""
        return float((np.abs(self.act) < threshold).mean())


def block_walk(lm: Decoder, trace: ForwardTrace, layer: int, position: int) -> BlockWalk:
    """Every intermediate of block `layer` at token `position` (negative counts from the end)."""
    layer = check_layer(lm, layer)
    p = check_position(trace, position)
    cfg = lm.config
    block = lm.blocks[layer]
    with torch.inference_mode():
        pos = Positions.for_trace(lm, trace)
        x = layer_input(lm, trace, layer, pos)                                 # [T, D]
        parts = block.parts(x, pos.cos, pos.sin, pos.mask)
        att, mlp = parts.attn, parts.mlp
        w_o = block.attn.w_o.view(cfg.d_model, cfg.n_heads, cfg.head_dim)    # [D, H, hd]
        head_out = torch.einsum("dhk,hk->hd", w_o, att.mixed[:, p])            # [H, D]
        masked = att.scores[:, p].masked_fill(~pos.mask[p], float("-inf"))     # [H, T]
        return BlockWalk(
            layer=layer, position=p, token_id=trace.token_ids[p],
            x=_frozen(x[p]),
            attn_norm=_norm_step(x, block.attn_norm, cfg.norm_eps, parts.attn_in, p),
            q=_frozen(att.q[:, p]), k=_frozen(att.k), v=_frozen(att.v),
            kv_head=_frozen(torch.arange(cfg.n_heads) // cfg.group_size),
            rope_cos=_frozen(pos.cos), rope_sin=_frozen(pos.sin),
            q_rot=_frozen(att.q_rot[:, p]), k_rot=_frozen(att.k_rot),
            scores=_frozen(att.scores[:, p]), mask=_frozen(pos.mask[p]), masked_scores=_frozen(masked),
            pattern=_frozen(att.pattern[:, p]), mixed=_frozen(att.mixed[:, p]), head_out=_frozen(head_out),
            attn_out=_frozen(att.out[p]), mid=_frozen(parts.mid[p]),
            mlp_norm=_norm_step(parts.mid, block.mlp_norm, cfg.norm_eps, parts.mlp_in, p),
            gate=_frozen(mlp.gate[p]), act=_frozen(mlp.act[p]), up=_frozen(mlp.up[p]),
            product=_frozen(mlp.product[p]), mlp_out=_frozen(mlp.out[p]), out=_frozen(parts.out[p]))


def _norm_step(x: torch.Tensor, weight: torch.Tensor, eps: float, out: torch.Tensor, p: int) -> NormStep:
    """Row p of rms_norm(x) = x * rsqrt(mean(x^2) + eps) * weight, split into its steps (same float32 ops)."""
    inv_rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)[p]            # [1]
    return NormStep(rms=float(1.0 / inv_rms.double()), scaled=_frozen(x[p] * inv_rms), weight=_frozen(weight),
                    out=_frozen(out[p]))


def _frozen(t: torch.Tensor) -> np.ndarray:
    """A read-only numpy copy (a view would keep the whole [T, ...] tensor alive, or expose model weights)."""
    a = t.numpy().copy()
    a.flags.writeable = False
    return a
