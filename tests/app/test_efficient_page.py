"""The Efficient attention page in Streamlit's AppTest, on the real model: every view, the attention-sink finding on
the long story, controls hidden where they do nothing, and share links that restore every setting."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from app_core.examples import default_text
from harness.apptest import array, example, figures, open_page, rerun, run_until, widget_values
from model.maths.flash_attention import flash_attention

TEXT = "The keys that the old man had left on the table were gone, so he looked everywhere for them."


def charts(at) -> dict[str, dict]:
    """The page's figures by widget key (eff_...)."""
    out = {}
    for el in at.get("plotly_chart"):
        key = el.proto.id.rsplit("-", 1)[-1]
        if key.startswith("eff_"):
            out[key] = json.loads(el.proto.spec)
    return out


def metrics(at) -> dict[str, float]:
    return {m.label: float(m.value) for m in at.metric}


def test_flash_view_steps_through_tiles(lm):
    at = open_page("efficient", text=TEXT, block="4", layer="14", head="4")
    figs = charts(at)
    assert {"eff_tiles", "eff_stats", "eff_out", "eff_bytes", "eff_hbm"} <= set(figs)
    ids = lm.encode(TEXT)
    T = len(ids)
    n = -(-T // 4)
    assert at.slider(key="eff_tile_pick").value == n * (n + 1) // 2 - 1             # default: the last tile
    caption = next(c.value for c in at.caption if "Largest difference" in c.value)
    exact, model = (float(x) for x in re.findall(r"(\d\.\de[-+]\d+)", caption)[:2])
    assert exact < 1e-12 and model < 1e-5
    at.slider(key="eff_tile_pick").set_value(1)
    rerun(at)
    assert at.session_state["eff_tile"] == 1
    tiles = np.array(charts(at)["eff_tiles"]["data"][0]["text"])
    assert sorted(t for t in tiles.ravel() if t) == ["0", "1"]
    detail = lm.layer_detail(lm.run_ids(ids), 14)
    step = flash_attention(detail.q_rot[4], detail.k_rot[1], detail.v[1], 4).steps[1]
    partial = array(charts(at)["eff_out"]["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(partial, step.out, atol=1e-6)


def test_the_default_flash_view_walks_several_tiles(lm):
    """The default text (~22 tokens) must not fit one tile: at least three query blocks, several steps to walk; the
    block sizes offered all cut it into 3..32 blocks, and an old link's B=64 becomes the nearest one offered."""
    T = len(lm.encode(default_text()))
    at = open_page("efficient")
    block = at.segmented_control(key="eff_block").value
    assert -(-T // block) >= 3
    assert at.slider(key="eff_tile_pick").max >= 5                           # >= 6 tiles of a 3-block triangle
    offered = [int(b) for b in at.segmented_control(key="eff_block").options]
    assert offered and all(3 <= -(-T // b) <= 32 for b in offered)
    old = open_page("efficient", block="64")
    assert old.segmented_control(key="eff_block").value == max(offered)
    assert old.slider(key="eff_tile_pick").max >= 5


def test_masks_view_shows_the_attention_sink_finding(lm):
    at = open_page("efficient", view="masks", text=example("long story"))
    assert at.selectbox(key="eff_mask").value == "window" and at.slider(key="eff_window").value == 64
    assert not [s for s in at.slider if s.key == "eff_sinks"]                        # the window reads no sinks
    m = metrics(at)
    full, window = m["Perplexity, full attention"], m["Perplexity with this mask"]
    assert window > 2 * full
    assert {"eff_mask_fig", "eff_loss", "eff_next"} <= set(charts(at))
    at.button(key="eff_compare").click()
    rerun(at)
    assert at.selectbox(key="eff_mask").value == "sink" and at.slider(key="eff_sinks").value == 4
    finding = next(md.value for md in at.markdown if "Attention sinks" in md.value)
    ppl_full, ppl_window, ppl_sinks = (float(x) for x in re.findall(r"(\d+\.\d)", finding))
    assert ppl_window > 2 * ppl_sinks and ppl_sinks < 1.5 * ppl_full               # StreamingLLM's finding
    losses = charts(at)["eff_loss"]["data"]
    T = len(lm.encode(example("long story")))
    assert [len(array(line["y"])) for line in losses] == [T - 1] * 4              # each series raw and smoothed
    raw, smooth = array(losses[2]["y"]).astype(float), array(losses[3]["y"]).astype(float)
    np.testing.assert_allclose(smooth[20], raw[5:21].mean())                        # the mean of the last 16


def test_a_mask_that_cuts_nothing_changes_nothing(lm):
    at = open_page("efficient", view="masks", text=TEXT, mask="window")          # default window >= this text
    m = metrics(at)
    assert m["Perplexity with this mask"] == m["Perplexity, full attention"] > 1
    assert any("this mask cuts nothing here" in c.value for c in at.caption)
    assert not [b for b in at.button if b.key == "eff_compare"]
    assert any("load the long story" in i.value for i in at.info)


def test_kv_view_duplicates_exactly_and_pools_with_a_loss(lm):
    at = open_page("efficient", view="kv", text=TEXT)
    m = metrics(at)
    assert m["MHA: largest change of a log p"] <= 1e-5
    assert m["Perplexity, pooled into MQA"] > m["Perplexity, the model (GQA)"]
    bars = charts(at)["eff_kv_bytes"]["data"][0]
    assert bars["text"] == ["69.1 kB", "23 kB", "7.68 kB"]                           # 2 x 30 layers x 64 x 2 bytes
    assert not [s for s in at.slider if s.key in ("layer", "head")]                  # no layer / head here


def test_linear_view(lm):
    at = open_page("efficient", view="linear", text=TEXT, layer="3", head="2")
    assert {"eff_lin_patterns", "eff_lin_error", "eff_lin_cost"} <= set(charts(at))
    assert any("multiply-adds for every token" in c.value for c in at.caption)


def test_a_link_restores_every_setting(lm):
    cases = [
        ("flash", [("slider", "layer", 9), ("slider", "head", 7), ("segmented_control", "eff_block", 4),
                   ("slider", "eff_tile_pick", 2)]),
        ("masks", [("selectbox", "eff_mask", "dilated"), ("slider", "eff_window", 5), ("slider", "eff_stride", 3)]),
        ("masks", [("selectbox", "eff_mask", "sink"), ("slider", "eff_window", 7), ("slider", "eff_sinks", 2)]),
    ]
    for view, actions in cases:
        at = open_page("efficient", view=view, text=TEXT)
        for kind, key, value in actions:
            getattr(at, kind)(key=key).set_value(value)
            rerun(at)
        link = dict(at.query_params)
        fresh = open_page("efficient", **link)
        assert widget_values(fresh) == widget_values(at), view
        assert [f["layout"] for f in figures(fresh)] == [f["layout"] for f in figures(at)]
        assert dict(fresh.query_params) == link


def test_alibi_view_on_the_positional_page(lm):
    at = open_page("positional", view="alibi", aheads="12", ahead="9", apositions="8")
    figs = {el.proto.id.rsplit("-", 1)[-1]: json.loads(el.proto.spec) for el in at.get("plotly_chart")}
    slopes = array(figs["pos_fig_alibi_slopes"]["data"][0]["y"]).astype(float)
    np.testing.assert_allclose(slopes[8:], [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5])    # the paper's rule
    bias = array(figs["pos_fig_alibi_bias"]["data"][0]["z"]).astype(float).reshape(8, 8)
    assert bias[7, 0] == pytest.approx(-7 * 2 ** -1.5) and np.isnan(bias[0, 7])
    assert len(figs["pos_fig_alibi_distance"]["data"]) == 12 + 2            # one line per head, RoPE at two bases
    assert dict(at.query_params) == {"view": "alibi", "aheads": "12", "ahead": "9", "apositions": "8"}
    default = open_page("positional", view="alibi")
    assert default.slider(key="pos_alibi_heads").value == lm.config.n_heads


def test_kv_cache_panel_on_the_generate_page(lm):
    at = run_until(open_page("generate", text=TEXT, n="6", greedy="1"), lambda a: bool(a.get("plotly_chart")))
    assert not [el for el in at.get("plotly_chart") if el.proto.id.endswith("gen_kv_cache")]    # not measured yet
    at.button(key="gen_kv_measure").click()
    rerun(at)
    fig = next(json.loads(el.proto.spec) for el in at.get("plotly_chart") if el.proto.id.endswith("gen_kv_cache"))
    T = len(lm.encode(TEXT))
    lengths = array(fig["data"][0]["x"]).astype(int)
    np.testing.assert_array_equal(lengths, np.arange(T + 1, T + 7))             # each of the 6 new tokens fed
    per_token = 2 * 30 * 3 * 64 * 4
    np.testing.assert_allclose(array(fig["data"][0]["y"]).astype(float), lengths * per_token / 2**20)
    cached, full = (array(fig["data"][k]["y"]).astype(float) for k in (1, 2))
    assert cached.size == 6 and 2 <= full.size <= 6 and (cached > 0).all() and (full > 0).all()
    rerun(at)                                                                   # the result stays shown
    assert [el for el in at.get("plotly_chart") if el.proto.id.endswith("gen_kv_cache")]


HOSTILE = {"one token": "Hello", "markup": "<b>bold</b> and <br> break <a href=x>link</a> &amp; 8 2",
           "chinese": "数字和猫：小猫在桌子上睡觉。"}


def test_every_view_takes_hostile_and_overlong_texts(lm):
    long_text = example("long story") + " " + example("long story") + " " + example("long story")
    for name, text in {**HOSTILE, "over 512 tokens": long_text}.items():
        for view in ("flash", "masks", "kv", "linear"):
            at = open_page("efficient", view=view, text=text)
            if name == "one token" and view in ("masks", "kv"):
                assert any("at least two tokens" in i.value for i in at.info)
                continue
            assert charts(at), (name, view)
            for fig in figures(at):                                  # no token turned into plotly markup
                assert "<b>bold" not in json.dumps(fig), (name, view)
