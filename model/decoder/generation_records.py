"""What a generation is made of and records: its settings (checked), each step's token, candidates and attention
row, and the whole generation."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from model.maths import sampling

MAX_NEW_TOKENS = 256
N_CANDIDATES = 10          # top candidates recorded per step

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
        set_(self, "max_new_tokens", checked_integer("max_new_tokens", self.max_new_tokens, 1, MAX_NEW_TOKENS))
        t = checked_number("temperature", self.temperature)
        if t != 0 and not sampling.T_MIN <= t <= sampling.T_MAX:
            raise ValueError(f"temperature must be 0 (greedy) or from {sampling.T_MIN} to {sampling.T_MAX}, "
                             f"got {self.temperature!r}")
        set_(self, "temperature", t)
        set_(self, "top_k", checked_integer("top_k", self.top_k, 0, None))
        p = checked_number("top_p", self.top_p)
        if not 0 < p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (1 turns it off), got {self.top_p!r}")
        set_(self, "top_p", p)
        set_(self, "seed", checked_integer("seed", self.seed, 0, None))

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
    tokens: list[str]           # readable labels of prompt + new tokens read as one text (lm.token_strings):
    #                             steps[t].attention runs over tokens[:prompt_len + t]
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
    def prompt_tokens(self) -> list[str]:
        return self.tokens[: self.prompt_len]

    @property
    def new_tokens(self) -> list[str]:
        return self.tokens[self.prompt_len:]

    @property
    def nbytes(self) -> int:
        """Approximate memory held (attention rows dominate), for cache budgets."""
        return sum(s.attention.nbytes + 64 * N_CANDIDATES for s in self.steps) + 16 * self.prompt_len


def checked_integer(name: str, value, low: int, high: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low or \
            (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


def checked_number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or \
            not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
