"""The lesson frame around a page's view: the step's text above the view, "step n of N", Previous / Next (PageUp /
PageDown in presenter mode), "back to this step's view", the step's question with its check, reveal and the
session's score; and "Copy as a lesson step" for authors.

The shell calls settle(page) first in every run (a lesson link, or a step asked for by a button, puts the step's
settings into the state, switching to the step's page when it is another), draw(page) after the shared controls,
and link_params(page) where it writes the link (the link always carries lesson and step).
"""
from __future__ import annotations

import streamlit as st

from app_core import schemas as S
from app_core.lessons import Lesson, check_answer, computed_answer, load_catalog
from app_core.lessons.format import CLASS_SETTINGS
from app_core.lessons.views import clamp_step, lesson_params, read_lesson_link, step_settings, step_snippet
from app_core.link import Context, Note, note
from app_pages import _caches as caches
from app_pages._i18n import _, language
from app_pages._widgets import escape_markdown

ACTIVE = "_lesson"              # (lesson id, step n): the step the session is on
GOTO = "_lesson_goto"           # (lesson id, step n): asked for by a button, opened at the start of the next run
RESULTS = "_lesson_results"     # {(lesson id, step n): right?}: the first check of each question counts
REVEALED = "_lesson_revealed"   # {(lesson id, step n)}: questions whose answer is shown
CARRIED = (*CLASS_SETTINGS, S.TEXT.name)    # a lesson link's settings kept when its step is on another page
# A compact frame: the step's text and the view's main chart share a 1024x768 projector's first screen.
PANEL_CSS = """<style>
.st-key-lesson_panel { padding: 0.5rem 0.9rem 0.6rem 0.9rem; }
.st-key-lesson_nav [data-testid="stMarkdown"] { min-width: 0; }
.st-key-lesson_nav [data-testid="stMarkdownContainer"] p
  { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; margin: 0; }
</style>"""


def page_file(page: str) -> str:
    """The script of a page by its name (router.PAGES: app_pages/<name with _ for ->.py)."""
    return f"app_pages/{page.replace('-', '_')}.py"


def translate(message) -> str:
    """A note (a lesson file's error, a link note; notes nested in its values too) in the reader's language."""
    if isinstance(message, Note):
        return _(message.template).format(**{k: translate(v) for k, v in message.values.items()})
    return str(message)


def active() -> tuple[Lesson, int] | None:
    """(the lesson, step n) the session is on, if its file still reads."""
    found = st.session_state.get(ACTIVE)
    if not found:
        return None
    lesson = load_catalog().get(found[0])
    return (lesson, clamp_step(lesson, found[1])) if lesson is not None else None


def _context() -> Context:
    cfg = caches.get_model().config
    return Context(n_layers=cfg.n_layers, n_heads=cfg.n_heads, head_dim=cfg.head_dim, vocab_size=cfg.vocab_size)


def _open_here(lesson: Lesson, n: int) -> list:
    """The step's settings into the state (on its own page); notes for the values this model had to clamp."""
    ss = st.session_state
    values, reset, notes = step_settings(lesson.step(n), _context())
    for key in reset:
        ss.pop(key, None)
    ss.update(values)
    ss[ACTIVE] = (lesson.id, n)
    return notes


def settle(page: str, first_run: bool) -> list:
    """Before the shell reads the link: open the step a lesson link (first run) or a button asked for. Switches to
    the step's page when it is another (nothing after this runs then). Returns notes for the user."""
    ss = st.session_state
    linked = None
    if first_run:
        lesson_id, n = read_lesson_link(st.query_params)
        for name in (S.LESSON.name, S.LESSON_STEP.name):    # not read as the page's own settings (Generate's step)
            if lesson_id is not None and name in st.query_params:
                del st.query_params[name]
        linked = (lesson_id, n) if lesson_id is not None else None
    wanted = ss.pop(GOTO, None) or linked
    if wanted is None:
        return []
    lesson = load_catalog().get(wanted[0])
    if lesson is None:
        return [note("lesson={id} is not a lesson of this app: see the Lessons page.", id=repr(wanted[0][:64]))]
    n = clamp_step(lesson, wanted[1])
    step = lesson.step(n)
    if step.page != page:
        ss[GOTO] = (lesson.id, n)
        carried = {k: v for k, v in st.query_params.to_dict().items() if k in CARRIED}   # the class's own
        st.switch_page(page_file(step.page), query_params={**carried, **step.query(), **lesson_params(lesson.id, n)})
    return _open_here(lesson, n)


def link_params(page: str) -> dict[str, str]:
    """lesson and step for the link, while the session is on a step of this page."""
    found = active()
    if found is None or found[0].step(found[1]).page != page:
        return {}
    return lesson_params(found[0].id, found[1])


def go(lesson_id: str, n: int) -> None:
    """on_click: open step n of a lesson (its page and settings) at the start of the next run."""
    st.session_state[GOTO] = (lesson_id, n)


def leave() -> None:
    """on_click: leave the lesson (the view stays as it is)."""
    st.session_state.pop(ACTIVE, None)


def score() -> tuple[int, int]:
    """(right, checked) over the session's questions."""
    results = st.session_state.get(RESULTS, {})
    return sum(results.values()), len(results)


def _check(key: tuple, widget: str, lesson_id: str, n: int) -> None:
    """on_click of Check: the first answer to a question counts for the score."""
    found = load_catalog().get(lesson_id)
    if found is None:
        return
    question = found.step(n).question
    answer = _answer(question)
    if answer is None:
        return
    right = check_answer(question, answer, st.session_state.get(widget))
    st.session_state.setdefault(RESULTS, {}).setdefault(key, right)
    st.session_state[widget + "_result"] = right


def _reveal(key: tuple) -> None:
    st.session_state.setdefault(REVEALED, set()).add(key)


def _answer(question):
    """The question's answer on the session's model and text; None when the text is empty."""
    if not question.needs_model:
        return computed_answer(question)
    text = st.session_state.get(S.TEXT.key) or ""
    if not text.strip():
        return None
    return computed_answer(question, caches.get_model(), caches.get_trace(text))


def _question(lesson: Lesson, n: int, lang: str) -> None:
    question = lesson.step(n).question
    key = (lesson.id, n)
    widget = f"lesson_answer_{lesson.id}_{n}"
    st.markdown(question.ask[lang])
    if question.kind == "choice":
        st.radio(_("Your answer"), options=list(range(1, len(question.choices) + 1)), index=None, key=widget,
                 format_func=lambda i: question.choices[i - 1][lang], label_visibility="collapsed")
    else:
        st.text_input(_("Your answer"), key=widget, placeholder=_("a number") if question.kind == "number"
                      else _("a token"))
    with st.container(horizontal=True, gap="small"):
        st.button(_("Check"), key=f"w_lesson_check_{n}", on_click=_check, args=(key, widget, lesson.id, n))
        st.button(_("Reveal"), key=f"w_lesson_reveal_{n}", on_click=_reveal, args=(key,))
    result = st.session_state.get(widget + "_result")
    if result is not None:
        st.markdown(":green[:material/check_circle: " + _("Right!") + "]" if result
                    else ":orange[:material/cancel: " + _("Not quite: try again, or reveal the answer.") + "]")
    if key in st.session_state.get(REVEALED, set()):
        answer = _answer(question)
        if answer is None:
            st.info(_("The text is empty: type a text to compute the answer."))
        else:
            shown = question.choices[answer.value - 1][lang] if question.kind == "choice" else answer.shown
            st.success(_("Answer: {answer}").format(answer=escape_markdown(shown)))
            st.markdown(question.why[lang].replace("{answer}", escape_markdown(shown)))
    right, checked = score()
    if checked:
        st.caption(_("Your score: {right} of {checked}").format(right=right, checked=checked))


def draw(page: str) -> None:
    """The step's frame above the view, while the session is on a step of this page."""
    found = active()
    if found is None or found[0].step(found[1]).page != page:
        return
    lesson, n = found
    lang, total = language(), len(lesson.steps)
    presenting = bool(st.session_state.get(S.PRESENT.key))
    step = lesson.step(n)
    st.sidebar.html(PANEL_CSS)                                   # in the sidebar: no gap on the page
    with st.container(border=True, key="lesson_panel", gap="small"):
        with st.container(horizontal=True, vertical_alignment="center", gap="small", key="lesson_nav", wrap=False):
            st.markdown(_("**Step {n} of {total}** · {title}").format(title=escape_markdown(lesson.title[lang]), n=n,
                                                                       total=total), width="stretch")
            st.button(_("Previous"), key="w_lesson_prev", icon=":material/arrow_back:", disabled=n <= 1,
                      on_click=go, args=(lesson.id, n - 1), shortcut="PageUp" if presenting else None)
            st.button(_("Next"), key="w_lesson_next", icon=":material/arrow_forward:", disabled=n >= total,
                      on_click=go, args=(lesson.id, n + 1), shortcut="PageDown" if presenting else None)
            st.button("", key="w_lesson_back", icon=":material/restart_alt:", on_click=go, args=(lesson.id, n),
                      help=_("Back to this step's view: its page and settings as the lesson set them"))
            if step.question is not None:
                right, checked = score()
                label = _("Question") + (f" · {right}/{checked}" if checked else "")
                with st.popover(label, icon=":material/quiz:", key="lesson_question"):
                    _question(lesson, n, lang)
            st.button("", key="w_lesson_leave", icon=":material/close:", on_click=leave,
                      help=_("Leave the lesson"))
        st.markdown(step.text[lang])


def snippet(page: str, query: dict[str, str]) -> None:
    """"Copy as a lesson step": this view (page and settings) as a [[steps]] entry of a lesson file (not for the
    Lessons page itself, which is no step's view)."""
    if page == S.LESSONS.page:
        return
    st.caption(_("Copy as a lesson step: paste it into a lesson file (see lessons/README.md) and write its text."))
    st.code(step_snippet(page, {k: v for k, v in query.items() if k not in (S.LESSON.name, S.LESSON_STEP.name)}),
            language="toml")
