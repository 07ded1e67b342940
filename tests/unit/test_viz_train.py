"""viz/train.py: the loss figure's "uniform guess" label stays off the loss curves."""
from __future__ import annotations

import numpy as np

from viz.train import Curves, log_ticks, loss_figure


def test_the_uniform_label_sits_where_no_curve_is():
    """A run starts at the uniform guess (ln 16 for 16 symbols) on the left and falls well below it: the label must not
    be drawn over the curve's start (it was: at x=0, under the line)."""
    uniform = float(np.log(16))
    steps = np.arange(0, 301, 20)
    loss = uniform * np.exp(-steps / 120)                      # from the uniform guess down to ~0.08 of it
    run = Curves("", steps, loss * 1.05, loss, np.ones((steps.size, 2)))
    fig = loss_figure([run], total_steps=300, uniform=uniform)
    label = next(a for a in fig.layout.annotations if "uniform" in a.text)
    assert label.xref == "paper" and label.x == 1 and label.xanchor == "right"     # the right end of the axis
    assert label.y == uniform and label.yanchor == "top"                           # just under the line
    right_third = steps >= 200
    assert (run.eval_loss[right_third] < 0.5 * uniform).all()  # there, every curve is far below the line
    start = steps <= 40
    assert (run.eval_loss[start] > 0.6 * uniform).all()         # while the left end is where the curves begin


def test_log_ticks_are_one_two_five_per_decade_around_the_values():
    assert log_ticks(np.array([0.23, 3.1])) == [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]
    assert log_ticks(np.array([40.0])) == [10.0, 20.0, 50.0, 100.0]
    assert log_ticks(np.array([])) == [1.0]
