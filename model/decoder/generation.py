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
step and a row's numbers do not depend on the batch (see _affine). A prompt of up to ROWS_PREFILL_MAX tokens runs the
same way, its tokens as rows (with other prompts joining a batch at once) when every matrix goes through the native
kernel; a longer one, or without the kernel, runs in torch, as the decoder's forward does, in chunks of
PREFILL_CHUNK queries (see feed_together).

Choosing a token uses model/lessons/sampling.py: temperature, then top-k, then top-p, renormalize, then one draw
(inverse_cdf) from a numpy Generator made once per call from the seed (temperature 0: greedy argmax); the softmax
and its entropy are one native call where the kernels run (model.native.softmax_entropy), and a batch's rows without
top-k / top-p are surveyed and drawn natively too (choose_steps, model.native.token_choice).
"""
from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from model.decoder.blocks import SwiGLU, Weight
from model.decoder.embedding import DenseEmbedding
from model.decoder.int8_blocks import Int8Blocks, int8_blocks_of
from model.decoder.matrices import QuantizedMatrix
from model.decoder.rope import rope_cos_sin
from model.lessons import sampling
from model.native import attention as native_attention
from model.native import decoder_step as native_step
from model.native import softmax_entropy as native_softmax
from model.native import token_choice
from model.native.decoder_step import DecoderStep

MAX_NEW_TOKENS = 256
N_CANDIDATES = 10          # top candidates recorded per step
DRAW_BLOCK = 512           # entries per block in a draw over a long distribution (see inverse_cdf)
PREFILL_CHUNK = 256        # prompt tokens per forward chunk: scores stay [H, 256, T]
HEAD_CHUNK_ROWS = 1024     # LM-head rows converted to float32 at a time (2.4 MB)
ROW_BLOCK = 8              # rows per weight product in a one-token step: a multiple of it (see _affine)
ROWS_PREFILL_MAX = 96      # prompts up to this many tokens run as rows through the int8 kernel (see feed_together):
#                            at 64 tokens 128 against the torch forward's 156 ms (SmolLM2), 523 against 667 (0.5B)
SHARED_PREFIX_MIN = 4      # a prompt starting with this many tokens another cache holds copies them (feed_together)


@dataclass(frozen=True)
class GenerationSettings:
    """How to pick each new token. temperature 0 means greedy (argmax; top_k and top_p then change nothing)."""

    max_new_tokens: int = 32
    temperature: float = 1.0
    top_k: int = 0        # 0: off
    top_p: float = 1.0    # 1: off
    seed: int = 0

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "max_new_tokens", _integer("max_new_tokens", self.max_new_tokens, 1, MAX_NEW_TOKENS))
        t = _number("temperature", self.temperature)
        if t != 0 and not sampling.T_MIN <= t <= sampling.T_MAX:
            raise ValueError(f"temperature must be 0 (greedy) or from {sampling.T_MIN} to {sampling.T_MAX}, "
                             f"got {self.temperature!r}")
        set_(self, "temperature", t)
        set_(self, "top_k", _integer("top_k", self.top_k, 0, None))
        p = _number("top_p", self.top_p)
        if not 0 < p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (1 turns it off), got {self.top_p!r}")
        set_(self, "top_p", p)
        set_(self, "seed", _integer("seed", self.seed, 0, None))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True, eq=False)
class Candidates:
    """The most probable next tokens at one step (best first), before and after filtering."""

    ids: np.ndarray             # [N] int64, by decreasing probability (the order is the same at every temperature)
    tokens: tuple[str, ...]     # readable labels (lm.token_strings)
    probs: np.ndarray           # [N] float64 after temperature, before top-k/top-p (greedy: the T=1 probabilities)
    raw_probs: np.ndarray       # [N] float64 at T=1
    kept: np.ndarray            # [N] bool, survived top-k then top-p (greedy: only the argmax)
    sampling_probs: np.ndarray  # [N] float64 the distribution actually drawn from (0 where filtered out)


@dataclass(frozen=True, eq=False)
class GenerationStep:
    """Step t: the new token, what it was chosen from, and the attention row of the position that predicted it."""

    index: int                  # t (0 for the first new token)
    token_id: int
    token: str                  # readable label
    candidates: Candidates
    rank: int                   # 0 = the most probable token
    prob: float                 # probability it was drawn with (after temperature + filtering; greedy: 1)
    temperature_prob: float     # after temperature, before filtering (greedy: the T=1 probability)
    raw_prob: float             # at T=1, no filtering
    entropy_bits: float         # of the distribution after temperature, before filtering (greedy: at T=1)
    n_kept: int                 # tokens left after top-k/top-p (greedy: 1)
    attention: np.ndarray       # [n_layers, n_heads, prompt_len + t] float16: the last fed token's attention over
    #                             every token so far (itself included), the row that produced this step's logits


@dataclass(frozen=True, eq=False)
class Generation:
    """A prompt, the settings, and every generated step."""

    prompt: str                 # the prompt text (decoded from the ids when ids were given)
    prompt_ids: list[int]       # the tokens fed to the model (after truncation)
    prompt_tokens: list[str]    # their readable labels
    truncated: bool             # the prompt was longer than context - max_new_tokens: its START was cut
    n_prompt_tokens_total: int  # prompt tokens before truncation
    settings: GenerationSettings
    steps: tuple[GenerationStep, ...]
    new_text: str               # lm.decode(new_token_ids), the end-of-sequence token's text included
    stop_reason: str            # "eos", "length" or "cancelled"
    eos_token_id: int | None

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids)

    @property
    def new_token_ids(self) -> list[int]:
        return [s.token_id for s in self.steps]

    @property
    def new_tokens(self) -> list[str]:
        return [s.token for s in self.steps]

    @property
    def tokens(self) -> list[str]:
        """Labels of prompt + new tokens: steps[t].attention runs over tokens[:prompt_len + t]."""
        return self.prompt_tokens + self.new_tokens

    @property
    def nbytes(self) -> int:
        """Approximate memory held (attention rows dominate), for cache budgets."""
        return sum(s.attention.nbytes + 64 * N_CANDIDATES for s in self.steps) + 16 * self.prompt_len


@dataclass(frozen=True, eq=False)
class TokenDistribution:
    """The next-token distributions at one step, over the whole vocabulary."""

    raw: np.ndarray       # [V] float64 softmax at T=1
    probs: np.ndarray     # [V] float64 after temperature (greedy: raw)
    keep: np.ndarray      # [V] bool after top-k then top-p (greedy: the argmax only)
    sampling: np.ndarray  # [V] float64 renormalized over keep: what the token is drawn from
    entropy_bits: float   # of probs


def next_token_distribution(logits: np.ndarray, settings: GenerationSettings) -> TokenDistribution:
    """Temperature, then top-k, then top-p, renormalized (model/sampling.py); greedy keeps the argmax only. Skips the
    passes that change nothing (temperature 1, no top-k / top-p): the same numbers, a third of a step's choosing.
    Each softmax and its entropy come from one native call where it runs (model.native.softmax_entropy)."""
    logits = np.ascontiguousarray(logits)[None]                                      # [1, V]
    softmaxes = _row_softmaxes(logits, [settings])
    return _distribution(logits[0], settings, softmaxes[0, 1.0], softmaxes.get((0, settings.temperature)))


def choose_steps(lm, made: Sequence[int], logits: np.ndarray, settings: Sequence[GenerationSettings],
                 rngs: Sequence[np.random.Generator], rows: Sequence[np.ndarray],
                 workspace: SoftmaxWorkspace | None = None) -> list[GenerationStep]:
    """Step made[b] of each row's generation from its logits [B, V]: its distribution (next_token_distribution), one
    draw with its own generator (choose_token) and the record (record_step) with attention row rows[b]. Rows greedy
    or sampled without top-k / top-p are surveyed and drawn for the whole batch in two native calls
    (model.native.token_choice: the same tokens and records, but where a uniform falls within rounding of a
    boundary); the others, and every row without the kernels, in numpy. workspace: where the softmaxes go (one
    caller's, reused step after step: nothing returned refers to it)."""
    logits = np.ascontiguousarray(logits)                                            # [B, V]
    softmaxes = _row_softmaxes(logits, settings, workspace)
    drawn_from = {b: softmaxes[b, 1.0 if s.greedy else s.temperature] for b, s in enumerate(settings)}
    plain = [b for b, s in enumerate(settings) if token_choice.available() and drawn_from[b][2] and
             (s.greedy or (s.top_k == 0 and s.top_p == 1.0))]
    steps: dict[int, GenerationStep] = {}
    if plain:
        choice = token_choice.TokenChoice([drawn_from[b][0] for b in plain], min(N_CANDIDATES, logits.shape[1]))
        V = logits.shape[1]
        # random(), not random(1): the same number, without handing the GIL on (an array's draw does: ~1 ms a row
        # while a class's page runs want it); a one-hot distribution draws no uniform
        u = [rngs[b].random() if not settings[b].greedy and (n == V or n > 1) else -1.0
             for b, n in zip(plain, choice.positive, strict=True)]
        tokens, ranks = choice.draw(u)
        for i, b in enumerate(plain):
            p, entropy, _ = drawn_from[b]
            token, top = int(tokens[i]), choice.top[i]
            if settings[b].greedy:
                kept, sampling_probs, prob, n_kept = top == token, (top == token).astype(np.float64), 1.0, 1
            else:
                kept, sampling_probs, prob, n_kept = p[top] > 0, p[top], float(p[token]), int(choice.positive[i])
            steps[b] = _step(lm, made[b], token, top, int(ranks[i]), p, softmaxes[b, 1.0][0], kept, sampling_probs,
                             prob, entropy(), n_kept, rows[b])
    for b, s in enumerate(settings):
        if b not in steps:
            dist = _distribution(logits[b], s, softmaxes[b, 1.0], softmaxes.get((b, s.temperature)))
            steps[b] = record_step(lm, made[b], choose_token(dist, rngs[b]), dist, rows[b])
    return [steps[b] for b in range(len(settings))]


class SoftmaxWorkspace:
    """A float64 buffer for a batch's softmaxes that grows as needed and is reused (see choose_steps)."""

    def __init__(self):
        self._buffer = np.empty((0, 0), np.float64)

    def rows(self, n: int, V: int) -> np.ndarray:
        """A C-order float64 [>= n, V] array (its contents: whatever the last use left)."""
        if self._buffer.shape[1] != V or self._buffer.shape[0] < n:
            self._buffer = np.empty((n, V), np.float64)
        return self._buffer


def _row_softmaxes(logits: np.ndarray, settings: Sequence[GenerationSettings],
                   workspace: SoftmaxWorkspace | None = None) -> dict[
        tuple[int, float], tuple[np.ndarray, Callable[[], float], bool]]:
    """{(row, temperature): softmax} for every row at T = 1 and at its temperature (see _softmax_entropies)."""
    wanted = [(b, 1.0) for b in range(len(logits))] + [
        (b, s.temperature) for b, s in enumerate(settings) if not s.greedy and s.temperature != 1.0]
    out = None if workspace is None else workspace.rows(len(wanted), logits.shape[1])
    return dict(zip(wanted, _softmax_entropies(logits, wanted, out), strict=True))


def _distribution(logits: np.ndarray, settings: GenerationSettings, raw_softmax, softmax) -> TokenDistribution:
    """One row's distribution from its softmax at T = 1 and at its temperature (None: the same), each (probs [V]
    float64, a function giving its entropy in bits)."""
    raw, raw_entropy, _ = raw_softmax
    if settings.greedy:
        keep = np.zeros(raw.shape, dtype=bool)
        keep[int(np.argmax(logits))] = True          # first maximum, as torch.argmax
        return TokenDistribution(raw, raw, keep, keep.astype(np.float64), raw_entropy())
    probs, entropy, _ = softmax or raw_softmax
    if settings.top_k == 0 and settings.top_p == 1.0:       # what filter_probs gives then: softmax sums to 1
        return TokenDistribution(raw, probs, probs > 0, probs, entropy())
    keep, kept = sampling.filter_probs(probs, settings.top_k, settings.top_p)
    return TokenDistribution(raw, probs, keep, kept, entropy())


def _softmax_entropies(logits: np.ndarray, wanted: Sequence[tuple[int, float]],
                       out: np.ndarray | None = None) -> list[tuple[np.ndarray, Callable[[], float], bool]]:
    """For each (row, temperature): softmax(logits[row] / temperature) [V] float64, a function giving its entropy in
    bits, and whether it came from the kernel (finite logits): natively all at once (model.native.softmax_entropy),
    else numpy's softmax, and its entropy only when asked for."""
    done = native_softmax.softmax_entropy_rows(logits, [b for b, _ in wanted], [t for _, t in wanted], out)
    softmaxes = []
    for i, (b, t) in enumerate(wanted):
        if done is not None and done[i] is not None:
            p, h = done[i]
            softmaxes.append((p, lambda h=h: h, True))
        else:
            p = sampling.softmax(logits[b], t)
            softmaxes.append((p, lambda p=p: float(sampling.entropy_bits(p)), False))
    return softmaxes


def choose_token(dist: TokenDistribution, rng: np.random.Generator) -> int:
    """One draw from the filtered distribution (a one-hot distribution, as greedy's, consumes no randomness): an
    inverse-CDF draw with one uniform, as sampling.sample_with, over the kept entries."""
    kept = None if dist.keep.all() else np.flatnonzero(dist.keep)                   # None: every token
    if kept is not None and len(kept) == 1:
        return int(kept[0])
    drawn = inverse_cdf(dist.sampling if kept is None else dist.sampling[kept], rng.random())
    return drawn if kept is None else int(kept[drawn])


def inverse_cdf(weights: np.ndarray, u: float) -> int:
    """The first index whose cumulative weight exceeds u times the total (u in [0, 1)): index i with probability
    weights[i] / total, never one of weight 0. A long array goes by DRAW_BLOCK-entry blocks (the block's cumulative
    sum, then the entries' within it) instead of one cumulative sum of all of it (0.2 ms at 49,152)."""
    n = len(weights)
    if n <= 4 * DRAW_BLOCK:
        cdf = np.cumsum(weights)                                                      # [n]
        return _first_above(cdf, u * cdf[-1], weights)
    starts = np.arange(0, n, DRAW_BLOCK)                                              # [blocks]
    ends = np.cumsum(np.add.reduceat(weights, starts))                                # [blocks] cumulative
    target = u * ends[-1]
    b = _first_above(ends, target, np.diff(ends, prepend=0.0))
    inner = np.cumsum(weights[starts[b]:starts[b] + DRAW_BLOCK]) + (ends[b - 1] if b else 0.0)   # [<= block]
    return int(starts[b]) + _first_above(inner, target, weights[starts[b]:starts[b] + DRAW_BLOCK])


def _first_above(cumulative: np.ndarray, target: float, weights: np.ndarray) -> int:
    """The first index with cumulative > target; past the end (rounding), the last one of weight > 0."""
    i = int(np.searchsorted(cumulative, target, side="right"))
    return i if i < len(cumulative) else int(np.flatnonzero(weights > 0)[-1])


@dataclass(frozen=True)
class NormWeights:
    """numpy views of one norm (see model.decoder.blocks.Norm)."""

    kind: str
    weight: np.ndarray            # [D]
    bias: np.ndarray | None       # [D]
    eps: float

    @classmethod
    def of(cls, norm) -> NormWeights:
        return cls(norm.kind, norm.weight.numpy(), _numpy(norm.bias), norm.eps)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The norm of each row of x [..., D] in numpy float32 (the same formula as the decoder's)."""
        if self.kind == "rmsnorm":
            return _rms_rows(x, self.weight, self.eps)
        centred = x - x.mean(-1, keepdims=True)
        return _rms_rows(centred, self.weight, self.eps) + self.bias


@dataclass(frozen=True)
class BlockWeights:
    """One block's weights for the one-token step: matrices as the model holds them, norms and biases as numpy."""

    attn_norm: NormWeights
    qkv: StepMatrix               # [(H + 2 KV) hd, D]
    qkv_bias: np.ndarray | None   # [(H + 2 KV) hd]
    q_norm: np.ndarray | None     # [hd] per-head RMSNorm weights (Qwen3)
    k_norm: np.ndarray | None     # [hd]
    o: StepMatrix                 # [D, H hd]
    o_bias: np.ndarray | None     # [D]
    mlp_norm: NormWeights
    up: StepMatrix                # [2 F, D] gate and up stacked (SwiGLU), or [F, D] up (GELU)
    up_bias: np.ndarray | None    # [F] (GELU)
    down: StepMatrix              # [D, F]
    down_bias: np.ndarray | None  # [D]
    gated: bool                   # SwiGLU (True) or GELU

    @classmethod
    def of(cls, block) -> BlockWeights:
        attn, mlp = block.attn, block.mlp
        gated = isinstance(mlp, SwiGLU)
        return cls(NormWeights.of(block.attn_norm), _step_matrix(attn.w_qkv), _numpy(attn.b_qkv),
                   _numpy(attn.q_norm), _numpy(attn.k_norm), _step_matrix(attn.w_o), _numpy(attn.b_o),
                   NormWeights.of(block.mlp_norm), _step_matrix(mlp.w_gate_up if gated else mlp.w_up),
                   None if gated else _numpy(mlp.b_up), _step_matrix(mlp.w_down),
                   None if gated else _numpy(mlp.b_down), gated)


class StepWeights:
    """What a one-token step reads, made once per model and shared by every generation (see steps_for): the blocks,
    the final norm, GPT-2's position table and the LM head. A matrix holding int8-coded values (Q8_0 kept quantized,
    or float32 dequantized from Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1) is multiplied as int8 by the native kernel
    (model.decoder.int8_blocks); others as they are. Without the kernel, an LM head kept as Q8_0 is laid out
    block-major: each chunk of rows is then nb contiguous [chunk, 32] int8 slabs, converted and multiplied without a
    strided pass."""

    all_native: bool              # every matrix multiplied by the native int8 kernel (see feed_together)
    native_blocks: DecoderStep | None   # all blocks in one native call (RMSNorm / RoPE / SwiGLU models)
    ROPE_ROWS_MIN = 1024          # positions of the first shared RoPE table (it doubles when a cache needs more)

    def __init__(self, lm):
        cfg = lm.config
        self._rope_shape = (cfg.head_dim, cfg.rope_theta, lm.rope_factors) if cfg.uses_rope else None
        self._rope: tuple[np.ndarray, np.ndarray] | None = None                     # cos, sin [P, hd/2]
        self._rope_lock = threading.Lock()
        self.blocks = [BlockWeights.of(block) for block in lm.blocks]
        self.out_norm = NormWeights.of(lm.out_norm)
        self.positions = _numpy(lm.position_embedding)                                # [P, D] (GPT-2) or None
        head = lm.lm_head.weight if isinstance(lm.lm_head, DenseEmbedding) else lm.lm_head   # [V, D]
        self.head = _step_matrix(head)
        matrices = [m for b in self.blocks for m in (b.qkv, b.o, b.up, b.down)] + [self.head]
        self.all_native = native_attention.available() and all(
            isinstance(part, Int8Blocks) for m in matrices for part in (m if isinstance(m, tuple) else (m,)))
        self.native_blocks = _native_blocks(self.blocks, lm) if self.all_native else None
        self.head_blocks = self.head_scales = None
        if isinstance(self.head, QuantizedMatrix) and self.head.format.name == "Q8_0":
            self.head_blocks = head.values.transpose(0, 1).contiguous()                   # [nb, V, 32] int8
            self.head_scales = head.scale[..., 0].T.contiguous()                          # [nb, V] float32

    def rope_rows(self, n: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        """cos and sin [n, hd/2] of positions 0..n-1 (lm.rope_tables' numbers), views of one table shared by every
        cache of the model (never written); None, None without RoPE. Computed per cache, they were ~6 torch
        operations, each handing the GIL on: a class's joiners each waited for it behind thirty pages' scripts."""
        if self._rope_shape is None:
            return None, None
        with self._rope_lock:
            if self._rope is None or len(self._rope[0]) < n:
                size = max(n, self.ROPE_ROWS_MIN, 2 * len(self._rope[0]) if self._rope else 0)
                self._rope = tuple(t.numpy() for t in rope_cos_sin(range(size), *self._rope_shape))
            cos, sin = self._rope
        return cos[:n], sin[:n]

    def logits(self, xn: np.ndarray) -> np.ndarray:
        """Next-token logits [B, V] float32 of final-normed rows xn [B, D]."""
        if self.head_blocks is None:
            return _affine(self.head, xn, None)
        # Q8_0: logit = sum over 32-value blocks b of scale_b * (int8 values_b . x_b): the scales are applied
        # after the block dot products, so the int8 -> float32 copy is the only pass over the table.
        n_blocks, vocab, block = self.head_blocks.shape
        rows = _padded(xn)                                                            # [B padded, D]
        x_blocks = torch.from_numpy(rows.reshape(len(rows), n_blocks, block)).permute(1, 2, 0)  # [nb, 32, Bp]
        out = torch.empty(vocab, len(rows))                                           # [V, Bp]
        buffer = torch.empty(n_blocks, HEAD_CHUNK_ROWS, block)
        for first in range(0, vocab, HEAD_CHUNK_ROWS):
            chunk = slice(first, first + HEAD_CHUNK_ROWS)
            buf = buffer[:, :len(out[chunk])]
            buf.copy_(self.head_blocks[:, chunk])                                     # [nb, c, 32] float32
            dots = torch.matmul(buf, x_blocks)                                        # [nb, c, Bp]
            torch.sum(dots * self.head_scales[:, chunk, None], dim=0, out=out[chunk])  # [c, Bp]
        return out.T.numpy()[:len(xn)]


_STEP_WEIGHTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_STEP_WEIGHTS_LOCK = threading.Lock()


def steps_for(lm) -> StepWeights:
    """The model's StepWeights, made on first use and kept as long as the model."""
    with _STEP_WEIGHTS_LOCK:
        weights = _STEP_WEIGHTS.get(lm)
        if weights is None:
            weights = _STEP_WEIGHTS[lm] = StepWeights(lm)
        return weights


def _native_blocks(blocks: Sequence[BlockWeights], lm) -> DecoderStep | None:
    """The blocks as one native call where the model is RMSNorm / rotary / SwiGLU throughout (Llama, Qwen2, Qwen3)
    with every matrix Int8Blocks, or q / k / v and gate / up Int8Blocks parts (a kept-quantized model's: each part
    fills its columns in place); None otherwise (GPT-2: the numpy step)."""
    cfg = lm.config
    if lm.position_embedding is not None or lm.rope_tables(range(1))[0] is None or not all(
            b.gated and b.attn_norm.kind == b.mlp_norm.kind == "rmsnorm" and b.up_bias is None and
            b.down_bias is None and all(_int8_parts(m) is not None for m in (b.qkv, b.o, b.up, b.down))
            for b in blocks):
        return None
    return DecoderStep([native_step.BlockArrays(
        _int8_parts(b.qkv), b.o.matrix, _int8_parts(b.up), b.down.matrix, b.attn_norm.weight, b.attn_norm.eps,
        b.mlp_norm.weight, b.mlp_norm.eps, b.qkv_bias, b.o_bias, b.q_norm, b.k_norm, cfg.norm_eps) for b in blocks],
        cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff)


def _int8_parts(m: StepMatrix):
    """The native kernel's view of m (Int8Blocks) or a tuple of its parts' (every part Int8Blocks), else None."""
    if isinstance(m, Int8Blocks):
        return m.matrix
    if isinstance(m, tuple) and len(m) <= native_step.MAX_PARTS and all(isinstance(p, Int8Blocks) for p in m):
        return tuple(p.matrix for p in m)
    return None


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
        pattern, mixed = _mix_queries(attn.rotate(q, cos, sin), torch.from_numpy(self.k[layer, :, :end]),
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
        x = _numpy_blocks(decoders, runs, at, x, cos, sin, rows, attend)            # [B, D]
    if attend is not None:
        attend.write_patterns(rows)                                                  # [L, H, T_b] each
    for d, first_row, count in runs:
        d.length += count
        d.tokens.extend(token_ids[first_row:first_row + count])
    return x


def _numpy_blocks(decoders: Sequence[IncrementalDecoder], runs: Sequence[tuple[IncrementalDecoder, int, int]],
                  at: np.ndarray, x: np.ndarray, cos: np.ndarray | None, sin: np.ndarray | None,
                  rows: Sequence[np.ndarray | None], attend: native_attention.CachedAttention | None) -> np.ndarray:
    """step_rows' blocks one by one in numpy: x [B, D] at positions at, cos / sin [B, hd/2] (None: no RoPE); the
    attention by attend (native) or numpy, which then writes the caches and rows itself."""
    first = decoders[0]
    cfg = first.lm.config
    B, hd, n_q, n_kv = len(decoders), cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
    n_qk = (n_q + n_kv) * hd
    if cos is not None:
        cos, sin = cos[:, None], sin[:, None]                                        # [B, 1, hd/2] each
    mixed = np.empty((B, n_q, hd), np.float32)                                      # [B, H, hd]
    for layer, w in enumerate(first.weights.blocks):
        qkv = _affine(w.qkv, w.attn_norm(x), w.qkv_bias)                            # [B, (H + 2 KV) hd]
        q, k = qkv[:, :n_q * hd].reshape(B, n_q, hd), qkv[:, n_q * hd:n_qk].reshape(B, n_kv, hd)
        if w.q_norm is not None:
            q, k = _rms_rows(q, w.q_norm, cfg.norm_eps), _rms_rows(k, w.k_norm, cfg.norm_eps)
        if cos is not None:
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)                       # [B, H, hd], [B, KV, hd]
        v = qkv[:, n_qk:].reshape(B, n_kv, hd)                                      # [B, KV, hd]
        if attend is not None:
            mixed = attend(layer, q, k, v, 1.0 / math.sqrt(hd))                     # caches written, [B, H, hd]
        else:
            for d, b, count in runs:
                d.k[layer, :, d.length:d.length + count] = k[b:b + count].transpose(1, 0, 2)
                d.v[layer, :, d.length:d.length + count] = v[b:b + count].transpose(1, 0, 2)
            for b, (d, p) in enumerate(zip(decoders, at, strict=True)):
                pattern, mixed[b] = _mix_one_query(q[b], d.k[layer, :, :p + 1], d.v[layer, :, :p + 1])
                if rows[b] is not None:
                    rows[b][layer] = pattern                                         # [H, T_b]
        x = x + _affine(w.o, mixed.reshape(B, -1), w.o_bias)                         # [B, D]
        up = _affine(w.up, w.mlp_norm(x), w.up_bias)                                 # [B, 2 F] or [B, F]
        if w.gated:
            gate, up = up[:, :cfg.d_ff], up[:, cfg.d_ff:]                            # [B, F] each
            with np.errstate(over="ignore"):                                        # exp(-gate) = inf: silu = -0
                act = gate / (1 + np.exp(-gate)) * up                                # [B, F]
        else:
            act = _gelu_tanh(up)                                                     # [B, F]
        x = x + _affine(w.down, act, w.down_bias)                                    # [B, D]
    return x


def _mix_queries(q_rot: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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


def _mix_one_query(q_rot: np.ndarray, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def _rms_rows(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """decoder.rms_norm of each row of x [..., D] in numpy float32 (also Qwen3's per-head q/k norm). The mean is
    np.mean's own arithmetic (a float32 sum, then / D) without its Python-level overhead (a third of a norm)."""
    square_mean = np.add.reduce(x * x, axis=-1, keepdims=True)                      # [..., 1]
    square_mean /= np.float32(x.shape[-1])
    square_mean += np.float32(eps)
    return x * (np.float32(1.0) / np.sqrt(square_mean)) * weight


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Half-split RoPE of x [..., hd] with cos, sin [..., hd/2] broadcast against it."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]                                          # [..., hd/2] each
    return np.concatenate((x1 * cos - x2 * sin, x1 * sin + x2 * cos), axis=-1)    # [..., hd]


StepMatrix = torch.Tensor | QuantizedMatrix | Int8Blocks | tuple   # parts stacked by rows: a tuple


def _step_matrix(w: Weight) -> StepMatrix:
    """What _affine multiplies by: int8 blocks where the matrix holds int8-coded values and the native kernel runs,
    else the float32 or quantized matrix as it is; parts of a matrix each."""
    if isinstance(w, tuple):
        return tuple(_step_matrix(part) for part in w)
    blocks = int8_blocks_of(w)
    return w if blocks is None else blocks


def _affine(w: StepMatrix, x: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """Rows x [B, in] through the matrix w [out, in] (and bias): [B, out], as products W @ X^T of ROW_BLOCK rows
    each, the rows padded with zeros to a multiple of ROW_BLOCK. MKL rounds a row's product differently for one row
    (a matrix-vector product) and, on AMD CPUs, for 8 and for 24 rows (on Intel the same for 2 to 40): products of
    one shape make a sequence's numbers the same alone and in any batch. MKL takes 64 ms for SmolLM2's 120 matrices
    and 8 rows (Intel). A quantized matrix is dequantized a chunk at a time for each group of rows. Int8Blocks need
    no padding: the native kernel computes a row the same way in any batch."""
    if isinstance(w, tuple):
        out = np.concatenate([_affine(part, x, None) for part in w], axis=1)       # [B, out]
    elif isinstance(w, Int8Blocks):
        out = w.linear(x)                                                          # [B, out]
    else:
        padded = _padded(x)                                                        # [B padded, in]
        groups = [torch.from_numpy(padded[g:g + ROW_BLOCK]) for g in range(0, len(padded), ROW_BLOCK)]
        product = torch.cat([w.linear(rows) if isinstance(w, QuantizedMatrix) else torch.mm(w, rows.T).T
                             for rows in groups])                                 # [B padded, out]
        out = product.numpy()[:len(x)]                                             # [B, out]
    return out if bias is None else out + bias


def _padded(x: np.ndarray) -> np.ndarray:
    """x [B, ...] with zero rows added up to a multiple of ROW_BLOCK."""
    pad = -x.shape[0] % ROW_BLOCK
    return np.concatenate((x, np.zeros((pad, *x.shape[1:]), x.dtype))) if pad else x


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU with the tanh approximation (GPT-2's), as torch's F.gelu(approximate="tanh")."""
    return np.float32(0.5) * x * (1 + np.tanh(np.float32(math.sqrt(2 / math.pi)) * (x + np.float32(0.044715) * x ** 3)))


def _numpy(t: torch.Tensor | None) -> np.ndarray | None:
    return None if t is None else t.numpy()


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
    return np.array([choose_token(dist, np.random.default_rng(_integer("seed", s, 0, None))) for s in seeds],
                    dtype=np.int64)


def record_step(lm, t: int, token_id: int, dist: TokenDistribution, attention: np.ndarray) -> GenerationStep:
    """Step t's record: the token, its top candidates and probabilities, and the attention row that chose it."""
    p = dist.probs
    top = sampling.top_ids(p, min(N_CANDIDATES, len(p)))
    rank = int(np.count_nonzero(p > p[token_id]) + np.count_nonzero(p[:token_id] == p[token_id]))
    return _step(lm, t, token_id, top, rank, p, dist.raw, dist.keep[top], dist.sampling[top],
                 float(dist.sampling[token_id]), dist.entropy_bits, int(np.count_nonzero(dist.keep)), attention)


def _step(lm, t: int, token_id: int, top: np.ndarray, rank: int, p: np.ndarray, raw: np.ndarray, kept: np.ndarray,
          sampling_probs: np.ndarray, prob: float, entropy_bits: float, n_kept: int,
          attention: np.ndarray) -> GenerationStep:
    """The GenerationStep of token_id drawn with probability prob; top: the candidates' ids, kept and
    sampling_probs theirs; p and raw [V]: the distribution after temperature and at T = 1."""
    attention.flags.writeable = False
    candidates = Candidates(
        ids=_read_only(top.astype(np.int64)), tokens=tuple(lm.token_strings(top.tolist())),
        probs=_read_only(p[top]), raw_probs=_read_only(raw[top]), kept=_read_only(np.asarray(kept)),
        sampling_probs=_read_only(np.asarray(sampling_probs, dtype=np.float64)))
    return GenerationStep(
        index=t, token_id=token_id, token=lm.token_strings([token_id])[0], candidates=candidates, rank=rank,
        prob=prob, temperature_prob=float(p[token_id]), raw_prob=float(raw[token_id]), entropy_bits=entropy_bits,
        n_kept=n_kept, attention=attention)


def _integer(name: str, value, low: int, high: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low or \
            (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


def _number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or \
            not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
