"""The Causal mask and Softmax & temperature pages in Streamlit's AppTest, on the real model."""
from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TEXT = "The cat sat on the mat because it was tired, and then the cat slept."


def open_page(page: str, **params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["page"] = page
    at.query_params["text"] = TEXT
    for key, value in params.items():
        at.query_params[key] = str(value)
    at.run()
    assert not at.exception, at.exception
    return at


def _array(v):
    """A plotly JSON array: a plain list or a base64 typed array {"dtype", "bdata", "shape"}."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return a.reshape([int(s) for s in str(v["shape"]).split(",")]) if "shape" in v else a
    return np.array([np.nan if x is None else x for x in np.ravel(v)], dtype=object).reshape(np.shape(v))


def figures(at: AppTest) -> dict[str, dict]:
    """The page's plotly figures by title (untitled ones by their order)."""
    out = {}
    for i, el in enumerate(at.get("plotly_chart")):
        spec = json.loads(el.proto.spec)
        out[(spec["layout"].get("title") or {}).get("text") or f"figure {i}"] = spec
    return out


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def assert_no_nan_shown(at: AppTest) -> None:
    assert not any("nan" in m.value.lower() or "inf" in m.value.lower() for m in at.metric), \
        [m.value for m in at.metric]
    for title, spec in figures(at).items():
        for trace in spec["data"]:
            if trace.get("type") == "bar":
                x = np.asarray(_array(trace["x"]), dtype=float)
                assert np.isfinite(x).all(), title
            if trace.get("type") == "scatter" and trace.get("mode") == "lines":
                y = np.asarray(_array(trace["y"]), dtype=float)
                assert np.isfinite(y).all(), title


# --------------------------------------------------------------------------------------------------- causal mask
def test_causal_mask_page_matches_the_model(lm):
    at = open_page("causal-mask", layer=3, head=2)
    assert at.title[0].value == "Causal mask"
    trace = lm.run(TEXT)
    T = trace.n_tokens
    n = at.slider(key="mask_n_tokens").value
    assert n == min(24, T)
    figs = figures(at)
    assert len(figs) == 10
    softmax_fig = next(s for t, s in figs.items() if t.startswith("4. softmax"))
    z = np.asarray(_array(softmax_fig["data"][0]["z"]), dtype=float)           # [n, n], NaN on masked cells
    expected = trace.attention[3, 2, :n, :n].astype(float)
    tri = np.tri(n, dtype=bool)
    np.testing.assert_allclose(z[tri], expected[tri], atol=2e-3)                # the model's own pattern
    assert np.isnan(z[~tri]).all()
    masked_layer = next(tr for tr in softmax_fig["data"] if tr.get("name") == "masked")
    assert masked_layer["showscale"] is False
    masked_fig = next(s for t, s in figs.items() if t.startswith("3. Scores + mask"))
    marks = np.asarray(_array(masked_fig["data"][1]["text"]))
    assert marks[0, 1] == "−∞" and marks[1, 0] == ""
    no_mask = next(s for t, s in figs.items() if t == "softmax with no mask")
    rows = np.asarray(_array(no_mask["data"][0]["z"]), dtype=float)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-6)               # softmax over every key
    assert rows[0, 1:].sum() > 0                                                 # the future leaks in
    assert any("step by step" in md.value for md in at.markdown)


def test_causal_mask_first_n_and_sink(lm):
    at = open_page("causal-mask", layer=20, head=0, sink=1)
    at.slider(key="mask_n_tokens").set_value(5).run()
    assert not at.exception, at.exception
    figs = figures(at)
    softmax_fig = next(s for t, s in figs.items() if t.startswith("4. softmax"))
    z = np.asarray(_array(softmax_fig["data"][0]["z"]), dtype=float)
    assert z.shape == (5, 5)
    assert [tr.get("name") for tr in softmax_fig["data"]][1:] == ["hidden", "masked"]
    assert np.isnan(z[1:, 0]).all()                                              # sink column hidden ...
    np.testing.assert_allclose(np.nansum(z[1:], axis=1), 1.0, atol=1e-4)         # ... rows renormalized
    assert list(softmax_fig["layout"]["xaxis"]["ticktext"]) == lm.run(TEXT).tokens[:5]


def charts_in_columns(at: AppTest) -> int:
    return sum(len(col.get("plotly_chart")) for col in at.columns)


def test_causal_mask_layout_stacked_by_default():
    """Default: one N x N matrix per row at the full width (two per row squeezed them to ~110 px at 1024 px); only
    the 4 x 4 worked example sits two per row. The toggle puts the big ones side by side, with fewer x labels."""
    at = open_page("causal-mask")
    assert at.toggle(key="mask_side_by_side").value is False
    assert len(figures(at)) == 10 and charts_in_columns(at) == 4                # the worked example only
    n = at.slider(key="mask_n_tokens").value
    stacked = figures(at)["1. Scores q·k / √d"]["layout"]["xaxis"]["tickvals"]
    assert len(stacked) == min(n, 20)
    at.toggle(key="mask_side_by_side").set_value(True).run()
    assert not at.exception, at.exception
    assert len(figures(at)) == 10 and charts_in_columns(at) == 10
    assert len(figures(at)["1. Scores q·k / √d"]["layout"]["xaxis"]["tickvals"]) <= 10


# --------------------------------------------------------------------------------------------------------- softmax
def test_softmax_page_temperature_updates_figures():
    at = open_page("softmax")
    assert at.title[0].value == "Softmax & temperature"
    assert at.select_slider(key="softmax_temp").value == 1.0
    before = figures(at)
    entropy_1 = metric(at, "Entropy")
    at.select_slider(key="softmax_temp").set_value(0.5).run()
    assert not at.exception, at.exception
    after = figures(at)
    assert metric(at, "Entropy") != entropy_1
    bars_before = next(s for t, s in before.items() if t.startswith("Top 20"))
    bars_after = next(s for t, s in after.items() if t.startswith("Top 20"))
    assert not np.allclose(np.asarray(_array(bars_before["data"][0]["x"]), float),
                           np.asarray(_array(bars_after["data"][0]["x"]), float))
    assert at.session_state["temp"] == 0.5                                       # shared state -> URL `temp`
    assert at.query_params["temp"] == ["0.5"] or at.query_params["temp"] == "0.5"


@pytest.mark.parametrize("source", ["next", "attention"])
def test_softmax_extremes_no_nan(source):
    at = open_page("softmax", layer=14, head=4)
    at.radio(key="softmax_source").set_value(source).run()
    for t in (0.05, 10.0):
        at.select_slider(key="softmax_temp").set_value(t).run()
        assert not at.exception, at.exception
        assert at.select_slider(key="softmax_temp").value == t
        assert_no_nan_shown(at)
        top1 = float(metric(at, "Top-1 probability").rstrip("%")) / 100
        if t == 0.05:
            assert top1 > 0.5
        else:
            assert top1 < 0.5
        assert math.isfinite(float(metric(at, "Entropy").split()[0]))


def test_softmax_top_k_top_p_and_seeded_sampling():
    at = open_page("softmax")
    at.number_input(key="softmax_top_k").set_value(5).run()
    assert metric(at, "Kept candidates") == "5"
    bars = next(s for t, s in figures(at).items() if t.startswith("Top 20"))
    colors = bars["data"][0]["marker"]["color"]
    assert colors[:5] == [colors[0]] * 5 and colors[5] != colors[0]              # kept set highlighted
    at.slider(key="softmax_top_p").set_value(0.3).run()
    assert int(metric(at, "Kept candidates")) <= 5
    at.number_input(key="softmax_seed").set_value(7).run()
    at.number_input(key="softmax_n_samples").set_value(2000).run()
    assert not at.exception, at.exception

    def histogram():
        spec = next(s for t, s in figures(at).items() if "draws from the kept" in t)
        sampled = spec["data"][1]
        return np.asarray(_array(sampled["x"]), float), len(_array(sampled["y"]))

    first, n_rows = histogram()
    assert n_rows == int(metric(at, "Kept candidates"))                    # only kept candidates are drawn
    assert first.sum() == pytest.approx(1.0)
    at.run()
    np.testing.assert_array_equal(histogram()[0], first)                         # same seed, same draws
    at.number_input(key="softmax_seed").set_value(8).run()
    assert not np.array_equal(histogram()[0], first) or n_rows == 1


def test_temperature_ten_from_a_link_is_kept():
    at = open_page("softmax", temp=10)
    assert float(at.query_params["temp"]) == 10.0
    assert not at.warning or all("temp" not in w.value for w in at.warning)
