"""Direct logit attribution: how much each head, each MLP and the embedding add to one token's logit.

The residual stream at a position is a sum: embedding (with GPT-2's position embedding) + every head's output +
every attention output bias + every MLP's output. The final norm divides that sum by a single scale (RMSNorm: its
rms; LayerNorm: its standard deviation, after subtracting the mean, which is itself a sum of the parts' means); with
the scale frozen at its real value the logit is linear in the stream, so each part's share is
((part - its mean) * norm weight / scale) . unembedding row, and the shares, plus the biases' share, add up to the
logit. "Direct" means through the residual stream only: what a head changes in later layers is not counted here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.analysis.stream import check_position
from model.decoder.core import Decoder
from model.decoder.hooks import Hook
from model.decoder.trace import ForwardTrace


@dataclass(frozen=True, eq=False)
class LogitAttribution:
    """Direct contributions to the logit of token_id at position (float64)."""

    token_id: int
    position: int
    logit: float           # the model's logit for token_id at position (final norm, then LM head)
    inv_rms: float         # the final norm's 1 / scale of the final residual stream there (the frozen scale)
    embedding: float       # the token embedding's contribution (with the position embedding, where there is one)
    heads: np.ndarray      # [n_layers, n_heads] each head's contribution (through its slice of o_proj)
    mlps: np.ndarray       # [n_layers] each MLP's contribution (its output bias included)
    bias: float = 0.0      # the attention output biases' and the final norm's bias's contribution (0 for llama)

    @property
    def total(self) -> float:
        """Sum of every contribution: equals logit up to float rounding."""
        return float(self.embedding + self.heads.sum() + self.mlps.sum() + self.bias)


def logit_attribution(lm: Decoder, trace: ForwardTrace, token_id: int, position: int = -1) -> LogitAttribution:
    """Each head's, each MLP's and the embedding's direct contribution to token_id's logit at position."""
    cfg = lm.config
    if isinstance(token_id, bool) or not isinstance(token_id, (int, np.integer)) or \
            not 0 <= token_id < cfg.vocab_size:
        raise ValueError(f"token_id must be an integer from 0 to {cfg.vocab_size - 1}, got {token_id!r}")
    p = check_position(trace, position)
    heads = torch.empty(cfg.n_layers, cfg.n_heads, cfg.d_model)                 # [L, H, D]
    mlps = torch.empty(cfg.n_layers, cfg.d_model)                               # [L, D]

    def read(t: torch.Tensor, hook: Hook) -> None:                              # z [1, H, T, hd] or [1, T, D]
        if hook.name.endswith("hook_z"):
            heads[hook.layer] = lm.blocks[hook.layer].attn.head_outputs(t[0, :, p])   # [H, D]
        else:
            mlps[hook.layer] = t[0, p]

    out_biases = sum((b.attn.b_o for b in lm.blocks if b.attn.b_o is not None), torch.zeros(cfg.d_model))  # [D]
    with torch.inference_mode():
        x = lm.rerun(trace, 0, hooks={f"blocks.{i}.{point}": read for i in range(cfg.n_layers)
                                      for point in ("attn.hook_z", "hook_mlp_out")})[0]   # [T, D]
        embedding = torch.from_numpy(trace.checkpoints[0][p].copy())             # [D]
        norm = lm.out_norm
        inv_scale = norm.statistics(x)[1][p]                                   # [1], as the norm computes it
        unembed = lm.lm_head.rows(torch.tensor([token_id]))[0].double()         # [D]
        direction = (inv_scale.double() * norm.weight.double() * unembed).numpy()  # [D]
        logit = float(lm.final_norm(x[p]).double() @ unembed)
        constant = 0.0 if norm.bias is None else float(norm.bias.double() @ unembed)

    def share(parts: torch.Tensor) -> np.ndarray:                              # [..., D] -> [...]
        values = parts.double().numpy()
        if norm.kind == "layernorm":
            values = values - values.mean(-1, keepdims=True)
        return values @ direction

    return LogitAttribution(
        token_id=int(token_id), position=p, logit=logit, inv_rms=float(inv_scale),
        embedding=float(share(embedding)), heads=share(heads), mlps=share(mlps),
        bias=float(share(out_biases)) + constant)
