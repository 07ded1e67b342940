"""Choosing the next token from a step's logits (model/maths/sampling.py's rules): temperature, then top-k, then
top-p, renormalize, then one draw (inverse_cdf) from the generation's own numpy Generator (temperature 0: greedy
argmax). The softmax and its entropy are one native call where the kernels run (model.native.softmax_entropy), and a
batch's rows without top-k / top-p are surveyed and drawn natively too (choose_steps, model.native.token_choice).
record_step writes what a step chose into its GenerationStep."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from model.decoder.generation_records import N_CANDIDATES, Candidates, GenerationSettings, GenerationStep, read_only
from model.maths import sampling
from model.native import softmax_entropy as native_softmax
from model.native import token_choice

DRAW_BLOCK = 512           # entries per block in a draw over a long distribution (see inverse_cdf)

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
        ids=read_only(top.astype(np.int64)), tokens=tuple(lm.token_labels(top.tolist())),
        probs=read_only(p[top]), raw_probs=read_only(raw[top]), kept=read_only(np.asarray(kept)),
        sampling_probs=read_only(np.asarray(sampling_probs, dtype=np.float64)))
    return GenerationStep(
        index=t, token_id=token_id, token=lm.token_labels([token_id])[0], candidates=candidates, rank=rank,
        prob=prob, temperature_prob=float(p[token_id]), raw_prob=float(raw[token_id]), entropy_bits=entropy_bits,
        n_kept=n_kept, attention=attention)
