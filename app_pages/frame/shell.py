"""The frame around every page: reading the share link, clamping the state, the shared controls (sidebar, or one
row on the page in presenter mode), the page header with the share link, and writing the link back.

router.py calls start(page) before the page runs and finish() after it. A page then reads its settings from
st.session_state (already valid: clamped once per run here) and draws its own controls and figures.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from urllib.parse import urlencode

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app_core import families
from app_core import schemas as S
from app_core.examples import default_text, note_for, reads_chinese
from app_core.link import Context, Note, Schema, clamp, decode, encode
from app_pages.classroom import panel as class_panel
from app_pages.frame import controls
from app_pages.frame import lesson_panel as lesson_panel
from app_pages.frame import session as caches
from app_pages.frame.i18n import LANG_KEY, LANGUAGES, _, language, ngettext
from app_pages.frame.presenter_keys import HELD, Stepped, hold_applied, presenter_keys
from app_pages.frame.widgets import ICON_ONLY_CSS, escape_markdown
from model import ForwardTrace

NOTES = "_url_notes"
URL_READ = "_url_read"
REOPEN = "_reopen_link"     # True: the browser went Back / Forward; start() reads the link as on a first run
RUN = "_run"                # this run's page name, schema and context (set by start)
MODEL_SEEN = "_model_seen"  # the identity of the model the previous run used
TEXT_HEIGHT = 110           # px: with the compact page list (CSS, eleven pages) layer, head, sink switch fit 768 px
CSS = """<style>
[data-testid="stHeader"] { background: transparent; }
[data-testid="stMainBlockContainer"] { padding-top: 3.6rem; padding-bottom: 2rem; }
@media (max-width: 1200px) {
  [data-testid="stMainBlockContainer"] { padding-left: 1.2rem; padding-right: 1.2rem; }
}
.st-key-keyboard_shortcuts { display: none; }
[data-testid="stSidebarHeader"] { height: 2.25rem; padding-top: 0.5rem; padding-bottom: 0; }
[data-testid="stSidebarNavLink"] { height: 1.25rem; min-height: 1.25rem; margin-top: 0; margin-bottom: 0; }
[data-testid="stSidebarUserContent"] { padding-top: 0.75rem; }
h1, h2, h3 { scroll-margin-top: 3rem; }
</style>"""
PRESENTER_CSS = """<style>
[data-testid="stSidebar"], [data-testid="stExpandSidebarButton"]
  { display: none; }
</style>"""


# ------------------------------------------------------------------------------------------------------- state
def presenter_mode() -> bool:
    """Presenter mode, from the state (or, on a session's first run, from the link)."""
    ss = st.session_state
    if S.PRESENT.key in ss:
        return bool(ss[S.PRESENT.key])
    raw = st.query_params.get(S.PRESENT.name)
    try:
        return raw is not None and bool(S.PRESENT.parse(raw))
    except ValueError:
        return False


def current_text() -> str:
    text = st.session_state.get(S.TEXT.key, "")
    return text if isinstance(text, str) else ""


def trace_or_reason(text: str) -> tuple[ForwardTrace | None, str | None]:
    """(trace, None), or (None, why) for empty or unreadable text. Shows a spinner while the model runs."""
    if not text.strip():
        return None, _("The text is empty. Type some text, or load an example, to run the model.")
    try:
        ws = caches.workspace()
        found = ws.cached_trace(text)
        if found is not None:
            return found, None
        with st.spinner(_("Running the model on your text…")):
            return ws.trace(text), None
    except ValueError as err:
        return None, str(err)


def current_trace() -> ForwardTrace | None:
    """The trace of the current text; None after showing why (empty or unreadable text)."""
    trace, why = trace_or_reason(current_text())
    if trace is None:
        st.info(why, icon=":material/edit_note:")
    return trace


def token_count(text: str) -> int:
    """How many tokens the session's model reads in text (tokenizing is cheap: no model run)."""
    return _token_count_of(caches.model_id(), text) if text.strip() else 0


@functools.lru_cache(maxsize=16)
def _token_count_of(model: tuple, text: str) -> int:
    return len(caches.get_model().encode(text))


def _context(schema: Schema, with_text: bool = True) -> Context:
    """The bounds of this run: the model's shape and, when the page shows the text, its token count (at most the
    tokens a trace keeps)."""
    cfg = caches.get_model().config
    n_tokens = None
    if with_text and _applies(schema, S.TEXT.key):
        n_tokens = min(token_count(current_text()), caches.token_limit()) or None
    return Context(n_layers=cfg.n_layers, n_heads=cfg.n_heads, head_dim=cfg.head_dim, vocab_size=cfg.vocab_size,
                   n_tokens=n_tokens)


def _query() -> dict[str, list[str]]:
    return {key: st.query_params.get_all(key) for key in st.query_params}


def _read_link(schema: Schema) -> None:
    """On a session's first run, and on Back / Forward: the link's settings for this page, with notes for anything
    fixed or ignored."""
    ss = st.session_state
    values, notes = decode(_query(), schema, _context(schema, with_text=False))
    ss.update(values)
    fixed, more = clamp(values, schema, _context(schema))      # now the text and view are known: the query token
    ss.update(fixed)
    ss[NOTES] = list(dict.fromkeys(ss.get(NOTES, []) + notes + more))


def reopen_link_on_history_navigation() -> None:
    """The browser's Back / Forward to one of the app's addresses opens its link as a fresh session would: every
    setting from the link, one it leaves out at its default (Streamlit's own rule for query-bound widgets), the
    lesson step it names or none. First in the router's run, before anything reads a setting (the language, the
    presenter mode). A class and the session's models stay as they are.

    Streamlit's frontend pushes an address onto the history for every change of the link, and one more, with no
    query, when a page is picked (before that page's run writes its link): Back to an address with no query keeps
    the session's settings, so one Back after picking a page does not reset the view."""
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None or not ctx.is_history_navigation or not st.session_state.get(URL_READ) or not st.query_params:
        return
    ss = st.session_state
    for key in S.SETTING_KEYS:
        ss.pop(key, None)
    for key in (lesson_panel.ACTIVE, lesson_panel.GOTO, HELD):
        ss.pop(key, None)
    ss[REOPEN] = True


def link_note(note: str) -> None:
    """A note about the link for the user (shown with the notes of start())."""
    st.session_state.setdefault(NOTES, []).append(note)


def start(page: str, before_controls: Callable[[], None] | None = None) -> None:
    """Before the page runs: read the link (first run, Back / Forward), fill defaults, clamp, call before_controls
    (the page's slow work asked for from the settled settings), draw the shared controls."""
    ss = st.session_state
    schema = S.schema(page)
    hold_applied()                                    # the presenter keys' last values, against a stale request
    class_panel.settle(page, URL_READ, link_note)     # a class: follow the teacher's view (read as a fresh link)
    ss.setdefault(S.TEXT.key, default_text())
    opened = not ss.get(URL_READ) or bool(ss.get(REOPEN))
    for said in lesson_panel.settle(page, first_run=opened):   # a lesson's step: page and settings
        link_note(said)
    if opened:
        ss[URL_READ] = True
        ss.pop(REOPEN, None)
        _read_link(schema)
    ctx = _context(schema)
    for param in schema.params:                             # a setting never set yet starts at its default
        if param.key not in ss and param.default_for(ctx) is not None:
            ss[param.key] = param.default_for(ctx)
    fixed, said = clamp(ss, schema, ctx, moving_only=True)  # e.g. the query token of a text that got shorter
    ss.update(fixed)
    model = caches.model_id()
    if ss.get(MODEL_SEEN, model) != model and said:       # another model: say which settings it moved
        ss[caches.MODEL_NOTE] = " ".join(_note_text(n) for n in said)
    ss[MODEL_SEEN] = model
    ss[RUN] = (page, schema, ctx)
    if class_panel.teaching():
        _link()            # the class's new view published now: other replicas prepare it while this run goes on
    if before_controls is not None:
        before_controls()
    st.sidebar.html(CSS + f"<style>{ICON_ONLY_CSS}</style>" + (PRESENTER_CSS if presenter_mode() else ""))  # no gap
    _shared_controls(schema)
    lesson_panel.draw(page)
    _family_guard(page, schema)


def finish() -> None:
    """After the page ran: the URL becomes this page's share link (only its settings that apply, non-default).
    Sent by every run, even one whose request carried that link: a request carries the address the browser had
    when it sent it, and the link of a run still on its way may change the address after (keys 20 ms apart: head 3,
    4, 3 again; the last run, skipping its link, left head=4 under a head-3 heatmap). The browser adds no history
    entry for the address it shows."""
    st.query_params.from_dict(_link())


def _link() -> dict[str, str]:
    """This run's link (its settings that apply, non-default); a teacher's view is published with it, once per view
    (class_panel.link_params): at the start of the run, so that followers on other replicas have it prepared by the
    time the teacher's screen shows it, and again at its end if the page changed a setting."""
    page, schema, ctx = st.session_state[RUN]
    wanted = {**encode(st.session_state, schema, ctx), **lesson_panel.link_params(page)}
    wanted.update(class_panel.link_params(page, wanted))
    return wanted


def stop() -> None:
    """End the page's run here, its link up to date: once st.stop() is asked for, Streamlit sends nothing more (a
    link written after it, by the router's finish, never reaches the browser)."""
    finish()
    st.stop()


def share_link() -> tuple[str, bool]:
    """(the link to this view, whether the text had to be left out of it because it is too long)."""
    page, schema, ctx = st.session_state[RUN]
    wanted = {**encode(st.session_state, schema, ctx), **lesson_panel.link_params(page)}
    dropped = _applies(schema, S.TEXT.key) and S.TEXT.name not in wanted and current_text() != S.TEXT.default
    base = st.context.url or ("/" if page == "attention" else f"/{page}")
    return base + (f"?{urlencode(wanted)}" if wanted else ""), dropped


# ---------------------------------------------------------------------------------------------------- drawing
def _open_view(page: str, key: str | None, view: str | None) -> None:
    """A family note's link: this page's or another page's view."""
    from app_pages import navigation

    if key is not None:
        st.session_state[key] = view
    if page == st.session_state[RUN][0]:
        st.rerun()
    navigation.switch_to(page)


def _family_guard(page: str, schema: Schema) -> None:
    """A view the session's model cannot show (app_core.families): the page's title, one note on what this family
    is and what the view needs, links to what it can show instead; the page's body does not run."""
    from app_pages import navigation

    lm = caches.get_model()
    family, views = families.family_of(lm), families.SUPPORT.get(page)
    param = schema.by_name(views.param) if views is not None and views.param else None
    view = (st.session_state.get(param.key) or param.default) if param is not None else None
    if families.supports(page, view, family):
        return
    header(_(navigation.BY_NAME[page].title))
    st.info(" ".join([_(families.WHAT_IT_IS[family]).format(model=escape_markdown(lm.name)),
                      _(families.NEEDS[families.needs(page, view)])]), icon=":material/info:")
    st.markdown(_("What {model} can show instead:").format(model=escape_markdown(lm.name)))
    with st.container(horizontal=True, gap="small", key="family_links"):
        for other, other_view in families.instead(family, page):
            other_schema = S.schema(other)
            other_views = families.SUPPORT[other]
            key = other_schema.by_name(other_views.param).key if other_views.param else None
            label = _(navigation.BY_NAME[other].title) + (f" · {_(S.VIEW_LABELS[other][other_view])}"
                                                          if other_view else "")
            if st.button(label, key=f"w_family_{other}_{other_view}", icon=":material/arrow_forward:"):
                _open_view(other, key, other_view)
    stop()


def _applies(schema: Schema, key: str) -> bool:
    """Whether the setting with this state key is one of the page's and applies to the open view."""
    return any(p.key == key for p in schema.active(st.session_state))


def _token_count(where, page: str) -> None:
    if lesson_panel.holds_view(page):                       # predict first: the count may be the answer
        return
    n, limit = token_count(current_text()), caches.token_limit()
    if page in S.WHOLE_TEXT_PAGES:
        where.caption(ngettext("{n} token", "{n} tokens", n).format(n=f"{n:,}"))
    elif n > limit:
        cut = _("only the first {limit} of {n} tokens are used").format(limit=limit, n=f"{n:,}")
        where.caption(f":orange[:material/content_cut: {cut}]")
    else:
        where.caption(_("{n} / {limit} tokens").format(n=n, limit=limit))


def model_shape(cfg) -> str:
    """The model's shape in one line (ModelConfig.describe in the reader's language)."""
    return _("{architecture} · {layers} layers · {heads} heads ({kv} KV) · d_model {d_model} · d_ff {d_ff} · vocab "
             "{vocab}").format(architecture=cfg.architecture, layers=cfg.n_layers, heads=cfg.n_heads,
                               kv=cfg.n_kv_heads, d_model=cfg.d_model, d_ff=cfg.d_ff, vocab=f"{cfg.vocab_size:,}")


def has_han(text: str) -> bool:
    """Whether text has Chinese characters (CJK unified ideographs)."""
    return any("\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf" for ch in text)


@functools.lru_cache(maxsize=8)
def reads_han_as_bytes(model: tuple) -> bool:
    """Whether the session's model (its identity) has no Chinese in its vocabulary: the rule that also decides which
    example texts it is offered (app_core.examples.reads_chinese)."""
    return not reads_chinese(caches.get_model().tokenizer)


def _byte_note(where) -> None:
    """One line when the text is Chinese and the model reads it byte by byte."""
    if has_han(current_text()) and reads_han_as_bytes(caches.model_id()):
        where.caption(":material/translate: " + _("This model reads many Chinese characters as 2 or 3 byte tokens "
                                                   "(labelled 我¹⁄₂, 我²⁄₂). For Chinese text pick a Chinese-capable "
                                                   "model such as Qwen in the model picker."))


def _shared_controls(schema: Schema) -> None:
    """Text, layer, head and sink switch, each only where it applies: in the sidebar, or in presenter mode in one
    compact row at the top of the page (with the share link and the switch back)."""
    cfg = caches.get_model().config
    active = {p.key for p in schema.active(st.session_state)}
    has = {key: key in active for key in S.SHARED_KEYS}
    leads = not class_panel.following()          # a following student's view is the teacher's
    if presenter_mode():
        row = st.container(horizontal=True, vertical_alignment="bottom", gap="small", key="presenter_row")
        if has[S.TEXT.key]:
            with row.popover(_("Text"), icon=":material/edit_note:", help=_("Change the text the model reads")):
                if leads:
                    controls.example_picker(st)
                controls.text_box(st, height=200)
                _token_count(st, schema.page)
                _byte_note(st)
        if has[S.LAYER.key]:
            controls.layer_slider(row, cfg, width=160)
        if has[S.HEAD.key]:
            controls.head_slider(row, cfg, width=110)
        if has[S.SINK.key]:
            controls.sink_toggle(row, label=_("Hide sink"))
        if leads:
            with row.popover(_("Model"), icon=":material/memory:", help=_("Pick the model the pages show")):
                controls.model_picker(st)
            _share_popover(row)
            class_panel.class_button(row)
        _language_switch(row, short=True)
        row.toggle(_("Presenter"), key=S.PRESENT.key, help=_("Presenter mode: switch off to get the sidebar back"),
                   **controls.PERSIST)
    else:
        lm = caches.get_model()
        with st.sidebar:
            if has[S.TEXT.key]:
                if leads:
                    controls.example_picker(st)
                controls.text_box(st, height=TEXT_HEIGHT)
                _token_count(st, schema.page)
                _byte_note(st)
            if has[S.LAYER.key]:
                controls.layer_slider(st, cfg)
            if has[S.HEAD.key]:
                controls.head_slider(st, cfg)
            if has[S.SINK.key]:
                controls.sink_toggle(st)
            note = note_for(current_text(), language()) if has[S.TEXT.key] else ""
            if note:
                st.caption(f":material/lightbulb: {note}")
            if leads:
                controls.model_picker(st)
            st.caption(_("Model: **{name}** · {shape}").format(name=escape_markdown(lm.name),
                                                                shape=model_shape(lm.config)))
    if leads:
        _keyboard_shortcuts(cfg, has[S.LAYER.key] or has[S.HEAD.key], schema.page)


def _keyboard_shortcuts(cfg, layer_and_head: bool, page: str) -> None:
    """The arrow keys step the head (left / right) and the layer (up / down) where they are shown, and in presenter
    mode PageUp / PageDown a lesson's step (what presentation clickers send), every press applied
    (_presenter_keys)."""
    ss = st.session_state
    stepped = [Stepped(key, int(ss.get(key) or 0), 0, top, keys, functools.partial(controls.set_within, key, 0, top))
               for key, top, keys in ((S.LAYER.key, cfg.n_layers - 1, {"ArrowUp": 1, "ArrowDown": -1}),
                                      (S.HEAD.key, cfg.n_heads - 1, {"ArrowRight": 1, "ArrowLeft": -1}))
               if layer_and_head]
    lesson_step = lesson_panel.stepped(page) if presenter_mode() else None
    stepped += [lesson_step] if lesson_step is not None else []
    if stepped:
        with st.sidebar.container(key="keyboard_shortcuts"):    # mounted (so the keys work) but never shown
            presenter_keys(*stepped)


def _share_popover(where) -> None:
    with where.popover(_("Share link"), icon=":material/share:",
                       help=_("A link that opens exactly this view: page, tab, text and every setting")):
        link, dropped = share_link()
        st.code(link, language=None, wrap_lines=True)
        st.caption(_("Copy it with the icon at the right of the box. **The text is too long for a link**: the link "
                     "keeps every other setting, and opens with the default text.") if dropped
                   else _("Copy it with the icon at the right of the box."))
        page, schema, ctx = st.session_state[RUN]
        lesson_panel.snippet(page, encode(st.session_state, schema, ctx))


def _language_switch(where, short: bool = False) -> None:
    """中文 / English: one button naming the other language (short: EN, for the presenter row); the choice is kept in
    the state (and so in the link). No icon: the header's title keeps its room at 1024 px."""
    other = "en" if language() == "zh" else "zh"
    label = "EN" if short and other == "en" else LANGUAGES[other]
    where.button(label, key="w_lang", on_click=controls.set_setting,
                 args=(LANG_KEY, other), help=_("Show the interface in English") if other == "en"
                 else _("Show the interface in Chinese"))


def header(title: str, caption: str = "") -> None:
    """The page's compact header: title, one line of explanation, the share link and the presenter switch. In
    presenter mode the shared-controls row holds the share link and the switch, and the header is only the title.
    On a lesson's predict step not answered yet, the page's body stops here (the lesson frame says why)."""
    if not presenter_mode():
        _header_row(title, caption)
    _link_notes()
    if lesson_panel.holds_view(st.session_state[RUN][0]):   # a predict step: the body waits for an answer
        lesson_panel.held_notice()
        stop()


def _header_row(title: str, caption: str) -> None:
    row = st.container(horizontal=True, vertical_alignment="center", gap="small", key="page_header", wrap=False)
    row.markdown(f"### {title}", width="stretch")
    with row.container(horizontal=True, horizontal_alignment="right", vertical_alignment="center", gap="small",
                       width="content", wrap=False):
        _language_switch(st)
        if not class_panel.following():
            _share_popover(st)
        st.toggle(_("Presenter"), key=S.PRESENT.key, width="content",
                  help=_("For a projector: hides the sidebar, puts the controls in one row on the page, enlarges "
                         "chart text. Arrow keys: ← → head, ↑ ↓ layer."), **controls.PERSIST)
    if caption:
        st.caption(caption)


def _note_text(note: str) -> str:
    """A link note in the reader's language (the codec's notes carry their template and values)."""
    return _(note.template).format(**note.values) if isinstance(note, Note) else note


def _model_note() -> None:
    """Why the model changed or which settings a new model moved, until the user dismisses it."""
    note = st.session_state.get(caches.MODEL_NOTE)
    if not note:
        return
    with st.container(horizontal=True, vertical_alignment="center", key="model_note", wrap=False):
        st.warning(escape_markdown(note), icon=":material/memory:")
        st.button(_("Dismiss"), key="w_dismiss_model_note",
                  on_click=lambda: st.session_state.pop(caches.MODEL_NOTE, None))


def _link_notes() -> None:
    """The notes about link settings that were fixed or ignored, until the user dismisses them."""
    _model_note()
    notes = [_note_text(n) for n in st.session_state.get(NOTES) or []]
    if not notes:
        return
    with st.container(horizontal=True, vertical_alignment="center", key="link_notes", wrap=False):
        st.warning(_("Some settings in the link were fixed: {notes}").format(
            notes=" ".join(escape_markdown(n) for n in notes)), icon=":material/link:")
        st.button(_("Dismiss"), key="w_dismiss_url_notes", on_click=lambda: st.session_state.pop(NOTES, None))
