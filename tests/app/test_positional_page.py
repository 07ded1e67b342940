"""The Positional encodings page in Streamlit's AppTest, on the real model: every tab, extreme settings, and the
shapes of the figures it sends."""
from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from harness import apptest
from harness.apptest import rerun

TEXT = "The cat sat on the mat because it was tired, and then the cat slept on the warm mat."
TABS = ("sin", "rope", "model")


def open_page(tab: str = TABS[0], text: str = TEXT, **params) -> AppTest:
    """The Positional page on a view; the text is only in the model view's link (the others do not use it)."""
    extra = {"text": text} if tab == "model" else {}
    return apptest.open_page("positional", view=tab, **extra, **{k: str(v) for k, v in params.items()})


def _array(v) -> np.ndarray:
    a = apptest.array(v)
    return a.astype(float) if a.dtype == object else a


def figures(at: AppTest) -> dict[str, dict]:
    """The page's plotly figures by widget key suffix (pos_fig_<name> -> <name>)."""
    out = {}
    for el in at.get("plotly_chart"):
        key = el.proto.id.rsplit("-", 1)[-1]
        if key.startswith("pos_fig_"):
            out[key.removeprefix("pos_fig_")] = json.loads(el.proto.spec)
    return out


def heatmap_z(spec: dict, index: int = 0) -> np.ndarray:
    return _array([t for t in spec["data"] if t["type"] == "heatmap"][index]["z"])


# ------------------------------------------------------------------------------------------------ sinusoidal

def test_sinusoidal_default_figures():
    at = open_page()
    figs = figures(at)
    assert set(figs) == {"heatmap", "waves", "offset", "similarity"}
    z = heatmap_z(figs["heatmap"])
    assert z.shape == (256, 128)                                              # positions x dims, default settings
    np.testing.assert_allclose(z[1, :2], [np.sin(1), np.cos(1)], atol=1e-6)  # PE(1, 0), PE(1, 1)
    assert np.abs(z).max() <= 1.0 + 1e-6
    waves = [t for t in figs["waves"]["data"] if t.get("name", "").startswith("dim")]
    assert [t["name"] for t in waves] == ["dim 0", "dim 16", "dim 32", "dim 64", "dim 126"]
    ticks = figs["waves"]["layout"]["yaxis"]["ticktext"]
    assert "λ = 6.28 tokens" in ticks[0]                                      # 2*pi for dimension 0
    offset = [t for t in figs["offset"]["data"] if t["type"] == "scatter"]
    assert len(offset) == 3
    ys = [_array(t["y"]) for t in offset]
    for y in ys[1:]:
        np.testing.assert_allclose(y, ys[0], atol=1e-9)                         # only the offset matters
    assert heatmap_z(figs["similarity"]).shape == (256, 256)
    layout = figs["similarity"]["layout"]                                      # square, at its own size
    m = layout["margin"]
    assert layout["width"] - m["l"] - m["r"] == layout["height"] - m["t"] - m["b"]


@pytest.mark.parametrize("d_model,n_positions,base", [(16, 2048, 1_000_000), (1024, 2048, 10_000),
                                                      (1024, 16, 100)])
def test_sinusoidal_extremes(d_model, n_positions, base):
    at = open_page()
    at.select_slider(key="pos_d_model").set_value(d_model)
    at.slider(key="pos_n_positions").set_value(n_positions)
    at.select_slider(key="pos_base").set_value(base)
    rerun(at)
    figs = figures(at)
    z = heatmap_z(figs["heatmap"])
    assert z.shape[0] <= 512 and z.shape[1] <= 512                            # thinned for the screen
    assert z.shape[0] == min(n_positions, len(range(0, n_positions, -(-n_positions // 512))))
    assert z.shape[1] == min(d_model, 512)
    assert figs["heatmap"]["data"][0]["y"] is not None
    sim = heatmap_z(figs["similarity"])
    assert sim.shape[0] == sim.shape[1] == z.shape[0]
    np.testing.assert_allclose(np.diag(sim), d_model / 2, rtol=1e-5)         # |PE(p)|^2 = d/2
    waves = [t for t in figs["waves"]["data"] if t.get("name", "").startswith("dim")]
    assert waves and all(len(_array(t["x"])) == n_positions for t in waves)
    assert all(int(t["name"].split()[1]) < d_model for t in waves)


def test_sinusoidal_no_wave_dims():
    at = open_page()
    at.multiselect(key="pos_dims_pick").set_value([])
    rerun(at)
    assert "waves" not in figures(at)


# ------------------------------------------------------------------------------------------------ RoPE theory

def test_rope_theory_tab():
    at = open_page(TABS[1])
    figs = figures(at)
    assert set(figs) == {"freqs", "rot_a", "rot_b", "pairing"}
    lines = [t for t in figs["freqs"]["data"] if t.get("yaxis") != "y2"]
    assert len(lines) == 3 and all(len(_array(t["y"])) == 32 for t in lines)   # head_dim 64: 32 pairs per base
    assert any("this model" in t["name"] for t in lines)
    theta = {t["name"].split()[0]: _array(t["y"]) for t in lines}
    np.testing.assert_allclose(theta["100,000"][1], 100_000 ** (-2 / 64), rtol=1e-6)
    path = [t for t in figs["rot_a"]["data"] if t.get("mode") == "markers"][0]
    assert len(_array(path["x"])) == 64
    at.slider(key="pos_pair_b").set_value(31)
    at.slider(key="pos_rot_positions").set_value(512)
    at.selectbox(key="pos_rot_base").set_value(1_000_000.0)
    rerun(at)
    figs = figures(at)
    path = [t for t in figs["rot_b"]["data"] if t.get("mode") == "markers"][0]
    x, y = _array(path["x"]), _array(path["y"])
    assert len(x) == 512
    np.testing.assert_allclose(np.hypot(x, y), 1.0, atol=1e-9)                 # rotation keeps the length
    assert np.arctan2(y[-1], x[-1]) < 0.01                                      # slowest pair barely moves


# ------------------------------------------------------------------------------------------------ on the model

def test_model_tab_numbers_match_the_model(lm):
    at = open_page(TABS[2], layer=3, head=4, q=12)
    figs = figures(at)
    assert set(figs) == {"pairs", "contrib", "shift", "distance", "patterns"}
    # per-pair contributions sum to score * sqrt(d) of the model's own layer detail
    tr = lm.run(TEXT)
    det = lm.layer_detail(tr, 3)
    n = at.selectbox(key="pos_key_pick").value
    bars = [t for t in figs["contrib"]["data"] if t["type"] == "bar"]
    assert len(bars) == 2 and all(len(_array(b["y"])) == 32 for b in bars)
    total = _array(bars[1]["y"]).sum()
    assert total == pytest.approx(float(det.scores[4, 12, n]) * 8, abs=1e-3)
    # shift invariance: flat lines
    for t in figs["shift"]["data"]:
        y = _array(t["y"])
        assert np.ptp(y) < 1e-4 * max(1.0, abs(y[0]))
    # long-range curve: 0..4096 by default, starts at the unrotated score (q and k at the same position)
    dist = [t for t in figs["distance"]["data"] if t["name"] == "this q and k"][0]
    assert len(_array(dist["x"])) == 4097
    kv = 4 // lm.config.group_size
    assert _array(dist["y"])[0] == pytest.approx(float(det.q[4, 12] @ det.k[kv, n]) / 8, abs=1e-4)
    # with / without RoPE: two [T, T] heatmaps, the left one is the model's pattern, masked cells empty
    T = tr.n_tokens
    left, right = heatmap_z(figs["patterns"], 0), heatmap_z(figs["patterns"], 1)
    assert left.shape == right.shape == (T, T)
    assert np.isnan(left[0, 1]) and np.isnan(right[0, 1])
    np.testing.assert_allclose(left[12, :13], det.pattern[4, 12, :13], atol=1e-6)
    np.testing.assert_allclose(np.nansum(right, axis=1), 1.0, atol=1e-5)
    # 32 pairs drawn as arrows: 4 arrow traces of 32 segments each
    arrows = [t for t in figs["pairs"]["data"] if t.get("mode") == "lines+markers"]
    assert len(arrows) == 4 and all(len(_array(t["x"])) == 3 * 32 for t in arrows)


def test_model_tab_controls_and_extremes():
    at = open_page(TABS[2], layer=29, head=8, q=0, sink=1)
    figs = figures(at)
    assert at.selectbox(key="pos_key_pick").value == 0                            # m = 0: only n = 0
    left = heatmap_z(figs["patterns"], 0)
    assert np.isnan(left[:, 0]).all() and np.isnan(left[:2]).all()                # sink hidden, rows 0-1 blank
    np.testing.assert_allclose(np.nansum(left[2:], axis=1), 1.0, atol=1e-5)       # the others renormalised
    at.selectbox(key="pos_max_distance").set_value(8192)
    rerun(at)
    dist = [t for t in figures(at)["distance"]["data"] if t["name"] == "this q and k"][0]
    assert len(_array(dist["x"])) == 8193
    at.select_slider(key="q").set_value(7)
    rerun(at)
    assert "query m = #7 " in " ".join(c.value for c in at.caption)
    at.selectbox(key="pos_key_pick").set_value(2)
    rerun(at)
    assert "distance m − n = 5" in " ".join(c.value for c in at.caption)


def test_model_tab_empty_text_stops_cleanly():
    at = open_page(TABS[2], text=" ")
    assert not figures(at)
    assert any("empty" in i.value for i in at.info)


def test_tabs_switch_back_and_forth():
    at = open_page(TABS[2])
    for tab in (TABS[0], TABS[1], TABS[2], TABS[0]):
        at.session_state["positional_view"] = tab
        rerun(at)
        assert figures(at)


def test_previous_token_head_button():
    at = open_page(TABS[2], layer=0, head=0)
    at.button(key="pos_prev_head").click()
    rerun(at)
    layer, head = at.session_state["layer"], at.session_state["head"]
    assert (layer, head) != (0, 0)
    figs = figures(at)
    left, right = heatmap_z(figs["patterns"], 0), heatmap_z(figs["patterns"], 1)
    T = left.shape[0]
    prev_with = np.mean([left[i, i - 1] for i in range(1, T)])
    prev_without = np.mean([right[i, i - 1] for i in range(1, T)])
    assert prev_with > 0.3 and prev_without < prev_with / 2      # the diagonal comes from RoPE


@pytest.mark.parametrize("sink", [0, 1])
def test_model_tab_one_token_text(sink):
    at = open_page(TABS[2], text="Hello", sink=sink)
    figs = figures(at)
    assert heatmap_z(figs["patterns"], 0).shape == (1, 1)
    assert at.selectbox(key="pos_key_pick").value == 0
