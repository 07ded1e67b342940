"""The lesson frame around a page's view: the step's text above the view (the model's facts filled in), "step n of
N", Previous / Next (PageUp / PageDown in presenter mode), "back to this step's view", the step's question
(lesson_question.py); and "Copy as a lesson step" for authors.

The shell calls settle(page) first in every run (a lesson link, or a step asked for by a button, puts the step's
settings into the state, switching to the step's page when it is another), draw(page) after the shared controls,
and link_params(page) where it writes the link (the link always carries lesson and step).

Predict, then see: on a step with `predict = true` the view is held until the student has checked an answer or
revealed it: holds_view(page) says so, and the shell then draws held_notice() instead of the page's body (its
charts and every number on it) and the token count. The question is on the frame itself meanwhile, not in its
popover.

In a live class the class's panel asks the questions (app_pages/classroom): a follower's CLASS_HOLD is (lesson id,
step n) of the teacher's step with a question, set by the class panel when it opens the teacher's view: the frame
leaves that question to the class's box (Send), and a predict step's view is held on that step's page (even after
leaving the lesson) until its answer is revealed (REVEALED) or the student has sent an answer (ANSWERED). The
teacher's session has CLASS_TEACHER: the frame shows each question's ask, and its answer once the class's strip has
revealed it (no Check, no Reveal of its own); a predict step's view is held until then.
"""
from __future__ import annotations

import functools

import streamlit as st

from app_core import schemas as S
from app_core.lessons import Lesson, load_catalog
from app_core.lessons.facts import fill
from app_core.lessons.format import CLASS_SETTINGS
from app_core.lessons.views import clamp_step, lesson_params, read_lesson_link, step_settings, step_snippet
from app_core.link import Context, note
from app_pages import navigation
from app_pages.frame import lesson_question as question_ui
from app_pages.frame import session as caches
from app_pages.frame.i18n import _, language
from app_pages.frame.lesson_question import RESULTS, REVEALED, score, translate
from app_pages.frame.presenter_keys import Stepped
from app_pages.frame.widgets import escape_markdown

__all__ = ["ACTIVE", "ANSWERED", "CLASS_HOLD", "CLASS_TEACHER", "RESULTS", "REVEALED", "active", "draw", "go",
           "held_notice", "holds_view", "leave", "link_params", "score", "settle", "snippet", "translate"]

ACTIVE = "_lesson"              # (lesson id, step n): the step the session is on
GOTO = "_lesson_goto"           # (lesson id, step n): asked for by a button, opened at the start of the next run
CLASS_HOLD = "_lesson_class_hold"   # (lesson id, step n): the teacher's step whose question this follower's class asks
CLASS_TEACHER = "_lesson_class_teacher"   # True: this session teaches a live class (its class answers the questions)
ANSWERED = "_lesson_answered"   # {(lesson id, step n)}: class questions this follower has sent an answer to
CARRIED = (*CLASS_SETTINGS, S.TEXT.name)    # a lesson link's settings kept when its step is on another page
# A compact frame: the step's text and the view's main chart share a 1024x768 projector's first screen.
PANEL_CSS = """<style>
.st-key-lesson_panel { padding: 0.5rem 0.9rem 0.6rem 0.9rem; }
.st-key-lesson_nav [data-testid="stMarkdown"] { min-width: 0; }
.st-key-lesson_nav [data-testid="stMarkdownContainer"] p
  { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; margin: 0; }
</style>"""


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
        navigation.switch_to(step.page, query_params={**carried, **step.query(), **lesson_params(lesson.id, n)})
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


def stepped(page: str) -> Stepped | None:
    """The lesson's step as the presenter keys step it (PageUp / PageDown), while a step of this page is open."""
    found = active()
    if found is None or found[0].step(found[1]).page != page:
        return None
    lesson, n = found
    return Stepped("lesson step", n, 1, len(lesson.steps), {"PageUp": -1, "PageDown": 1},
                   functools.partial(go, lesson.id))


def leave() -> None:
    """on_click: leave the lesson (the view stays as it is)."""
    st.session_state.pop(ACTIVE, None)


def _held(key: tuple | None, page: str) -> bool:
    """Whether the step (lesson id, n) is a predict step of this page whose answer the session has neither checked
    nor seen."""
    if key is None:
        return False
    lesson = load_catalog().get(key[0])
    if lesson is None or not 1 <= key[1] <= len(lesson.steps):
        return False
    step = lesson.step(key[1])
    if not step.predict or step.page != page:
        return False
    ss = st.session_state
    return key not in ss.get(REVEALED, set()) and key not in ss.get(RESULTS, {}) and key not in ss.get(ANSWERED, ())


def holds_view(page: str) -> bool:
    """Whether this page's view is held: the session is on a predict step of this page not answered yet (or a
    class's follower is held on one: CLASS_HOLD)."""
    found = active()
    if found is not None and found[0].step(found[1]).page == page:
        return _held((found[0].id, found[1]), page)
    return _held(st.session_state.get(CLASS_HOLD), page)


def held_notice() -> None:
    """What a held view shows instead of its body."""
    if st.session_state.get(CLASS_TEACHER):
        st.info(_("**Predict first.** The class answers the step's question on their own screens: Reveal on the "
                  "class's strip opens this view on every screen."), icon=":material/visibility_off:")
        return
    st.info(_("**Predict first.** Answer the step's question above: the view opens once you have checked an answer, "
              "or when the answer is revealed."), icon=":material/visibility_off:")


def draw(page: str) -> None:
    """The step's frame above the view, while the session is on a step of this page."""
    found = active()
    if found is None or found[0].step(found[1]).page != page:
        return
    lesson, n = found
    lang, total = language(), len(lesson.steps)
    step = lesson.step(n)
    ss = st.session_state
    by_class = ss.get(CLASS_HOLD) == (lesson.id, n)             # a follower: the class's box asks it
    answering = not ss.get(CLASS_TEACHER)                       # the teacher: the class answers, the strip reveals
    st.sidebar.html(PANEL_CSS)                                   # in the sidebar: no gap on the page
    with st.container(border=True, key="lesson_panel", gap="small"):
        with st.container(horizontal=True, vertical_alignment="center", gap="small", key="lesson_nav", wrap=False):
            st.markdown(_("**Step {n} of {total}** · {title}").format(title=escape_markdown(lesson.title[lang]), n=n,
                                                                       total=total), width="stretch")
            st.button(_("Previous"), key="w_lesson_prev", icon=":material/arrow_back:", disabled=n <= 1,
                      on_click=go, args=(lesson.id, n - 1))
            st.button(_("Next"), key="w_lesson_next", icon=":material/arrow_forward:", disabled=n >= total,
                      on_click=go, args=(lesson.id, n + 1))
            st.button(_("Back to this step's view"), key="w_lesson_back", icon=":material/restart_alt:", on_click=go,
                      args=(lesson.id, n),
                      help=_("Back to this step's view: its page and settings as the lesson set them"))
            held = holds_view(page)
            if step.question is not None and not held and not by_class:
                right, checked = score()
                label = _("Question") + (f" · {right}/{checked}" if checked and answering else "")
                with st.popover(label, icon=":material/quiz:", key="lesson_question"):
                    question_ui.draw(lesson, n, lang, answering)
            st.button(_("Leave the lesson"), key="w_lesson_leave", icon=":material/close:", on_click=leave,
                      help=_("Leave the lesson"))
        st.markdown(fill(step.text[lang], question_ui.facts()))
        if step.predict and not held and answering and not by_class:   # the prediction's outcome stays on the frame
            question_ui.result_line(lesson, n)
        if held and not by_class:
            with st.container(border=True, key="lesson_predict"):
                question_ui.draw(lesson, n, lang, answering)


def snippet(page: str, query: dict[str, str]) -> None:
    """"Copy as a lesson step": this view (page and settings) as a [[steps]] entry of a lesson file (not for the
    Lessons page itself, which is no step's view)."""
    if page == S.LESSONS.page:
        return
    st.caption(_("Copy as a lesson step: paste it into a lesson file (see lessons/README.md) and write its text."))
    st.code(step_snippet(page, {k: v for k, v in query.items() if k not in (S.LESSON.name, S.LESSON_STEP.name)}),
            language="toml")
