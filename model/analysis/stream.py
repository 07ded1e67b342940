"""The residual stream of a traced text, replayed with the decoder's own blocks, and its size layer by layer.

A ForwardTrace keeps the residual stream only every CHECKPOINT_EVERY layers. The helpers here re-run the model's
blocks from a checkpoint (Decoder.rerun, as LanguageModel.layer_detail does), reading what they need at the blocks'
hook points, so every number is the forward pass's own, bit for bit; nothing here re-implements a block. Callers
wrap them in torch.inference_mode().
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from model.decoder.core import Decoder, Positions
from model.decoder.hooks import Hook
from model.decoder.trace import ForwardTrace


@dataclass(frozen=True, eq=False)
class ResidualNorms:
    """L2 norms of the residual stream and of what each layer adds to it, for every position."""

    resid: np.ndarray  # [n_layers + 1, T] float32: row 0 the embeddings, row l after layer l
    attn: np.ndarray   # [n_layers, T] float32: norm of layer l's attention output (what it adds)
    mlp: np.ndarray    # [n_layers, T] float32: norm of layer l's MLP output


def check_layer(lm: Decoder, layer: int) -> int:
    n = lm.config.n_layers
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer < n:
        raise ValueError(f"layer must be an integer from 0 to {n - 1}, got {layer!r}")
    return int(layer)


def check_position(trace: ForwardTrace, position: int) -> int:
    """position as an index from 0 (negative positions count from the end, as in Python)."""
    T = trace.n_tokens
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or not -T <= position < T:
        raise ValueError(f"position must be an integer from {-T} to {T - 1} (the text has {T} tokens), "
                         f"got {position!r}")
    return int(position) % T


def layer_input(lm: Decoder, trace: ForwardTrace, layer: int, pos: Positions) -> torch.Tensor:
    """The residual stream entering `layer` ([T, D] float32), re-run from the nearest checkpoint."""
    return lm.rerun(trace, layer, layer, pos=pos)[0]


def residual_stream(lm: Decoder, trace: ForwardTrace, pos: Positions) -> Iterator[torch.Tensor]:
    """The residual stream after the embedding, then after every layer: n_layers + 1 tensors [T, D]."""
    x = torch.from_numpy(trace.checkpoints[0].copy())[None]                # [1, T, D]
    yield x[0]
    for i in range(lm.config.n_layers):
        x = lm.run_blocks(x, pos, start=i, stop=i + 1)
        yield x[0]


def residual_norms(lm: Decoder, trace: ForwardTrace) -> ResidualNorms:
    """Norm of every position's residual stream after every layer, and of each layer's attention and MLP outputs.

    One pass through the blocks, the norms taken at their hook points: about the cost of one forward pass.
    """
    L, T = lm.config.n_layers, trace.n_tokens
    resid = np.empty((L + 1, T), dtype=np.float32)
    attn = np.empty((L, T), dtype=np.float32)
    mlp = np.empty((L, T), dtype=np.float32)
    into = {"hook_attn_out": attn, "hook_mlp_out": mlp, "hook_resid_post": resid[1:]}

    def norms(x: torch.Tensor, hook: Hook) -> None:                       # x [1, T, D]
        into[hook.name.split(".", 2)[2]][hook.layer] = torch.linalg.vector_norm(x[0], dim=-1).numpy()

    with torch.inference_mode():
        resid[0] = torch.linalg.vector_norm(torch.from_numpy(trace.checkpoints[0].copy()), dim=-1).numpy()
        lm.rerun(trace, 0, hooks={f"blocks.{i}.{point}": norms for i in range(L) for point in into})
    return ResidualNorms(resid=resid, attn=attn, mlp=mlp)
