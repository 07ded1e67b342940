"""Synthetic training data: token batches with a mask of the predictable targets, deterministic from a generator.

Every batch is tokens [B, T] with predictable [B, T]: predictable[b, t] says token t can be inferred from the
tokens before it (the rest is random filler or a prompt). Tasks:
- induction: random tokens in which a random segment (length and repeat distance vary per example) appears twice;
  predictable: the second copy's tokens after its first. `source[b, t]` is the position token t was copied from.
- copy:  x | x        sort: x | sorted(x)        (x random, | a separator; predictable: everything after |)
- modadd: a + b = c with c = (a + b) mod p, p the largest prime the vocabulary holds; half of all pairs (a fixed
  split) train, the other half is held out; predictable: c.
- text: windows of a text, character level; the last tenth (at least one window) is held out.
"""
from __future__ import annotations

import math
import string
from dataclasses import dataclass

import torch

from model.train.settings import TrainSettings

HELD_OUT_SEED = 1_000_003      # held-out data and the probe are the same for every run seed
HELD_OUT_BATCH = 128
UNSEEN_SEED = 2_000_003      # the completion demo's example
SPLIT_SEED = 7                 # the fixed train / held-out split of modadd's pairs
GREEK = "αβγδεζηθικλμνξοπρστυφχψω"
SYMBOLS = string.digits + string.ascii_uppercase + string.ascii_lowercase + GREEK.upper() + GREEK   # sort order
SEPARATOR = "|"


@dataclass(frozen=True)
class Batch:
    """tokens [B, T] int64; predictable [B, T] bool; source [B, T] int64 or None (induction only)."""

    tokens: torch.Tensor
    predictable: torch.Tensor
    source: torch.Tensor | None = None


def symbol_labels(n: int) -> tuple[str, ...]:
    """Readable one-character names of n symbols, in code point order: 0-9, A-Z, a-z, Α-Ω, α-ω, then #110, ..."""
    return tuple(SYMBOLS[i] if i < len(SYMBOLS) else f"#{i}" for i in range(n))


def segment_lengths(seq_len: int) -> tuple[int, int]:
    """The induction segment's shortest and longest length for a sequence length: T/6 to T/3, at least 2."""
    return max(2, seq_len // 6), max(2, seq_len // 3)


def induction_batch(gen: torch.Generator, batch: int, seq_len: int, n_symbols: int) -> Batch:
    """Random tokens with one segment of length L in [T/6, T/3] repeated d >= L positions later (L, d and the first
    start uniform per example, so no fixed offset finds the copy)."""
    lo, hi = segment_lengths(seq_len)
    hi = min(hi, seq_len // 2)
    tokens = torch.randint(n_symbols, (batch, seq_len), generator=gen)                      # [B, T]
    length = torch.randint(lo, hi + 1, (batch,), generator=gen)                             # [B]
    distance = length + (torch.rand(batch, generator=gen) * (seq_len - 2 * length + 1)).long()
    start = (torch.rand(batch, generator=gen) * (seq_len - length - distance + 1)).long()   # first copy's start
    t = torch.arange(seq_len)                                                               # [T]
    second = start + distance                                                               # [B]
    in_copy = (t >= second[:, None]) & (t < (second + length)[:, None])                     # [B, T]
    source = torch.where(in_copy, t - distance[:, None], t)                                 # [B, T]
    return Batch(tokens.gather(1, source), in_copy & (t > second[:, None]), source)


def _with_answer(prompt: torch.Tensor, answer: torch.Tensor, separator: int) -> Batch:
    """prompt | answer, the answer predictable. prompt, answer [B, n] -> [B, 2n + 1]"""
    B, n = prompt.shape
    tokens = torch.cat([prompt, torch.full((B, 1), separator), answer], dim=1)             # [B, 2n+1]
    predictable = torch.zeros_like(tokens, dtype=torch.bool)
    predictable[:, n + 1:] = True
    return Batch(tokens, predictable)


def largest_prime_upto(n: int) -> int:
    return next(p for p in range(n, 1, -1) if all(p % d for d in range(2, int(p**0.5) + 1)))


class Task:
    """A task's data: its vocabulary's labels, the sequence length, training batches and the fixed held-out batch."""

    name = ""
    labels: tuple[str, ...] = ()
    seq_len = 0

    @property
    def vocab_size(self) -> int:
        return len(self.labels)

    def sample(self, gen: torch.Generator, batch: int) -> Batch:
        raise NotImplementedError

    def held_out(self) -> Batch:
        return self.sample(torch.Generator().manual_seed(HELD_OUT_SEED), HELD_OUT_BATCH)

    def unseen_example(self) -> Batch:
        """One example that neither training nor the held-out batch contains (with overwhelming probability)."""
        return self.sample(torch.Generator().manual_seed(UNSEEN_SEED), 1)

    def completion_split(self, batch: Batch) -> int:
        """Where an example's prompt ends for the completion demo: the first predictable position."""
        return int(batch.predictable[0].nonzero()[0])


class Induction(Task):
    name = "induction"

    def __init__(self, n_symbols: int, seq_len: int):
        self.labels, self.seq_len = symbol_labels(n_symbols), seq_len

    def sample(self, gen, batch):
        return induction_batch(gen, batch, self.seq_len, self.vocab_size)


class Copy(Task):
    name = "copy"

    def __init__(self, n_symbols: int, seq_len: int):
        self.labels = (*symbol_labels(n_symbols - 1), SEPARATOR)
        self.n, self.seq_len = (seq_len - 1) // 2, 2 * ((seq_len - 1) // 2) + 1

    def _answer(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def sample(self, gen, batch):
        x = torch.randint(self.vocab_size - 1, (batch, self.n), generator=gen)              # [B, n]
        return _with_answer(x, self._answer(x), self.vocab_size - 1)


class Sort(Copy):
    name = "sort"

    def _answer(self, x: torch.Tensor) -> torch.Tensor:
        return x.sort(dim=1).values


class ModAdd(Task):
    name = "modadd"
    seq_len = 5

    def __init__(self, n_symbols: int):
        self.p = largest_prime_upto(n_symbols - 2)
        self.labels = (*(str(i) for i in range(self.p)), "+", "=")
        pairs = torch.randperm(self.p * self.p, generator=torch.Generator().manual_seed(SPLIT_SEED))
        half = len(pairs) // 2
        self.train_pairs, self.held_pairs = pairs[:half], pairs[half:]

    def _equations(self, pairs: torch.Tensor) -> Batch:
        a, b = pairs // self.p, pairs % self.p                                               # [B]
        plus, equals = torch.full_like(a, self.p), torch.full_like(a, self.p + 1)
        tokens = torch.stack([a, plus, b, equals, (a + b) % self.p], dim=1)                 # [B, 5]
        predictable = torch.zeros_like(tokens, dtype=torch.bool)
        predictable[:, 4] = True
        return Batch(tokens, predictable)

    def sample(self, gen, batch):
        return self._equations(self.train_pairs[torch.randint(len(self.train_pairs), (batch,), generator=gen)])

    def held_out(self) -> Batch:
        return self._equations(self.held_pairs)

    def unseen_example(self) -> Batch:
        """A held-out pair: its sum was never trained on."""
        pick = torch.randint(len(self.held_pairs), (1,), generator=torch.Generator().manual_seed(UNSEEN_SEED))
        return self._equations(self.held_pairs[pick])


class Text(Task):
    name = "text"

    def __init__(self, text: str, seq_len: int):
        self.labels = tuple(sorted(set(text)))
        index = {c: i for i, c in enumerate(self.labels)}
        ids = torch.tensor([index[c] for c in text])
        self.seq_len = seq_len
        cut = len(ids) - max(len(ids) // 10, seq_len + 1)
        self.train_ids, self.held_ids = ids[:cut], ids[cut:]

    def _windows(self, ids: torch.Tensor, starts: torch.Tensor) -> Batch:
        tokens = ids[starts[:, None] + torch.arange(self.seq_len)]                          # [B, T]
        predictable = torch.ones_like(tokens, dtype=torch.bool)
        predictable[:, 0] = False
        return Batch(tokens, predictable)

    def sample(self, gen, batch):
        return self._windows(self.train_ids, torch.randint(len(self.train_ids) - self.seq_len + 1, (batch,),
                                                           generator=gen))

    def held_out(self) -> Batch:
        last = len(self.held_ids) - self.seq_len
        return self._windows(self.held_ids, torch.arange(0, last + 1, max(1, self.seq_len // 2))[:HELD_OUT_BATCH])

    def unseen_example(self) -> Batch:
        """The held-out text's first window."""
        return self._windows(self.held_ids, torch.zeros(1, dtype=torch.long))

    def completion_split(self, batch: Batch) -> int:
        return self.seq_len // 2


def make_task(s: TrainSettings) -> Task:
    """The task of the settings."""
    if s.task == "induction":
        return Induction(s.vocab_size, s.seq_len)
    if s.task in ("copy", "sort"):
        return (Copy if s.task == "copy" else Sort)(s.vocab_size, s.seq_len)
    if s.task == "modadd":
        return ModAdd(s.vocab_size)
    return Text(s.text, s.seq_len)


def uniform_loss(s: TrainSettings) -> float:
    """ln(vocabulary size): the loss of a uniform guess over the task's symbols (TrainRun.uniform_loss), known
    before any run."""
    return math.log(make_task(s).vocab_size)


def probe_batch(task: Task, held_out: Batch) -> Batch:
    """Held-out induction data over the task's vocabulary and length: what previous-token and induction scores are
    measured on (for the induction task, its own held-out batch, returned as it is)."""
    if isinstance(task, Induction):
        return held_out
    return induction_batch(torch.Generator().manual_seed(HELD_OUT_SEED + 1), HELD_OUT_BATCH, task.seq_len,
                           task.vocab_size)
