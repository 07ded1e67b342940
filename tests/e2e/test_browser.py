"""End-to-end: the real app (`streamlit run app.py`, one server for the e2e modules that use app_url, shared by an
xdist run's workers) in a real headless Chromium.

What a classroom sees and shares:
- token labels: with a numbers text and a text full of HTML tags, every axis that carries tokens is categorical or
  positional in the browser's own plotly layout, and no tick, hover value or title swallows a tag from the text
  (the SVG shows "<" and "</" literally; the token list comes from the tokenizer, not from the app);
- the first screen at 1024x768 (a projector): the main chart's top and 300 px of it without scrolling, Softmax's
  temperature slider and bars together, presenter mode's controls on the page, no sidebar, chart text >= 14 px;
- share links: controls changed in the browser, the URL opened in a fresh browser, the same control values (read
  from the DOM) and the same main chart (title and a hash of its data); the "Share link" box holds that URL;
- arrow keys step the head and the layer; typed text runs the model; old /attention links forward to "/"; clicks
  on the whole-model overview pick a head; screenshots of every view (pytest's temp dir, and $E2E_SCREENSHOT_DIR;
  with it set, also the screens further down each page).

Every view opens with no error at 1024x768, in presenter mode and in Chinese; the server never learns the window's
size, so a view's script run (and so an error) is the same at any size.

Needs Debian's chromium at /usr/bin/chromium and the `playwright` Python package (its own browsers are not used).
"""
from __future__ import annotations

import html
import os
import re
import shutil
import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from playwright import sync_api

from harness.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    CONTROLS_JS,
    COUNT_DRAWS_INIT_JS,
    FIGURE_DIGEST_JS,
    FIGURES_JS,
    IDLE_WITH_CHARTS_JS,
    KEYS_READY_JS,
    RERUN_DONE_JS,
    RUN_COUNTER_INIT_JS,
    open_view,
    running_app,
    visit,
)
from harness.shared_app import shared_app_url

assert Path(CHROMIUM).exists(), f"end-to-end browser tests need Debian's chromium at {CHROMIUM} (apt install chromium)"

ROOT = Path(__file__).resolve().parents[2]
HEALTH_TIMEOUT_S = 90
RERUN_MS = 90_000
PROJECTOR = (1024, 768)
WIDE = (1280, 800)
MAX_SCROLL_SHOTS = 8           # screenshots further down a long page (what a user sees when scrolling)
SCROLL_SHOTS = bool(os.environ.get("E2E_SCREENSHOT_DIR"))     # taken where someone collects them (~17 s a run)
MIN_CHART_PX = 300             # of the main chart (all of a shorter one) visible on the first screen
# The sidebar's height unchanged over three polls 100 ms apart: its elements have their final size (once, measured
# just after the first idle run, the sink switch stood 29 px lower than a moment later in the screenshot).
SIDEBAR_SETTLED_JS = """() => {
  const s = document.querySelector('[data-testid="stSidebarUserContent"]');
  const h = s ? `${s.getBoundingClientRect().height}:${s.scrollHeight}` : 'none';
  window.__sidebarSame = window.__sidebarHeight === h ? (window.__sidebarSame || 0) + 1 : 0;
  window.__sidebarHeight = h;
  return window.__sidebarSame >= 3;
}"""
MIN_PRESENTER_FONT_PX = 14

# Every page and view: name -> (URL path and query, whether the layer / head / sink switch apply to it).
VIEWS = {
    "attention-head": ("/", True),
    "attention-layer": ("/?view=layer", True),
    "attention-model": ("/?view=model", True),
    "attention-query": ("/?view=query", True),
    "attention-next": ("/?view=next", False),
    "causal-mask": ("/causal-mask", True),
    "softmax": ("/softmax", False),                           # next-token logits (the default source)
    "softmax-attention": ("/softmax?source=attention", True),
    "generate": ("/generate?n=6", True),                       # written in the background, then shown
    "generate-compare": ("/generate?view=compare&n=6", False),
    "inside-tokens": ("/inside", False),
    "inside-block": ("/inside?view=block", True),
    "inside-stream": ("/inside?view=stream", False),
    "inside-lens": ("/inside?view=lens", False),
    "inside-heads": ("/inside?view=heads", False),
    "positional-sin": ("/positional", False),
    "positional-rope": ("/positional?view=rope", False),
    "positional-model": ("/positional?view=model", True),
    "parameters": ("/parameters", False),
    "positional-alibi": ("/positional?view=alibi", False),
    "efficient-flash": ("/efficient", ("layer", "head")),       # no sink switch: the tiles are the model's own
    "efficient-masks": ("/efficient?view=masks", False),
    "efficient-kv": ("/efficient?view=kv", False),
    "efficient-linear": ("/efficient?view=linear", ("layer", "head")),
    "train": ("/train", False),
    "circuits-roles": ("/circuits", ("layer", "head")),                # the head the roles map marks
    "circuits-patching": ("/circuits?view=patching", False),
    "circuits-patching-zh": ("/circuits?view=patching&lang=zh", False),
    "circuits-attribution": ("/circuits?view=attribution", ("layer", "head")),
}
SHARED_KEYS = ("layer", "head", "sink")


def applies(shared, key: str) -> bool:
    """Whether the shared control `key` acts on a view (VIEWS' flag: True all three, False none, or their keys)."""
    return shared is True or (isinstance(shared, tuple) and key in shared)
TEXT_VIEWS = [name for name in VIEWS
              if name.startswith(("attention", "causal", "softmax", "generate", "inside", "positional-model"))]
# Views whose figures label an axis with the text's own tokens (the layer grid and the next-token bars do not).
TOKEN_AXIS_VIEWS = {"attention-head", "attention-model", "attention-query", "causal-mask", "softmax-attention",
                    "positional-model"}
TEXTS = {    # labels such as "5 1" or "8 2" look like numbers to plotly; "<b>" and "<br>" look like its markup
    "numbers": "Count with me: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20. The year was 19",
    "markup": "<b>bold</b> and <br> break",
}
TYPED_TEXT = "The quick brown fox jumps over the lazy dog, and then the quick brown fox jumps over the lazy dog again."
PLOTLY_TAG = re.compile(r"</?(b|i|em|sup|sub|br|span|a|extra)(\s[^<>]*)?/?>", re.IGNORECASE)

# Page coordinates of the centre of cell (x, y) (axis values or category positions) of a chart's first subplot.
CELL_CENTRE_JS = """([key, x, y]) => {
  const chart = key ? document.querySelector('.st-key-' + CSS.escape(key) + ' [data-testid="stPlotlyChart"]')
                    : document.querySelector('[data-testid="stMain"] [data-testid="stPlotlyChart"]');
  const gd = chart.querySelector('.js-plotly-plot');
  const fl = gd._fullLayout, box = gd.getBoundingClientRect();
  return [box.left + fl.xaxis._offset + fl.xaxis.l2p(x), box.top + fl.yaxis._offset + fl.yaxis.l2p(y)];
}"""
# The box (viewport px) of the first element matching the selector, null when there is none or it is not shown.
BOX_JS = """(selector) => {
  const el = document.querySelector(selector);
  if (!el) return null;
  const r = el.getBoundingClientRect();
  return r.width && r.height ? {top: r.top, bottom: r.bottom, left: r.left, right: r.right} : null;
}"""
# Computed font sizes (px) of every tick label of the charts in the main area; the titles when there is none.
CHART_FONTS_JS = """() => {
  const texts = sel => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"] ' + sel)];
  const ticks = texts('g[class$="tick"] > text').filter(t => t.textContent.trim());
  const shown = ticks.length ? ticks : texts('.gtitle');
  return shown.map(t => [t.textContent, parseFloat(getComputedStyle(t).fontSize)]);
}"""


# -------------------------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def app_url(tmp_path_factory):
    """A `streamlit run app.py` on a free local port; its base URL. One server for every module that uses it, and for
    every worker of an xdist run (harness/shared_app.py: a fresh server loads the model and fills its caches again);
    the process group is killed at the session's end (the run's end)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        yield shared_app_url(ROOT, HEALTH_TIMEOUT_S)
        return
    with running_app(ROOT, tmp_path_factory.mktemp("streamlit") / "server.log", HEALTH_TIMEOUT_S) as (_, url):
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def screenshot_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture
def new_page(browser):
    """new_page(width, height) -> a page in a fresh browser context (no cookies, no session); closed afterwards."""
    contexts = []

    def make(width: int = WIDE[0], height: int = WIDE[1]):
        context = browser.new_context(viewport={"width": width, "height": height})
        context.set_default_timeout(RERUN_MS)
        context.add_init_script(RUN_COUNTER_INIT_JS)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


# -------------------------------------------------------------------------------------------------- helpers

def url_of(app_url: str, path: str, **params) -> str:
    split = urlsplit(path)
    query = {k: v[-1] for k, v in parse_qs(split.query).items()} | params
    return app_url + split.path + (f"?{urlencode(query)}" if query else "")


def query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}


def same_link(a: str, b: str) -> bool:
    """Two URLs naming the same view: same host, same path ("" = "/"), same query parameters."""
    sa, sb = urlsplit(a), urlsplit(b)
    return ((sa.scheme, sa.netloc, sa.path.rstrip("/")) == (sb.scheme, sb.netloc, sb.path.rstrip("/"))
            and parse_qs(sa.query) == parse_qs(sb.query))


def cell_centre(page, key: str, x: int, y: int) -> list[float]:
    """CELL_CENTRE_JS once the page's layout has settled (two readings 150 ms apart agree): a late reflow (a web
    font arriving) would otherwise move the chart between the reading and the mouse move."""
    last = page.evaluate(CELL_CENTRE_JS, [key, x, y])
    for _ in range(20):
        page.wait_for_timeout(150)
        now = page.evaluate(CELL_CENTRE_JS, [key, x, y])
        if now == last:
            break
        last = now
    return last


def rerun(page, action, min_charts: int = 1) -> None:
    """Do `action` (a click, a key) on the idle page and wait until the rerun it causes has finished and its charts
    are drawn (the app's messages counted: RUN_COUNTER_INIT_JS)."""
    page.wait_for_function(IDLE_WITH_CHARTS_JS, arg=0, timeout=RERUN_MS, polling=100)
    runs = page.evaluate("window.__stRuns || 0")
    action()
    try:
        page.wait_for_function(RERUN_DONE_JS, arg=[runs, min_charts], timeout=RERUN_MS, polling=100)
    except sync_api.TimeoutError as err:
        seen = page.evaluate("""() => ({runs: window.__stRuns, open: window.__stRunOpen, url: location.href,
          state: document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state'),
          stale: document.querySelectorAll('[data-stale="true"]').length,
          charts: document.querySelectorAll('[data-testid="stPlotlyChart"] .main-svg').length})""")
        raise AssertionError(f"no finished rerun within {RERUN_MS} ms (runs before the action: {runs}); the page: "
                             f"{seen}") from err


def wait_for_title(page, title: str) -> None:
    page.wait_for_function("""(title) => [...document.querySelectorAll('[data-testid="stPlotlyChart"] .gtitle')]
      .some(t => t.textContent.trim() === title)""", arg=title, timeout=RERUN_MS, polling=100)


def exception_text(page) -> str | None:
    errors = page.locator('[data-testid="stException"]')
    if errors.count():
        return "\n---\n".join(errors.all_inner_texts())[:3000]
    if page.locator('[role="dialog"]', has_text="Page not found").count():
        return f"'Page not found' for {page.url}"
    return None


def assert_no_exception(page, where: str) -> None:
    shown = exception_text(page)
    if shown:
        pytest.fail(f"{where}: the app shows an error:\n{shown}")


def controls(page, keys) -> dict:
    """CONTROLS_JS once every widget's component has mounted: the frontend loads a widget's code on first use, so
    its keyed box can be on the page, still empty, after the charts are drawn."""
    page.wait_for_function("(keys) => Object.values((" + CONTROLS_JS + ")(keys))"
                           ".every(v => !(v && v.unknown === ''))", arg=list(keys), timeout=RERUN_MS, polling=100)
    return page.evaluate(CONTROLS_JS, list(keys))


def digest(page, key: str | None = None) -> dict | None:
    return page.evaluate(FIGURE_DIGEST_JS, key)


def share_box_link(page) -> str:
    """The link in the "Share link" popover's code box (the popover is closed again afterwards; the TOML box below
    it is the view as a lesson step)."""
    page.locator('[data-testid="stPopoverButton"]:visible', has_text="Share link").click()
    code = page.locator('[data-testid="stPopoverBody"] [data-testid="stCode"] code.language-plaintext')
    code.wait_for()
    link = code.text_content().strip()
    page.keyboard.press("Escape")
    return link


def save_screenshots(page, name: str, out_dir: Path, scroll: bool = True) -> list[Path]:
    """The viewport as the user first sees it, then (scroll) one shot per screen further down the main area."""
    shots = [out_dir / f"{name}.png"]
    page.screenshot(path=str(shots[0]))
    if not scroll:
        return shots
    main = page.locator('[data-testid="stMain"]')
    height, screen = main.evaluate("e => [e.scrollHeight, e.clientHeight]")
    n = min(MAX_SCROLL_SHOTS, max(0, -(-height // max(screen, 1)) - 1))
    for i in range(1, n + 1):
        main.evaluate("(e, y) => { e.scrollTop = y; }", i * screen)     # the screenshot waits for that frame
        shots.append(out_dir / f"{name}_scroll{i:02d}.png")
        page.screenshot(path=str(shots[-1]))
    main.evaluate("e => { e.scrollTop = 0; }")
    return shots


def copy_out(paths: list[Path]) -> None:
    target = os.environ.get("E2E_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for p in paths:
            shutil.copy2(p, Path(target) / p.name)


# ----------------------------------------------------------------------------------- token axes and escaping

def shown_text(spec: str) -> str:
    """What plotly draws for a label: its tags applied (dropped here), its entities decoded."""
    return html.unescape(PLOTLY_TAG.sub("", spec))


def stray_markup(value: str, text: str, data: bool = False) -> str | None:
    """Why `value` (a title, template, or with data=True a label or hover value) shows markup from the text unescaped,
    or None.

    Token text reaches plotly escaped ("&lt;b&gt;"), so a "<" left after plotly's own tags (in data: a "<" or ">")
    is a token's; and no tag-bearing piece of the text ("<b>bold", "<br> break") may appear raw.
    """
    bare = PLOTLY_TAG.sub("", value)
    if "<" in bare or (data and ">" in bare):
        return f"an unescaped {'< or >' if data else '<'} in {value!r}"
    pieces = [p for p in re.findall(r"<[^<>]*>[^<>]*", text) if len(p) > 3]
    raw = [p for p in pieces if p.strip() in value]
    return f"the text's raw markup {raw} in {value!r}" if raw else None


def distinctive(tokens: list[str]) -> set[str]:
    """Tokens that mark an axis as a token axis: two characters or more, with a letter."""
    return {t for t in tokens if len(t) >= 2 and re.search(r"[^\W\d_]", t.replace("␣", ""))}


def figure_problems(fig: dict, tokens: list[str], text: str) -> tuple[list[str], int]:
    """(what is wrong with one figure's token axes and labels, how many token axes it has)."""
    problems: list[str] = []
    where = f"figure {fig['key']!r} ({fig['title_shown'] or 'untitled'})"

    def markup(what: str, values: list[str], data: bool) -> None:
        problems.extend(f"{where}: {what}: {why}" for v in values if (why := stray_markup(v, text, data)))

    string_axes = {t[axis] for t in fig["traces"] for axis, values in (("xaxis", t["x_strings"]),
                                                                         ("yaxis", t["y_strings"])) if values}
    marks = distinctive(tokens)
    n_token_axes = 0
    for axis in fig["axes"]:
        name = axis["name"]
        labels = [shown_text(s) for s in axis["ticktext"] + axis["categories"]]
        if axis["id"] in string_axes or any(m in label for label in labels for m in marks):     # carries tokens
            n_token_axes += 1
            positional = (axis["type"] == "linear" and axis["tickmode"] == "array" and axis["ticktext"]
                          and len(axis["tickvals"]) == len(axis["ticktext"])
                          and all(isinstance(v, int | float) for v in axis["tickvals"]))
            if axis["type"] != "category" and not positional:
                problems.append(f"{where}: {name} carries tokens but is type {axis['type']!r} (tickmode "
                                f"{axis['tickmode']!r}, tickvals {axis['tickvals'][:4]}): neither categorical nor "
                                "positional")
            if axis["id"] in string_axes and axis["type"] != "category":
                problems.append(f"{where}: {name} has text coordinates on a {axis['type']!r} axis")
        problems.extend(f"{where}: {name} tick {t['spec']!r} is drawn as {t['shown']!r}" for t in axis["ticks"]
                        if t["spec"] is not None and t["shown"] != shown_text(t["spec"]))
        markup(f"{name} tick text", axis["ticktext"] + axis["categories"], data=True)
        markup(f"{name} title", [axis["title"]], data=False)
    markup("title or annotation", [fig["title"], *fig["annotations"]], data=False)
    if fig["title"] and fig["title_shown"].strip() != shown_text(fig["title"]).strip():
        problems.append(f"{where}: title {fig['title']!r} is drawn as {fig['title_shown']!r}")
    for trace in fig["traces"]:
        markup(f"{trace['type']} trace data (hover values)", trace["x_strings"] + trace["y_strings"] + trace["values"],
               data=True)
        markup(f"{trace['type']} trace name or template", [trace["name"], *trace["hovertemplate"],
                                                           *trace["texttemplate"]], data=False)
    return problems, n_token_axes


def drawn_ticks(page, key: str | None, axis: str = "xaxis") -> list[str]:
    figs = page.evaluate(FIGURES_JS, None)
    fig = next(f for f in figs if key is None or f["key"] == key)
    return [t["shown"] for t in next(a for a in fig["axes"] if a["name"] == axis)["ticks"]]


@pytest.mark.parametrize("text_name", list(TEXTS))
def test_token_axes_are_declared_and_tags_escaped(app_url, new_page, lm, text_name):
    """Every view that shows the text, at 1024x768: token axes categorical or positional (plotly guesses numbers from
    labels like "8 2"), no tag from the text swallowed in a tick, hover value or title, and the one-head heatmap's
    drawn ticks are the tokenizer's tokens, "<" and "</" literally."""
    text = TEXTS[text_name]
    tokens = lm.token_strings(lm.encode(text))
    page = new_page(*PROJECTOR)
    problems: list[str] = []
    for name in TEXT_VIEWS:
        visit(page, url_of(app_url, VIEWS[name][0], text=text))
        shown = exception_text(page)
        if shown:
            problems.append(f"{name}: the app shows an error: {shown[:500]}")
            continue
        if query(page.url).get("text") != text:
            problems.append(f"{name}: the URL does not carry the text: {page.url}")
        n_token_axes = 0
        for fig in page.evaluate(FIGURES_JS, None):
            found, n = figure_problems(fig, tokens, text)
            problems += [f"{name}: {p}" for p in found]
            n_token_axes += n
        if name in TOKEN_AXIS_VIEWS and not n_token_axes:
            problems.append(f"{name}: no axis carries the text's tokens {sorted(distinctive(tokens))[:5]}")
        if name == "attention-head":
            ticks = drawn_ticks(page, "fig_head")
            if len(tokens) <= 40:                              # every token labelled
                if ticks != tokens:
                    problems.append(f"{name}: the heatmap's x ticks read {ticks}, the tokenizer says {tokens}")
            else:                                              # thinned: "position:token"
                for tick in ticks:
                    pos, _, tok = tick.partition(":")
                    if not (pos.isdigit() and int(pos) < len(tokens) and tokens[int(pos)].startswith(tok.rstrip("…"))):
                        problems.append(f"{name}: tick {tick!r} is not 'position:token' of {tokens}")
                if len(ticks) < 10:
                    problems.append(f"{name}: only {len(ticks)} x ticks drawn for {len(tokens)} tokens")
            if text_name == "markup":
                x, y = cell_centre(page, "fig_head", 0, 4)      # query 4 ("</"), key 0 ("<")
                page.mouse.move(x, y)
                hover = page.locator(".hoverlayer .hovertext").first
                try:
                    hover.wait_for(timeout=10_000)
                    said = hover.text_content()
                except sync_api.TimeoutError:
                    said = "(no hover label)"
                if f"4 {tokens[4]}" not in said or f"0 {tokens[0]}" not in said:
                    problems.append(f"{name}: the hover on cell (query 4, key 0) says {said!r}: tokens "
                                    f"{tokens[4]!r} and {tokens[0]!r} not shown literally")
                page.mouse.move(1, 1)
    assert not problems, f"text {text!r}:\n" + "\n".join(problems)


# The margins the first chart of the main area reserved (its layout) and those plotly drew it with.
MARGINS_JS = """(key) => {
  const gd = document.querySelector('.st-key-' + CSS.escape(key) + ' .js-plotly-plot');
  const m = gd.layout.margin || {}, s = gd._fullLayout._size;
  return {reserved: [m.l, m.r, m.t, m.b], drawn: [s.l, s.r, s.t, s.b]};
}"""
ROOM_TEXTS = {**TEXTS, "chinese": "我喜欢学习机器学习，也喜欢读书。", "emoji": "I love 🍕 and 🎉 parties 😀!",
              "one token": "Hi", "512 tokens": " ".join(f"word{i}" for i in range(400)), "tags only": "<b>bold</b>"}


# Charts that reserve room for their labels (viz.margins): (path, chart key, texts to try).
ROOM_CHARTS = {
    "one head": ("/", "fig_head", list(ROOM_TEXTS)),
    "overview, previous-token": ("/?view=model", "w_overview", ["numbers", "512 tokens"]),
    "overview, entropy": ("/?view=model&color=entropy", "w_overview", ["numbers"]),
    "overview, thumbnails": ("/?view=model&color=thumbs", "w_overview", ["numbers"]),
    "query row": ("/?view=query", "fig_query", ["markup", "emoji", "one token", "512 tokens"]),
    "next token": ("/?view=next", "fig_next", ["markup", "chinese", "emoji", "tags only"]),   # ↵␣␣␣ predicted
}


@pytest.mark.parametrize("present", [False, True], ids=["sidebar", "presenter"])
def test_charts_reserve_room_for_their_labels(app_url, new_page, present):
    """The Attention page's charts (one head, the whole-model overviews, a query's row, the next-token bars)
    reserve margins that fit their labels, colour bars and titles (viz.margins), so plotly draws them once: had
    they been short, plotly's automargin would have drawn them again with larger ones (a third of a head switch's
    time). Texts with long, wide, markup-like and numeric tokens, one token, 512 tokens; presenter mode's larger
    text."""
    page = new_page(*PROJECTOR)
    problems = []
    for chart, (path, key, texts) in ROOM_CHARTS.items():
        for name in texts:
            visit(page, url_of(app_url, path, text=ROOM_TEXTS[name], **({"present": 1} if present else {})))
            assert_no_exception(page, f"{chart}, {name}")
            margins = page.evaluate(MARGINS_JS, key)
            if margins["drawn"] != margins["reserved"]:
                problems.append(f"{chart}, {name}: reserved l, r, t, b = {margins['reserved']}, drawn with "
                                f"{margins['drawn']}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------- first screen

def box(page, selector: str) -> dict | None:
    return page.evaluate(BOX_JS, selector)


MAIN_CHART = '[data-testid="stMain"] [data-testid="stPlotlyChart"]'
# Every chart in the main area: whether it is drawn, its box, and the tab panel around it (for a failure's message).
CHARTS_SEEN_JS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')]
  .map(c => { const r = c.getBoundingClientRect(), tab = c.closest('[role="tabpanel"]');
    return {drawn: !!c.querySelector('.main-svg'), top: Math.round(r.top), width: Math.round(r.width),
            height: Math.round(r.height), tab: tab ? `${tab.id} hidden=${tab.hidden}` : null}; })"""


def main_chart_box(page, timeout_ms: int = 10_000) -> tuple[dict | None, str]:
    """The first main-area chart's box once it has one (a run's last layout can land just after the app reports
    idle on a busy machine), and what the page showed if it never did within timeout_ms."""
    try:
        page.wait_for_function(f"() => ({BOX_JS})({MAIN_CHART!r}) !== null", timeout=timeout_ms, polling=100)
    except sync_api.TimeoutError:
        return None, f"charts {page.evaluate(CHARTS_SEEN_JS)} at {page.url}"
    return box(page, MAIN_CHART), ""


def fully_visible(b: dict | None, width: int, height: int) -> bool:
    return b is not None and b["top"] >= 0 and b["left"] >= 0 and b["bottom"] <= height and b["right"] <= width


def test_first_screen_at_1024x768(app_url, new_page, screenshot_dir):
    """On every page and view (example text) at 1024x768: no error, the main chart's top and at least 300 px of it
    (all of a shorter one) on the first screen, the sidebar's layer / head / sink switch without scrolling where they
    apply (and nowhere where they do not), Softmax's temperature slider and bars both whole, no Deploy button.
    Screenshots."""
    width, height = PROJECTOR
    page = new_page(width, height)
    problems: list[str] = []
    shots: list[Path] = []
    try:
        for name, (path, shared) in VIEWS.items():
            visit(page, app_url + path)
            page.evaluate("delete window.__sidebarHeight; delete window.__sidebarSame")
            page.wait_for_function(SIDEBAR_SETTLED_JS, timeout=RERUN_MS, polling=100)
            where = f"{name} ({path}) at {width}x{height}"
            shown = exception_text(page)
            if shown:
                problems.append(f"{where}: the app shows an error: {shown[:500]}")
            chart, seen_instead = main_chart_box(page)
            seen = 0 if chart is None or not 0 <= chart["top"] < height else min(chart["bottom"], height) - chart["top"]
            wanted = MIN_CHART_PX if chart is None else min(MIN_CHART_PX, chart["bottom"] - chart["top"])
            if seen < wanted:
                problems.append(f"{where}: the main chart is at {chart and {k: round(v) for k, v in chart.items()}}: "
                                f"its top and {wanted} px of it should be on the first {height} px {seen_instead}")
            for key in SHARED_KEYS:
                control = box(page, f'[data-testid="stSidebar"] .st-key-{key}')
                if applies(shared, key) and not fully_visible(control, width, height):
                    problems.append(f"{where}: the sidebar's {key} control is not on the first screen: {control}")
                if not applies(shared, key) and page.locator(f".st-key-{key}").count():
                    problems.append(f"{where}: the {key} control is shown but does nothing on this view")
            if name == "softmax":
                for what, selector in (("temperature slider", ".st-key-temp"),
                                       ("probability bars", '.st-key-softmax_bars [data-testid="stPlotlyChart"]')):
                    b = box(page, selector)
                    if not fully_visible(b, width, height):
                        problems.append(f"{where}: the {what} is not fully on the first screen: {b}")
            deploy = page.locator('[data-testid="stAppDeployButton"]').or_(page.get_by_role("button", name="Deploy"))
            if deploy.count():
                problems.append(f"{where}: a Deploy button is shown")
            shots += save_screenshots(page, f"{name}_{width}x{height}", screenshot_dir, scroll=SCROLL_SHOTS)
    finally:
        copy_out(shots)
    assert not problems, "\n".join(problems)


def test_presenter_mode_at_1024x768(app_url, new_page, screenshot_dir):
    """?present=1 on every page and view: no sidebar; the layer and head sliders and the sink switch on the page's
    first screen where they apply (absent where they do not); chart tick labels at least 14 px. Screenshots."""
    width, height = PROJECTOR
    page = new_page(width, height)
    problems: list[str] = []
    shots: list[Path] = []
    try:
        for name, (path, shared) in VIEWS.items():
            visit(page, url_of(app_url, path, present=1))
            where = f"{name} ({path}) in presenter mode"
            shown = exception_text(page)
            if shown:
                problems.append(f"{where}: the app shows an error: {shown[:500]}")
            if query(page.url).get("present") != "1":
                problems.append(f"{where}: the URL lost present=1: {page.url}")
            if box(page, '[data-testid="stSidebar"]') is not None:
                problems.append(f"{where}: the sidebar is visible: {box(page, '[data-testid=stSidebar]')}")
            for key in SHARED_KEYS:
                control = box(page, f'[data-testid="stMain"] .st-key-{key}')
                if applies(shared, key) and not fully_visible(control, width, height):
                    problems.append(f"{where}: the {key} control is not on the page's first screen: {control}")
                if not applies(shared, key) and page.locator(f".st-key-{key}").count():
                    problems.append(f"{where}: the {key} control is shown but does nothing on this view")
            fonts = page.evaluate(CHART_FONTS_JS)
            small = [(t, px) for t, px in fonts if px < MIN_PRESENTER_FONT_PX]
            if not fonts or small:
                problems.append(f"{where}: chart text below {MIN_PRESENTER_FONT_PX} px: {small[:5] or 'none found'}")
            shots += save_screenshots(page, f"{name}_presenter_{width}x{height}", screenshot_dir, scroll=False)
    finally:
        copy_out(shots)
    assert not problems, "\n".join(problems)


# Each chart of the main area: its key, its draws, the width plotly drew it at and its frame's width.
DRAWS_JS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')].map(c => {
  const gd = c.querySelector('.js-plotly-plot');
  return {key: c.closest('[class*="st-key-"]')?.className.match(/st-key-(\\S+)/)?.[1],
          reacts: gd?.__draws?.plotly_react || 0, autosized: gd?.__draws?.plotly_autosize || 0,
          width: gd?._fullLayout?.width, frame: c.closest('[data-testid="stFullScreenFrame"]').clientWidth};
})"""

# Every chart of the view has been drawn (plotly has laid it out), and there are at least n.
ALL_DRAWN_JS = """(n) => {
  const charts = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')];
  return charts.length >= n && charts.every(c => c.querySelector('.js-plotly-plot')?._fullLayout?.width);
}"""


def test_each_chart_is_drawn_once_at_its_frames_width(app_url, new_page):
    """Streamlit's chart drew every figure twice, at plotly's default size and then at its frame's width
    (server/frontend_mends.py): on views of 10 and 3 charts, each is drawn once (one Plotly.react, no autosize) at
    its frame's width, also when the window is resized (and then drawn again, once, at the new width)."""
    page = new_page(*PROJECTOR)
    page.context.add_init_script(COUNT_DRAWS_INIT_JS)
    problems = []
    for path, n in (("/causal-mask", 10), ("/softmax", 3)):
        open_view(page, app_url + path)
        try:                                  # a loaded CPU draws the last charts well after the run's end
            page.wait_for_function(ALL_DRAWN_JS, arg=n, timeout=RERUN_MS, polling=100)
        except sync_api.TimeoutError:
            pass                                                     # the charts left undrawn are the problem
        page.wait_for_timeout(500)                                   # a second draw would come within a frame
        charts = page.evaluate(DRAWS_JS)
        if len(charts) != n:
            problems.append(f"{path}: {len(charts)} charts, {n} expected")
        problems += [f"{path}: {c}" for c in charts
                     if (c["reacts"], c["autosized"]) != (1, 0) or abs(c["width"] - c["frame"]) > 1]
    page.set_viewport_size({"width": WIDE[0], "height": WIDE[1]})
    page.wait_for_function("""(w) => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')]
      .every(gd => gd._fullLayout.width > w)""", arg=PROJECTOR[0] * 0.67, timeout=RERUN_MS)
    page.wait_for_timeout(500)
    problems += [f"/softmax at {WIDE}: {c}" for c in page.evaluate(DRAWS_JS)
                 if c["reacts"] != 2 or abs(c["width"] - c["frame"]) > 1]
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------------------------------------ share links

def press_on(page, key: str, arrow: str, times: int) -> None:
    """Focus the slider with this widget key and press an arrow key `times` times, one rerun each."""
    for _ in range(times):
        handle = page.locator(f".st-key-{key} input[type='range']").first
        rerun(page, lambda h=handle: (h.focus(), h.press(arrow)))


def click_switch(page, key: str) -> None:
    reveal(page, key)
    rerun(page, lambda: page.locator(f".st-key-{key} label").first.click())


def pick_option(page, key: str, index: int) -> None:
    """Click option `index` of a segmented control or pills."""
    rerun(page, lambda: page.locator(f".st-key-{key} button[role='radio']").nth(index).click())


def open_tab(page, key: str, label: str) -> None:
    rerun(page, lambda: page.locator(f".st-key-{key} [role='tab']", has_text=label).click())


def reveal(page, key: str) -> None:
    """Open the folded expander that holds the control with this key (a no-op when it shows already)."""
    if not page.locator(f".st-key-{key}").first.is_visible():
        folded = page.locator('[data-testid="stExpander"]', has=page.locator(f".st-key-{key}"))
        folded.locator("summary").first.click()
        page.locator(f".st-key-{key}").first.wait_for(state="visible")


def type_number(page, key: str, value: str) -> None:
    reveal(page, key)
    box_ = page.locator(f".st-key-{key} input").first
    rerun(page, lambda: (box_.fill(value), box_.press("Enter")))


def choose(page, key: str, starts_with: str) -> None:
    """Open a selectbox (keyboard: a click that scrolls the page can close the list again) and click the option whose
    text starts with `starts_with`."""
    combo = page.locator(f".st-key-{key} input[role='combobox']")
    option = page.get_by_role("option").filter(has_text=re.compile("^" + re.escape(starts_with)))
    for _ in range(3):               # a rerun from the step before can redraw the box and close its list: open again
        combo.scroll_into_view_if_needed()
        combo.focus()
        combo.press("ArrowDown")
        try:
            option.first.wait_for(state="visible", timeout=10_000)
            break
        except sync_api.TimeoutError:
            page.keyboard.press("Escape")
    rerun(page, lambda: option.first.click())


# Each share-link case: where it starts, what the user changes, which controls and charts must come back the same.
SHARE_CASES = {
    "attention-head": ("/", [
        (press_on, "layer", "ArrowRight", 2), (press_on, "head", "ArrowRight", 2), (click_switch, "sink"),
        (click_switch, "attention_stretch"), (pick_option, "q_pick", 5),
    ], ["attention_view_tabs", "layer", "head", "sink", "attention_stretch", "q_pick"], ["fig_head"]),
    "attention-model": ("/", [
        (open_tab, "attention_view_tabs", "Whole model"), (pick_option, "attention_overview", 3),
        (press_on, "head", "ArrowRight", 1),
    ], ["attention_view_tabs", "attention_overview", "layer", "head", "sink"], ["w_overview", "fig_model_preview"]),
    "causal-mask": ("/causal-mask", [
        (press_on, "mask_n", "ArrowLeft", 2), (click_switch, "mask_side"), (press_on, "head", "ArrowRight", 1),
    ], ["mask_n", "mask_side", "layer", "head", "sink"], ["mask_scores", "mask_probs"]),
    "softmax": ("/softmax", [
        (pick_option, "softmax_source", 1), (press_on, "temp", "ArrowRight", 2),
        (type_number, "softmax_top_k", "5"), (press_on, "softmax_top_p", "ArrowLeft", 3),
        (type_number, "softmax_seed", "7"), (type_number, "softmax_draws", "2500"), (press_on, "head", "ArrowRight", 1),
    ], ["softmax_source", "temp", "softmax_top_k", "softmax_top_p", "softmax_seed", "softmax_draws", "layer", "head",
        "q"], ["softmax_bars", "softmax_histogram"]),
    "positional-rope": ("/positional", [
        (open_tab, "positional_view_tabs", "RoPE: the rotation"), (press_on, "pos_pair_a", "ArrowRight", 1),
        (press_on, "pos_pair_b", "ArrowLeft", 1), (choose, "pos_rot_base", "1,000,000"),
    ], ["positional_view_tabs", "pos_pair_a", "pos_pair_b", "pos_rot_base", "pos_rot_positions"],
        ["pos_fig_rot_a", "pos_fig_rot_b"]),
    "positional-model": ("/positional", [
        (open_tab, "positional_view_tabs", "RoPE inside the model"), (press_on, "layer", "ArrowRight", 1),
        (press_on, "head", "ArrowRight", 1), (choose, "pos_max_distance", "2,048"),
    ], ["positional_view_tabs", "layer", "head", "sink", "q", "pos_key_pick", "pos_max_distance"],
        ["pos_fig_pairs", "pos_fig_patterns"]),
    "parameters-preset": ("/parameters", [
        (choose, "params_preset", "Llama-2-7B"), (type_number, "params_batch", "4"),
        (choose, "params_kv_dtype", "int8"),
    ], ["params_preset", "params_n_layers", "params_d_model", "params_batch", "params_kv_dtype"],
        ["params_treemap", "params_memory"]),
    "parameters-custom": ("/parameters", [
        (type_number, "params_n_layers", "12"), (type_number, "params_d_ff", "2048"), (click_switch, "params_qkv_bias"),
    ], ["params_preset", "params_n_layers", "params_d_ff", "params_qkv_bias", "params_d_model", "params_mlp"],
        ["params_treemap", "params_layer_split"]),
}


@pytest.mark.parametrize("case", list(SHARE_CASES))
def test_share_link_restores_the_view(app_url, new_page, case):
    """Change a page's controls in the browser; the URL it wrote, opened in a fresh browser, shows the same control
    values and the same charts (title and data hash); the "Share link" box holds that URL."""
    path, steps, keys, charts = SHARE_CASES[case]
    page = new_page(*PROJECTOR)
    open_view(page, app_url + path)
    before = controls(page, keys)
    for step, *args in steps:
        step(page, *args)
        assert_no_exception(page, f"{case}: after {step.__name__}{tuple(args)}")
    link = page.url
    changed = controls(page, keys)
    shown = {key: digest(page, key) for key in charts}
    touched = {args[0] for _, *args in steps}
    unchanged = [k for k in touched if k in keys and changed[k] == before[k]]
    assert not unchanged, f"{case}: the controls {unchanged} did not change: {changed}"
    assert all(shown.values()), f"{case}: charts missing: {shown}"
    box_link = share_box_link(page)
    assert same_link(box_link, link), f"{case}: the Share link box says {box_link!r}, the address bar {link!r}"

    fresh = new_page(*PROJECTOR)                       # a fresh browser profile opening the shared link
    open_view(fresh, link)
    for key in charts:                                 # the page may draw its first chart before the others
        fresh.locator(f".st-key-{key} .js-plotly-plot").first.wait_for(state="attached", timeout=RERUN_MS)
    assert_no_exception(fresh, f"{case}: the shared link {link}")
    problems = []
    restored = controls(fresh, keys)
    for key in keys:
        if restored[key] != changed[key]:
            problems.append(f"control {key!r}: {restored[key]} after opening the link, {changed[key]} before")
    for key in charts:
        again = digest(fresh, key)
        if again != shown[key]:
            problems.append(f"chart {key!r}: {again} after opening the link, {shown[key]} before")
    if fresh.locator(".st-key-link_notes").count():
        problems.append("the link shows a note that settings were fixed: "
                        + fresh.locator(".st-key-link_notes").inner_text()[:300])
    if not same_link(fresh.url, link):
        problems.append(f"the address bar became {fresh.url}")
    assert not problems, f"{case}: the link {link} does not restore the view:\n" + "\n".join(problems)


# ----------------------------------------------------------------------------------------- keys, text, links

# A key pressed on the page, then 5 ms later the key handler's target sent again: a rerun request that carries every
# widget's value as the browser has it (before the press's run reached it), as a click on any control would.
PRESS_THEN_ANOTHER_REQUEST_JS = """(key) => {
  document.body.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true, cancelable: true}));
  const w = window.atlasPresenterKeys;
  setTimeout(() => w.set("target", {values: {...w.targets}, seq: w.sent}), 5);
}"""


@pytest.mark.parametrize("presenter", [False, True], ids=["sidebar", "presenter"])
def test_arrow_keys_step_head_and_layer(app_url, new_page, presenter):
    """With the focus on the page (not in a box), ArrowRight moves to the next head and ArrowUp to the next layer:
    the URL and the heatmap's title follow, every press counted however fast they come (a teacher's taps 20 ms
    apart, a held key's repeats; the runs they start merge)."""
    page = new_page(*PROJECTOR)
    open_view(page, url_of(app_url, "/", **({"present": 1} if presenter else {})))
    wait_for_title(page, "Layer 0, head 0")
    # The keys work once the key handler's component has mounted, which can be after the heatmap is drawn.
    page.wait_for_function(KEYS_READY_JS, timeout=RERUN_MS, polling=100)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    for keys, gap_s, want, title in ((["ArrowRight"], 0, {"head": "1"}, "Layer 0, head 1"),
                                     (["ArrowUp"], 0, {"head": "1", "layer": "1"}, "Layer 1, head 1"),
                                     (["ArrowUp"] * 3, 0.02, {"head": "1", "layer": "4"}, "Layer 4, head 1"),
                                     (["ArrowRight"] * 3 + ["ArrowLeft"], 0.02, {"head": "3", "layer": "4"},
                                      "Layer 4, head 3"),
                                     (["ArrowDown"] * 2, 0.06, {"head": "3", "layer": "2"}, "Layer 2, head 3")):
        for key in keys:
            page.keyboard.press(key)
            time.sleep(gap_s)
        try:
            page.wait_for_url(lambda url, want=want: all(query(url).get(k) == v for k, v in want.items()),
                              timeout=20_000)
        except sync_api.TimeoutError:
            pytest.fail(f"{keys} on the page body (focus on {page.evaluate('document.activeElement.tagName')}) did not "
                        f"step the view: the URL stayed {page.url}, the heatmap title "
                        f"{page.locator('.gtitle').first.text_content()!r}")
        wait_for_title(page, title)
    # A press and, a few ms later, another request from the page (as any click then sends: the sliders from before
    # the press, the same key target), which stops the run applying the press: the press still counts
    # (presenter_keys.hold_applied; without it the stale slider won, every time).
    page.evaluate(PRESS_THEN_ANOTHER_REQUEST_JS, "ArrowUp")
    page.wait_for_url(lambda url: query(url).get("layer") == "3", timeout=20_000)
    wait_for_title(page, "Layer 3, head 3")
    assert_no_exception(page, "arrow keys")


def test_text_typed_in_the_sidebar_runs_the_model(app_url, new_page, lm):
    """Text typed in the sidebar (Ctrl+Enter) goes into the URL, the token count is the tokenizer's, and the heatmap's
    axis shows the tokenizer's tokens of that text."""
    tokens = lm.token_strings(lm.encode(TYPED_TEXT))
    page = new_page(*WIDE)
    open_view(page, app_url + "/")
    text_area = page.locator('[data-testid="stSidebar"] textarea')
    text_area.fill(TYPED_TEXT)
    rerun(page, lambda: text_area.press("Control+Enter"))
    page.wait_for_url(lambda url: query(url).get("text") == TYPED_TEXT)
    assert_no_exception(page, "after typing a text")
    assert page.locator('[data-testid="stSidebar"]').get_by_text(f"{len(tokens)} / 512 tokens").count() == 1
    assert drawn_ticks(page, "fig_head") == tokens


def test_attention_link_is_the_root_and_old_links_forward(app_url, new_page):
    """The Attention page's link is "/?..." and an old /attention link forwards to "/" with its settings."""
    page = new_page(*WIDE)
    open_view(page, f"{app_url}/attention?view=layer&layer=7&head=1")
    page.wait_for_url(lambda url: urlsplit(url).path in ("", "/"))
    wait_for_title(page, "Layer 7: all 9 heads")
    params = query(page.url)
    assert {k: params.get(k) for k in ("view", "layer", "head")} == {"view": "layer", "layer": "7", "head": "1"}
    assert_no_exception(page, "old /attention link")


def test_back_and_forward_reopen_each_link(app_url, new_page):
    """The browser's Back / Forward open the address's link as a fresh browser would: its settings win over the
    session's, and one it leaves out is back at its default (Streamlit's rule for its own query-bound widgets). Layer 3,
    head 2 on the one-head view; the Causal mask page (the two come along); there layer 4 by a key, then the sink
    hidden. Back: layer 4, the sink shown; Back: layer 3; Forward twice: layer 4, the sink hidden. Back past the
    address Streamlit pushes as a page is picked (no query: the session's settings stay) to the one-head view."""
    page = new_page(*WIDE)
    open_view(page, url_of(app_url, "/", layer=3, head=2))
    wait_for_title(page, "Layer 3, head 2")
    rerun(page, lambda: page.locator('[data-testid="stSidebarNav"] a', has_text="Causal mask").click())
    page.wait_for_function(KEYS_READY_JS, timeout=RERUN_MS, polling=100)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("ArrowUp")
    page.wait_for_url(lambda url: query(url).get("layer") == "4", timeout=20_000)
    rerun(page, lambda: page.locator('[data-testid="stSidebar"] .st-key-sink label').click())
    page.wait_for_url(lambda url: query(url).get("sink") == "1", timeout=20_000)
    shown = {"layer": "4", "head": "2", "sink": "1"}
    assert urlsplit(page.url).path == "/causal-mask" and query(page.url) == shown, page.url
    for move, link, slider in ((page.go_back, {"layer": "4", "head": "2"}, {"layer": {"slider": ["4"]}}),
                               (page.go_back, {"layer": "3", "head": "2"}, {"layer": {"slider": ["3"]}}),
                               (page.go_forward, {"layer": "4", "head": "2"}, {"layer": {"slider": ["4"]}}),
                               (page.go_forward, shown, {"layer": {"slider": ["4"]}})):
        rerun(page, move)
        sink = {"sink": {"checked": link.get("sink") == "1"}}
        assert (urlsplit(page.url).path, query(page.url)) == ("/causal-mask", link), page.url
        assert controls(page, ["layer", "sink"]) == slider | sink, f"{move.__name__} to {link}"
    for _ in range(4):                # layer 4, layer 3, the address pushed as the page was picked, the one-head view
        rerun(page, page.go_back)
    wait_for_title(page, "Layer 3, head 2")
    assert urlsplit(page.url).path in ("", "/") and query(page.url) == {"layer": "3", "head": "2"}, page.url
    assert_no_exception(page, "Back and Forward")


@pytest.mark.parametrize("overview", ["previous-token score", "pattern thumbnails"])
def test_whole_model_overview_click_picks_a_head(app_url, new_page, overview):
    """A click on a cell of the Whole-model overview (layers across, heads down) selects that head."""
    page = new_page(*PROJECTOR)
    open_view(page, f"{app_url}/?view=model", min_charts=2)
    choice = page.get_by_role("radio", name=overview)
    if choice.get_attribute("aria-checked") != "true":
        rerun(page, lambda: choice.click(), min_charts=2)
    for layer, head in ((16, 0), (29, 8)):
        page.locator(".st-key-w_overview").scroll_into_view_if_needed()
        x, y = cell_centre(page, "w_overview", layer, head)
        page.mouse.move(x + 3, y - 4)           # off-centre: anywhere in the cell counts
        page.mouse.click(x + 3, y - 4)
        want = (str(layer), str(head))
        page.wait_for_url(lambda url, want=want: (query(url).get("layer", "0"), query(url).get("head", "0")) == want)
        wait_for_title(page, f"Selected: layer {layer}, head {head}")
    assert_no_exception(page, f"overview clicks ({overview})")


def test_long_text_keeps_the_sidebar_controls_on_screen(app_url, new_page):
    """A text cut to 512 tokens shows the cut note, and layer, head and the sink switch still need no scrolling (on
    Causal mask: it computes one layer, the quickest page that has all three)."""
    width, height = PROJECTOR
    page = new_page(width, height)
    open_view(page, url_of(app_url, "/causal-mask", text="word " * 700))
    cut_note = re.compile(r"only the first 512 of [0-9,]+ tokens")
    assert page.locator('[data-testid="stSidebar"]').get_by_text(cut_note).count() == 1
    for key in ("layer", "head", "sink"):
        control = box(page, f'[data-testid="stSidebar"] .st-key-{key}')
        assert fully_visible(control, width, height), f"{key}: {control}"


@pytest.mark.parametrize(("lang", "names"), [("en", ["Start a class", "Back to this step's view", "Leave the lesson"]),
                                             ("zh", ["开始上课", "回到这一步的视图", "离开课程"])])
def test_icon_only_buttons_have_accessible_names(app_url, new_page, lang, names):
    """A button that shows only its icon keeps its label as its accessible name (screen readers and test tools find
    "Start a class" by name), in both languages."""
    page = new_page(*PROJECTOR)
    open_view(page, url_of(app_url, "/", lesson="1-llm-basics", step="2", present="1", lang=lang))
    missing = []
    for name in names:      # a label is drawn by the markdown code the frontend loads on first use: it may come late
        try:
            sync_api.expect(page.get_by_role("button", name=name, exact=True)).to_have_count(1, timeout=15_000)
        except AssertionError:
            missing.append(name)
    assert not missing, f"no button named {missing} ({lang})"
