"""The byte-level tokenization figure in headless Chromium, on a Qwen-style vocabulary that holds Chinese
(tests/qwen_style_vocab.py: trained here, carried by a tiny random GGUF): for a Chinese sentence, an emoji text and a
40-character English sentence, in English and in Chinese, every SVG text element of the figure (labels, row names,
title) is at least 10 px and no two overlap (their boxes as the browser lays them out, rotated ids included); in
presenter mode too (fonts 1.25x).

The figure is drawn as the app draws it (the page's own window, walk and rounds) in a page of its own at the width
the app gives it at 1024x768 (presenter mode: without the sidebar); and in the real app (the model picked by link
from a models folder holding the Qwen-style GGUF), where it must also sit whole on the first screen's width and its
top on the first screen. Screenshots go to pytest's temp dir (and $E2E_SCREENSHOT_DIR)."""
from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright import sync_api

from app_core.tokenization import piece_rounds, piece_window
from app_pages.frame.i18n import translations
from app_pages.frame.widgets import PRESENTER_FONT_SCALE
from app_pages.inside.tokenization import FIGURE_WIDTH, PRESENTER_WIDTH, auto_piece
from harness.browser import CHROMIUM, CHROMIUM_ARGS, IDLE_WITH_CHARTS_JS, running_app
from model import load_model
from model.tokenizers.bpe_walk import bpe_walk, piece_token_count
from model.tokenizers.labels import readable_token
from tests import qwen_style_vocab
from tests.e2e.test_browser import copy_out
from viz import tokenization as vt
from viz.theme import scale_fonts

TEXTS = {
    "chinese": "周末我和朋友去图书馆借了三本关于人工智能的书，回家后一直读到深夜。",
    "emoji": "今天好开心😀👍 Party time 🎉🚀 大家一起来🍎🍌！",
    "english": "Small models read every token of a story",
}
MIN_FONT_PX = 10
# Every text element of the figure's SVG (of the chart under `scope`) with something in it: its text, its box in the
# page and its font size.
TEXT_BOXES_JS = """(scope) => [...document.querySelectorAll((scope || '') + ' .main-svg text')]
  .filter(t => t.textContent.trim())
  .map(t => { const r = t.getBoundingClientRect();
              return {text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom,
                      font_px: parseFloat(getComputedStyle(t).fontSize)}; })"""


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return load_model(str(qwen_style_vocab.write_gguf(tmp_path_factory.mktemp("qwen") / "qwen-style.gguf"))).tokenizer


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """The app with a models folder that holds the Qwen-style GGUF (as qwen-style)."""
    folder = tmp_path_factory.mktemp("qwen-app-models")
    qwen_style_vocab.write_gguf(folder / "qwen-style.gguf")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATLAS_MODELS_DIR", str(folder))
        with running_app(Path(__file__).resolve().parents[2], folder / "server.log", 90) as (_, url):
            yield url


@pytest.fixture(scope="module")
def page():
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser.new_context(viewport={"width": 1024, "height": 768}).new_page()
        finally:
            browser.close()


def words(lang: str) -> vt.Words:
    catalog = translations(lang)
    return replace(vt.WORDS, **{f.name: catalog.gettext(getattr(vt.WORDS, f.name)) for f in fields(vt.WORDS)})


def figure(tok, text: str, lang: str, present: bool = False):
    """The figure the view draws for text's automatic piece (in presenter mode: its fonts enlarged as show_figure
    enlarges them), and the walks it shows."""
    pieces = tok.pieces(text)
    counts = [piece_token_count(tok, p) for p in pieces]
    chosen = auto_piece(pieces, counts)
    window = piece_window([len(p) for p in pieces], chosen)
    walks = [bpe_walk(tok, pieces[k]) for k in window]
    scale = PRESENTER_FONT_SCALE if present else 1.0
    fig = vt.byte_level_figure([piece_rounds(tok, w) for w in walks], readable_token, chosen=chosen - window.start,
                               max_width=PRESENTER_WIDTH if present else FIGURE_WIDTH, fit_scale=scale,
                               title=f"{len(text)} characters",
                               words=words(lang))
    return (scale_fonts(fig, scale) if present else fig), walks, window


def missing(wanted: list[str], shown: list[str]) -> list[str]:
    """What wanted holds more often than shown does."""
    left = list(shown)
    out = []
    for w in wanted:
        if w in left:
            left.remove(w)
        else:
            out.append(w)
    return out


def settled_boxes(page, scope: str, every_ms: int = 400, timeout_ms: int = 15_000) -> list[dict]:
    """TEXT_BOXES_JS of the chart under scope once two reads every_ms apart agree: the app's page can be idle with
    its chart mounted while plotly still lays it out (a full run once read the labels 52 px low, adjacent characters
    overlapping, drawn in place a moment later)."""
    boxes = page.evaluate(TEXT_BOXES_JS, scope)
    for _ in range(timeout_ms // every_ms):
        page.wait_for_timeout(every_ms)
        again = page.evaluate(TEXT_BOXES_JS, scope)
        if again == boxes:
            return boxes
        boxes = again
    return boxes


# The chart's drawn width, and the widths around it (for the message when it is not drawn at its figure's width).
WIDTHS_JS = """(scope) => { const w = (s) => { const e = document.querySelector(s);
                                              return e ? e.getBoundingClientRect().width : null; };
  return {chart: w(scope + ' .main-svg'), main: w('[data-testid="stMain"]'), sidebar: w('[data-testid="stSidebar"]'),
          window: window.innerWidth}; }"""


def drawn_at_its_width(page, scope: str, width: int, timeout_ms: int = 30_000) -> None:
    """Wait until the chart under scope is drawn at its figure's width: Streamlit draws a chart of width "content"
    at its frame's width when the frame is narrower (a full run once measured this chart 0.78x as wide as its figure,
    a moment after the page went idle, every pair of neighbouring characters overlapping)."""
    try:
        page.wait_for_function("([s, w]) => { const e = document.querySelector(s + ' .main-svg'); "
                               "return e && Math.abs(e.getBoundingClientRect().width - w) < 1; }",
                               arg=[scope, width], timeout=timeout_ms, polling=200)
    except sync_api.TimeoutError:
        pytest.fail(f"the chart is not drawn at its figure's width {width} px: {page.evaluate(WIDTHS_JS, scope)}")


def overlaps(boxes: list[dict], slack: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of boxes that overlap by more than slack px both ways."""
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if min(a["right"], b["right"]) - max(a["left"], b["left"]) > slack and \
                    min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > slack:
                found.append((a["text"], b["text"]))
    return found


def test_the_walk_ends_on_the_tokenizers_own_tokens(tok):
    """What the figure draws as final tokens: our encode's ids, and the tokenizers library's over the same
    vocabulary."""
    _, reference = qwen_style_vocab.trained()
    for text in TEXTS.values():
        _, walks, window = figure(tok, text, "en")
        shown = "".join(tok.pieces(text)[k] for k in window)
        ids = [i for w in walks for i in w.tokens]
        assert ids == tok.encode(shown) == reference.encode(shown).ids, text


@pytest.mark.parametrize("present", [False, True], ids=["", "presenter"])
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", list(TEXTS))
def test_labels_are_legible_at_1024x768(tok, page, tmp_path_factory, name, lang, present):
    fig, walks, _ = figure(tok, TEXTS[name], lang, present)
    html = tmp_path_factory.mktemp("figures") / f"tokenization_{name}_{lang}{'_presenter' * present}.html"
    html.write_text(fig.to_html(include_plotlyjs=True, full_html=True), encoding="utf-8")
    page.goto(html.as_uri())
    page.wait_for_selector(".main-svg text")
    boxes = page.evaluate(TEXT_BOXES_JS)
    shot = html.with_suffix(".png")
    page.screenshot(path=str(shot), full_page=True)
    copy_out([shot])
    labels = [b["text"] for b in boxes]
    chars = [readable_token(c) for w in walks for c in vt.utf8_characters(w.raw)]
    assert not missing(chars, labels), missing(chars, labels)                          # every character is shown
    whole = [f"{i:,}" for w in walks for i, part in zip(w.tokens, w.steps[-1], strict=True)
             if part.decode("utf-8", errors="ignore")]                     # a token holding a whole character
    assert not missing(whole, labels), missing(whole, labels)                          # shows its id
    small = [(b["text"], b["font_px"]) for b in boxes if b["font_px"] < MIN_FONT_PX]
    assert not small, small
    assert not overlaps(boxes), overlaps(boxes)[:10]
    width = page.evaluate("() => document.querySelector('.main-svg').getBoundingClientRect().width")
    assert width <= (PRESENTER_WIDTH if present else FIGURE_WIDTH)



@pytest.mark.parametrize("lang", ["en", "zh"])
def test_in_the_app_at_1024x768(tok, app_url, page, tmp_path_factory, lang):
    text = TEXTS["chinese"]
    page.goto(f"{app_url}/inside?model=qwen-style&lang={lang}&text={quote(text)}")
    page.wait_for_function(IDLE_WITH_CHARTS_JS, arg=1, timeout=180_000, polling=200)
    page.evaluate("document.fonts.ready.then(() => true)")          # the labels measured in their own font
    chart = ".st-key-inside_bpe"
    drawn_at_its_width(page, chart, figure(tok, text, lang)[0].layout.width)
    boxes = settled_boxes(page, chart)
    shot = tmp_path_factory.mktemp("app") / f"tokenization_app_{lang}.png"
    page.screenshot(path=str(shot))
    copy_out([shot])
    where = page.evaluate("(s) => { const r = document.querySelector(s).getBoundingClientRect(); "
                          "return {top: r.top, right: r.right}; }", chart + " .main-svg")
    assert where["right"] <= 1024 and 0 <= where["top"] < 768 - 300, where        # whole across, on the first screen
    labels = [b["text"] for b in boxes]
    ids_row = ("token ids", "token ids (hover)") if lang == "en" else ("词元 ID", "词元 ID（悬停可见）")
    assert "周" in labels and set(ids_row) & set(labels)
    assert not [b for b in boxes if b["font_px"] < MIN_FONT_PX]
    assert not overlaps(boxes), overlaps(boxes)[:10]
