"""Direct logit attribution: how much each head, each MLP and the embedding add to one token's logit.

The residual stream at a position is a sum: embedding + every head's output + every MLP's output. The final
RMSNorm divides that sum by its rms, a single scale; with the scale frozen at its real value the logit is linear in
the stream, so each part's share is (part * norm weight / rms) . unembedding row, and the shares add up to the
logit. "Direct" means through the residual stream only: what a head changes in later layers is not counted here.
Llama blocks have no biases, so there is no bias term to attribute.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.analysis.stream import Positions, check_position
from model.decoder.core import Decoder
from model.decoder.trace import ForwardTrace


@dataclass(frozen=True, eq=False)
class LogitAttribution:
    """Direct contributions to the logit of token_id at position (float64)."""

    token_id: int
    position: int
    logit: float           # the model's logit for token_id at position (final RMSNorm, then LM head)
    inv_rms: float         # the final RMSNorm's 1 / rms of the final residual stream there (the frozen scale)
    embedding: float       # the token embedding's contribution
    heads: np.ndarray      # [n_layers, n_heads] each head's contribution (through its slice of o_proj)
    mlps: np.ndarray       # [n_layers] each MLP's contribution

    @property
    def total(self) -> float:
        """Sum of every contribution: equals logit up to float rounding."""
        return float(self.embedding + self.heads.sum() + self.mlps.sum())


def logit_attribution(lm: Decoder, trace: ForwardTrace, token_id: int, position: int = -1) -> LogitAttribution:
    """Each head's, each MLP's and the embedding's direct contribution to token_id's logit at position."""
    cfg = lm.config
    if isinstance(token_id, bool) or not isinstance(token_id, (int, np.integer)) or \
            not 0 <= token_id < cfg.vocab_size:
        raise ValueError(f"token_id must be an integer from 0 to {cfg.vocab_size - 1}, got {token_id!r}")
    p = check_position(trace, position)
    heads = torch.empty(cfg.n_layers, cfg.n_heads, cfg.d_model)                 # [L, H, D]
    mlps = torch.empty(cfg.n_layers, cfg.d_model)                               # [L, D]
    with torch.inference_mode():
        pos = Positions.for_trace(lm, trace)
        x = torch.from_numpy(trace.checkpoints[0].copy())                      # [T, D]
        embedding = x[p].clone()                                                # [D]
        for i, block in enumerate(lm.blocks):
            parts = block.parts(x, pos.cos, pos.sin, pos.mask, keep_scores=False)
            w_o = block.attn.w_o.view(cfg.d_model, cfg.n_heads, cfg.head_dim)  # [D, H, hd]
            heads[i] = torch.einsum("dhk,hk->hd", w_o, parts.attn.mixed[:, p])  # [H, D]
            mlps[i] = parts.mlp.out[p]
            x = parts.out
        inv_rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.norm_eps)[p]  # [1], as rms_norm computes it
        unembed = lm.lm_head.rows(torch.tensor([token_id]))[0]                  # [D]
        direction = (inv_rms.double() * lm.out_norm.double() * unembed.double()).numpy()  # [D]
        logit = float((x[p] * inv_rms * lm.out_norm).double().numpy() @ unembed.double().numpy())
    return LogitAttribution(
        token_id=int(token_id), position=p, logit=logit, inv_rms=float(inv_rms),
        embedding=float(embedding.double().numpy() @ direction),
        heads=heads.double().numpy() @ direction, mlps=mlps.double().numpy() @ direction)
