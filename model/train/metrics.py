"""What is measured while training, as pure functions: loss on the predictable targets, attention entropy,
previous-token and induction scores per head, gradient norms per layer."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def predictable_loss(logits: torch.Tensor, tokens: torch.Tensor, predictable: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (nats) of the predictable targets: position t-1's logits predict token t.
    logits [B, T, V], tokens and predictable [B, T] -> scalar"""
    target_mask = predictable[:, 1:]                                                         # [B, T-1]
    return F.cross_entropy(logits[:, :-1][target_mask], tokens[:, 1:][target_mask])


def attention_entropy(pattern: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of every head's attention rows, over the batch and every query after the first (the
    first can only look at itself). pattern [B, H, T, T] -> [H]"""
    p = pattern[:, :, 1:]                                                                    # [B, H, T-1, T]
    return -(p * p.clamp_min(1e-30).log()).sum(-1).mean(dim=(0, 2))


def previous_token_score(pattern: torch.Tensor) -> torch.Tensor:
    """Mean attention from each token to the one just before it. pattern [B, H, T, T] -> [H]"""
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))


def induction_score(pattern: torch.Tensor, predictable: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """Mean attention, from the token before each predictable target of a repeated segment, to the token that
    followed that token's earlier occurrence (the target's source): what an induction head attends to.
    pattern [B, H, T, T], predictable and source [B, T] -> [H]"""
    b, t = predictable[:, 1:].nonzero(as_tuple=True)                                         # targets at t + 1
    return pattern[b, :, t, source[b, t + 1]].mean(dim=0)                                    # [N, H] -> [H]


def layer_grad_norms(blocks: nn.ModuleList) -> torch.Tensor:
    """The L2 norm of every block's parameter gradients together (before clipping). [n_layers]"""
    return torch.stack([torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad)
                                                              for p in block.parameters() if p.grad is not None]))
                        for block in blocks])
