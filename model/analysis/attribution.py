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
    out_biases = torch.zeros(cfg.d_model)                                       # [D]
    with torch.inference_mode(), lm.pass_threads(trace.n_tokens):
        pos = lm.positions_for(trace)
        x = torch.from_numpy(trace.checkpoints[0].copy())                      # [T, D]
        embedding = x[p].clone()                                                # [D]
        for i, block in enumerate(lm.blocks):
            parts = block.parts(x, pos.cos, pos.sin, pos.mask, keep_scores=False)
            heads[i] = block.attn.head_outputs(parts.attn.mixed[:, p])         # [H, D]
            if block.attn.b_o is not None:
                out_biases += block.attn.b_o
            mlps[i] = parts.mlp.out[p]
            x = parts.out
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
