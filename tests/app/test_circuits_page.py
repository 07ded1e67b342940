"""The Circuits page in AppTest on the built-in model: head roles, patching a minimal pair, attribution; the share
link; Chinese. The numbers themselves are checked against transformers in tests/model/test_head_roles.py,
test_patching.py and test_input_attribution.py; here the page must show the engine's."""
from __future__ import annotations

import json

import numpy as np
import pytest

from app_core.circuit_pairs import PAIRS
from harness.apptest import array, figures, open_page, rerun, titles, warnings
from tests.app.test_hostile_texts import TEXTS, check_figure

IOI = PAIRS[0]


def test_head_roles_map_picks_a_head_and_opens_it(lm):
    at = open_page("circuits", role="previous_token")
    heat = figures(at)[0]["data"][0]
    np.testing.assert_allclose(array(heat["z"]), lm.head_role_scores()["previous_token"].T, atol=1e-6)
    assert titles(at)[0] == "previous-token score of every head"
    assert at.query_params["role"] == "previous_token"
    at.segmented_control(key="circ_role").set_value("sink")
    rerun(at)
    assert at.query_params["role"] == "sink"
    np.testing.assert_allclose(array(figures(at)[0]["data"][0]["z"]), lm.head_role_scores()["sink"].T, atol=1e-6)
    assert any("Open layer 0, head 0" in b.label for b in at.button)
    image = json.loads(at.get("plotly_chart")[0].proto.config)["toImageButtonOptions"]
    assert (image["format"], image["width"], image["height"]) == ("png", 1024, 768)
    at.selectbox(key="w_circ_image").set_value("svg")
    rerun(at)
    assert json.loads(at.get("plotly_chart")[0].proto.config)["toImageButtonOptions"]["format"] == "svg"


def test_patching_a_pair_from_the_link(lm):
    at = open_page("circuits", view="patching", kind="head")
    assert at.text_area(key="circ_clean").value == IOI.clean
    fig = figures(at)[0]
    expected = lm.activation_patching(IOI.clean, IOI.corrupt, IOI.answer, IOI.foil, "head")
    np.testing.assert_allclose(array(fig["data"][0]["z"]), expected.T, atol=1e-4)
    gap = [lm.run(t).next_token_logits for t in (IOI.clean, IOI.corrupt)]
    ids = [lm.encode(w)[0] for w in (IOI.answer, IOI.foil)]
    assert f"{gap[0][ids[0]] - gap[0][ids[1]]:+.2f}" in at.markdown[-1].value or any(
        f"{gap[0][ids[0]] - gap[0][ids[1]]:+.2f}" in m.value for m in at.markdown)
    a, b = (lm.run(t).attention.astype(float) for t in (IOI.clean, IOI.corrupt))
    first = next(i for i, (x, y) in enumerate(zip(lm.encode(IOI.clean), lm.encode(IOI.corrupt), strict=True)) if x != y)
    by_hand = np.mean([0.5 * np.abs(a[:, :, i] - b[:, :, i]).sum(-1) for i in range(first, a.shape[-1])], axis=0)
    difference = next(f for f in figures(at) if "differently" in f["layout"]["title"]["text"])
    np.testing.assert_allclose(array(difference["data"][0]["z"]), by_hand.T, atol=1e-5)
    at.text_area(key="circ_corrupt").set_value(IOI.corrupt + " again")
    rerun(at)
    assert "same number of tokens" in warnings(at)
    at.text_area(key="circ_corrupt").set_value(IOI.corrupt)
    at.text_input(key="circ_foil").set_value(" Johnathan Smith")
    rerun(at)
    assert "give one token" in warnings(at)


def test_attribution_beside_a_head(lm):
    text = "Alice met Bob. Bob thanked"
    at = open_page("circuits", view="attribution", text=text, layer="3", head="1")
    fig = figures(at)[0]
    ids = lm.encode(text)
    bars = [t for t in fig["data"] if t["type"] == "bar"]
    assert len(bars) == 3
    target = int(np.argmax(lm.run(text).next_token_logits))
    np.testing.assert_allclose(array(bars[0]["y"]), lm.occlusion(ids, target), atol=1e-4)
    np.testing.assert_allclose(array(bars[2]["y"]), lm.run(text).attention[3, 1, -1], atol=1e-4)
    assert "Attention is not explanation" in " ".join(c.value for c in at.caption)


def test_chinese_interface():
    at = open_page("circuits", lang="zh", view="patching")
    assert not warnings(at)
    assert figures(at)


@pytest.mark.parametrize("name", list(TEXTS))
def test_hostile_texts_in_attribution_and_patching(name, lm):
    at = open_page("circuits", view="attribution", text=TEXTS[name])
    for i, fig in enumerate(figures(at)):
        check_figure(fig, f"attribution {name} figure {i}")
    assert len([t for t in figures(at)[0]["data"] if t["type"] == "bar"]) == 3
    at = open_page("circuits", view="patching", a=TEXTS[name], b=TEXTS[name] + "!", answer=".", foil="!")
    for i, fig in enumerate(figures(at)):
        check_figure(fig, f"patching {name} figure {i}")


def test_a_long_text_is_refused_with_a_reason(lm):
    text = " ".join(f"word{i}" for i in range(300))
    at = open_page("circuits", view="attribution", text=text)
    assert not figures(at) and any("at most" in i.value for i in at.info)
    at = open_page("circuits", view="patching", a=text, b=text.replace("word0", "word9"))
    assert "at most" in warnings(at)
