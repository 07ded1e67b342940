"""viz/labels.py (token labels for every figure) and viz/format.py (one number formatter), against hand-worked
values."""
from __future__ import annotations

import pytest

from viz.format import (
    SI,
    format_bytes,
    format_si,
    percent_decimals,
    percent_labels,
    percent_tickformat,
    probability_axis,
)
from viz.labels import plotly_escape, position_axis, row_axis, symbol_legend, tick_positions, token_axis


def test_escape_and_categories_keep_tokens_literal():
    assert plotly_escape("<b>&<br>") == "&lt;b&gt;&amp;&lt;br&gt;"
    axis = token_axis(["8", " 2", "<b>", "8"])
    assert axis["type"] == "category" and axis["categoryorder"] == "array"
    assert axis["categoryarray"] == ["0 8", "1  2", "2 &lt;b&gt;", "3 8"]       # unique even for repeats
    assert axis["ticktext"] == ["8", " 2", "&lt;b&gt;", "8"]


def test_thinned_ticks_carry_their_position():
    tokens = [f"tok{i}" for i in range(100)]
    assert tick_positions(100, 10) == list(range(0, 100, 10))
    axis = position_axis(tokens, max_labels=10)
    assert axis["type"] == "linear" and axis["tickmode"] == "array" and axis["range"] == [-0.5, 99.5]
    assert axis["tickvals"] == list(range(0, 100, 10)) and axis["ticktext"][3] == "30:tok30"
    rows = row_axis(["a", "<i>"])
    assert rows["tickvals"] == [0, 1] and rows["ticktext"] == ["a", "&lt;i&gt;"] and rows["range"] == [1.5, -0.5]


def test_symbol_legend_names_only_the_symbols_shown():
    assert symbol_legend(["The", "␣cat"]) == "␣ = a space"
    assert symbol_legend(["a", "b"]) == ""
    legend = symbol_legend(["↵", "<0xE6>", "␣x"])
    assert "↵ = a newline" in legend and "<0xE6>" in legend and "space" in legend


@pytest.mark.parametrize("value, kwargs, text", [
    (0, {}, "0"),
    (999, {}, "999"),
    (1000, {}, "1 k"),
    (134_515_008, {"digits": 4}, "134.5 M"),
    (8_030_261_248, {}, "8.03 B"),
    (6_738_415_616, {"digits": 4}, "6.738 B"),
    (5.55e17, {}, "5.55e5 T"),                       # beyond the largest prefix: a power of ten, not digits
    (999_700, {}, "999.7 k"),                        # 3 digits would round to "1e+03 k": one more digit
    (269_030_016, {"unit": "B", "prefixes": SI}, "269 MB"),
    (1.1e15, {"unit": "B", "prefixes": SI}, "1.1 PB"),
    (2.2e18, {"unit": "B", "prefixes": SI}, "2.2e3 PB"),
    (1.8e17, {"unit": "FLOPs", "prefixes": SI[:5]}, "1.8e5 TFLOPs"),
    (-2500, {}, "-2.5 k"),
])
def test_format_si(value, kwargs, text):
    assert format_si(value, **kwargs) == text


def test_format_bytes():
    assert format_bytes(23_040) == "23 kB" and format_bytes(1_143_513e12) == "1.14e3 PB"


def test_percent_labels_share_one_format():
    assert percent_decimals([0.456, 0.0049]) == 2
    assert percent_labels([0.456, 0.0049]) == ["45.60%", "0.49%"]
    assert percent_labels([0.5, 0.3, 0.2]) == ["50%", "30%", "20%"]
    high_t = percent_labels([1.22e-4, 1.09e-4, 7.7e-5])                       # T = 10 over 49,152 tokens
    assert high_t == ["0.0122%", "0.0109%", "0.0077%"]
    assert percent_labels([0.9, 1e-9]) == ["90.0000%", "<0.0001%"]           # never a rounded 0
    assert percent_labels([0.0, 0.0]) == ["0%", "0%"]


def test_percent_tickformat_never_repeats_a_tick():
    for top in (0.9, 0.05, 0.0015, 1.5e-4):
        decimals = int(percent_tickformat(top)[1:-1])
        ticks = {f"{100 * top * k / 5:.{decimals}f}" for k in range(6)}
        assert len(ticks) == 6, (top, ticks)


def test_probability_axis_passes_100_percent_only_for_a_near_certain_bar():
    assert probability_axis(0.5) == {"range": [0, 0.5], "tickformat": ".0%"}
    near_certain = probability_axis(0.9999 * 1.25)
    assert near_certain["range"] == [0, 0.9999 * 1.25]                     # room for "99.99%" past the bar
    assert max(near_certain["tickvals"]) == 1.0                            # no "120%" tick on a probability
    assert probability_axis(0.0)["range"] == [0, 1.0]
