"""Logit lens: what the model would predict if the residual stream stopped after each layer.

Each row reads the residual stream through the model's own final RMSNorm and LM head (nostalgebraist's logit
lens): row 0 reads the embeddings, row l the stream after layer l, and row n_layers is the model's real output.
The LM head runs over the vocabulary in chunks, so a layers x positions grid never holds [layers, T, vocab].
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from model.analysis.stream import check_position, residual_stream
from model.decoder.core import Decoder
from model.decoder.trace import ForwardTrace

VOCAB_CHUNK = 1024  # LM-head rows dequantized and multiplied at a time
ROW_BLOCK = 1024    # residual rows per batch: [ROW_BLOCK, VOCAB_CHUNK] float32 logits (4 MB) at a time
MAX_TOP_K = 100


@dataclass(frozen=True, eq=False)
class LensTop:
    """The top-k tokens of the logit lens at every (layer, position)."""

    ids: np.ndarray        # [n_layers + 1, P, k] int64 token ids, most likely first; row 0 = embeddings
    probs: np.ndarray      # [n_layers + 1, P, k] float32 softmax probabilities over the whole vocabulary
    positions: np.ndarray  # [P] int64 the token positions of the columns


def logit_lens(lm: Decoder, trace: ForwardTrace, position: int = -1) -> np.ndarray:
    """[n_layers + 1, vocab_size] float32 logits at `position`: row 0 from the embeddings, row l after layer l
    (row n_layers == the model's logits there)."""
    p = check_position(trace, position)
    with torch.inference_mode():
        pos = lm.positions_for(trace)
        rows = torch.stack([x[p].clone() for x in residual_stream(lm, trace, pos)])  # [L + 1, D]
        normed = lm.final_norm(rows)                                                # [L + 1, D]
        logits = torch.empty(rows.shape[0], lm.config.vocab_size)                   # [L + 1, V]
        for start, table in _lm_head_chunks(lm):
            logits[:, start:start + table.shape[0]] = F.linear(normed, table)
    return logits.numpy()


def logit_lens_top(lm: Decoder, trace: ForwardTrace, k: int = 5,
                   positions: Sequence[int] | None = None) -> LensTop:
    """Top-k ids and probabilities of the logit lens for every layer row and every position (or the given ones).

    The residual rows of all layers are gathered into blocks of ROW_BLOCK rows, and each block is read through the
    LM head VOCAB_CHUNK tokens at a time, so memory stays at a few tens of MB even for 512 positions. Time: one
    forward pass plus (n_layers + 1) * P rows of the LM head, which dominates for long texts.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_TOP_K:
        raise ValueError(f"k must be an integer from 1 to {MAX_TOP_K}, got {k!r}")
    cols = np.arange(trace.n_tokens) if positions is None else \
        np.array([check_position(trace, q) for q in positions], dtype=np.int64)
    if cols.size == 0:
        raise ValueError("positions is empty: pass None for every position, or at least one position")
    n_rows = (lm.config.n_layers + 1) * cols.size
    ids = np.empty((n_rows, k), dtype=np.int64)
    probs = np.empty((n_rows, k), dtype=np.float32)
    index = torch.from_numpy(cols)
    with torch.inference_mode():
        pos = lm.positions_for(trace)
        normed = (lm.final_norm(x[index]) for x in residual_stream(lm, trace, pos))
        done = 0
        for rows in _rebatch(normed, ROW_BLOCK):                                    # [<= ROW_BLOCK, D]
            block_ids, block_probs = _top_k(lm, rows, k)
            ids[done:done + rows.shape[0]] = block_ids.numpy()
            probs[done:done + rows.shape[0]] = block_probs.numpy()
            done += rows.shape[0]
    shape = (lm.config.n_layers + 1, cols.size, k)
    return LensTop(ids=ids.reshape(shape), probs=probs.reshape(shape), positions=cols)


def _rebatch(chunks: Iterator[torch.Tensor], size: int) -> Iterator[torch.Tensor]:
    """The rows of chunks ([n_i, D] each, in order) regrouped into batches of `size` rows (the last may be fewer)."""
    pending: list[torch.Tensor] = []
    n_pending = 0
    for chunk in chunks:
        while chunk.shape[0]:
            take = chunk[:size - n_pending]
            pending.append(take)
            n_pending += take.shape[0]
            chunk = chunk[take.shape[0]:]
            if n_pending == size:
                yield torch.cat(pending)
                pending, n_pending = [], 0
    if pending:
        yield torch.cat(pending)


def _lm_head_chunks(lm: Decoder):
    """(first row, [chunk, D] float32 rows of the LM head) for the whole vocabulary, VOCAB_CHUNK rows at a time."""
    V = lm.config.vocab_size
    for start in range(0, V, VOCAB_CHUNK):
        yield start, lm.lm_head.rows(torch.arange(start, min(start + VOCAB_CHUNK, V)))


def _top_k(lm: Decoder, h: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k ids and softmax probabilities of the LM head on rows h [N, D], one vocabulary chunk at a time:
    a running top-k and a running log-sum-exp (max m, sum of exp(logit - m)) replace the full [N, V] logits."""
    N = h.shape[0]
    top_logits = torch.full((N, k), float("-inf"))                                 # [N, k]
    top_ids = torch.zeros((N, k), dtype=torch.int64)                               # [N, k]
    running_max = torch.full((N,), float("-inf"))                                  # [N]
    running_sum = torch.zeros(N)                                                   # [N]
    for start, table in _lm_head_chunks(lm):
        logits = F.linear(h, table)                                                # [N, chunk]
        chunk_logits, chunk_ids = logits.topk(min(k, logits.shape[1]), dim=-1)     # [N, k]
        merged_logits = torch.cat((top_logits, chunk_logits), dim=-1)              # [N, 2k]
        merged_ids = torch.cat((top_ids, chunk_ids + start), dim=-1)               # [N, 2k]
        top_logits, best = merged_logits.topk(k, dim=-1)                           # [N, k]
        top_ids = merged_ids.gather(-1, best)
        new_max = torch.maximum(running_max, chunk_logits[:, 0])                   # [N]
        running_sum = running_sum * torch.exp(running_max - new_max) + \
            logits.sub_(new_max[:, None]).exp_().sum(-1)
        running_max = new_max
    return top_ids, torch.exp(top_logits - running_max[:, None]) / running_sum[:, None]
