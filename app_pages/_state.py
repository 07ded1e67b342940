"""The only place with Streamlit caches, and the mapping between the URL's query params and the app's state.

State lives in st.session_state under a few canonical keys (text, layer, head, q, temp, sink). Widgets that pages
render (layer/head sliders, the query-token strip, the temperature slider) use their own "w_..." keys and copy into
the canonical key in their on_change callback, so a value survives page switches even when a page does not show
the widget. The URL is written from the canonical keys at the end of every run (write_url) and read once, when a
session starts (init_from_url): a shared link restores the same view.

Pages use:
    trace = current_trace()            # None (with a note already shown) when there is nothing to show
    if trace is None: st.stop()
    layer_head_controls()              # sidebar layer + head sliders (once per run)
    query_token_strip(trace)           # the text as clickable tokens
    sel = selection(trace)             # Selection(layer, head, query, hide_sink, temperature), clamped
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

import numpy as np
import streamlit as st

from app_pages._widgets import escape_markdown, token_label
from model import ForwardTrace, LayerDetail, load_model
from model.gguf import ModelLoadError
from model.head_stats import apply_sink, head_stats
from model.sampling import T_MAX, T_MIN
from viz.attention import thumbnail_tiles

__all__ = [
    "DEFAULT_MAX_TOKENS", "Selection", "apply_sink", "current_trace", "get_head_stats", "get_layer_detail",
    "get_model", "get_thumbnail_tiles", "get_trace", "head_picker", "layer_head_controls", "open_view",
    "query_token_strip", "selection", "set_layer_head", "view_tabs",
]

DEFAULT_MAX_TOKENS = 512
MAX_TEXT_CHARS = 8_000          # longer texts (typed or from a link) are cut: 512 tokens need far fewer characters
URL_TEXT_LIMIT = 16_000         # URL-encoded characters of text we still put into the share link
TEMPERATURE_MIN, TEMPERATURE_MAX, TEMPERATURE_DEFAULT = T_MIN, T_MAX, 1.0  # the softmax page's log range
EXAMPLES_FILE = Path(__file__).resolve().parent.parent / "assets" / "examples.json"

# canonical session-state keys; they double as the query-param names
K_TEXT, K_LAYER, K_HEAD, K_QUERY, K_TEMP, K_SINK = "text", "layer", "head", "q", "temp", "sink"
K_VIEW = "view"     # the open tab of a page that uses view_tabs()
URL_KEYS = (K_TEXT, K_LAYER, K_HEAD, K_QUERY, K_TEMP, K_SINK, K_VIEW)
_NOTES = "_url_notes"
_CONTROLS_SLOT = "_sidebar_controls"    # this run's sidebar container for the layer/head sliders (shell_sidebar)
TEXT_AREA_HEIGHT = 110                  # px: short enough that layer, head and the sink switch fit in 768 px


# ---------------------------------------------------------------------------------------------------------- caches
@st.cache_resource(show_spinner="Loading SmolLM2-135M (first start only, about 3 seconds)…")
def _load_model():
    return load_model()


def get_model():
    """The shared, read-only language model (loaded once per server process). If it cannot be loaded, the app
    shows the loader's message, which says what to do, and stops (nothing is cached, so a fix is picked up)."""
    try:
        return _load_model()
    except ModelLoadError as exc:
        st.error(f"**The language model could not be loaded.** {exc}", icon=":material/error:")
        st.stop()


@st.cache_resource(max_entries=8, show_spinner="Running the model on your text…")
def get_trace(text: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> ForwardTrace:
    """The forward trace for a text. cache_resource, not cache_data: no pickle copy of ~140 MB per rerun."""
    return get_model().run(text, max_tokens=max_tokens)


@st.cache_resource(max_entries=6, show_spinner=False)
def get_layer_detail(text: str, max_tokens: int, layer: int) -> LayerDetail:
    """q/k/v (before and after RoPE), scores before the mask, mask and pattern of one layer (recomputed, cached)."""
    return get_model().layer_detail(get_trace(text, max_tokens), layer)


@st.cache_data(max_entries=32, show_spinner="Scoring every head…")
def get_head_stats(text: str, max_tokens: int, hide_sink: bool) -> dict[str, np.ndarray]:
    """model.head_stats.head_stats for the trace of (text, max_tokens): {statistic: [n_layers, n_heads]}."""
    trace = get_trace(text, max_tokens)
    return head_stats(trace.attention, trace.token_ids, hide_sink=hide_sink)


@st.cache_data(max_entries=8, show_spinner="Drawing every head…")
def get_thumbnail_tiles(text: str, max_tokens: int, hide_sink: bool) -> np.ndarray:
    """viz.attention.thumbnail_tiles of the trace (sink hidden or not): [n_layers, n_heads, n, n]."""
    trace = get_trace(text, max_tokens)
    return thumbnail_tiles(trace.attention, per_layer=(lambda a: apply_sink(a, True)) if hide_sink else None)


@lru_cache(maxsize=1)
def load_examples() -> tuple[dict, ...]:
    """Example texts from assets/examples.json: ({"title", "text", "note"}, ...)."""
    try:
        items = json.loads(EXAMPLES_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ({"title": "Plain English", "text": "The cat sat on the mat because it was tired.", "note": ""},)
    return tuple({"title": str(e["title"]), "text": str(e["text"]), "note": str(e.get("note", ""))} for e in items)


# ------------------------------------------------------------------------------------------------------- selection
@dataclass(frozen=True)
class Selection:
    """What the user is looking at, clamped to the current model and trace."""

    layer: int
    head: int
    query: int          # query token index into the trace (default: the last token)
    hide_sink: bool     # hide key 0 and renormalize every row (apply_sink)
    temperature: float


def _clamp(value, lo, hi):
    return max(lo, min(hi, value))


def _trace_or_error(text) -> tuple[ForwardTrace | None, str | None]:
    """(trace, None), or (None, why) for empty or unreadable text. Shows nothing."""
    if not isinstance(text, str) or not text.strip():
        return None, "The text is empty. Type some text in the sidebar, or load an example, to run the model."
    try:
        return get_trace(text, DEFAULT_MAX_TOKENS), None
    except ValueError as err:
        return None, str(err)


def current_text() -> str:
    text = st.session_state.get(K_TEXT, "")
    return text if isinstance(text, str) else ""


def current_trace() -> ForwardTrace | None:
    """The trace of the sidebar text; None after showing a note when the text is empty or unreadable."""
    trace, why = _trace_or_error(current_text())
    if trace is None:
        st.info(why, icon=":material/edit_note:")
    return trace


def selection(trace: ForwardTrace | None = None) -> Selection:
    """The current Selection, clamped to the model's shape and (when given or computable) the trace's length."""
    ss = st.session_state
    cfg = get_model().config
    layer = _clamp(int(ss.get(K_LAYER, 0)), 0, cfg.n_layers - 1)
    head = _clamp(int(ss.get(K_HEAD, 0)), 0, cfg.n_heads - 1)
    temp = float(ss.get(K_TEMP, TEMPERATURE_DEFAULT))
    temp = _clamp(temp, TEMPERATURE_MIN, TEMPERATURE_MAX) if math.isfinite(temp) else TEMPERATURE_DEFAULT
    if trace is None:
        trace, _ = _trace_or_error(current_text())
    n_tokens = trace.n_tokens if trace is not None else 1
    query = ss.get(K_QUERY)
    if query is None:
        query = n_tokens - 1
    elif trace is not None and not 0 <= int(query) < n_tokens:
        if ss.pop("_q_from_url", False):
            st.warning(f"The link's query token q={query} is outside this text's {n_tokens} tokens; "
                       f"showing token {_clamp(int(query), 0, n_tokens - 1)}.", icon=":material/link_off:")
        query = _clamp(int(query), 0, n_tokens - 1)
        ss[K_QUERY] = query
    if K_LAYER in ss or K_HEAD in ss:
        ss[K_LAYER], ss[K_HEAD] = layer, head
    if K_TEMP in ss:
        ss[K_TEMP] = temp
    return Selection(layer=layer, head=head, query=int(query), hide_sink=bool(ss.get(K_SINK, False)),
                     temperature=temp)


def set_layer_head(layer: int, head: int) -> None:
    """Select a head (e.g. from a click on an overview figure); clamped by the next selection()."""
    st.session_state[K_LAYER], st.session_state[K_HEAD] = int(layer), int(head)


# ------------------------------------------------------------------------------------------------ bound widgets
def _copy(widget_key: str, state_key: str) -> None:
    """on_change callback: a widget's new value becomes the canonical state (None = no choice: keep the old)."""
    value = st.session_state.get(widget_key)
    if value is not None:
        st.session_state[state_key] = value
        if state_key == K_QUERY:
            st.session_state.pop("_q_from_url", None)


def _bound(widget_key: str, state_key: str, value) -> dict:
    """Preset a widget's value from the canonical state; returns the key/on_change kwargs for the widget."""
    st.session_state[widget_key] = value
    return dict(key=widget_key, on_change=_copy, args=(widget_key, state_key))


def _controls_slot():
    """Where the sidebar's layer/head sliders go: the slot shell_sidebar made this run (right under the text,
    above the sink switch, so they are visible without scrolling), else the end of the sidebar."""
    slot = st.session_state.get(_CONTROLS_SLOT)
    return slot if slot is not None else st.sidebar


def layer_head_controls(where=None) -> tuple[int, int]:
    """Layer and head sliders (ranges from the model's config). where: the sidebar's slot for them (default, see
    shell_sidebar) or a container."""
    where = _controls_slot() if where is None else where
    cfg = get_model().config
    sel = selection()
    st.session_state.setdefault(K_LAYER, sel.layer)
    st.session_state.setdefault(K_HEAD, sel.head)
    if cfg.n_layers > 1:
        where.slider("Layer", 0, cfg.n_layers - 1, help=f"Which of the {cfg.n_layers} transformer blocks (0 = first)",
                     **_bound("w_layer", K_LAYER, sel.layer))
    if cfg.n_heads > 1:
        where.slider("Head", 0, cfg.n_heads - 1,
                     help=f"Which of the layer's {cfg.n_heads} query heads (head h reads KV head "
                          f"h // {cfg.group_size})", **_bound("w_head", K_HEAD, sel.head))
    return sel.layer, sel.head


def head_picker(where=None, key: str = "w_head_pick", label: str = "Open head") -> int:
    """A row of head buttons (segmented control) bound to the selected head."""
    where = st if where is None else where
    cfg = get_model().config
    sel = selection()
    st.session_state.setdefault(K_HEAD, sel.head)
    where.segmented_control(label, options=list(range(cfg.n_heads)), format_func=lambda h: f"head {h}",
                            required=True, **_bound(key, K_HEAD, sel.head))
    return sel.head


def query_token_strip(trace: ForwardTrace, where=None, label: str = "Query token (click a token)") -> int:
    """The text as tokens, one button each; the clicked token becomes the query. Scrolls for long texts."""
    where = st if where is None else where
    sel = selection(trace)
    tokens = trace.tokens
    long_text = trace.n_tokens > 60
    box = where.container(height=170 if long_text else "content", border=long_text)
    box.pills(label, options=list(range(trace.n_tokens)), format_func=lambda i: escape_markdown(tokens[i]),
              required=True, **_bound("w_q", K_QUERY, sel.query))
    if long_text:          # the chosen token may be scrolled out of view: a slider over positions as well
        where.select_slider("Query position", options=list(range(trace.n_tokens)),
                            format_func=lambda i: token_label(tokens, i, 20),
                            help="Drag to move the query token along the text",
                            **_bound("w_q_pos", K_QUERY, sel.query))
    return sel.query


def _view_changed(widget_key: str, labels: dict[str, str]) -> None:
    label = st.session_state.get(widget_key)
    slug = next((s for s, lab in labels.items() if lab == label), None)
    if slug is not None:
        st.session_state[K_VIEW] = slug


def view_tabs(labels: dict[str, str], key: str = "w_view") -> tuple[str, list]:
    """st.tabs that remembers the open tab in the state and the URL (?view=<slug>); only the open tab runs.

    labels: {slug: tab label}. Returns (open slug, tab containers in the order of labels).
    """
    ss = st.session_state
    slug = ss.get(K_VIEW)
    if slug not in labels:
        if slug is not None and ss.pop("_view_from_url", False):
            st.warning(f"view={_shown(slug)} is not a view of this page: showing {list(labels.values())[0]}.",
                       icon=":material/link_off:")
        slug = next(iter(labels))
    ss.pop("_view_from_url", None)
    tabs = st.tabs(list(labels.values()), key=key, default=labels[slug], on_change=_view_changed,
                   args=(key, labels))
    open_slug = next((s for s, tab in zip(labels, tabs, strict=True) if tab.open), slug)
    ss[K_VIEW] = open_slug
    return open_slug, list(tabs)


def open_view(slug: str, key: str = "w_view", labels: dict[str, str] | None = None) -> None:
    """Switch a page's tabs to slug (call from a callback, e.g. 'open this head')."""
    st.session_state[K_VIEW] = slug
    if labels is not None and slug in labels:
        st.session_state[key] = labels[slug]


# ----------------------------------------------------------------------------------------------------- the shell
def _load_example() -> None:
    choice = st.session_state.get("w_example")
    examples = load_examples()
    if choice is not None and 0 <= choice < len(examples):
        st.session_state[K_TEXT] = examples[choice]["text"]
        st.session_state[K_QUERY] = None
    st.session_state["w_example"] = None


def _text_changed() -> None:
    st.session_state[K_QUERY] = None       # new text: the query token goes back to the last token


def shell_sidebar() -> None:
    """The shared sidebar, on every page. Ordered for a 1024x768 projector: what a teacher changes most is
    visible without scrolling (under the page list): example picker, text (+ token count), the page's layer/head
    sliders (a slot filled by layer_head_controls), the attention-sink switch; notes and the model last."""
    lm = get_model()
    ss = st.session_state
    examples = load_examples()
    ss.setdefault(K_TEXT, examples[0]["text"])
    ss.setdefault(K_SINK, False)
    with st.sidebar:
        st.selectbox("Example texts", options=list(range(len(examples))), index=None,
                     format_func=lambda i: examples[i]["title"], placeholder="Load an example text…",
                     key="w_example", on_change=_load_example, label_visibility="collapsed")
        st.text_area("Text", key=K_TEXT, height=TEXT_AREA_HEIGHT, max_chars=MAX_TEXT_CHARS,
                     on_change=_text_changed,
                     help="The model reads this text; every page shows what it did with it. Ctrl+Enter to apply.")
        text = current_text()
        trace, _ = _trace_or_error(text)
        if trace is None:
            st.caption(f"0 / {DEFAULT_MAX_TOKENS} tokens")
        elif trace.truncated:       # a compact caption, not a warning box: the sliders below stay in view
            st.caption(f":orange[:material/content_cut: **{trace.n_tokens} / {DEFAULT_MAX_TOKENS} tokens**: only "
                       f"the first {DEFAULT_MAX_TOKENS} of {trace.n_tokens_total:,} tokens are used]")
        else:
            st.caption(f"{trace.n_tokens} / {DEFAULT_MAX_TOKENS} tokens")
        ss[_CONTROLS_SLOT] = st.container(gap="small")       # layer_head_controls() fills it, if the page asks
        st.toggle("Hide attention sink (token 0)", key=K_SINK,
                  help="From layer 12 on, most heads put 50-84% of their attention on the first token (position "
                       "0). This hides that column and rescales every row to sum to 1, so the rest becomes "
                       "visible.")
        note = next((e["note"] for e in examples if e["text"] == text and e["note"]), "")
        if note:
            st.caption(f":material/lightbulb: {note}")
        if len(quote(text)) > URL_TEXT_LIMIT:
            st.caption("This text is too long for the share link: the URL keeps the other settings only.")
        st.caption(f"Model: **{escape_markdown(lm.name)}** · {lm.config.describe()}")


# ------------------------------------------------------------------------------------------------- query params
def parse_int_param(name: str, raw: str, lo: int, hi: int) -> tuple[int | None, str | None]:
    """(value, note): a whole number clamped to [lo, hi]; (None, note) when it is not a whole number."""
    raw = raw.strip()
    if not re.fullmatch(r"[+-]?\d{1,12}", raw):
        return None, f"{name}={_shown(raw)} is not a whole number: ignored."
    value = int(raw)
    if not lo <= value <= hi:
        clamped = _clamp(value, lo, hi)
        return clamped, f"{name}={value} is outside {lo}–{hi}: using {clamped}."
    return value, None


def parse_float_param(name: str, raw: str, lo: float, hi: float) -> tuple[float | None, str | None]:
    """(value, note): a finite number clamped to [lo, hi]; (None, note) when not a finite number."""
    try:
        value = float(raw.strip()) if len(raw) <= 32 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        return None, f"{name}={_shown(raw)} is not a finite number: ignored."
    if not lo <= value <= hi:
        clamped = _clamp(value, lo, hi)
        return clamped, f"{name}={value:g} is outside {lo:g}–{hi:g}: using {clamped:g}."
    return value, None


def parse_bool_param(name: str, raw: str) -> tuple[bool | None, str | None]:
    word = raw.strip().lower()
    if word in ("1", "true", "on", "yes"):
        return True, None
    if word in ("0", "false", "off", "no"):
        return False, None
    return None, f"{name}={_shown(raw)} is not on/off (1 or 0): ignored."


def _shown(raw: str) -> str:
    """A short, literal rendering of a query-param value for a note."""
    return escape_markdown(repr(raw[:24] + ("…" if len(raw) > 24 else "")))


def read_url_params(params: dict[str, str], n_layers: int, n_heads: int) -> tuple[dict, list[str]]:
    """Validate query params (pure): ({canonical key: value}, [notes for the user])."""
    values, notes = {}, []
    if K_TEXT in params:
        text = params[K_TEXT]
        if len(text) > MAX_TEXT_CHARS:
            notes.append(f"The link's text has {len(text):,} characters: cut to the first {MAX_TEXT_CHARS:,}.")
            text = text[:MAX_TEXT_CHARS]
        values[K_TEXT] = text
    for key, hi in ((K_LAYER, n_layers - 1), (K_HEAD, n_heads - 1), (K_QUERY, 10**9)):
        if key in params:
            value, note = parse_int_param(key, params[key], 0, hi)
            if value is not None:
                values[key] = value
            if note:
                notes.append(note)
    if K_TEMP in params:
        value, note = parse_float_param(K_TEMP, params[K_TEMP], TEMPERATURE_MIN, TEMPERATURE_MAX)
        if value is not None:
            values[K_TEMP] = value
        if note:
            notes.append(note)
    if K_VIEW in params:
        if re.fullmatch(r"[a-z0-9_-]{1,32}", params[K_VIEW]):
            values[K_VIEW] = params[K_VIEW]
        else:
            notes.append(f"view={_shown(params[K_VIEW])} is not a view name: ignored.")
    if K_SINK in params:
        value, note = parse_bool_param(K_SINK, params[K_SINK])
        if value is not None:
            values[K_SINK] = value
        if note:
            notes.append(note)
    return values, notes


def init_from_url(pages=(), current=None) -> None:
    """Once per session (first run): URL query params -> state, with notes for bad values; ?page=<name>.

    pages: {name: st.Page} (name = the page's slug, e.g. "attention" for the default page served at "/"), or
    st.Page objects (matched on url_path)."""
    ss = st.session_state
    if ss.get("_url_read"):
        return
    ss["_url_read"] = True
    cfg = get_model().config
    params = {k: st.query_params[k] for k in st.query_params}
    values, notes = read_url_params(params, cfg.n_layers, cfg.n_heads)
    ss.update(values)
    if K_QUERY in values:
        ss["_q_from_url"] = True
    if K_VIEW in values:
        ss["_view_from_url"] = True
    ss[_NOTES] = notes
    wanted = params.get("page")
    if wanted is not None:
        by_name = dict(pages) if isinstance(pages, dict) else {p.url_path: p for p in pages}
        target = by_name.get(wanted.strip().strip("/"))
        if target is None:
            notes.append(f"page={_shown(wanted)} is not a page of this app: showing "
                         f"{current.title if current is not None else 'the first page'}.")
        elif current is not None and target.url_path != current.url_path:
            st.switch_page(target)


def show_url_notes() -> None:
    """The notes about query params that were clamped or ignored, until the user dismisses them."""
    selection()             # clamps a query token from the link to the text's length (with its own note)
    notes = st.session_state.get(_NOTES)
    if not notes:
        return
    with st.container(border=False):
        st.warning("Some settings in the link were fixed:\n\n" + "\n".join(f"- {n}" for n in notes),
                   icon=":material/link:")
        st.button("Dismiss", key="w_dismiss_url_notes", on_click=lambda: st.session_state.pop(_NOTES, None))


def url_params() -> dict[str, str]:
    """The canonical state as query params (what a share link carries)."""
    ss = st.session_state
    out: dict[str, str] = {}
    text = current_text()
    if text and len(quote(text)) <= URL_TEXT_LIMIT:
        out[K_TEXT] = text
    for key in (K_LAYER, K_HEAD, K_QUERY):
        if ss.get(key) is not None:
            out[key] = str(int(ss[key]))
    if ss.get(K_TEMP) is not None:
        out[K_TEMP] = f"{float(ss[K_TEMP]):g}"
    if ss.get(K_VIEW):
        out[K_VIEW] = str(ss[K_VIEW])
    out[K_SINK] = "1" if ss.get(K_SINK) else "0"
    return out


def write_url() -> None:
    """Canonical state -> URL query params (only our keys; other pages' params are left alone)."""
    wanted = url_params()
    for key in URL_KEYS:
        if key in wanted:
            if st.query_params.get(key) != wanted[key]:
                st.query_params[key] = wanted[key]
        elif key in st.query_params:
            del st.query_params[key]
    if "page" in st.query_params:
        del st.query_params["page"]
