"""The classic comparison pairs as one-click presets: two settings that differ in one design choice."""
from __future__ import annotations

from dataclasses import dataclass, replace

from model.train.settings import TrainSettings


@dataclass(frozen=True)
class Preset:
    """Run a and run b differ only in `field` (the page names the preset and states the claim it tests)."""

    name: str
    field: str
    a: TrainSettings
    b: TrainSettings


def _pair(name: str, field: str, a_value, b_value, **common) -> Preset:
    base = TrainSettings(**common)
    return Preset(name, field, replace(base, **{field: a_value}), replace(base, **{field: b_value}))


PRESETS: dict[str, Preset] = {p.name: p for p in (
    _pair("layers", "n_layers", 1, 2),
    _pair("norm_place", "norm_place", "pre", "post", lr=0.03, warmup=0),
    _pair("positions", "positions", "learned", "none"),
    _pair("norm", "norm", "layernorm", "rmsnorm"),
)}
