"""viz/mask.py and viz/softmax.py: trace types, shapes, tick labels, masked cells; no streamlit / torch imports."""

import numpy as np
import plotly.graph_objects as go
import pytest

from viz import mask as VM
from viz import softmax as VS
from viz.theme import MASKED_COLOR

TOKENS = ["The", "␣cat", "␣sat", "␣the"]   # "the" twice in spirit: labels need not be unique


def _tri(T):
    return np.tri(T, dtype=bool)


def test_masked_scores_heatmap_grey_minus_inf_cells():
    scores = np.arange(16, dtype=float).reshape(4, 4) - 8
    m = _tri(4)
    fig = VM.matrix_heatmap(np.where(m, scores, -np.inf), TOKENS, allowed=m, show_values=True)
    assert isinstance(fig, go.Figure)
    assert [type(t).__name__ for t in fig.data] == ["Heatmap", "Heatmap"]
    values, masked = fig.data
    z = np.array(values.z, dtype=float)
    assert z.shape == (4, 4)
    assert np.isnan(z[~m]).all() and np.array_equal(z[m], scores[m])       # -inf is not a colour of the scale
    assert values.zmin == -values.zmax == -8                              # symmetric, white = 0
    mz = np.array(masked.z, dtype=float)
    assert np.array_equal(~np.isnan(mz), ~m)                              # grey layer exactly on masked cells
    assert masked.colorscale[0][1] == MASKED_COLOR and masked.showscale is False
    assert np.array(masked.text)[0, 1] == VM.MINUS_INF and np.array(masked.text)[1, 0] == ""
    assert "−∞" in masked.hovertemplate
    assert np.array(values.text)[1, 0] == "−4.00"                        # numbers written in the cells
    cats = ["0 The", "1 ␣cat", "2 ␣sat", "3 ␣the"]                         # unique categories, never guessed
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "category"
    assert list(values.x) == list(values.y) == cats == list(fig.layout.xaxis.categoryarray)
    assert list(fig.layout.xaxis.ticktext) == TOKENS and list(fig.layout.yaxis.ticktext) == TOKENS
    assert fig.layout.yaxis.autorange == "reversed" and fig.layout.yaxis.scaleanchor == "x"   # square, row 0 on top


def test_probs_heatmap_scale_and_outline():
    p = np.full((4, 4), 0.25)
    fig = VM.matrix_heatmap(p, TOKENS, kind="probs", future_outline=True, zmax=1.0)
    assert [type(t).__name__ for t in fig.data] == ["Heatmap"]
    assert fig.layout.shapes[0].type == "path" and fig.layout.shapes[0].path.startswith("M -0.5,-0.5")
    assert fig.data[0].zmin == 0 and fig.data[0].zmax == 1.0
    assert np.array(fig.data[0].text)[0, 0] == "0.25"                     # tiny matrix: numbers shown by default
    fig = VM.matrix_heatmap(p, TOKENS, kind="probs", show_values=False)
    assert fig.data[0].texttemplate is None and fig.data[0].showscale
    fig = VM.matrix_heatmap(p, TOKENS, kind="probs", show_values=False, show_scale=False)   # side by side
    assert not any(t.showscale for t in fig.data)


def test_matrix_heatmap_auto_values_and_thinned_ticks():
    T = 100
    toks = [f"t{i}" for i in range(T)]
    fig = VM.matrix_heatmap(np.zeros((T, T)), toks, allowed=_tri(T), max_labels=20)
    assert fig.data[0].texttemplate is None and fig.data[1].texttemplate is None   # too big for cell text
    assert len(fig.layout.xaxis.tickvals) <= 20
    first = fig.layout.xaxis.tickvals[1]
    position = int(first.split()[0])
    assert fig.layout.xaxis.ticktext[1] == f"{position}:{toks[position]}"     # thinned: the position says where


def test_token_labels_fit_the_figure():
    """y labels: as many as the square's side fits at 18 px a label (a 40-token matrix must not stack 40 labels
    into ~320 px); x labels: max_labels when given, angled only when they would collide."""
    T = 40
    toks = [f"tok{i}" for i in range(T)]
    fig = VM.matrix_heatmap(np.zeros((T, T)), toks, allowed=_tri(T), max_labels=T, height=460)
    assert len(fig.layout.xaxis.tickvals) == T
    assert fig.layout.xaxis.tickangle is None and list(fig.layout.xaxis.autotickangles) == [0, 45, 90]
    y_ticks = fig.layout.yaxis.tickvals
    assert len(y_ticks) < T and (fig.layout.height - VM.CHROME_PX) / len(y_ticks) >= 16
    small = VM.matrix_heatmap(np.zeros((4, 4)), TOKENS, height=340)            # the worked example: every label
    assert list(small.layout.yaxis.ticktext) == TOKENS
    bars = VM.leak_bars(np.zeros(T), toks, max_labels=10)
    assert len(bars.layout.xaxis.tickvals) <= 10 and bars.layout.xaxis.tickangle is None
    assert bars.layout.xaxis.type == "linear" and bars.layout.xaxis.tickmode == "array"


def test_matrix_heatmap_rejects_bad_shapes():
    with pytest.raises(ValueError):
        VM.matrix_heatmap(np.zeros((3, 4)), TOKENS)
    with pytest.raises(ValueError):
        VM.matrix_heatmap(np.zeros((4, 4)), TOKENS, kind="nope")
    with pytest.raises(ValueError):
        VM.mask_heatmap(np.ones((3, 3), bool), TOKENS)


def test_mask_heatmap_zero_and_minus_inf():
    m = _tri(4)
    fig = VM.mask_heatmap(m, TOKENS)
    allowed, blocked = fig.data
    assert np.array(allowed.text)[2, 1] == "0" and np.array(blocked.text)[1, 2] == VM.MINUS_INF
    assert np.array_equal(np.isnan(np.array(allowed.z, dtype=float)), ~m)


def test_leak_bars():
    fig = VM.leak_bars([0.5, 0.2, 0.1, 0.0], TOKENS)
    assert type(fig.data[0]).__name__ == "Bar" and list(fig.data[0].y) == [0.5, 0.2, 0.1, 0.0]
    assert list(fig.layout.xaxis.ticktext) == TOKENS and fig.layout.xaxis.type == "linear"


def test_probability_bars_kept_highlight():
    labels = ["␣the", "␣a", "␣the"]
    fig = VS.probability_bars(labels, [0.5, 0.3, 0.2], keep=[True, True, False], renormalized=[0.625, 0.375, 0])
    bars = fig.data[0]
    assert type(bars).__name__ == "Bar" and bars.orientation == "h"
    assert list(bars.y) == [0, 1, 2]                                       # numeric rows: duplicates allowed
    assert list(fig.layout.yaxis.ticktext) == labels and fig.layout.yaxis.type == "linear"
    assert list(bars.text) == ["50%", "30%", "20%"]                        # one format for every bar
    assert list(bars.marker.color) == [VS.KEPT_COLOR, VS.KEPT_COLOR, MASKED_COLOR]
    marks = fig.data[1]
    assert type(marks).__name__ == "Scatter" and np.isnan(marks.x[2]) and marks.x[0] == 0.625
    only = VS.probability_bars(labels, [0.5, 0.3, 0.2])
    assert len(only.data) == 1 and list(only.data[0].marker.color) == [VS.KEPT_COLOR] * 3


def test_temperature_curves_log_axis_and_marker():
    t = np.geomspace(0.05, 10, 30)
    fig = VS.temperature_curves(t, np.linspace(0, 3, 30), np.linspace(1, 0.2, 30), np.exp2(np.linspace(0, 3, 30)),
                                current=1.0)
    assert len(fig.data) == 6 and all(type(d).__name__ == "Scatter" for d in fig.data)
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis3.type == "log"
    assert list(fig.layout.xaxis.ticktext) == ["0.1", "0.3", "1", "3", "10"]
    markers = [d for d in fig.data if d.mode == "markers"]
    assert len(markers) == 3 and all(d.x[0] == 1.0 for d in markers)
    assert len(fig.layout.shapes) == 3                                     # one dashed line per panel
    gaps = [fig.layout[f"xaxis{c + 1}"].domain[0] - fig.layout[f"xaxis{c if c > 1 else ''}"].domain[1]
            for c in (1, 2)]
    assert min(gaps) >= 0.14          # room for the next panel's y tick labels ("100%", "10,000") at 1024 px
    with pytest.raises(ValueError):
        VS.temperature_curves(t, [0, 1], t, t, current=1.0)


def test_sample_histogram():
    fig = VS.sample_histogram(["a", "b", "other"], [0.6, 0.4, 0.0], [0.58, 0.42, 0.0], 100)
    assert [type(d).__name__ for d in fig.data] == ["Bar", "Bar"]
    assert fig.layout.barmode == "group"
    assert list(fig.layout.yaxis.ticktext) == ["a", "b", "other"]
    assert "100" in fig.data[1].name
    assert list(fig.data[1].customdata[:, 1]) == [58, 42, 0]


def test_hidden_sink_cells_get_their_own_layers():
    from model.analysis.head_stats import sink_hidden_view

    m = _tri(4)
    fig = VM.matrix_heatmap(sink_hidden_view(np.where(m, 0.25, 0.0)), TOKENS, kind="probs", allowed=m,
                            sink_hidden=True)
    assert [t.name for t in fig.data] == ["probability", "hidden", "nothing to show", "masked"]
    z = np.array(fig.data[0].z, dtype=float)
    assert np.isnan(z[:, 0]).all() and np.isnan(z[:2]).all()               # key 0 and rows 0-1 not shown
    np.testing.assert_allclose(np.nansum(z[2:], axis=1), 1.0)               # the rest renormalized
    assert list(fig.data[1].y) == ["2 ␣sat", "3 ␣the"] and "sink" in fig.data[1].hovertemplate
    blank = fig.data[2]
    assert np.array_equal(~np.isnan(np.array(blank.z, dtype=float)), m[:2, :2])   # only allowed cells
    assert "nothing to show" in np.array(blank.text)[0, 0] and "by construction" in np.array(blank.text)[1, 1]


def test_log_ticks():
    assert VS.log_ticks(0.05, 10) == [0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]
    assert VS.log_ticks(0.3, 0.4) == []
    assert VS.log_ticks(1, 49152, max_ticks=6) == [1.0, 10.0, 100.0, 1000.0, 10000.0]   # wide: powers of ten
    assert VS.log_ticks(1, 20, mantissas=(1, 3)) == [1.0, 3.0, 10.0]
    with pytest.raises(ValueError):
        VS.log_ticks(0, 1)
