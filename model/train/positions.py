"""Position encodings as pure functions: the sinusoidal table, RoPE and the ALiBi bias."""
from __future__ import annotations

import math

import torch

ROPE_BASE = 10_000.0
SINUSOID_BASE = 10_000.0


def sinusoidal_table(n_positions: int, d_model: int, base: float = SINUSOID_BASE) -> torch.Tensor:
    """The Transformer paper's table: PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(same). [P, D]"""
    position = torch.arange(n_positions, dtype=torch.float64)[:, None]                       # [P, 1]
    inv_freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)          # [ceil(D/2)]
    angle = position * inv_freq                                                               # [P, ceil(D/2)]
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table.float()


def rope_angles(n_positions: int, head_dim: int, base: float = ROPE_BASE) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotation angles p * base^(-2i/head_dim), repeated for both halves. Each [P, head_dim]"""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)        # [head_dim/2]
    angle = torch.arange(n_positions, dtype=torch.float64)[:, None] * inv_freq                # [P, head_dim/2]
    angle = torch.cat([angle, angle], dim=-1)                                                 # [P, head_dim]
    return angle.cos().float(), angle.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x[i], x[i + head_dim/2]) by its position's angle (the half-split layout). x [B, H, T, hd]"""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)                              # [B, H, T, hd]
    return x * cos + rotated * sin


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """The ALiBi paper's head slopes: a geometric sequence from 2^(-8/n); for a head count that is not a power of
    two, the power of two below it plus every other slope of the next power of two. [H]"""
    def geometric(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    below = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = geometric(below)
    if below < n_heads:
        slopes += geometric(2 * below)[0::2][: n_heads - below]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(n_heads: int, n_positions: int) -> torch.Tensor:
    """-slope * (i - j): the score penalty for query i looking back at key j (positive above the diagonal, where
    the causal mask removes it anyway). [H, T, T]"""
    distance = torch.arange(n_positions)[:, None] - torch.arange(n_positions)[None, :]        # [T, T]
    return -alibi_slopes(n_heads)[:, None, None] * distance.float()
