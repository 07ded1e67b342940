"""The Attention page with the real model: every view renders, follows the controls, and exports."""
import json

import numpy as np
import pytest

from app_pages.frame.widgets import escape_markdown, picked_layer_head, selected_points, selected_rows
from harness.apptest import array, example, figures, open_page, rerun, titles
from model.analysis.head_stats import apply_sink, prev_token_score

INDUCTION = example("induction")
VIEWS = ["head", "layer", "model", "query", "next"]


def open_app(**params):
    return open_page("attention", **params)


@pytest.mark.parametrize("view", VIEWS)
def test_each_view_renders(view, lm):
    at = open_app(view=view, text=INDUCTION)
    assert figures(at), f"no figure in view {view}"
    assert not at.warning


def test_layer_and_head_controls_update_the_figures(lm):
    at = open_app(view="head")
    assert titles(at) == ["Layer 0, head 0"]
    assert at.pills(key="q_pick")                                           # the query strip sits under the figure
    at.slider(key="layer").set_value(11)
    at.slider(key="head").set_value(7)
    rerun(at)
    assert titles(at) == ["Layer 11, head 7"]
    tr = lm.run(at.text_area(key="text").value)
    z = array(figures(at)[0]["data"][0]["z"]).astype(float)     # the figure shows the trace's own numbers
    expected = tr.attention[11, 7].astype(float)
    allowed = np.tril(np.ones_like(expected, dtype=bool))
    np.testing.assert_allclose(z[allowed], expected[allowed], atol=1e-3)
    assert np.isnan(z[~allowed]).all()


def test_sink_switch_changes_the_head_view(lm):
    at = open_app(view="head", layer="20", head="3")
    assert any("attention sink" in c.value for c in at.caption)         # the hint to use the switch
    before = array(figures(at)[0]["data"][0]["z"])
    at.toggle(key="sink").set_value(True)
    rerun(at)
    fig = figures(at)[0]
    after = array(fig["data"][0]["z"])
    assert np.isnan(after[:, 0]).all()                                      # key 0 hidden ...
    assert np.isnan(after[:2]).all()                                        # ... rows 0-1 have nothing to show
    np.testing.assert_allclose(np.nansum(after[2:], axis=-1), 1, atol=1e-3)  # ... the others renormalized
    hidden = [t for t in fig["data"][1:] if t["type"] == "heatmap"]
    assert {t["name"] for t in hidden} == {"hidden", "nothing to show"}     # drawn pale, with a hover saying why
    assert "nothing to show" in str(hidden[1]["text"])
    assert np.nanmax(before[1:, 0]) > 0.5
    assert fig["data"][0]["zmax"] < 0.999                                  # no bright 1.0 row steals the scale
    assert not any("attention sink" in c.value for c in at.caption)


def test_layer_view_picks_a_head(lm):
    at = open_app(view="layer", layer="2")
    fig = figures(at)[0]
    assert sum(1 for trace in fig["data"] if trace["type"] == "heatmap") == lm.config.n_heads
    at.segmented_control(key="w_head_pick").set_value(6)
    rerun(at)
    assert at.slider(key="head").value == 6
    assert at.query_params["head"] == "6"
    at.button(key="w_open_head").click()
    rerun(at)
    assert "view" not in at.query_params                                  # the default view: One head
    assert titles(at) == ["Layer 2, head 6"]


def test_whole_model_overview_and_stats_table(lm):
    at = open_app(view="model", text=INDUCTION, layer="16", head="2")
    overview, preview = figures(at)[:2]
    L, H = lm.config.n_layers, lm.config.n_heads
    heat, click = overview["data"][0], overview["data"][1]
    assert heat["type"] == "heatmap" and array(heat["z"]).shape == (H, L)    # wide: layers across, heads down
    assert overview["layout"]["xaxis"]["title"]["text"] == "layer"
    assert not heat.get("texttemplate")                                    # 30 narrow columns: values in the hover
    assert len(heat["colorbar"]["title"].get("text", "")) <= 8             # no long colour-bar title to cut off
    assert click["type"] == "scatter" and array(click["customdata"]).reshape(-1, 2).shape == (L * H, 2)
    assert (preview["layout"]["title"]["text"]) == "Selected: layer 16, head 2"
    assert preview["data"][0]["showscale"] is False                       # the preview gives its width to the matrix
    columns = json.loads(at.dataframe[0].proto.columns)
    assert columns["previous-token score"]["type_config"]["format"] == "%.2f"
    assert len(columns["previous-token score"]["label"]) <= 14            # narrow headers: every column fits
    table = at.dataframe[0].value
    assert len(table) == lm.config.n_layers * lm.config.n_heads
    prev = table["previous-token score"].to_numpy()
    assert (np.diff(prev) <= 1e-12).all()                               # sorted: previous-token heads first
    tr = lm.run(INDUCTION)
    layer, head = int(table["layer"].iloc[0]), int(table["head"].iloc[0])
    assert prev[0] == pytest.approx(prev_token_score(tr.attention[layer, head]), abs=1e-6)
    assert table["induction score"].notna().all()                       # the text repeats itself
    for kind in ("thumbs", "induction", "entropy"):
        at.segmented_control(key="attention_overview").set_value(kind)
        rerun(at)
        assert figures(at)


def test_induction_column_is_explained_when_the_text_has_no_repeats(lm):
    at = open_app(view="model", text="One two three.")
    at.segmented_control(key="attention_overview").set_value("induction")
    rerun(at)
    assert any("repeats no token" in i.value for i in at.info)
    assert "induction score" not in at.dataframe[0].value.columns


def test_query_token_strip_selects_the_query(lm):
    at = open_app(view="query", text=INDUCTION, layer="14")
    tr = lm.run(INDUCTION)
    assert at.select_slider(key="q").value == tr.n_tokens - 1              # default: the last token
    at.select_slider(key="q").set_value(20)
    rerun(at)
    assert at.query_params["q"] == "20"
    fig = figures(at)[0]
    assert len(fig["data"][0]["x"]) == 21                              # keys 0..20
    assert array(fig["data"][0]["z"]).shape == (lm.config.n_heads, 21)
    assert fig["data"][0]["y"][0] == "head 0"


def test_next_token_panel_shows_top_ten(lm):
    at = open_app(view="next", text=INDUCTION)
    fig = figures(at)[0]
    bars = fig["data"][0]
    assert bars["type"] == "bar" and len(array(bars["y"])) == 10
    assert fig["layout"]["yaxis"]["type"] == "linear"                      # rows by position, never guessed
    tr = lm.run(INDUCTION)
    best = lm.token_strings([int(np.argmax(tr.next_token_logits))])[0]
    assert fig["layout"]["yaxis"]["ticktext"][0] == f"1. {best}"


def test_csv_download_and_png_name(lm):
    at = open_app(view="head", layer="5", head="1")
    download = at.get("download_button")[0]
    assert download.proto.label.startswith("Download")
    config = json.loads(at.get("plotly_chart")[0].proto.config)
    assert config["toImageButtonOptions"]["filename"] == "attention_L5_H1"


def test_long_text_is_truncated_and_views_still_render(lm):
    text = " ".join(f"item{i}" for i in range(400))                     # > 512 tokens
    at = open_app(view="layer", text=text)
    assert any("only the first 512" in c.value for c in at.sidebar.caption)
    grid = figures(at)[0]
    assert len(grid["data"]) == lm.config.n_heads


def test_chart_event_helpers():
    event = {"selection": {"points": [{"x": 2, "y": 7, "customdata": [7, 2]}], "rows": [3]}}
    assert picked_layer_head(selected_points(event)) == (7, 2)
    assert picked_layer_head(selected_points({"selection": {"points": []}})) is None
    assert picked_layer_head([{"customdata": {"0": 16, "1": 0}}]) == (16, 0)     # a typed array, as sent
    assert picked_layer_head([{"x": 3, "y": 7.0}]) == (3, 7)                      # no customdata: x = layer
    assert picked_layer_head([{"customdata": "junk"}, "junk"]) is None
    assert selected_points(None) == [] and selected_rows(None) == []
    assert selected_rows(event) == [3]
    assert escape_markdown("**a** [b](c)") == r"\*\*a\*\* \[b\]\(c\)"
    assert apply_sink(np.eye(2), True).shape == (2, 2)


def test_stretch_colours_lowers_the_top_of_the_scale(lm):
    at = open_app(view="head", text=" ".join(f"w{i}" for i in range(60)), layer="3", head="4")
    before = figures(at)[0]["data"][0]["zmax"]
    at.toggle(key="attention_stretch").set_value(True)
    rerun(at)
    after = figures(at)[0]["data"][0]["zmax"]
    assert 0 < after < before
