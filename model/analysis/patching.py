"""Activation patching (causal tracing): which activations of a clean run carry the answer into a corrupt run.

Two texts of the same number of tokens, a clean one and a corrupt one (a minimal pair), and two candidate next tokens,
the answer and the foil. D = logit[answer] - logit[foil] at the last position. One activation of the clean run is
copied into the corrupt run, the rest of the corrupt run recomputed, and the patch scored
(D_patched - D_corrupt) / (D_clean - D_corrupt): 1 = that activation alone restores the clean answer, 0 = no effect.

- kind "resid": the residual stream entering block l at position p -> [layers, T];
- kind "head": one head's mixed values (its attention-weighted values before the output projection) at every
  position of block l -> [layers, heads].

The patched runs of one layer are one batch (model.analysis.batched_forward): T variants of the corrupt stream
entering block l, or H variants whose block l takes one clean head each, run through blocks l.. together. An
activation equal in both runs (the stream before the first differing token: the model is causal) is not run: its
patched run is the corrupt run, its effect exactly 0. The patched runs hold only the positions from the first
differing token on, attending to the earlier positions' keys and values from the corrupt run (the same in every
patched run).
"""
from __future__ import annotations

import numpy as np
import torch

from model.analysis.batched_forward import HeadPatch, batch_size, block_forward, run_from
from model.analysis.token_args import input_ids, one_token_id
from model.decoder.core import Decoder

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
    with torch.inference_mode():
        pos = lm.positions(T)
        unembed = lm.lm_head.rows(torch.tensor([answer_id, foil_id]))                 # [2, D]
        direction = unembed[0] - unembed[1]                                            # [D]
        x = torch.stack((lm.embed(torch.tensor(clean)), lm.embed(torch.tensor(corrupt))))   # [2, T, D]
        streams, mixed, past = [], [], []          # per layer: [2, T, D], [2, H, T, hd], corrupt's ([KV, n, hd],) * 2
        n = next(p for p in range(T + 1) if p == T or clean[p] != corrupt[p])         # the first differing token
        with lm.pass_threads(2 * T):
            for block in lm.blocks:
                streams.append(x)
                x, m, (k, v) = block_forward(lm, block, x, pos)
                mixed.append(m)
                past.append((k[1, :, :n], v[1, :, :n]))
            d_clean, d_corrupt = (lm.final_norm(x[:, -1]) @ direction).double().tolist()
        if abs(d_clean - d_corrupt) < 1e-6 * max(1.0, abs(d_clean)):
            raise ValueError(f"Both texts give the same logit difference ({d_clean:.4g}) between the answer and the "
                             f"foil: there is nothing for patching to restore. Pick texts (or tokens) the model "
                             f"tells apart.")
        n_variants = T if kind == "resid" else cfg.n_heads
        patched = np.full((cfg.n_layers, n_variants), d_corrupt)                       # [L, T] or [L, H]
        step = batch_size(lm, T)
        for layer in range(cfg.n_layers):
            # the patched runs hold positions n.. only: before n both texts are the same tokens (causal)
            clean_part, corrupt_part = (streams if kind == "resid" else mixed)[layer]   # [T, D] or [H, T, hd]
            differs = (clean_part != corrupt_part).flatten(1).any(-1).nonzero()[:, 0]  # variants that change
            if kind == "resid":
                differs = differs[differs >= n]
            for first in range(0, len(differs), step):
                chosen = differs[first:first + step]                                   # [B]
                batch = torch.arange(len(chosen))                                      # [B]
                corrupt_in = streams[layer][1][n:].expand(len(chosen), T - n, cfg.d_model).clone()   # [B, T-n, D]
                patch = None
                if kind == "resid":
                    corrupt_in[batch, chosen - n] = streams[layer][0][chosen]          # [B, D]
                else:
                    heads = torch.zeros(len(chosen), cfg.n_heads, dtype=torch.bool)     # [B, H]
                    heads[batch, chosen] = True
                    patch = HeadPatch(heads, mixed[layer][0][:, n:])                    # [H, T-n, hd]
                with lm.pass_threads(len(chosen) * (T - n)):
                    final = run_from(lm, corrupt_in, layer, pos, patch, past)          # [B, D]
                patched[layer, chosen.numpy()] = (final @ direction).double().numpy()
    return (patched - d_corrupt) / (d_clean - d_corrupt)
