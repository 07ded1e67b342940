"""The classic comparison pairs as one-click presets: two settings that differ in one design choice, and a check of
the course notes' claim about them on the two finished runs (measured, not assumed)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from model.train.run import TrainRun
from model.train.settings import TrainSettings

FINAL_LOGS = 3                 # a run's final loss: the mean of its last few logged held-out losses
SAME_WITHIN = 0.25             # nats: two final losses this close count as the same
FORMED_BELOW = 1.5             # nats: below this the induction task is solved (uniform guess: 4.16)
CLEARLY_WORSE = 1.0            # nats: a run this much worse did not solve what the other solved


@dataclass(frozen=True)
class Preset:
    """Run a and run b differ only in `field`; `claim` names the notes' claim the pair tests (the page words it)."""

    name: str
    field: str
    a: TrainSettings
    b: TrainSettings
    claim: str


@dataclass(frozen=True)
class Verdict:
    """Whether the claim showed in the two runs, with the numbers it was decided on."""

    holds: bool
    a_final: float
    b_final: float


def final_loss(run: TrainRun) -> float:
    return float(np.mean(run.eval_loss[-FINAL_LOGS:]))


def verdict(preset: Preset, a: TrainRun, b: TrainRun) -> Verdict:
    """The preset's claim checked on its finished runs a and b (final loss: the mean of the last FINAL_LOGS):
    - only_b_solves / only_a_solves: that run ends below FORMED_BELOW and the other at least CLEARLY_WORSE above it;
    - a_better: b ends more than SAME_WITHIN above a;
    - same: the two end within SAME_WITHIN of each other."""
    fa, fb = final_loss(a), final_loss(b)
    if preset.claim == "only_b_solves":
        holds = fb < FORMED_BELOW and fa > fb + CLEARLY_WORSE
    elif preset.claim == "only_a_solves":
        holds = fa < FORMED_BELOW and fb > fa + CLEARLY_WORSE
    elif preset.claim == "a_better":
        holds = fb > fa + SAME_WITHIN
    else:
        holds = abs(fa - fb) <= SAME_WITHIN
    return Verdict(bool(holds), fa, fb)


def _pair(name: str, field: str, a_value, b_value, claim: str, **common) -> Preset:
    base = TrainSettings(**common)
    return Preset(name, field, replace(base, **{field: a_value}), replace(base, **{field: b_value}), claim)


PRESETS: dict[str, Preset] = {p.name: p for p in (
    _pair("layers", "n_layers", 1, 2, "only_b_solves"),
    _pair("norm_place", "norm_place", "pre", "post", "a_better", lr=0.01, warmup=0, mlp="gelu"),
    _pair("positions", "positions", "learned", "none", "only_a_solves"),
    _pair("norm", "norm", "layernorm", "rmsnorm", "same"),
    _pair("warmup", "warmup", 200, 0, "only_a_solves", lr=0.02),
)}
