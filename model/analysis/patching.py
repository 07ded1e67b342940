"""Activation patching (causal tracing): which activations of a clean run carry the answer into a corrupt run.

Two texts of the same number of tokens, a clean one and a corrupt one (a minimal pair), and two candidate next tokens,
the answer and the foil. D = logit[answer] - logit[foil] at the last position. One activation of the clean run is
copied into the corrupt run, the rest of the corrupt run recomputed, and the patch scored
(D_patched - D_corrupt) / (D_clean - D_corrupt): 1 = that activation alone restores the clean answer, 0 = no effect.

- kind "resid": the residual stream entering block l at position p (blocks.{l}.hook_resid_pre) -> [layers, T];
- kind "head": one head's z (its attention-weighted values before the output projection, blocks.{l}.attn.hook_z)
  at every position of block l -> [layers, heads].

Both runs go as one batch of two through the blocks, their activations read at those hook points; then the patched
runs of one layer are one batch (Decoder.run_blocks): T variants of the corrupt stream entering block l, or H
variants whose block l takes one clean head each, the patch a hook at that point, run through blocks l.. together.
An activation equal in both runs (the stream before the first differing token: the model is causal) is not run: its
patched run is the corrupt run, its effect exactly 0. The patched runs hold only the positions from the first
differing token on, attending to the earlier positions' keys and values from the corrupt run (the same in every
patched run: run_blocks' past).
"""
from __future__ import annotations

import numpy as np
import torch

from model.analysis.token_args import input_ids, one_token_id
from model.decoder.core import Decoder
from model.decoder.hooks import Hook, HookFn, capture

KINDS = ("resid", "head")
MAX_PATCHING_TOKENS = 64   # a resid patching runs ~layers^2 / 2 batches of T variants of T tokens


def activation_patching(lm: Decoder, clean_text, corrupt_text, answer, foil, kind: str) -> np.ndarray:
    """Patching effects: [layers, T] for kind "resid", [layers, heads] for kind "head" (float64; see the module)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    clean = input_ids(lm, clean_text, "clean text")
    corrupt = input_ids(lm, corrupt_text, "corrupt text")
    if len(clean) != len(corrupt):
        raise ValueError(f"The clean text is {len(clean)} tokens and the corrupt text {len(corrupt)}: patching "
                         f"copies position p of one into position p of the other, so both need the same number of "
                         f"tokens. Change words for words of the same token count.")
    T = len(clean)
    if T > MAX_PATCHING_TOKENS:
        raise ValueError(f"The texts are {T} tokens; activation patching here takes at most {MAX_PATCHING_TOKENS}.")
    answer_id = one_token_id(lm, answer, "answer")
    foil_id = one_token_id(lm, foil, "foil")
    if answer_id == foil_id:
        raise ValueError("The answer and the foil are the same token: their logit difference is always 0.")
    cfg = lm.config
    points = {"resid": "hook_resid_pre", "head": "attn.hook_z"}[kind]
    with torch.inference_mode():
        pos = lm.positions(T)
        unembed = lm.lm_head.rows(torch.tensor([answer_id, foil_id]))                 # [2, D]
        direction = unembed[0] - unembed[1]                                            # [D]
        n = next(p for p in range(T + 1) if p == T or clean[p] != corrupt[p])         # the first differing token
        seen: dict[str, torch.Tensor] = {}
        read = [f"blocks.{i}.{p}" for i in range(cfg.n_layers)
                for p in {"hook_resid_pre", points, "attn.hook_rot_k", "attn.hook_v"}]
        x = lm.run_blocks(lm.embed_tokens(torch.tensor([clean, corrupt])), pos, capture(read, seen))   # [2, T, D]
        d_clean, d_corrupt = (lm.final_norm(x[:, -1]) @ direction).double().tolist()
        if abs(d_clean - d_corrupt) < 1e-6 * max(1.0, abs(d_clean)):
            raise ValueError(f"Both texts give the same logit difference ({d_clean:.4g}) between the answer and the "
                             f"foil: there is nothing for patching to restore. Pick texts (or tokens) the model "
                             f"tells apart.")
        # the corrupt run's keys and values of positions 0..n-1, which every patched run shares
        past = [(seen[f"blocks.{i}.attn.hook_rot_k"][1, :, :n], seen[f"blocks.{i}.attn.hook_v"][1, :, :n])
                for i in range(cfg.n_layers)]                                          # ([KV, n, hd],) * 2 per layer
        n_variants = T if kind == "resid" else cfg.n_heads
        patched = np.full((cfg.n_layers, n_variants), d_corrupt)                       # [L, T] or [L, H]
        step = lm.variants_per_batch(T)
        for layer in range(cfg.n_layers):
            name = f"blocks.{layer}.{points}"
            clean_part, corrupt_part = seen[name]                                      # [T, D] or [H, T, hd]
            differs = (clean_part != corrupt_part).flatten(1).any(-1).nonzero()[:, 0]  # variants that change
            if kind == "resid":
                differs = differs[differs >= n]
            corrupt_in = seen[f"blocks.{layer}.hook_resid_pre"][1, n:]                 # [T - n, D]
            for first in range(0, len(differs), step):
                chosen = differs[first:first + step]                                   # [B]
                x = lm.run_blocks(corrupt_in.expand(len(chosen), T - n, cfg.d_model), pos.rows_from(n),
                                  {name: patch(clean_part, chosen, n, kind)}, start=layer, past=past)   # [B, T-n, D]
                patched[layer, chosen.numpy()] = (lm.final_norm(x[:, -1]) @ direction).double().numpy()
    return (patched - d_corrupt) / (d_clean - d_corrupt)


def patch(clean: torch.Tensor, chosen: torch.Tensor, n: int, kind: str) -> HookFn:
    """The hook giving patched run b the clean run's activation chosen[b]: the stream entering the block at
    position chosen[b] (clean [T, D]; the runs hold positions n..), or head chosen[b]'s z (clean [H, T, hd])."""
    batch = torch.arange(len(chosen))                                                  # [B]
    if kind == "resid":
        def stream(x: torch.Tensor, hook: Hook) -> torch.Tensor:                       # [B, T - n, D]
            x = x.clone()
            x[batch, chosen - n] = clean[chosen]                                       # [B, D]
            return x
        return stream
    heads = torch.zeros(len(chosen), clean.shape[0], dtype=torch.bool)                 # [B, H]
    heads[batch, chosen] = True

    def head(z: torch.Tensor, hook: Hook) -> torch.Tensor:                            # [B, H, T - n, hd]
        return torch.where(heads[:, :, None, None], clean[:, n:], z)
    return head
