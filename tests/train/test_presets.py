"""Presets differ in exactly their one field, and their verdicts follow the final losses."""
from dataclasses import fields, replace

import numpy as np
import pytest

from model.train import PRESETS, TrainSettings, train, verdict


@pytest.mark.parametrize("name", list(PRESETS))
def test_a_preset_changes_only_its_field(name):
    preset = PRESETS[name]
    differ = [f.name for f in fields(TrainSettings) if getattr(preset.a, f.name) != getattr(preset.b, f.name)]
    assert differ == [preset.field]


@pytest.fixture(scope="module")
def short_run():
    return train(TrainSettings(steps=4))


def _ending_at(run, loss: float):
    return replace(run, eval_loss=np.array([4.2, 4.0, loss, loss, loss], dtype=np.float32))


@pytest.mark.parametrize(("name", "a_loss", "b_loss", "holds"), [
    ("layers", 3.4, 0.4, True), ("layers", 3.4, 1.8, False), ("layers", 1.2, 0.4, False),
    ("positions", 0.4, 3.3, True), ("positions", 0.4, 0.6, False),
    ("norm_place", 3.7, 4.1, True), ("norm_place", 3.7, 3.8, False), ("norm_place", 3.7, 1.9, False),
    ("norm", 0.35, 0.5, True), ("norm", 0.35, 0.9, False),
])
def test_verdicts(short_run, name, a_loss, b_loss, holds):
    v = verdict(PRESETS[name], _ending_at(short_run, a_loss), _ending_at(short_run, b_loss))
    assert v.holds is holds
    assert v.a_final == pytest.approx(a_loss) and v.b_final == pytest.approx(b_loss)
