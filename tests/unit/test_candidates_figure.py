"""The Generate page's top-candidates chart sits in a narrow column (two fifths of the page at 1024 px): its
probability ticks must stay few and level, or plotly turns them sideways, and the axis must leave room for the
longest bar's value."""
import numpy as np
import pytest

from viz.generation import candidates_figure


@pytest.mark.parametrize("top", [0.999, 0.80, 0.35, 0.04])
def test_probability_ticks_stay_level_and_few(top):
    probs = np.array([top] + [(1 - top) / 9] * 9)
    fig = candidates_figure([f"t{i}" for i in range(10)], probs, np.ones(10, bool), 0)
    axis = fig.layout.xaxis
    assert axis.tickangle == 0
    assert axis.range[1] >= 1.45 * top                # the longest bar and its value ("99.9949%") fit
    if axis.tickvals is not None:
        assert list(axis.tickvals) == [0.0, 0.5, 1.0]
    else:
        assert axis.nticks is not None and axis.nticks <= 4
