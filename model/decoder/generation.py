"""Token-by-token generation with a KV cache, recording what the model saw at each step.

Each step feeds one token through the decoder's own weights (the fused Attention and SwiGLU matrices, the same
rope_cos_sin tables and half-split rotation), attending to the rotated keys and values cached from earlier steps, so a
step costs one token's compute. The cache lives in an IncrementalDecoder made per call: nothing is stored on the
model, and one model can serve many threads at once.

A step (one new row per sequence) keeps its rows in numpy (torch's per-op overhead on one row cost 14 ms of a
41 ms step). A weight matrix holding Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 values is multiplied as int8 codes by the
native kernel (model.decoder.int8_blocks: a quarter to a third of float32's bytes, each row computed the same way in
any batch), the attention over the caches by one native call per layer for the whole batch
(model.native.attention); when every matrix is such and the model is RMSNorm / RoPE / SwiGLU throughout (Llama,
Qwen2, Qwen3), all blocks are one native call (model.native.decoder_step: the numpy norms, rotations and SiLU
between the kernels cost a third of a one-row step). Without a C compiler, or for other matrices, products run in
torch (MKL, one thread pool: numpy's OpenBLAS pool and torch's OpenMP pool spin against each other when their calls
alternate) as one product of the step's rows padded to a multiple of ROW_BLOCK, so the weights are read once per
step and a row's numbers do not depend on the batch (see affine). A prompt of up to ROWS_PREFILL_MAX tokens runs the
same way, its tokens as rows (with other prompts joining a batch at once) when every matrix goes through the native
kernel; a longer one, or without the kernel, runs in torch, as the decoder's forward does, in chunks of
PREFILL_CHUNK queries (see feed_together).

Choosing each token: next_token.py; what a step reads: step_weights.py; a step's blocks in numpy: numpy_step.py
(its products and row arithmetic: step_products.py); the settings and records: generation_records.py.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from model.decoder.generation_records import GenerationSettings, checked_integer
from model.decoder.next_token import choose_token, next_token_distribution
from model.decoder.numpy_step import mix_queries, numpy_blocks
from model.decoder.step_weights import steps_for
from model.native import attention as native_attention

PREFILL_CHUNK = 256        # prompt tokens per forward chunk: scores stay [H, 256, T]
ROWS_PREFILL_MAX = 96      # prompts up to this many tokens run as rows through the int8 kernel (see feed_together):
#                            at 64 tokens 128 against the torch forward's 156 ms (SmolLM2), 523 against 667 (0.5B)
SHARED_PREFIX_MIN = 4      # a prompt starting with this many tokens another cache holds copies them (feed_together)


class IncrementalDecoder:
    """The model run one sequence at a time with a KV cache: feed(prompt_ids), then feed([token]) per step.

    Holds one sequence's state (the rotated keys and values of every layer for up to `capacity` positions, RoPE
    tables): make one per generation and drop it with it; never store it on the model. step_rows advances several
    of them by one token each in one pass over the weights (batched generation).
    """

    def __init__(self, lm, capacity: int):
        cfg = lm.config
        self.lm = lm
        shape = (cfg.n_layers, cfg.n_kv_heads, capacity, cfg.head_dim)
        self.k = np.empty(shape, np.float32)                                          # [L, KV, C, hd] after RoPE
        self.v = np.empty(shape, np.float32)                                          # [L, KV, C, hd]
        self.weights = steps_for(lm)
        self.cos_np, self.sin_np = self.weights.rope_rows(capacity)                  # [C, hd/2] each, or None
        self.cos, self.sin = (None, None) if self.cos_np is None else (
            torch.from_numpy(self.cos_np), torch.from_numpy(self.sin_np))            # the same memory
        self.capacity = capacity
        self.length = 0                                                               # positions cached so far
        self.tokens: list[int] = []                                                   # their token ids
        self.rows_only = True          # every cached position made by step_rows: any prefix may be copied (see
                                       # copy_prefix); the torch forward's differ from them in the last bits

    def copy_prefix(self, source: IncrementalDecoder, n: int) -> None:
        """Start this empty cache with source's first n positions (its keys and values: the numbers this decoder
        would compute for the same tokens on the rows path, as every row's are the same in any batch)."""
        if self.length or not source.rows_only or n > source.length or source.lm is not self.lm:
            raise ValueError("copy_prefix needs an empty cache and a prefix the rows path made for the same model")
        self.k[:, :, :n] = source.k[:, :, :n]
        self.v[:, :, :n] = source.v[:, :, :n]
        self.tokens = source.tokens[:n]
        self.length = n

    def start_from(self, trace) -> tuple[np.ndarray, np.ndarray]:
        """Start this empty cache from a causal ForwardTrace of the prompt (its rotated keys and values, as the
        decoder's forward computed them) instead of running the prompt again: returns, as feed does, the trace's
        logits after its last token [V] float32 and that token's attention row [n_layers, n_heads, T] float16."""
        cfg, T = self.lm.config, trace.n_tokens
        if self.length or trace.keys is None or T > self.capacity or \
                trace.keys.shape != (cfg.n_layers, cfg.n_kv_heads, T, cfg.head_dim):
            raise ValueError("start_from needs an empty cache and a causal trace of this model that fits it")
        self.k[:, :, :T] = trace.keys
        self.v[:, :, :T] = trace.values
        self.tokens = list(trace.token_ids)
        self.length = T
        self.rows_only = False
        return trace.next_token_logits, trace.attention[:, :, -1, :].astype(np.float16)   # [V], [L, H, T]

    def feed(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Run ids (continuing the cached tokens) through the model. Returns the logits after the last one
        [V] float32 and its attention row [n_layers, n_heads, length] float16."""
        return feed_together([self], [ids])[0]

    def forward_chunks(self, ids: Sequence[int], row: np.ndarray) -> np.ndarray:
        """ids through the decoder's torch forward, PREFILL_CHUNK at a time; the last one's attention row into row.
        Returns the last block's output for the last token [D]."""
        for start in range(0, len(ids), PREFILL_CHUNK):
            chunk, keep = ids[start:start + PREFILL_CHUNK], start + PREFILL_CHUNK >= len(ids)
            if len(chunk) == 1:
                x = step_rows([self], chunk, [row if keep else None])                # [1, D]
            else:
                x = self._forward(torch.tensor(list(chunk)), row if keep else None).numpy()  # [n, D]
        return x[-1]

    def _forward(self, ids: torch.Tensor, row: np.ndarray | None) -> torch.Tensor:
        """ids [n > 1] at positions length..length+n-1 through every block; caches their keys and values."""
        start = self.length
        self.rows_only = False
        x = self.lm.embed(ids, start)                                                # [n, D]
        for layer, block in enumerate(self.lm.blocks):
            out, pattern = self._attention(block.attn, block.attn_norm(x), layer, start)  # [n, D], [H, n, T]
            if row is not None:
                row[layer] = pattern[:, -1].numpy()                                  # [H, T]
            x = x + out
            x = x + block.mlp(block.mlp_norm(x))                                    # [n, D]
        self.length = start + len(ids)
        self.tokens.extend(ids.tolist())
        return x

    def _attention(self, attn, h: torch.Tensor, layer: int, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Causal GQA attention of n > 1 new queries over the cached keys plus their own (half-split RoPE).
        Returns the output [n, D] and the pattern [H, n, T]."""
        end = start + h.shape[0]
        q, k, v = attn.project(h)                                                   # [H, n, hd], [KV, n, hd] x2
        cos, sin = (None, None) if self.cos is None else (self.cos[start:end], self.sin[start:end])
        self.k[layer, :, start:end] = attn.rotate(k, cos, sin).numpy()
        self.v[layer, :, start:end] = v.numpy()
        pattern, mixed = mix_queries(attn.rotate(q, cos, sin), torch.from_numpy(self.k[layer, :, :end]),
                                     torch.from_numpy(self.v[layer, :, :end]))    # [H, n, T], [H, n, hd]
        return attn.output(mixed), pattern                                         # [n, D], [H, n, T]


def feed_together(decoders: Sequence[IncrementalDecoder], id_lists: Sequence[Sequence[int]],
                  donors: Sequence[IncrementalDecoder] = ()) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each decoder's ids (continuing its cached tokens) through the model: [(logits [V] float32 after its last
    token, that token's attention row [n_layers, n_heads, length] float16)]. Runs of up to ROWS_PREFILL_MAX tokens
    go through step_rows together, one pass over the weights for all of them, when every matrix is multiplied by the
    native kernel (whose rows do not depend on each other: each decoder gets the numbers it would get alone); longer
    ones, or without the kernel, through the decoder's torch forward (MKL), one decoder and PREFILL_CHUNK tokens at
    a time. An empty decoder on the rows path whose prompt starts with SHARED_PREFIX_MIN or more tokens that another
    one's rows path holds (a donor's cache, or another prompt here) copies their keys and values instead of
    computing them again (a class often sends the same text): the same numbers, fewer rows."""
    for d, ids in zip(decoders, id_lists, strict=True):
        if not 1 <= len(ids) <= d.capacity - d.length:
            raise ValueError(f"Can feed 1 to {d.capacity - d.length} more tokens, got {len(ids)}")
    cfg = decoders[0].lm.config
    rows_path = [len(ids) == 1 or (len(ids) <= ROWS_PREFILL_MAX and d.weights.all_native)
                 for d, ids in zip(decoders, id_lists, strict=True)]
    last: list[np.ndarray | None] = [None] * len(decoders)                          # [D] each
    rows = [np.empty((cfg.n_layers, cfg.n_heads, d.length + len(ids)), np.float16)
            for d, ids in zip(decoders, id_lists, strict=True)]
    together = [i for i, fast in enumerate(rows_path) if fast]
    passes, sources = _shared_prefixes(decoders, id_lists, together, donors)
    rest = {i: id_lists[i] for i in together}
    with torch.inference_mode():
        for group in passes:
            for i in group:
                if i in sources:
                    source, n = sources[i]
                    decoders[i].copy_prefix(source, n)
                    rest[i] = id_lists[i][n:]
            if group:
                x = step_rows([decoders[i] for i in group for _ in rest[i]], [t for i in group for t in rest[i]],
                              [rows[i] if j == len(rest[i]) - 1 else None for i in group
                               for j in range(len(rest[i]))])                       # [sum n, D]
                for i, end in zip(group, np.cumsum([len(rest[i]) for i in group]) - 1, strict=True):
                    last[i] = x[end]
        for i, fast in enumerate(rows_path):
            if not fast:
                last[i] = decoders[i].forward_chunks(id_lists[i], rows[i])
    weights = decoders[0].weights
    logits = weights.logits(weights.out_norm(np.stack(last)))                        # [B, V]
    return list(zip(logits, rows, strict=True))


def _shared_prefixes(decoders: Sequence[IncrementalDecoder], id_lists: Sequence[Sequence[int]],
                     together: Sequence[int], donors: Sequence[IncrementalDecoder]) -> tuple[
        list[list[int]], dict[int, tuple[IncrementalDecoder, int]]]:
    """How the rows-path prompts `together` run (feed_together): (passes, each the prompts run together, {index:
    (source decoder, tokens copied)}). Longest prompts first, each copies its longest prefix, short of its last
    token (whose logits and attention row are computed), that a donor or a prompt of an earlier pass holds, and runs
    in the pass after its source's. A pass more costs about SHARED_PREFIX_MIN rows (the weights read once more), so
    a source one pass later must share that many tokens more."""
    placed = [(d, d.tokens, -1) for d in donors if d.rows_only and d.length]      # (source, its tokens, its pass)
    sources: dict[int, tuple[IncrementalDecoder, int]] = {}
    passes: list[list[int]] = []
    for i in sorted(together, key=lambda i: -len(id_lists[i])):
        ids, best, best_score, at = id_lists[i], None, 0, 0
        if decoders[i].length == 0:
            for source, tokens, source_pass in placed:
                n = _common_length(tokens, ids, len(ids) - 1)
                score = n - SHARED_PREFIX_MIN * (source_pass + 1)
                if n >= SHARED_PREFIX_MIN and (best is None or score > best_score):
                    best, best_score, at = (source, n), score, source_pass + 1
        if best is not None:
            sources[i] = best
        passes.extend([] for _ in range(at + 1 - len(passes)))
        passes[at].append(i)
        placed.append((decoders[i], ids, at))
    return passes, sources


def _common_length(a: Sequence[int], b: Sequence[int], most: int) -> int:
    """How many leading tokens a and b share, at most `most`."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y or n == most:
            break
        n += 1
    return n


def step_rows(decoders: Sequence[IncrementalDecoder], token_ids: Sequence[int],
              rows: Sequence[np.ndarray | None]) -> np.ndarray:
    """Tokens through every block (see the module docstring), token b continuing decoders[b]'s cache: one new token
    per sequence (a generation step), or a decoder listed for several consecutive tokens (a prompt, its tokens in
    order: each attends to the ones before it). The weight products of all rows are one matrix product, so the
    weights are read once whatever the number of rows. Writes token b's attention row into rows[b]
    ([n_layers, n_heads, position + 1]; None: not kept) and returns the last block's outputs [B, D]. With the native
    kernels, a RMSNorm / RoPE / SwiGLU model's blocks are one native call (model.native.decoder_step), others run
    block by block in numpy."""
    first = decoders[0]
    w_all = first.weights
    runs: list[tuple[IncrementalDecoder, int, int]] = []                            # (decoder, first row, count)
    for b, d in enumerate(decoders):
        if runs and runs[-1][0] is d and runs[-1][1] + runs[-1][2] == b:
            runs[-1] = (d, runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((d, b, 1))
    if len({id(d) for d, _, _ in runs}) != len(runs):
        raise ValueError("step_rows needs each sequence's tokens next to each other")
    at = np.concatenate([d.length + np.arange(count) for d, _, count in runs])     # [B] positions
    x = first.lm.embedding.rows(torch.tensor(list(token_ids))).numpy()             # [B, D]
    if w_all.positions is not None:
        x = x + w_all.positions[at]                                                  # [B, D]
    cos = sin = None
    if first.cos_np is not None:
        cos = np.concatenate([d.cos_np[d.length:d.length + count] for d, _, count in runs])  # [B, hd/2]
        sin = np.concatenate([d.sin_np[d.length:d.length + count] for d, _, count in runs])  # [B, hd/2]
    attend = None
    if native_attention.available():
        attend = native_attention.CachedAttention([d.k for d in decoders], [d.v for d in decoders], at,
                                                  [r is not None for r in rows], first.lm.config.n_heads)
    if attend is not None and w_all.native_blocks is not None:
        x = w_all.native_blocks(x, cos, sin, attend)                                # [B, D]
    else:
        x = numpy_blocks(decoders, runs, at, x, cos, sin, rows, attend)            # [B, D]
    if attend is not None:
        attend.write_patterns(rows)                                                  # [L, H, T_b] each
    for d, first_row, count in runs:
        d.length += count
        d.tokens.extend(token_ids[first_row:first_row + count])
    return x


def prepare_prompt(lm, prompt: str | Sequence[int], max_new_tokens: int) -> tuple[str, list[int], int]:
    """(text, ids, n_total): the prompt's tokens, cut at the START to context - max_new_tokens when longer (the
    BOS that encode puts before a text, if the model asks for one, stays first)."""
    prefix: list[int] = []
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ValueError("The prompt is empty. Type some text (at least one non-space character) for the model "
                             "to continue.")
        all_ids = lm.encode(prompt)
        prefix = list(lm.tokenizer.prefix_ids)
        if len(all_ids) <= len(prefix):
            raise ValueError("The prompt has no tokens this model can read (only bytes outside its vocabulary). "
                             "Type some ordinary text.")
    else:
        all_ids = [int(i) for i in prompt]
        if not all_ids:
            raise ValueError("The prompt is empty: give at least one token id.")
        bad = [i for i in all_ids if not 0 <= i < lm.config.vocab_size]
        if bad:
            raise ValueError(f"Token ids must be from 0 to {lm.config.vocab_size - 1}, got {bad[:5]}")
    room = lm.config.max_positions - max_new_tokens - len(prefix)
    if room < 1:
        raise ValueError(f"max_new_tokens must be below the model's context ({lm.config.max_positions}), "
                         f"got {max_new_tokens}")
    body = all_ids[len(prefix):]
    ids = prefix + body[-room:]
    text = prompt if isinstance(prompt, str) else lm.decode(all_ids)
    return text, ids, len(all_ids)


def starts_prompt(trace, ids: Sequence[int]) -> bool:
    """Whether trace can start a generation of prompt ids (IncrementalDecoder.start_from): a causal trace of exactly
    those tokens."""
    return trace is not None and trace.keys is not None and list(trace.token_ids) == list(ids)


def first_token_samples(lm, prompt: str | Sequence[int], settings: GenerationSettings,
                        seeds: Sequence[int]) -> np.ndarray:
    """The first new token that generate would pick with each seed (same settings otherwise), from one prompt
    forward: [len(seeds)] int64. Cheap enough for thousands of seeds (a histogram of possible openings)."""
    _, ids, _ = prepare_prompt(lm, prompt, settings.max_new_tokens)
    logits, _ = IncrementalDecoder(lm, len(ids)).feed(ids)
    dist = next_token_distribution(logits, settings)
    return np.array([choose_token(dist, np.random.default_rng(checked_integer("seed", s, 0, None))) for s in seeds],
                    dtype=np.int64)
