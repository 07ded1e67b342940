"""Every training outcome a lesson states, checked on the runs its step shows: the step's settings are read as its link
is (the link codec, then the Train page's own settings_of / runs_of), a step with a comparison shows exactly its
preset's two runs, and the preset's verdict (the lab's own check) holds on them; the other numbers the step's text
and explanation give are checked on the same runs. The runs are the lessons' own (800 steps each, ~10-30 s on 2
cores); the same settings are trained once."""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from app_core.lessons import load_catalog
from app_core.lessons.views import step_settings
from app_core.link import Context
from app_pages.train.runs import runs_of
from model.train import PRESETS, train, verdict
from model.train.presets import FORMED_BELOW, final_loss

# Nats: "about 0" for a head's attention entropy that starts near 2.6 (32 tokens). A run's trajectory differs in its
# last bits from CPU to CPU (AVX-512 against AVX2 kernels): at step 192-208 the collapsed heads read 0.16-0.24 on a
# 2-core AMD EPYC, below 0.2 on a Xeon.
COLLAPSED = 0.3
CTX = Context(n_layers=30, n_heads=9, head_dim=64, vocab_size=49152, n_tokens=None)
TRAIN_STEPS = [(lesson.id, n, step) for lesson in load_catalog().lessons
               for n, step in enumerate(lesson.steps, start=1) if step.page == "train"]


@functools.cache
def run_of(settings):
    return train(settings)


def shown_runs(step) -> dict:
    """The runs the step's link shows: the Train page's settings from the state its link sets."""
    values, _, _ = step_settings(step, CTX)       # the settings it leaves out take their defaults (settings_of)
    return runs_of(values)


@pytest.mark.parametrize("lesson_id, n, step", TRAIN_STEPS, ids=[f"{i}#{n}" for i, n, _ in TRAIN_STEPS])
def test_a_train_step_shows_what_its_text_says(lesson_id, n, step):
    runs = shown_runs(step)
    preset = PRESETS.get(step.settings.get("cmp"))
    if preset is None:                          # one run: the induction task's two phases
        run = run_of(runs[""])
        assert run.phase_step is not None, "the lab finds no phase change"
        assert abs(run.eval_loss[0] - math.log(64)) < 0.1 and final_loss(run) < FORMED_BELOW
        return
    assert runs == {"a": preset.a, "b": preset.b}, "the step does not carry its preset's settings"
    a, b = run_of(preset.a), run_of(preset.b)
    assert verdict(preset, a, b).holds, (preset.name, final_loss(a), final_loss(b))
    CLAIMS[preset.name](a, b)


def _layers(one, two):                      # "ends near 0.3 nats; ... stays above 3"
    assert final_loss(two) < 0.4 and final_loss(one) > 3.0


def _norm_place(pre, post):                 # "Post-LN stays at 4.13 ... Pre-LN creeps down to about 3.8"
    assert abs(final_loss(post) - post.uniform_loss) < 0.1
    assert 3.5 < final_loss(pre) < 4.0 and pre.phase_step is None and post.phase_step is None


def _norm(layernorm, rmsnorm):              # "the same step ... within a few hundredths of a nat"
    assert abs(final_loss(layernorm) - final_loss(rmsnorm)) < 0.1
    assert layernorm.phase_step == rmsnorm.phase_step


def _warmup(warm, cold):                    # "the first layer's entropy drops to about 0 within 200 updates ..."
    at = int(np.searchsorted(cold.steps_logged, 200, side="right")) - 1               # the last log at or before 200
    collapsed = cold.entropy[at:, 0].max(axis=1)                                     # [steps from there] over heads
    assert cold.entropy[0, 0].min() > 2.0 and collapsed.max() < COLLAPSED, collapsed.round(3)
    assert warm.entropy[at, 0].min() > 1.5                                           # [step, layer 0, heads]
    assert final_loss(cold) > 3.8 and cold.phase_step is None                       # "stalls near 4.0"
    assert warm.phase_step is not None and final_loss(warm) < 0.5                   # "ends near 0.4 nats"


CLAIMS = {"layers": _layers, "norm_place": _norm_place, "norm": _norm, "warmup": _warmup}
