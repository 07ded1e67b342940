"""One token's path through one decoder block, step by step, with the forward pass's own numbers.

block_walk re-runs the blocks from the trace's nearest checkpoint and reads the chosen block at every one of its hook
points (hooks that change nothing: the forward pass's own operations and numbers, which tests check bit for bit),
then slices out the chosen position: its vectors, and for attention its query row against every key.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from model.analysis.stream import check_layer, check_position
from model.decoder.blocks import Norm
from model.decoder.core import Decoder
from model.decoder.hooks import block_points, capture
from model.decoder.trace import ForwardTrace

NEAR_ZERO = 0.05  # |silu(gate)| below this counts as a (nearly) closed gate


@dataclass(frozen=True, eq=False)
class NormStep:
    """One norm applied to one vector: out = (x - mean) / rms * weight (+ bias).
    RMSNorm: mean 0, rms = sqrt(mean(x ** 2) + eps), no bias; LayerNorm: the mean, rms = sqrt(var(x) + eps)."""

    kind: str                # "rmsnorm" | "layernorm"
    mean: float              # what is subtracted first (0 for RMSNorm)
    rms: float               # what the centred vector is divided by
    scaled: np.ndarray       # [D] (x - mean) / rms (mean square 1, up to eps)
    weight: np.ndarray       # [D] the norm's learned per-dimension scale
    bias: np.ndarray | None  # [D] LayerNorm's learned shift, None for RMSNorm
    out: np.ndarray          # [D] scaled * weight (+ bias): what the next projections read


@dataclass(frozen=True, eq=False)
class BlockWalk:
    """Every step of block `layer` for the token at `position`, in the order the block computes them (float32)."""

    layer: int
    position: int
    token_id: int
    x: np.ndarray             # [D] residual stream in (layer 0: the token's embedding row)
    attn_norm: NormStep
    q: np.ndarray             # [H, hd] this token's query per head, before RoPE (after the q norm, if any)
    k: np.ndarray             # [KV, T, hd] every token's key per KV head, before RoPE
    v: np.ndarray             # [KV, T, hd] every token's value per KV head
    kv_head: np.ndarray       # [H] int: the KV head each query head reads (GQA: h // group)
    rope_cos: np.ndarray | None  # [T, hd/2] cos of each position's rotation angle per pair (i, i + hd/2); None: no RoPE
    rope_sin: np.ndarray | None  # [T, hd/2]
    q_rot: np.ndarray         # [H, hd] query after RoPE (== q without RoPE)
    k_rot: np.ndarray         # [KV, T, hd] keys after RoPE
    scores: np.ndarray        # [H, T] q_rot . k_rot / sqrt(hd) against every key, before the mask
    mask: np.ndarray          # [T] bool: True for keys this token may attend to (j <= position)
    masked_scores: np.ndarray  # [H, T] scores with -inf on the future keys
    pattern: np.ndarray       # [H, T] softmax of masked_scores (== trace.attention[layer][:, position])
    mixed: np.ndarray         # [H, hd] pattern-weighted sum of the values, per head
    head_out: np.ndarray      # [H, D] each head's share of the output projection: W_o[:, h hd:(h+1) hd] @ mixed[h]
    attn_out: np.ndarray      # [D] output projection of all heads (== head_out.sum(0) + its bias, up to rounding)
    mid: np.ndarray           # [D] x + attn_out
    mlp_norm: NormStep
    gate: np.ndarray | None   # [F] gate projection (SwiGLU; None for a GELU MLP)
    act: np.ndarray           # [F] silu(gate), or gelu(up)
    up: np.ndarray            # [F] up projection
    product: np.ndarray       # [F] act * up, or act
    mlp_out: np.ndarray       # [D] down projection of product
    out: np.ndarray           # [D] mid + mlp_out: the residual stream into the next layer

    def near_zero_share(self, threshold: float = NEAR_ZERO) -> float:
        """Share of the d_ff channels with |act| < threshold (channels the gate / GELU nearly shuts)."""
        return float((np.abs(self.act) < threshold).mean())


def block_walk(lm: Decoder, trace: ForwardTrace, layer: int, position: int) -> BlockWalk:
    """Every intermediate of block `layer` at token `position` (negative counts from the end)."""
    layer = check_layer(lm, layer)
    p = check_position(trace, position)
    cfg = lm.config
    block = lm.blocks[layer]
    seen: dict[str, torch.Tensor] = {}
    with torch.inference_mode():
        pos = lm.positions_for(trace)
        lm.rerun(trace, layer, layer + 1, capture([f"blocks.{layer}.{p}" for p in block_points(cfg)], seen), pos)
        at = {name.split(".", 2)[2]: t[0] for name, t in seen.items()}         # point -> [T, ...] or [heads, T, ...]
        x, mid = at["hook_resid_pre"], at["hook_resid_mid"]                     # [T, D] each
        gated = cfg.mlp == "swiglu"
        gate = at["mlp.hook_pre"] if gated else None                           # [T, F]
        up = at["mlp.hook_pre_linear" if gated else "mlp.hook_pre"]            # [T, F]
        act = F.silu(gate) if gated else at["mlp.hook_post"]                   # [T, F]
        scores, z = at["attn.hook_attn_scores"], at["attn.hook_z"]             # [H, T, T], [H, T, hd]
        masked = scores[:, p].masked_fill(~pos.mask[p], float("-inf"))         # [H, T]
        return BlockWalk(
            layer=layer, position=p, token_id=trace.token_ids[p],
            x=_frozen(x[p]),
            attn_norm=_norm_step(x, block.attn_norm, at["ln1.hook_normalized"], p),
            q=_frozen(at["attn.hook_q"][:, p]), k=_frozen(at["attn.hook_k"]), v=_frozen(at["attn.hook_v"]),
            kv_head=_frozen(torch.arange(cfg.n_heads) // cfg.group_size),
            rope_cos=_frozen(pos.cos), rope_sin=_frozen(pos.sin),
            q_rot=_frozen(at["attn.hook_rot_q"][:, p]), k_rot=_frozen(at["attn.hook_rot_k"]),
            scores=_frozen(scores[:, p]), mask=_frozen(pos.mask[p]), masked_scores=_frozen(masked),
            pattern=_frozen(at["attn.hook_pattern"][:, p]), mixed=_frozen(z[:, p]),
            head_out=_frozen(block.attn.head_outputs(z[:, p])),
            attn_out=_frozen(at["hook_attn_out"][p]), mid=_frozen(mid[p]),
            mlp_norm=_norm_step(mid, block.mlp_norm, at["ln2.hook_normalized"], p),
            gate=_frozen(None if gate is None else gate[p]), act=_frozen(act[p]), up=_frozen(up[p]),
            product=_frozen(at["mlp.hook_post"][p]), mlp_out=_frozen(at["hook_mlp_out"][p]),
            out=_frozen(at["hook_resid_post"][p]))


def _norm_step(x: torch.Tensor, norm: Norm, out: torch.Tensor, p: int) -> NormStep:
    """Row p of norm(x), split into its steps (Norm.statistics: the same float32 operations as the norm)."""
    mean, inv_scale = norm.statistics(x)                                       # [T, 1] each
    return NormStep(kind=norm.kind, mean=float(mean[p]), rms=float(1.0 / inv_scale[p].double()),
                    scaled=_frozen((x[p] - mean[p]) * inv_scale[p]), weight=_frozen(norm.weight),
                    bias=_frozen(norm.bias), out=_frozen(out[p]))


def _frozen(t: torch.Tensor | None) -> np.ndarray | None:
    """A read-only numpy copy (a view would keep the whole [T, ...] tensor alive, or expose model weights)."""
    if t is None:
        return None
    a = t.numpy().copy()
    a.flags.writeable = False
    return a
