"""A generation step's blocks one by one in numpy (numpy_blocks): the path for models the native decoder step does
not cover (GPT-2's LayerNorm, GELU and biases) and for every model where no C compiler works. Products go through
step_products.affine (the native int8 kernel or torch); the attention through the native cached attention or numpy.

Why not the torch block (decoder/blocks.py, which can run a step with past keys and values): it loses in both
places this runs. One row after 64 cached positions, SmolLM2's shapes, torch on 1 thread (2-core Xeon, busy): with
the kernels 17-34 ms a step here against 37-75 ms through the block (SmolLM2 off its C step), 21-39 against 34-64 ms
(a GPT-2 of the same shapes); without them a step's products must be padded to a fixed row count so that a
sequence's numbers are the same alone and in a batch, and eight rows cost 85-183 ms here against 98-210 ms."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from model.decoder.step_products import affine, gelu_tanh, rms_rows, rotate_half_split
from model.native import attention as native_attention


def numpy_blocks(decoders: Sequence, runs: Sequence[tuple], at: np.ndarray, x: np.ndarray, cos: np.ndarray | None,
                 sin: np.ndarray | None, rows: Sequence[np.ndarray | None],
                 attend: native_attention.CachedAttention | None) -> np.ndarray:
    """step_rows' blocks one by one in numpy for decoders (model.decoder.generation.IncrementalDecoder: their caches
    and model; runs: (decoder, first row, rows)): x [B, D] at positions at, cos / sin [B, hd/2] (None: no RoPE); the
    attention by attend (native) or numpy, which then writes the caches and rows itself."""
    first = decoders[0]
    cfg = first.lm.config
    B, hd, n_q, n_kv = len(decoders), cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
    n_qk = (n_q + n_kv) * hd
    if cos is not None:
        cos, sin = cos[:, None], sin[:, None]                                        # [B, 1, hd/2] each
    mixed = np.empty((B, n_q, hd), np.float32)                                      # [B, H, hd]
    for layer, w in enumerate(first.weights.blocks):
        qkv = affine(w.qkv, w.attn_norm(x), w.qkv_bias)                            # [B, (H + 2 KV) hd]
        q, k = qkv[:, :n_q * hd].reshape(B, n_q, hd), qkv[:, n_q * hd:n_qk].reshape(B, n_kv, hd)
        if w.q_norm is not None:
            q, k = rms_rows(q, w.q_norm, cfg.norm_eps), rms_rows(k, w.k_norm, cfg.norm_eps)
        if cos is not None:
            q, k = rotate_half_split(q, cos, sin), rotate_half_split(k, cos, sin)          # [B, H, hd], [B, KV, hd]
        v = qkv[:, n_qk:].reshape(B, n_kv, hd)                                      # [B, KV, hd]
        if attend is not None:
            mixed = attend(layer, q, k, v, 1.0 / math.sqrt(hd))                     # caches written, [B, H, hd]
        else:
            for d, b, count in runs:
                d.k[layer, :, d.length:d.length + count] = k[b:b + count].transpose(1, 0, 2)
                d.v[layer, :, d.length:d.length + count] = v[b:b + count].transpose(1, 0, 2)
            for b, (d, p) in enumerate(zip(decoders, at, strict=True)):
                pattern, mixed[b] = mix_one_query(q[b], d.k[layer, :, :p + 1], d.v[layer, :, :p + 1])
                if rows[b] is not None:
                    rows[b][layer] = pattern                                         # [H, T_b]
        x = x + affine(w.o, mixed.reshape(B, -1), w.o_bias)                         # [B, D]
        up = affine(w.up, w.mlp_norm(x), w.up_bias)                                 # [B, 2 F] or [B, F]
        if w.gated:
            gate, up = up[:, :cfg.d_ff], up[:, cfg.d_ff:]                            # [B, F] each
            with np.errstate(over="ignore"):                                        # exp(-gate) = inf: silu = -0
                act = gate / (1 + np.exp(-gate)) * up                                # [B, F]
        else:
            act = gelu_tanh(up)                                                     # [B, F]
        x = x + affine(w.down, act, w.down_bias)                                    # [B, D]
    return x


def mix_queries(q_rot: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The last n of T positions attend causally (a prompt chunk), one KV group at a time as the decoder's Attention:
    q_rot [H, n, hd], keys and values [KV, T, hd] -> pattern [H, n, T], mixed [H, n, hd]."""
    H, n, hd = q_rot.shape
    kv_heads, T, _ = keys.shape
    g = H // kv_heads
    future = torch.arange(T)[None, :] > torch.arange(T - n, T)[:, None]             # [n, T] True where j > i
    pattern = torch.empty(H, n, T)                                                  # [H, n, T]
    mixed = torch.empty(H, n, hd)                                                   # [H, n, hd]
    for kv in range(kv_heads):
        heads = slice(kv * g, (kv + 1) * g)                                         # query heads reading KV head kv
        scores = torch.mm(q_rot[heads].reshape(g * n, hd), keys[kv].T).mul_(1.0 / math.sqrt(hd)).view(g, n, T)
        pattern[heads] = torch.softmax(scores.masked_fill_(future, float("-inf")), dim=-1)  # [g, n, T]
        torch.mm(pattern[heads].view(g * n, T), values[kv], out=mixed[heads].view(g * n, hd))  # [g n, hd]
    return pattern, mixed


def mix_one_query(q_rot: np.ndarray, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One query per head over T positions, all heads of a KV group in one product: q_rot [H, hd], keys and values
    [KV, T, hd] -> pattern [H, T], mixed [H, hd]."""
    H, hd = q_rot.shape
    kv_heads, T, _ = keys.shape
    q = torch.from_numpy(q_rot.reshape(kv_heads, H // kv_heads, hd))                # [KV, g, hd]
    scores = torch.matmul(q, torch.from_numpy(keys).transpose(1, 2)).numpy()        # [KV, g, T]
    scores *= np.float32(1.0 / math.sqrt(hd))                                       # as the decoder: q.k, then scale
    scores -= scores.max(-1, keepdims=True)                                         # softmax over keys, in place
    pattern = np.exp(scores, out=scores)
    pattern /= pattern.sum(-1, keepdims=True)                                       # [KV, g, T]
    mixed = torch.matmul(torch.from_numpy(pattern), torch.from_numpy(values)).numpy()  # [KV, g, hd]
    return pattern.reshape(H, T), mixed.reshape(H, hd)
