"""viz/efficient.py: the figures carry the numbers they are given, with categorical token axes and passed-in labels."""
from __future__ import annotations

import numpy as np

from model.maths.alibi import alibi_bias, alibi_slopes
from model.maths.sparse_masks import sink_window
from viz import efficient as V

TOKENS = ["The", " cat", " sat", " on", " the", " mat", ".", " It", " was", " 8"]


def test_sparse_mask_figure_has_three_states():
    fig = V.sparse_mask_figure(sink_window(10, 3, 1), title="Sink", x_title="key", y_title="query")
    z = np.array(fig.data[0].z)
    assert z[9, 0] == 0 and z[9, 9] == 0 and z[9, 2] == 1 and z[0, 1] == 2     # sink and diagonal kept, cut, future
    assert list(fig.data[0].x) == list(range(10)) and fig.layout.yaxis.autorange == "reversed"
    assert len(fig.data) == 1 and fig.data[0].z.dtype == np.uint8


def test_tile_order_marks_the_current_tile_and_skipped_tiles():
    order = np.array([[0, -1], [1, np.nan]])
    fig = V.tile_order_figure(order, (1, 0), ["0–15", "16–31"], title="t", x_title="kb", y_title="qb",
                              step_word="step", skipped_word="skipped")
    assert list(fig.data[0].text[1]) == ["1", ""] and np.isnan(fig.data[0].z[0][1])
    assert fig.data[1].z[0][1] == 0 and fig.layout.shapes[0].x0 == -0.5 and fig.layout.shapes[0].y0 == 0.5


def test_position_lines_and_next_token_compare_keep_values():
    fig = V.position_lines({"full": np.arange(9.0), "window": np.ones(9)}, TOKENS[1:], title="t", x_title="x",
                           y_title="y", marker=4, marker_text="cut")
    np.testing.assert_array_equal(fig.data[1].y, np.ones(9))
    assert fig.layout.xaxis.type == "linear" and fig.layout.shapes[0].x0 == 3.5
    bars = V.next_token_compare([" mat", " rug"], {"a": np.array([0.6, 0.1]), "b": np.array([0.2, 0.3])}, title="t",
                                x_title="p")
    assert [t.name for t in bars.data] == ["a", "b"] and list(bars.data[1].x) == [0.2, 0.3]


def test_alibi_figures():
    slopes = alibi_slopes(8)
    fig = V.slopes_figure(slopes, selected=1, title="t", x_title="head", y_title="slope")
    assert fig.data[0].text[0] == "1/2" and fig.data[0].marker.color[1] != fig.data[0].marker.color[0]
    heat = V.bias_heatmap(alibi_bias(slopes, 4)[0], title="t", x_title="k", y_title="q", value_word="bias")
    z = np.array(heat.data[0].z, dtype=float)
    assert z[3, 0] == -1.5 and np.isnan(z[0, 3])


def test_kv_cache_figure_puts_every_step_and_the_timed_recomputes():
    fig = V.kv_cache_figure(np.arange(10, 14), np.arange(10, 14) * 2**20, np.ones(4), np.array([10, 13]),
                            np.array([5.0, 8.0]), titles=("size", "time"), x_title="tokens", y_titles=("MiB", "ms"),
                            names=("cached", "recomputed"))
    assert list(fig.data[0].y) == [10, 11, 12, 13]
    assert list(fig.data[1].x) == [10, 11, 12, 13] and list(fig.data[2].x) == [10, 13]
    assert [t.name for t in fig.data[1:]] == ["cached", "recomputed"]
