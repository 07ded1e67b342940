"""Share links in Streamlit's AppTest: on every page and view, set every control to a non-default value, take the
query params the app wrote, open a fresh session with them, and get the same controls and the same figures."""
from __future__ import annotations

import pytest
from streamlit.runtime.state.query_params import QueryParams

from harness.apptest import example, figures, open_page, rerun, widget_values

TEXT = "The keys that the old man had left on the table were gone, so he looked everywhere for them."


def set_view(key: str, slug: str):
    """What a click on a tab does: the page's view setting changes."""
    def act(at):
        at.session_state[key] = slug
    return act


def widget(kind: str, key: str, value):
    def act(at):
        getattr(at, kind)(key=key).set_value(value)
    return act


def text(value: str):
    return widget("text_area", "text", value)


def select_index(key: str, index: int):
    """Pick a selectbox's index-th option (for options that follow the text, such as a top-10 list)."""
    def act(at):
        at.selectbox(key=key).select_index(index)
    return act


# page -> [(case name, [actions])]; every action is followed by a rerun, like a user's click
CASES = {
    "attention": [
        ("one head", [text(TEXT), widget("slider", "layer", 17), widget("slider", "head", 5),
                      widget("toggle", "sink", True), widget("toggle", "attention_stretch", True),
                      widget("pills", "q_pick", 6)]),
        ("all heads", [set_view("attention_view", "layer"), widget("slider", "layer", 3),
                       widget("segmented_control", "w_head_pick", 8), widget("toggle", "attention_stretch", True)]),
        ("whole model", [set_view("attention_view", "model"), widget("segmented_control", "attention_overview",
                                                                        "entropy"), widget("slider", "layer", 29)]),
        ("query token", [set_view("attention_view", "query"), text(example("induction")),
                         widget("select_slider", "q", 9), widget("slider", "head", 1)]),
        ("next token", [set_view("attention_view", "next"), text("Count with me: 1, 2, 3, 4")]),
    ],
    "causal-mask": [
        ("mask", [text(TEXT), widget("slider", "mask_n", 7), widget("toggle", "mask_side", True),
                  widget("slider", "layer", 21), widget("slider", "head", 2), widget("toggle", "sink", True)]),
    ],
    "softmax": [
        ("next token", [widget("select_slider", "temp", 2.5), widget("number_input", "softmax_top_k", 7),
                        widget("slider", "softmax_top_p", 0.8), widget("number_input", "softmax_seed", 42),
                        widget("number_input", "softmax_draws", 5000)]),
        ("one head", [widget("segmented_control", "softmax_source", "attention"), widget("slider", "layer", 14),
                      widget("slider", "head", 6), widget("select_slider", "q", 4), widget("toggle", "sink", True),
                      widget("select_slider", "temp", 0.5)]),
    ],
    "positional": [
        ("sinusoidal", [widget("select_slider", "pos_d_model", 256), widget("slider", "pos_n_positions", 512),
                        widget("select_slider", "pos_base", 1000), widget("multiselect", "pos_dims_pick", [2, 9])]),
        ("rope", [set_view("positional_view", "rope"), widget("selectbox", "pos_rot_base", 1_000_000.0),
                  widget("slider", "pos_rot_positions", 100), widget("slider", "pos_pair_a", 5),
                  widget("slider", "pos_pair_b", 30)]),
        ("model", [set_view("positional_view", "model"), widget("slider", "layer", 9), widget("slider", "head", 4),
                   widget("select_slider", "q", 12), widget("selectbox", "pos_key_pick", 3),
                   widget("selectbox", "pos_max_distance", 512), widget("toggle", "sink", True)]),
    ],
    "inside": [
        ("tokens", [text("Tokenizers split unfamiliar words like photosynthesizing into pieces."),
                    widget("pills", "inside_piece_pick", 5)]),
        ("block", [set_view("inside_view", "block"), widget("slider", "layer", 17), widget("slider", "head", 5),
                   widget("select_slider", "q", 6), widget("toggle", "sink", True)]),
        ("stream", [set_view("inside_view", "stream"), widget("select_slider", "q", 3)]),
        ("lens", [set_view("inside_view", "lens"), widget("select_slider", "q", 4)]),
        ("heads", [set_view("inside_view", "heads"), select_index("inside_target_pick", 2),
                   widget("multiselect", "inside_off_pick", [110, 251])]),
    ],
    "parameters": [
        ("preset", [widget("selectbox", "params_preset", "Llama-3-8B"), widget("number_input", "params_context", 4096),
                    widget("number_input", "params_batch", 8), widget("selectbox", "params_kv_dtype", "int8"),
                    widget("selectbox", "params_cmp_a", "Qwen3-8B"), widget("selectbox", "params_cmp_b", "GPT-2 XL")]),
        ("custom", [widget("number_input", "params_d_model", 640), widget("number_input", "params_n_kv_heads", 3),
                    widget("selectbox", "params_norm", "layernorm"), widget("checkbox", "params_qkv_bias", True)]),
    ],
}


def chart_data(at) -> list:
    """What the figures show: their titles and their first trace's values."""
    out = []
    for fig in figures(at):
        data = fig["data"][0] if fig["data"] else {}
        out.append(((fig["layout"].get("title") or {}).get("text"), str(data.get("z") or data.get("x"))[:2000]))
    return out


@pytest.mark.parametrize("page, name, actions", [(p, n, a) for p, cases in CASES.items() for n, a in cases],
                         ids=[f"{p}-{n}" for p, cases in CASES.items() for n, _ in cases])
def test_a_link_restores_every_setting(page, name, actions, lm):
    at = open_page(page)
    before = widget_values(at)
    for act in actions:
        act(at)
        rerun(at)
    changed = widget_values(at)
    assert changed != before
    link = dict(at.query_params)
    assert link, "the URL carries the settings that differ from the defaults"
    fresh = open_page(page, **link)
    assert widget_values(fresh) == changed
    assert chart_data(fresh) == chart_data(at)
    assert dict(fresh.query_params) == link                        # and writes back the very same link


def test_a_link_with_defaults_only_is_empty(lm):
    for page in CASES:
        at = open_page(page)
        assert dict(at.query_params) == {}, page


def test_every_run_sends_its_link_even_when_the_request_carried_it(monkeypatch, lm):
    """A rerun request carries the address the browser had when it sent it, which can be older than the link of a run
    still on its way (ArrowRight three times and ArrowLeft, 20 ms apart: head 3, 4, then 3 again). A run that found
    its own link in the request sent nothing, and the address kept the head=4 of the run before under a head-3
    heatmap (CI, presenter mode). Every run sends its link (the browser adds no history entry for the same one)."""
    sent = []
    send = QueryParams._send_query_param_msg

    def spy(self):
        sent.append({key: self.get_all(key) for key in self})
        send(self)

    monkeypatch.setattr(QueryParams, "_send_query_param_msg", spy)
    at = open_page("attention", layer="4", head="3")
    sent.clear()
    rerun(at)                                    # the request carries layer=4&head=3: this view's own link
    assert sent and sent[-1] == {"layer": ["4"], "head": ["3"]}
