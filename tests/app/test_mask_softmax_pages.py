"""The Causal mask and Softmax & temperature pages in Streamlit's AppTest, on the real model."""
from __future__ import annotations

import re

import numpy as np
import pytest

from harness.apptest import array, figures, open_page, rerun
from model.maths.sampling import filter_probs, softmax

TEXT = "The cat sat on the mat because it was tired, and then the cat slept."


def by_title(at) -> dict[str, dict]:
    """The page's plotly figures by title (untitled ones by their order)."""
    return {(spec["layout"].get("title") or {}).get("text") or f"figure {i}": spec
            for i, spec in enumerate(figures(at))}


def first(figs: dict, prefix: str) -> dict:
    return next(s for t, s in figs.items() if t.startswith(prefix))


# --------------------------------------------------------------------------------------------------- causal mask
def test_causal_mask_page_matches_the_model(lm):
    at = open_page("causal-mask", text=TEXT, layer="3", head="2")
    trace = lm.run(TEXT)
    n = at.slider(key="mask_n").value
    assert n == min(16, trace.n_tokens)
    figs = by_title(at)
    assert len(figs) == 10
    softmax_fig = first(figs, "4. softmax")
    z = array(softmax_fig["data"][0]["z"]).astype(float)                        # [n, n], NaN on masked cells
    tri = np.tri(n, dtype=bool)
    np.testing.assert_allclose(z[tri], trace.attention[3, 2, :n, :n].astype(float)[tri], atol=2e-3)
    assert np.isnan(z[~tri]).all()
    assert softmax_fig["layout"]["xaxis"]["type"] == "category"                # token axes never guessed
    assert softmax_fig["layout"]["yaxis"]["scaleanchor"] == "x"                # square cells
    at.slider(key="mask_n").set_value(8)                                        # cells big enough for marks
    rerun(at)
    marks = np.asarray(first(by_title(at), "3. Scores + mask")["data"][-1]["text"], dtype=object)
    assert marks[0, 1] == "−∞" and marks[1, 0] == ""
    rows = array(figs["softmax with no mask"]["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-5)               # softmax over every key
    assert rows[0, 1:].sum() > 0                                                # the future leaks in
    assert any("step by step" in md.value for md in at.markdown)


def test_causal_mask_first_n_and_sink(lm):
    at = open_page("causal-mask", text=TEXT, layer="20", head="0", sink="1")
    at.slider(key="mask_n").set_value(5)
    rerun(at)
    softmax_fig = first(by_title(at), "4. softmax")
    z = array(softmax_fig["data"][0]["z"]).astype(float)
    assert z.shape == (5, 5)
    assert [t.get("name") for t in softmax_fig["data"]][1:] == ["hidden", "nothing to show", "masked"]
    assert np.isnan(z[:, 0]).all() and np.isnan(z[:2]).all()                    # sink column and rows 0-1 hidden
    np.testing.assert_allclose(np.nansum(z[2:], axis=1), 1.0, atol=1e-4)        # the rest renormalized
    labels = [re.sub(r"^\d+ ", "", c) for c in softmax_fig["layout"]["xaxis"]["categoryarray"]]
    assert labels == lm.run(TEXT).tokens[:5]


def test_causal_mask_side_by_side_keeps_equal_square_panels(lm):
    at = open_page("causal-mask", text=TEXT)
    assert at.toggle(key="mask_side").value is False
    at.toggle(key="mask_side").set_value(True)
    rerun(at)
    panels = [s for t, s in by_title(at).items() if t[:2] in ("1.", "2.", "3.", "4.")]
    assert len(panels) == 4
    assert len({s["layout"]["height"] for s in panels}) == 1                   # equal panels ...
    assert all(s["layout"]["yaxis"]["scaleanchor"] == "x" for s in panels)      # ... with square cells
    assert not any(t.get("showscale") for s in panels for t in s["data"])      # no colour bar eats one's width


# --------------------------------------------------------------------------------------------------------- softmax
def bars(at) -> dict:
    return next(s for t, s in by_title(at).items() if " at T = " in t)


def test_softmax_temperature_updates_the_bars(lm):
    at = open_page("softmax", text=TEXT)
    assert at.select_slider(key="temp").value == 1.0
    before = array(bars(at)["data"][0]["x"]).astype(float)
    at.select_slider(key="temp").set_value(0.5)
    rerun(at)
    after = array(bars(at)["data"][0]["x"]).astype(float)
    expected = np.sort(softmax(lm.run(TEXT).next_token_logits, 0.5))[::-1][:20]
    np.testing.assert_allclose(after, expected, rtol=1e-6)                      # independent softmax
    assert not np.allclose(before, after)
    assert at.query_params["temp"] == "0.5"


@pytest.mark.parametrize("source", ["next", "attention"])
def test_softmax_extremes_are_readable(source, lm):
    at = open_page("softmax", text=TEXT, source=source, layer="14", head="4")
    for t in (0.05, 10.0):
        at.select_slider(key="temp").set_value(t)
        rerun(at)
        fig = bars(at)
        p = array(fig["data"][0]["x"]).astype(float)
        assert np.isfinite(p).all()
        labels = fig["data"][0]["text"]
        decimals = {len(s.split(".")[1].rstrip("%")) if "." in s else 0 for s in labels if not s.startswith("<")}
        assert len(decimals) == 1 and all(s.endswith("%") for s in labels)      # one format for every bar
        fmt = fig["layout"]["xaxis"]["tickformat"]
        ticks = [float(f"{v * 100:.{int(fmt[1:-1])}f}") for v in np.linspace(0, fig["layout"]["xaxis"]["range"][1], 5)]
        assert len(set(ticks)) == 5                                              # no "0% 0% 0%" axis
        assert fig["layout"]["yaxis"]["type"] == "linear"


def test_softmax_top_k_top_p_and_seeded_sampling(lm):
    at = open_page("softmax", text=TEXT, top_k="5")
    fig = bars(at)
    colors = fig["data"][0]["marker"]["color"]
    assert colors[:5] == [colors[0]] * 5 and colors[5] != colors[0]             # the kept set highlighted
    at.slider(key="softmax_top_p").set_value(0.3)
    at.number_input(key="softmax_seed").set_value(7)
    at.number_input(key="softmax_draws").set_value(2000)
    rerun(at)
    keep, kept = filter_probs(softmax(lm.run(TEXT).next_token_logits), top_k=5, top_p=0.3)

    def histogram():
        spec = first(by_title(at), "2,000 draws")
        return array(spec["data"][1]["x"]).astype(float), array(spec["data"][0]["x"]).astype(float)

    observed, expected = histogram()
    np.testing.assert_allclose(np.sort(expected)[::-1], np.sort(kept[keep])[::-1], rtol=1e-9)
    assert observed.sum() == pytest.approx(1.0)
    rerun(at)
    np.testing.assert_array_equal(histogram()[0], observed)                    # same seed, same draws
    at.number_input(key="softmax_seed").set_value(8)
    rerun(at)
    assert not np.array_equal(histogram()[0], observed) or keep.sum() == 1


def test_sampling_gap_settles_as_draws_grow(lm):
    """At T = 10 over 49,152 candidates the comparison is over the bars shown plus one 'others' bucket: at
    100,000 draws it is within a few times the noise the caption quotes, and far below 25%."""
    at = open_page("softmax", text=TEXT, temp="10", draws="100000")
    caption = next(c.value for c in at.caption if "differ by" in c.value)
    gap, noise = (float(x) for x in re.findall(r"([\d.]+)%", caption.split("differ by")[1])[:2])
    assert gap < 5 * noise + 0.05 and gap < 1.0
    assert "1/√N" in caption
