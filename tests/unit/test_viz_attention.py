"""viz.attention: figure types, shapes, labels, masked cells."""
import csv
import io

import numpy as np
import plotly.graph_objects as go
import pytest

from viz import attention as va
from viz.exports import matrix_csv
from viz.theme import MASKED_COLOR


def causal_softmax(T, seed=0, lead=()):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(*lead, T, T))
    x = np.where(np.tril(np.ones((T, T), dtype=bool)), x, -np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def test_head_heatmap_axes_masking_and_duplicate_tokens():
    tokens = ["The", "␣cat", "␣the", "␣cat", "."]                 # duplicates must not merge
    p = causal_softmax(5)
    p[4, 2] = 0.0                                                  # an allowed zero-weight cell
    fig = va.head_heatmap(p, tokens, query=3, title="L0 H0")
    heat = fig.data[0]
    assert isinstance(heat, go.Heatmap)
    z = np.asarray(heat.z, dtype=float)
    assert z.shape == (5, 5)
    assert np.isnan(z[np.triu_indices(5, 1)]).all()               # masked = NaN (drawn as the grey background)
    assert z[4, 2] == 0.0                                          # zero weight stays a number: dark end of scale
    assert fig.layout.plot_bgcolor == MASKED_COLOR
    assert list(heat.x) == list(heat.y) == ["0 The", "1 ␣cat", "2 ␣the", "3 ␣cat", "4 ."]
    assert len(set(heat.x)) == 5
    assert list(fig.layout.xaxis.ticktext) == tokens
    assert fig.layout.yaxis.autorange == "reversed"                # query 0 on top
    assert "query %{y}" in heat.hovertemplate and "key %{x}" in heat.hovertemplate
    assert len(fig.layout.shapes) == 1                             # the query row outline
    assert fig.layout.title.text == "L0 H0"


def test_head_heatmap_thins_ticks_for_long_texts():
    T = 300
    fig = va.head_heatmap(causal_softmax(T), [f"t{i}" for i in range(T)], max_labels=30)
    ticks = fig.layout.xaxis.tickvals
    assert 10 <= len(ticks) <= 30
    assert fig.layout.xaxis.ticktext[1].startswith(f"{ticks[1].split()[0]}:")   # position-prefixed when thinned
    with pytest.raises(ValueError):
        va.head_heatmap(np.zeros((3, 4)), ["a", "b", "c"])


def test_token_labels_are_safe_for_plotly_markup():
    tokens = ["<0xF0>", "<b>", "a&b"]
    fig = va.head_heatmap(causal_softmax(3), tokens)
    assert list(fig.data[0].x) == ["0 &lt;0xF0&gt;", "1 &lt;b&gt;", "2 a&amp;b"]
    assert all("<" not in t for t in fig.layout.xaxis.ticktext)


def test_layer_grid_small_multiples_and_pooling():
    H, T = 9, 20
    fig = va.layer_grid(causal_softmax(T, lead=(H,)), selected=4)
    heats = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(heats) == H
    assert all(np.asarray(h.z).shape == (T, T) for h in heats)
    assert [a.text for a in fig.layout.annotations][4] == "<b>head 4</b>"
    assert fig.layout.coloraxis.cmin == 0
    big = va.layer_grid(causal_softmax(300, lead=(2,)), max_cells=100)
    assert np.asarray(big.data[0].z).shape == (100, 100)          # 300 tokens in blocks of 3


def test_pool_square_means_and_mask():
    m = va.causal_nan(np.tril(np.ones((4, 4))))
    pooled, f = va.pool_square(m, 2)
    assert f == 2
    np.testing.assert_allclose(pooled[0, 0], 1.0)                  # mean of the allowed cells only
    assert np.isnan(pooled[0, 1])                                  # an all-masked block stays masked


def test_stat_overview_wide_grid_click_layer_and_selection():
    L, H = 30, 9
    values = np.random.default_rng(1).random((L, H))
    values[3, 3] = np.nan
    fig = va.stat_overview(values, label="prev", selected=(7, 2))
    heat, click = fig.data[0], fig.data[1]
    assert isinstance(heat, go.Heatmap) and np.asarray(heat.z).shape == (H, L)   # layers across, heads down
    np.testing.assert_array_equal(np.asarray(heat.z, dtype=float)[2, 7], values[7, 2])
    assert heat.hoverinfo == "skip"                                # the click layer carries the hover ...
    assert heat.texttemplate is None                               # ... and the values (30 columns: too narrow)
    assert not heat.colorbar.title.text                            # the figure title names the statistic
    assert isinstance(click, go.Scatter) and len(click.x) == L * H
    data = np.asarray(click.customdata)
    assert data.shape == (L * H, 2)
    k = 7 * H + 2
    assert (click.x[k], click.y[k]) == (7, 2) and data[k].tolist() == [7, 2]
    assert click.text[k] == f"prev: {values[7, 2]:.3f}" and click.text[3 * H + 3] == "prev: n/a"
    assert fig.layout.clickmode == "event+select" and fig.layout.dragmode is False
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # head 0 on top
    assert fig.layout.xaxis.title.text == "layer" and fig.layout.yaxis.title.text == "head"
    assert fig.layout.shapes[0].x0 == 6.5 and fig.layout.shapes[0].y0 == 1.5
    assert fig.layout.height < 520                                 # wide and short
    few = va.stat_overview(np.full((4, 2), 0.5), label="x", scale_title="bits")
    assert few.data[0].texttemplate == "%{text}" and few.data[0].text[0][0] == "0.50"   # wide cells: numbers
    assert few.data[0].colorbar.title.text == "bits"
    assert va.stat_overview(values, label="x", show_values=True).data[0].texttemplate == "%{text}"


def test_thumbnail_overview_is_one_downsampled_figure():
    L, H, T = 30, 9, 256
    att = causal_softmax(T, lead=(L, H)).astype(np.float16)
    fig = va.thumbnail_overview(va.thumbnail_tiles(att), selected=(0, 0))
    heat = [t for t in fig.data if isinstance(t, go.Heatmap)][0]
    z = np.asarray(heat.z, dtype=float)
    assert z.shape[1] > z.shape[0] and z.shape[1] < 2000          # downsampled, layers across
    assert np.nanmax(z) <= 1.0 + 1e-6
    click = [t for t in fig.data if t.customdata is not None][0]
    assert len(click.x) == L * H and (click.x[5 * H + 4], click.y[5 * H + 4]) == (5, 4)
    tiles = va.thumbnail_tiles(att[:2, :3, :21, :21], per_layer=lambda a: a * 0.5)
    assert tiles.shape == (2, 3, 11, 11)                          # 21 tokens in blocks of 2
    assert np.nanmax(tiles) == pytest.approx(1.0)                 # each head scaled to its own maximum
    small = va.thumbnail_overview(tiles)
    big = np.asarray([t for t in small.data if isinstance(t, go.Heatmap)][0].z, dtype=float)
    np.testing.assert_allclose(big[:11, 12:23], tiles[1, 0])      # tile (layer 1, head 0): second column, top row
    with pytest.raises(ValueError):
        va.thumbnail_overview(np.zeros((3, 3)))


def test_head_heatmap_without_colour_bar():
    fig = va.head_heatmap(causal_softmax(4), list("abcd"), show_scale=False)
    assert fig.data[0].showscale is False
    assert fig.layout.margin.pad == 0                              # no grey frame around the matrix


def test_query_heads_heatmap_keys_up_to_query():
    rows = causal_softmax(6, lead=(3,))[:, 4, :]
    fig = va.query_heads_heatmap(rows, list("abcdef"), 4, selected=1)
    z = np.asarray(fig.data[0].z)
    assert z.shape == (3, 5)                                       # keys 0..4 only
    assert list(fig.data[0].y) == ["head 0", "head 1", "head 2"]
    with pytest.raises(ValueError):
        va.query_heads_heatmap(rows, list("abcdef"), 6)


def test_next_token_bars():
    fig = va.next_token_bars(["␣a", "<b>", "c"], np.array([0.5, 0.3, 0.2]))
    bar = fig.data[0]
    assert isinstance(bar, go.Bar) and bar.orientation == "h"
    assert list(bar.y) == [0, 1, 2] and fig.layout.yaxis.type == "linear"   # rows by position: "8" stays a label
    assert list(fig.layout.yaxis.ticktext) == ["1. ␣a", "2. &lt;b&gt;", "3. c"]
    assert list(bar.text) == ["50%", "30%", "20%"]


def test_matrix_csv_round_trip():
    tokens = ["The", '"q"', "The"]
    p = causal_softmax(3)
    rows = list(csv.reader(io.StringIO(matrix_csv(p, tokens))))
    assert rows[0][1:] == ["0 The", '1 "q"', "2 The"]
    assert [r[0] for r in rows[1:]] == ["0 The", '1 "q"', "2 The"]
    assert rows[1][2] == "" and rows[1][3] == ""                   # masked cells empty
    np.testing.assert_allclose(float(rows[3][1]), p[2, 0], rtol=1e-5)


def test_next_token_bars_leave_room_for_a_near_certain_label():
    """A 99.99% bar: the axis goes past its end (its value is written there), ticks stop at 100%."""
    fig = va.next_token_bars(["5", "4"], np.array([0.9999, 0.0001]))
    assert fig.layout.xaxis.range[1] >= 1.2 and max(fig.layout.xaxis.tickvals) == 1.0
