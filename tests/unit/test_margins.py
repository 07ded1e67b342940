"""viz.margins and the room the one-head heatmap reserves (the browser check: tests/e2e, reserves_room)."""
import math

import numpy as np

from viz import attention as va
from viz.margins import LINE_EM, NARROW_EM, SYMBOL_EM, WIDE_EM, text_px, tick_angle, tick_depth, widest_px
from viz.theme import scale_fonts


def test_text_px_counts_wide_characters_and_reads_entities():
    assert text_px("abcd", 10) == 4 * NARROW_EM * 10
    assert text_px("学习", 10) == 2 * WIDE_EM * 10                  # CJK: about a font size each
    assert text_px("🍕", 10) == WIDE_EM * 10
    assert text_px("↵…", 10) == 2 * SYMBOL_EM * 10                  # token marks and the ellipsis: wider than "a"
    assert text_px("&lt;br&gt;", 14) == text_px("<br>", 14)        # escaped for plotly, drawn as 4 characters
    assert widest_px(["a", "abc", "ab"], 10) == text_px("abc", 10)
    assert widest_px([], 10) == 0


def test_tick_angle_by_hand():
    # 14 px labels: a slanted line needs 1.4 * 14 * sqrt(2) + 4 = 31.7 px between ticks
    assert tick_angle(40, 44, 14) == 0                             # 40 + 4 <= 44: side by side
    assert tick_angle(41, 44, 14) == 45
    assert tick_angle(100, 32, 14) == 45
    assert tick_angle(100, 31, 14) == 90
    assert tick_depth(50, 90, 14) == 50 + 4
    assert tick_depth(50, 0, 14) == LINE_EM * 14 + 4
    assert math.isclose(tick_depth(50, 45, 14), (50 + LINE_EM * 14) / math.sqrt(2) + 4)


def test_head_heatmap_plot_is_square_and_its_margins_hold_the_labels():
    T = 12
    pattern = np.tril(np.ones((T, T), np.float32)) / np.arange(1, T + 1)[:, None]
    for tokens in (["a"] * T, [f"␣token{i:03d}" for i in range(T)], ["学习学习"] * T):
        fig = va.head_heatmap(pattern, tokens, title="L0 H0", height=560)
        m = fig.layout.margin
        side = fig.layout.height - m.t - m.b
        assert fig.layout.width - m.l - m.r == side                  # square plot area
        assert m.l >= widest_px(list(fig.layout.yaxis.ticktext), 14)  # the labels and more (the axis title)
        assert m.b >= tick_depth(widest_px(list(fig.layout.xaxis.ticktext), 14), fig.layout.xaxis.tickangle, 14)
    narrow = va.head_heatmap(pattern, ["a"] * T)
    wide = va.head_heatmap(pattern, ["学习学习"] * T)
    assert wide.layout.margin.l > narrow.layout.margin.l
    assert narrow.layout.xaxis.tickangle == 0 and wide.layout.xaxis.tickangle in (45, 90)   # turned to fit
    bare = va.head_heatmap(pattern, ["a"] * T, show_scale=False)
    assert bare.layout.margin.r < narrow.layout.margin.r              # no colour bar to make room for


def test_scale_fonts_scales_reserved_margins():
    fig = va.head_heatmap(np.eye(3, dtype=np.float32), ["a", "b", "c"], title="t")
    before = [fig.layout.margin[s] for s in "lrtb"]
    scale_fonts(fig, 1.25)
    assert [fig.layout.margin[s] for s in "lrtb"] == [round(v * 1.25) for v in before]
