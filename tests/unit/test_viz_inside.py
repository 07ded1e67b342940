"""viz/inside.py: what each figure draws (positions, values, colours, outlines), escaped token text and declared
axes, errors for inconsistent inputs; the signed option of viz.attention.stat_overview; no streamlit / torch."""
import math

import numpy as np
import plotly.graph_objects as go
import pytest

from viz import attention as va
from viz import head_effects as he
from viz import inside as vi
from viz.theme import ACCENT, ATTENTION_SCALE, DIVERGING_SCALE, MASKED_COLOR


# ------------------------------------------------------------------------------------------------ one block
def test_vectors_figure_rows_share_the_dimension_axis():
    a, b = np.arange(6.0), -np.arange(6.0)
    fig = vi.vectors_figure({"x <in>": a, "out": b}, title="t")
    # a row is one filled step line from zero (bars of width 1, no gap), not n bars
    assert [(t.type, t.mode, t.line.shape, t.fill) for t in fig.data] == [("scatter", "lines", "hvh", "tozeroy")] * 2
    assert [t.fillcolor for t in fig.data] == [t.line.color for t in fig.data] and fig.data[0].fillcolor != \
        fig.data[1].fillcolor
    np.testing.assert_array_equal(fig.data[1].x, np.arange(6))
    np.testing.assert_array_equal(fig.data[1].y, b)
    assert fig.data[0].hoveron == "points" and "%{y" in fig.data[0].hovertemplate
    assert [ann.text for ann in fig.layout.annotations] == ["x &lt;in&gt;", "out"]
    assert fig.layout.xaxis2.matches == "x" or fig.layout.xaxis.matches == "x2"
    with pytest.raises(ValueError):
        vi.vectors_figure({"a": a, "b": np.arange(5.0)})


def test_head_rows_figure_is_symmetric_and_outlines_the_head():
    z = np.array([[1.0, -3.0], [0.5, 2.0]])
    fig = vi.head_rows_figure(z, ["head 0", "head <1>"], selected=1)
    heat = fig.data[0]
    assert heat.zmin == -3.0 and heat.zmax == 3.0 and heat.colorscale[0][1] == go.Heatmap(
        colorscale=DIVERGING_SCALE).colorscale[0][1]
    assert list(fig.layout.yaxis.ticktext) == ["head 0", "head &lt;1&gt;"]
    assert fig.layout.shapes[0].y0 == 0.5 and fig.layout.shapes[0].y1 == 1.5


def test_qkv_figure_marks_the_kv_head_a_query_head_reads():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(6, 4)), rng.normal(size=(2, 4)), rng.normal(size=(2, 4))
    fig = vi.qkv_figure(q, k, v, np.arange(6) // 3, selected=4)
    assert [np.asarray(t.z).shape for t in fig.data] == [(6, 4), (2, 4), (2, 4)]
    assert list(fig.layout.yaxis.ticktext)[4] == "q head 4 → kv 1"
    outlined = [(s.yref, s.y0 + 0.5) for s in fig.layout.shapes]
    assert outlined == [("y", 4), ("y2", 1), ("y3", 1)]                     # q head 4, then kv head 4 // 3 = 1
    with pytest.raises(ValueError):
        vi.qkv_figure(q, k, v[:1], np.arange(6) // 3)


def test_gqa_diagram_connects_each_query_head_to_its_group():
    fig = vi.gqa_figure(9, 3, selected=5)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == 9
    kv_x = {j: 3 * j + 1 for j in range(3)}                                 # under the middle of each group
    for h, line in enumerate(lines):
        assert list(line.x) == [h, kv_x[h // 3]] and list(line.y) == [1, 0]
    assert lines[5].line.color == ACCENT and lines[4].line.color != ACCENT
    with pytest.raises(ValueError):
        vi.gqa_figure(9, 4)


def test_rope_figure_angles_in_degrees():
    q = np.arange(8.0)
    angles = np.array([0.0, math.pi / 2, 2 * math.pi + math.pi, 10.0])
    fig = vi.rope_figure(q, q[::-1], angles)
    np.testing.assert_allclose(np.asarray(fig.data[0].z), np.stack([q, q[::-1]]))
    np.testing.assert_allclose(fig.data[1].y, [0, 90, 180, np.degrees(10.0 - 2 * math.pi)])
    with pytest.raises(ValueError):
        vi.rope_figure(q, q, angles[:3])


def test_scores_figure_greys_the_future_keys():
    tokens = ["8", " 2", "<br>", "x"]
    fig = vi.scores_figure(np.array([1.0, -2.0, 0.5, 3.0]), np.array([True, True, True, False]), tokens)
    bar = fig.data[0]
    assert list(bar.x) == [0, 1, 2, 3]
    assert list(bar.marker.color)[3] == MASKED_COLOR and MASKED_COLOR not in list(bar.marker.color)[:3]
    assert fig.layout.xaxis.type == "linear" and fig.layout.xaxis.tickmode == "array"
    assert "&lt;br&gt;" in list(fig.layout.xaxis.ticktext)
    assert all("<" not in str(c) for row in bar.customdata for c in row)


def test_silu_figure_splits_open_and_closed_gates():
    gate = np.array([-8.0, -0.01, 0.0, 2.0, 5.0])
    act = gate / (1 + np.exp(-gate))
    fig = vi.activation_figure(gate, act, near_zero=0.05)
    points = [t for t in fig.data if t.mode == "markers"]
    assert sorted(points[1].customdata) == [0, 1, 2] and sorted(points[0].customdata) == [3, 4]
    curve = fig.data[0]
    np.testing.assert_allclose(curve.y, curve.x / (1 + np.exp(-np.asarray(curve.x))))
    assert min(curve.x) <= -8.0 and max(curve.x) >= 5.0


# ------------------------------------------------------------------------------------------ residual stream
def test_norms_heatmap_is_log10_with_readable_colour_ticks():
    norms = np.array([[1.0, 2.0, 3.0], [20000.0, 50.0, 60.0]])
    fig = vi.norms_heatmap(norms, ["<s>", "a", "8"], position=2)
    heat = fig.data[0]
    np.testing.assert_allclose(np.asarray(heat.z), np.log10(norms))
    assert list(heat.colorbar.ticktext) == ["1", "10", "100", "1,000", "10,000", "100,000"]
    assert list(fig.layout.yaxis.ticktext) == ["emb", "L0"]
    assert "&lt;s&gt;" in fig.layout.xaxis.ticktext[0] and fig.layout.xaxis.type == "linear"
    assert fig.layout.shapes[0].x0 == 1.5


def test_norm_lines_and_layer_bars():
    norms = np.array([[1.0, 1.0, 2.0], [1000.0, 10.0, 30.0], [900.0, 20.0, 40.0]])
    fig = vi.norm_lines(norms, 2, ["a", "b", "c"])
    np.testing.assert_array_equal(fig.data[0].y, norms[:, 0])
    np.testing.assert_array_equal(fig.data[1].y, norms[:, 2])
    np.testing.assert_array_equal(fig.data[2].y, [1.0, 30.0, 40.0])          # the median of each row
    assert fig.layout.yaxis.type == "log"
    assert len(vi.norm_lines(norms, 0, ["a", "b", "c"]).data) == 2           # position 0 is not drawn twice
    bars = vi.layer_bars({"attention": np.ones(4), "MLP": np.arange(4.0)}, log=True)
    assert [t.name for t in bars.data] == ["attention", "MLP"] and bars.layout.barmode == "group"
    assert bars.layout.yaxis.type == "log"


# ----------------------------------------------------------------------------------------------- logit lens
def test_lens_top_figure_cells_are_escaped_and_coloured_by_probability():
    labels = [["<b>", "a", "b"], ["verylongtoken", "c", "d"]]
    probs = np.array([[0.5, 0.3, 0.1], [0.9, 0.05, 0.01]])
    fig = vi.lens_top_figure(labels, probs, title="t")
    heat = fig.data[0]
    np.testing.assert_array_equal(np.asarray(heat.z), probs)
    assert heat.zmin == 0 and heat.zmax == 1
    assert heat.text[0][0] == "&lt;b&gt;" and heat.text[1][0] == "verylo…"
    assert heat.customdata[1][0][0] == "verylongtoken"                        # the hover has the whole token
    assert list(fig.layout.xaxis.ticktext) == ["#1", "#2", "#3"]
    with pytest.raises(ValueError):
        vi.lens_top_figure(labels, probs[:, :2])


def test_lens_grid_outlines_the_chosen_position():
    labels = [["a", "b", "c"], ["d", "<e>", "f"]]
    probs = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    fig = vi.lens_grid_figure(labels, probs, ["x", "y", "<z>"], [7, 8, 9], chosen=8, title="t")
    assert fig.layout.shapes[0].x0 == 0.5 and fig.layout.shapes[0].x1 == 1.5
    assert list(fig.layout.xaxis.ticktext) == ["7:x", "8:y", "9:&lt;z&gt;"]
    assert fig.data[0].customdata[1][1][0] == "&lt;e&gt;" and fig.data[0].customdata[1][1][2] == "8 y"
    with pytest.raises(ValueError):
        vi.lens_grid_figure(labels, probs, ["x", "y"], [7, 8])


# ----------------------------------------------------------------------------------------- which heads matter
def test_stat_overview_signed_is_symmetric_and_default_unchanged():
    v = np.array([[0.2, -0.8], [0.5, np.nan]])
    signed = va.stat_overview(v, label="push", signed=True)
    heat = signed.data[0]
    assert heat.zmin == -0.8 and heat.zmax == 0.8
    assert heat.colorscale == go.Heatmap(colorscale=DIVERGING_SCALE).colorscale
    assert "push: -0.800" in signed.data[1].text and "push: +0.200" in signed.data[1].text
    plain = va.stat_overview(np.abs(np.nan_to_num(v)), label="x")
    assert plain.data[0].zmin == 0.0 and plain.data[0].colorscale == go.Heatmap(
        colorscale=ATTENTION_SCALE).colorscale


def test_attribution_figure_crosses_out_switched_off_heads():
    heads = np.arange(12.0).reshape(4, 3) - 6
    fig = he.attribution_figure(heads, off=[(1, 2), (3, 0)], selected=(0, 0))
    marks = [t for t in fig.data if t.name == "switched off"]
    assert list(marks[0].x) == [1, 3] and list(marks[0].y) == [2, 0]
    assert fig.data[0].zmin == -6 and fig.data[0].zmax == 6
    assert len([t for t in he.attribution_figure(heads).data if t.name == "switched off"]) == 0


def test_ablation_figure_before_after_with_one_number_format():
    fig = he.ablation_figure(["a", "<b>"], np.array([0.5, 0.25]), np.array([0.3, 0.001]), title="t")
    before, after = fig.data
    np.testing.assert_array_equal(before.x, [0.5, 0.25])
    np.testing.assert_array_equal(after.x, [0.3, 0.001])
    assert list(before.text) == ["50.00%", "25.00%"] and list(after.text) == ["30.00%", "0.10%"]  # 2 digits of 0.1%
    assert list(fig.layout.yaxis.ticktext) == ["a", "&lt;b&gt;"] and fig.layout.barmode == "group"
    with pytest.raises(ValueError):
        he.ablation_figure(["a"], np.array([0.5, 0.25]), np.array([0.3, 0.001]))
