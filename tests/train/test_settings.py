"""TrainSettings: the page's defaults, hashable, and refusals a user can act on."""
import pytest

from model.train import TrainSettings
from model.train.trainer import is_logged, lr_at, n_logs


def test_defaults_are_the_default_induction_run_and_settings_are_hashable():
    s = TrainSettings()
    assert (s.task, s.n_layers, s.mlp, s.kv_heads, s.head_dim) == ("induction", 2, "none", s.n_heads, 16)
    assert hash(s) == hash(TrainSettings()) and s == TrainSettings()
    assert {s: 1}[TrainSettings(seed=0)] == 1 and TrainSettings(seed=1) != s
    assert TrainSettings(n_layers=1, seed=3).changed() == {"n_layers": 1, "seed": 3}


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"task": "parity"}, "task must be one of induction, copy"),
    ({"n_layers": 7}, "n_layers must be between 1 and 6"),
    ({"d_model": 32, "n_heads": 3}, "d_model (32) must be a multiple of n_heads (3)"),
    ({"n_heads": 4, "n_kv_heads": 3}, "n_kv_heads (3) must divide n_heads (4)"),
    ({"d_model": 48, "n_heads": 8, "positions": "rope", "n_kv_heads": 8}, None),
    ({"positions": "rope", "d_model": 48, "n_heads": 16}, "n_heads must be between 1 and 8"),
    ({"task": "text", "text": "short"}, "at least 400 characters"),
    ({"lr": 2.0}, "lr must be between"),
])
def test_invalid_settings_say_what_to_change(kwargs, says):
    if says is None:
        TrainSettings(**kwargs)
        return
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        TrainSettings(**kwargs)


def test_log_points_and_learning_rate_schedule():
    for steps in (1, 3, 49, 50, 51, 800, 1234):
        assert n_logs(steps) == sum(is_logged(i, steps) for i in range(steps + 1))
        assert is_logged(0, steps) and is_logged(steps, steps)
    s = TrainSettings(steps=100, warmup=10, lr=0.01)
    assert lr_at(5, s) == pytest.approx(0.005) and lr_at(10, s) == pytest.approx(0.01)
    assert lr_at(55, s) == pytest.approx(0.001 + 0.5 * 0.009)                   # half way down the cosine
    assert lr_at(100, s) == pytest.approx(0.001)
    assert lr_at(100, TrainSettings(steps=100, warmup=10, lr=0.01, cosine=False)) == pytest.approx(0.01)
