"""Every page and view with hostile-but-ordinary texts (tokens that look like numbers, markup, Chinese, emoji, one
token, more than 512 tokens): no exception, every axis that carries tokens is declared categorical or positional
(plotly would otherwise guess a numeric axis from labels such as "8 2"), and no token reaches plotly unescaped."""
from __future__ import annotations

import re

import pytest

from harness.apptest import figures, open_page, rerun

TEXTS = {
    "numbers": "Count with me: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20.",
    "year": "The year was 19",
    "markup": "<b>bold</b> and <br> break <a href=x>link</a> &amp;",
    "chinese": "数字和猫：小猫在桌子上睡觉。",
    "emoji": "I love 🙂 and 🚀 very much 🎉",
    "one token": "Hello",
}
VIEWS = [("attention", {"view": v}) for v in ("head", "layer", "model", "query", "next")] + [
    ("causal-mask", {}), ("softmax", {}), ("softmax", {"source": "attention"}), ("positional", {"view": "model"})] + [
    ("inside", {"view": v}) for v in ("tokens", "block", "stream", "lens", "heads")]
MARKUP = re.compile(r"</?(b|br|a|i|sup|sub|span)\b")     # what plotly would read as markup


def strings(node):
    """Every string inside a JSON value."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


def axes_of(fig: dict) -> dict[str, dict]:
    return {k: v for k, v in fig["layout"].items() if re.fullmatch(r"[xy]axis\d*", k)}


def check_figure(fig: dict, where: str) -> None:
    """Token axes declared; token text only ever escaped where plotly reads markup."""
    for name, axis in axes_of(fig).items():
        if axis.get("ticktext") is not None or axis.get("categoryarray") is not None:
            assert axis.get("type") in ("category", "linear", "log"), (where, name, axis.get("type"))
            if axis.get("type") == "linear":
                assert axis.get("tickmode") == "array", (where, name)
        for text in strings([axis.get("ticktext"), axis.get("categoryarray"), axis.get("tickvals")]):
            assert "<" not in text and ">" not in text, (where, name, text)     # tokens arrive escaped
    for trace in fig["data"]:
        for coord in ("x", "y"):
            values = trace.get(coord)
            if isinstance(values, list) and any(isinstance(v, str) for v in values):
                ref = (trace.get(f"{coord}axis") or coord).replace(coord, f"{coord}axis")
                assert fig["layout"].get(ref, {}).get("type") == "category", (where, trace.get("name"), coord)
        for text in strings([trace.get("x"), trace.get("y"), trace.get("customdata")]):
            assert "<" not in text and ">" not in text, (where, trace.get("name"), text)
    for text in strings((fig["layout"].get("title") or {}).get("text")):
        assert not MARKUP.search(text.replace("<br>", " ").replace("<sup>", "")), (where, text)


@pytest.mark.parametrize("name", list(TEXTS))
@pytest.mark.parametrize("page, params", VIEWS, ids=[f"{p}-{'-'.join(v.values()) or 'default'}" for p, v in VIEWS])
def test_hostile_texts_render_with_declared_token_axes(page, params, name, lm):
    at = open_page(page, text=TEXTS[name], **params)
    figs = figures(at)
    assert figs, (page, params, name)
    for i, fig in enumerate(figs):
        check_figure(fig, f"{page} {params} {name} figure {i}")


def test_more_than_512_tokens_on_every_view(lm):
    text = " ".join(f"word{i} {i % 10}" for i in range(300))                   # ~900 tokens: cut to 512
    for page, params in VIEWS:
        at = open_page(page, text=text, **params)
        for i, fig in enumerate(figures(at)):
            check_figure(fig, f"{page} {params} long figure {i}")
        for fig in figures(at):                                                 # thinned: labels never pile up
            for axis in axes_of(fig).values():
                assert len(axis.get("tickvals") or []) <= 64


def test_hidden_sink_on_a_long_text_still_shows_something(lm):
    text = " ".join(f"token{i}" for i in range(200))
    at = open_page("attention", text=text, view="layer", layer="20", sink="1")
    grid = figures(at)[0]
    heads = [t for t in grid["data"] if t["type"] == "heatmap"]
    assert len(heads) == lm.config.n_heads
    tops = [grid["layout"]["coloraxis" if i == 0 else f"coloraxis{i + 1}"]["cmax"] for i in range(len(heads))]
    assert all(0 < t < 0.999 for t in tops)                                     # each head on its own scale
    at.toggle(key="attention_stretch").set_value(True)
    rerun(at)
    stretched = figures(at)[0]
    assert all(stretched["layout"]["coloraxis" if i == 0 else f"coloraxis{i + 1}"]["cmax"] <= tops[i]
               for i in range(len(heads)))
