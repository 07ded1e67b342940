"""The tiny decoder's parts: norms, MLPs, causal self-attention that can record its pattern, and the block."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from model.train.positions import apply_rope

NORM_EPS = 1e-5


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dimension."""

    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, NORM_EPS)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension (no centring, no bias)."""

    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, x.shape[-1:], self.weight, NORM_EPS)


def make_norm(kind: str, d: int) -> nn.Module:
    """'layernorm', 'rmsnorm' or 'none' (the identity)."""
    return {"layernorm": LayerNorm, "rmsnorm": RMSNorm}.get(kind, lambda _: nn.Identity())(d)


class GeluMLP(nn.Module):
    """GPT's MLP: down(gelu(up(x))), gelu the exact (erf) one, hidden width 4 d."""

    def __init__(self, d: int):
        super().__init__()
        self.up = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))                                 # [B, T, D]


class SwiGLU(nn.Module):
    """LLaMA's MLP: down(silu(gate(x)) * up(x)), hidden width 8/3 d (about GELU's parameter count)."""

    def __init__(self, d: int):
        super().__init__()
        hidden = 8 * d // 3
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))                  # [B, T, D]


def make_mlp(kind: str, d: int) -> nn.Module | None:
    """'gelu', 'swiglu' or 'none' (an attention-only block)."""
    return {"gelu": GeluMLP, "swiglu": SwiGLU}[kind](d) if kind != "none" else None


class CausalSelfAttention(nn.Module):
    """Multi-head attention with n_kv_heads key/value heads (query head h reads KV head h // (heads / kv_heads)):
    MHA, GQA or MQA. `bias` [H or 1, T, T] holds the causal mask (-inf above the diagonal) and ALiBi's penalties;
    `rope` (cos, sin) rotates q and k. forward returns the output and, if asked, the pattern [B, H, T, T]."""

    def __init__(self, d: int, n_heads: int, n_kv_heads: int):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d // n_heads
        self.qkv = nn.Linear(d, (n_heads + 2 * n_kv_heads) * self.head_dim, bias=False)
        self.out = nn.Linear(n_heads * self.head_dim, d, bias=False)

    def forward(self, x: torch.Tensor, bias: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None = None,
                record: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T, _ = x.shape
        H, KV, hd = self.n_heads, self.n_kv_heads, self.head_dim
        q, k, v = self.qkv(x).view(B, T, H + 2 * KV, hd).transpose(1, 2).split([H, KV, KV], dim=1)  # [B, *, T, hd]
        if rope is not None:
            cos, sin = rope[0][:T], rope[1][:T]                              # [T, hd]
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if KV != H:
            k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)  # [B, H, T, hd]
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd) + bias[:, :T, :T]   # [B, H, T, T]
        pattern = scores.softmax(dim=-1)                                     # [B, H, T, T]
        y = (pattern @ v).transpose(1, 2).reshape(B, T, H * hd)              # [B, T, H*hd]
        return self.out(y), (pattern if record else None)


class Block(nn.Module):
    """Attention (and an MLP if any), each with a residual connection; norms before (Pre-LN: x + f(norm(x))) or
    after (Post-LN: norm(x + f(x))) each residual sum."""

    def __init__(self, d: int, n_heads: int, n_kv_heads: int, mlp: str, norm: str, norm_place: str):
        super().__init__()
        self.pre = norm_place == "pre"
        self.attn = CausalSelfAttention(d, n_heads, n_kv_heads)
        self.norm_attn = make_norm(norm, d)
        self.mlp = make_mlp(mlp, d)
        self.norm_mlp = make_norm(norm, d) if self.mlp is not None else None

    def forward(self, x: torch.Tensor, bias: torch.Tensor, rope=None, record: bool = False):
        if self.pre:
            a, pattern = self.attn(self.norm_attn(x), bias, rope, record)
            x = x + a                                                        # [B, T, D]
            if self.mlp is not None:
                x = x + self.mlp(self.norm_mlp(x))
        else:
            a, pattern = self.attn(x, bias, rope, record)
            x = self.norm_attn(x + a)                                        # [B, T, D]
            if self.mlp is not None:
                x = self.norm_mlp(x + self.mlp(x))
        return x, pattern
