"""Rotary position embeddings (RoPE) as the decoder runs them: frequencies, cos/sin tables, the rotation.

`apply_rope` accepts numpy arrays or torch tensors and returns the same kind.
"""
from __future__ import annotations

import numpy as np
import torch

CONVENTIONS = ("half", "adjacent")  # pairs (i, i + d/2) as in common PyTorch code; (2i, 2i+1) as in the RoPE paper


def rope_frequencies(head_dim: int, base: float) -> np.ndarray:
    """RoPE rotation speed theta_i = base^(-2i/head_dim) for pair i, in radians per token: [head_dim/2]."""
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be an even number >= 2, got {head_dim}")
    return base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def rope_cos_sin(positions, head_dim: int, base: float, factors=None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotation angle m*theta_i, computed in float64: two [T, head_dim/2] float32 tensors.
    factors ([head_dim/2], optional): per-pair divisors of theta_i (Llama 3.1 / 3.2 files' rope_freqs tensor)."""
    pos = torch.as_tensor(np.asarray(positions, dtype=np.float64))                      # [T]
    theta = torch.from_numpy(rope_frequencies(head_dim, base))                          # [d/2]
    if factors is not None:
        theta = theta / torch.as_tensor(factors, dtype=torch.float32).double()          # [d/2]
    angles = pos[:, None] * theta[None, :]                                              # [T, d/2]
    return angles.cos().float(), angles.sin().float()


def apply_rope(x, cos, sin, convention: str = "half"):
    """Rotate each 2-D pair of the last axis of x [..., T, d] by the angles whose cos/sin are [T, d/2]."""
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    is_numpy = isinstance(x, np.ndarray)
    xt = torch.from_numpy(x) if is_numpy else x
    cos_t = torch.as_tensor(cos, dtype=xt.dtype)
    sin_t = torch.as_tensor(sin, dtype=xt.dtype)
    half = xt.shape[-1] // 2
    if convention == "half":
        x1, x2 = xt[..., :half], xt[..., half:]        # [..., T, d/2] each
    else:
        x1, x2 = xt[..., 0::2], xt[..., 1::2]          # [..., T, d/2] each
    r1 = x1 * cos_t - x2 * sin_t
    r2 = x1 * sin_t + x2 * cos_t
    if convention == "half":
        out = torch.cat((r1, r2), dim=-1)              # [..., T, d]
    else:
        out = torch.stack((r1, r2), dim=-1).flatten(-2)  # [..., T, d], pairs interleaved back
    return out.numpy() if is_numpy else out


def half_to_adjacent(x):
    """Reorder the last axis from half-split pairs (i, i+d/2) to adjacent pairs (2i, 2i+1)."""
    d = x.shape[-1]
    order = np.arange(d).reshape(2, d // 2).T.reshape(-1)  # [0, d/2, 1, d/2+1, ...]
    return x[..., order]
