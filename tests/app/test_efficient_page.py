"""The Efficient attention page in Streamlit's AppTest, on the real model: every view, the attention-sink finding on
the long story, controls hidden where they do nothing, and share links that restore every setting."""
from __future__ import annotations

import json
import re

import numpy as np

from model.lessons.flash_attention import flash_attention
from tests.app.apptest import array, example, figures, open_page, rerun, widget_values

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
    at = open_page("efficient", text=TEXT, block="16", layer="14", head="4")
    figs = charts(at)
    assert {"eff_tiles", "eff_stats", "eff_out", "eff_bytes", "eff_hbm"} <= set(figs)
    ids = lm.encode(TEXT)
    T = len(ids)
    n = -(-T // 16)
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
    step = flash_attention(detail.q_rot[4], detail.k_rot[1], detail.v[1], 16).steps[1]
    partial = array(charts(at)["eff_out"]["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(partial, step.out, atol=1e-6)


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
    assert [len(array(line["y"])) for line in losses] == [T - 1, T - 1]


def test_kv_view_duplicates_exactly_and_pools_with_a_loss(lm):
    at = open_page("efficient", view="kv", text=TEXT)
    m = metrics(at)
    assert m["MHA vs the model: largest change of a log-probability"] <= 1e-5
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
        ("flash", [("slider", "layer", 9), ("slider", "head", 7), ("segmented_control", "eff_block", 16),
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
