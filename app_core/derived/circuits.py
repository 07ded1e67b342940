"""What the Circuits page computes on a minimal pair: the answer and foil tokens, the logit gap each text gives,
activation patching from text A into text B, the first position where the texts differ and how differently each
head attends from there on."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.analysis.pair_attention import attention_difference


@dataclass(frozen=True, eq=False)
class PairPatching:
    """A pair patched: problem names why it cannot be (then nothing else is set)."""

    problem: str | None = None          # "same token": answer and foil are one token; "same gap": nothing to restore
    answer_id: int = -1
    foil_id: int = -1
    gaps: tuple[float, float] = (0.0, 0.0)      # logit(answer) - logit(foil) after text A, after text B
    effects: np.ndarray | None = None           # [layers, T] (kind "resid") or [layers, heads] (kind "head")
    first_difference: int = 0                   # the first position whose tokens differ
    attention_difference: np.ndarray | None = None     # [layers, heads] from first_difference on


def first_token(ws, word: str) -> int:
    """The first token of word (after what the tokenizer puts before every text)."""
    return ws.lm.encode(word)[len(ws.lm.tokenizer.prefix_ids)]


def pair_patching(ws, clean: str, corrupt: str, answer: str, foil: str, kind: str) -> PairPatching:
    """Patch the pair (texts of the same token count): the effects and what the page shows beside them."""
    ids = first_token(ws, answer), first_token(ws, foil)
    if ids[0] == ids[1]:
        return PairPatching("same token")
    a, b = ws.trace(clean), ws.trace(corrupt)
    gaps = tuple(float(t.next_token_logits[ids[0]] - t.next_token_logits[ids[1]]) for t in (a, b))
    if abs(gaps[0] - gaps[1]) < 1e-6:
        return PairPatching("same gap", *ids, gaps)
    effects = ws.model.activation_patching(clean, corrupt, ids[0], ids[1], kind)
    first = next(p for p in range(a.n_tokens) if a.token_ids[p] != b.token_ids[p])
    return PairPatching(None, *ids, gaps, effects, first, attention_difference(a.attention, b.attention, start=first))
