"""T5's pieces, as transformers' T5 computes them: relative position buckets and their bias, the RMS norm, the MLP
(ReLU or gated GELU), and one encoder or decoder block. A decoder block takes its earlier positions' keys and values
(a generation's cache, or none for a whole target at once), so a full pass and a generation step are the same code."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F

from model.encoders.attention import AttentionParts, attend, causal, split_heads
from model.encoders.config import T5Config

Weights = Callable[[str], torch.Tensor]   # a tensor by its GGUF name


def relative_buckets(relative: torch.Tensor, bidirectional: bool, n_buckets: int, max_distance: int) -> torch.Tensor:
    """T5's bucket of each relative position (key - query), int64 like relative: exact buckets up to half the
    range, then logarithmically wider ones up to max_distance; the encoder's buckets split by direction, the
    decoder's only look back."""
    buckets = torch.zeros_like(relative)
    if bidirectional:
        n_buckets //= 2
        buckets = buckets + (relative > 0).to(torch.long) * n_buckets
        distance = relative.abs()
    else:
        distance = -torch.minimum(relative, torch.zeros_like(relative))
    exact = n_buckets // 2
    wide = exact + (torch.log(distance.float() / exact) / math.log(max_distance / exact)
                    * (n_buckets - exact)).to(torch.long)
    wide = torch.minimum(wide, torch.full_like(wide, n_buckets - 1))
    return buckets + torch.where(distance < exact, distance, wide)


def position_bias(table: torch.Tensor, queries: torch.Tensor, keys: torch.Tensor, bidirectional: bool,
                  cfg: T5Config) -> torch.Tensor:
    """[H, Tq, Tk] bias added to the scores: table [buckets, H] at the bucket of each (key - query) position."""
    relative = keys[None, :] - queries[:, None]                                    # [Tq, Tk]
    buckets = relative_buckets(relative, bidirectional, cfg.relative_buckets, cfg.relative_max_distance)
    return table[buckets].permute(2, 0, 1)                                         # [H, Tq, Tk]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """T5's norm: x / sqrt(mean(x^2) + eps) * weight, no mean subtracted, no bias."""
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def mlp(x: torch.Tensor, w: Weights, prefix: str, cfg: T5Config) -> torch.Tensor:
    """down(gelu_tanh(gate(x)) * up(x)) for a gated T5, down(relu(up(x))) for the original."""
    up = F.linear(x, w(prefix + "ffn_up.weight"))                                  # [T, F]
    if cfg.gated:
        up = F.gelu(F.linear(x, w(prefix + "ffn_gate.weight")), approximate="tanh") * up
    else:
        up = torch.relu(up)
    return F.linear(up, w(prefix + "ffn_down.weight"))                             # [T, D]


def heads(x: torch.Tensor, weight: torch.Tensor, cfg: T5Config) -> torch.Tensor:
    """x [T, D] projected and split into heads: [H, T, hd]."""
    return split_heads(F.linear(x, weight), cfg.n_heads)


def self_attention(x: torch.Tensor, w: Weights, prefix: str, cfg: T5Config, bias: torch.Tensor,
                   past: tuple[torch.Tensor, torch.Tensor] | None = None,
                   allowed: torch.Tensor | None = None) -> AttentionParts:
    """Unscaled self-attention of x's rows over past keys / values [H, t, hd] (None: none) and their own, plus the
    position bias [H, Tq, Tk]; allowed [Tq, Tk] (None: every key)."""
    norm = rms_norm(x, w(prefix + "attn_norm.weight"), cfg.norm_eps)
    q, k, v = (heads(norm, w(prefix + f"attn_{n}.weight"), cfg) for n in "qkv")    # [H, T, hd] each
    if past is not None:
        k, v = torch.cat([past[0], k], dim=1), torch.cat([past[1], v], dim=1)      # [H, t + T, hd]
    return attend(q, k, v, w(prefix + "attn_o.weight"), None, 1.0, bias, allowed)


def cross_keys(encoder_output: torch.Tensor, w: Weights, prefix: str, cfg: T5Config) -> tuple[torch.Tensor, ...]:
    """The cross-attention's keys and values of the encoder's output: [H, S, hd] each."""
    return (heads(encoder_output, w(prefix + "cross_attn_k.weight"), cfg),
            heads(encoder_output, w(prefix + "cross_attn_v.weight"), cfg))


def cross_attention(y: torch.Tensor, w: Weights, prefix: str, cfg: T5Config,
                    keys: tuple[torch.Tensor, torch.Tensor]) -> AttentionParts:
    """Each decoder row's unscaled attention over the source (no bias, no mask)."""
    norm = rms_norm(y, w(prefix + "cross_attn_norm.weight"), cfg.norm_eps)
    q = heads(norm, w(prefix + "cross_attn_q.weight"), cfg)                        # [H, T, hd]
    return attend(q, keys[0], keys[1], w(prefix + "cross_attn_o.weight"), None, 1.0)


def encoder_block(x: torch.Tensor, w: Weights, layer: int, cfg: T5Config,
                  bias: torch.Tensor) -> tuple[torch.Tensor, AttentionParts]:
    """(the block's output [S, D], its self-attention)."""
    prefix = f"enc.blk.{layer}."
    parts = self_attention(x, w, prefix, cfg, bias)
    x = x + parts.out
    return x + mlp(rms_norm(x, w(prefix + "ffn_norm.weight"), cfg.norm_eps), w, prefix, cfg), parts


class DecoderBlockOut(NamedTuple):
    """One decoder block's output for its rows and what its attentions computed."""

    y: torch.Tensor               # [T, D]
    self_parts: AttentionParts    # keys / values: every position so far (the next step's past)
    cross_parts: AttentionParts


def decoder_block(y: torch.Tensor, w: Weights, layer: int, cfg: T5Config, bias: torch.Tensor,
                  keys: tuple[torch.Tensor, torch.Tensor],
                  past: tuple[torch.Tensor, torch.Tensor] | None = None) -> DecoderBlockOut:
    """Rows y [T, D] at the last T of the positions so far (the earlier ones' keys and values in past), each seeing
    itself and the positions before it, then the source (keys: cross_keys)."""
    prefix = f"dec.blk.{layer}."
    n_past = 0 if past is None else past[0].shape[1]
    own = self_attention(y, w, prefix, cfg, bias, past, causal(y.shape[0], n_past + y.shape[0]))
    y = y + own.out
    cross = cross_attention(y, w, prefix, cfg, keys)
    y = y + cross.out
    y = y + mlp(rms_norm(y, w(prefix + "ffn_norm.weight"), cfg.norm_eps), w, prefix, cfg)
    return DecoderBlockOut(y, own, cross)


def lm_logits(final: torch.Tensor, head: torch.Tensor, cfg: T5Config) -> torch.Tensor:
    """Logits [T, V] of the decoder's normed output [T, D] (scaled by d_model**-0.5 first for a tied T5)."""
    if cfg.scale_decoder_output:
        final = final * cfg.d_model ** -0.5
    return F.linear(final, head)
