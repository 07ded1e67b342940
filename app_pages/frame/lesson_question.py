"""A lesson step's question on the page: the student's answer (a choice, a typed number or token, a clicked token of
the text, or a text the model is run on), Check (the first check of each question counts for the score), Reveal,
and the answer with its explanation. Texts name the model's facts ({n_layers}, ...: app_core/lessons/facts.py).
A live class asks through the same widgets and checks (answer_widget, judge, revealed_answer: the class's panel).
"""
from __future__ import annotations

import functools

import streamlit as st

from app_core import schemas as S
from app_core.lessons import Lesson, check_answer, check_task, computed_answer, load_catalog
from app_core.lessons.facts import fill, model_facts
from app_core.link import Note
from app_pages.frame import session as caches
from app_pages.frame.i18n import _
from app_pages.frame.widgets import escape_markdown

RESULTS = "_lesson_results"     # {(lesson id, step n): right?}: the first check of each question counts
REVEALED = "_lesson_revealed"   # {(lesson id, step n)}: questions whose answer is shown
STRIP_MAX_TOKENS = 60           # a point question's tokens as buttons up to this many, else a list to pick from


def facts() -> dict[str, str]:
    """The facts of the session's model, as the lesson texts name them."""
    return _facts_of(caches.model_id())


@functools.lru_cache(maxsize=8)
def _facts_of(model: tuple) -> dict[str, str]:
    return model_facts(caches.get_model().config)


def translate(message) -> str:
    """A note (a lesson file's error, a link note; notes nested in its values too) in the reader's language."""
    if isinstance(message, Note):
        return _(message.template).format(**{k: translate(v) for k, v in message.values.items()})
    return str(message)


def answer_of(question, text: str | None = None):
    """The question's answer on the session's model and text (or `text`: a live class's); None when it needs a text
    and the text is empty."""
    if not question.needs_model:
        return computed_answer(question)
    if not question.needs_trace:
        return computed_answer(question, caches.get_model())
    text = st.session_state.get(S.TEXT.key) or "" if text is None else text
    if not text.strip():
        return None
    ws = caches.workspace()
    return computed_answer(question, ws.model, ws.trace(text))         # ws.model: a block walk takes the lock


def given_something(value) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip())


def judge(question, given, text: str | None = None) -> tuple[bool | None, Note | None]:
    """Whether the answer given is right on the session's model and text (or `text`) (None: it cannot be told, the
    text is empty), and for a task what the model did (a note to show)."""
    if question.kind == "task":
        ws = caches.workspace()
        result = check_task(question, ws.model, given, run=ws.trace)
        return result.done, result.seen
    answer = answer_of(question, text)
    return (None if answer is None else check_answer(question, answer, given)), None


def _check(key: tuple, widget: str) -> None:
    """on_click of Check: the first answer to a question counts for the score (an empty answer is not checked)."""
    ss = st.session_state
    found = load_catalog().get(key[0])
    given = ss.get(widget)
    if found is None or not 1 <= key[1] <= len(found.steps) or not given_something(given):
        return
    right, seen = judge(found.step(key[1]).question, given)
    if seen is not None:
        ss[widget + "_seen"] = seen
    if right is None:
        return
    ss.setdefault(RESULTS, {}).setdefault(key, right)
    ss[widget + "_result"] = right


def _reveal(key: tuple) -> None:
    st.session_state.setdefault(REVEALED, set()).add(key)


def score() -> tuple[int, int]:
    """(right, checked) over the session's questions."""
    results = st.session_state.get(RESULTS, {})
    return sum(results.values()), len(results)


def _point_widget(widget: str, text: str) -> None:
    """The text's tokens to click (buttons for a short text, a list for a long one)."""
    if not text.strip():
        st.info(_("The text is empty: type a text to compute the answer."))
        return
    tokens = caches.workspace().trace(text).tokens
    if len(tokens) <= STRIP_MAX_TOKENS:
        st.pills(_("Click a token"), options=list(range(len(tokens))), key=widget,
                 format_func=lambda i: escape_markdown(tokens[i]), label_visibility="collapsed")
    else:
        st.selectbox(_("Pick a token"), options=list(range(len(tokens))), index=None, key=widget,
                     format_func=lambda i: f"#{i} {tokens[i]}", label_visibility="collapsed")


def answer_widget(question, widget: str, lang: str, known: dict, text: str | None = None) -> None:
    """The student's answer to question, in the widget with this key (its value is what judge reads); a point
    question's tokens are the session's text's (or `text`'s)."""
    if question.kind == "choice":
        st.radio(_("Your answer"), options=list(range(1, len(question.choices) + 1)), index=None, key=widget,
                 format_func=lambda i: fill(question.choices[i - 1][lang], known), label_visibility="collapsed")
    elif question.kind == "point":
        _point_widget(widget, st.session_state.get(S.TEXT.key) or "" if text is None else text)
    elif question.kind == "task":
        st.text_area(_("Your text"), key=widget, height=90, placeholder=_("Write a text: the model reads it"),
                     label_visibility="collapsed")
    else:
        st.text_input(_("Your answer"), key=widget, placeholder=_("a number") if question.kind == "number"
                      else _("a token"), label_visibility="collapsed")


def revealed_answer(question, lang: str, known: dict, text: str | None = None) -> None:
    """The question's answer (on the session's model and text, or `text`) and its explanation."""
    answer = answer_of(question, text)
    if answer is None:
        st.info(_("The text is empty: type a text to compute the answer."))
        return
    if question.kind == "choice":
        shown = fill(question.choices[answer.value - 1][lang], known)
    else:
        shown = answer.shown
    if question.kind != "task":
        st.success(_("Answer: {answer}").format(answer=escape_markdown(shown)))
    st.markdown(fill(question.why[lang], known).replace("{answer}", escape_markdown(shown)))


def result_line(lesson: Lesson, n: int) -> None:
    """Whether the student's last check of step n's question was right (nothing before a check)."""
    result = st.session_state.get(f"lesson_answer_{lesson.id}_{n}_result")
    if result is not None:
        st.markdown(":green[:material/check_circle: " + _("Right!") + "]" if result
                    else ":orange[:material/cancel: " + _("Not quite: try again, or reveal the answer.") + "]")


def draw(lesson: Lesson, n: int, lang: str, answering: bool = True) -> None:
    """The question of step n: ask, answer, Check and Reveal, the result, the answer once revealed, the score.
    Not answering (the teacher of a live class, whose class answers on their own screens and whose class strip
    reveals it): the ask, then the answer once revealed."""
    ss = st.session_state
    question = lesson.step(n).question
    key = (lesson.id, n)
    widget = f"lesson_answer_{lesson.id}_{n}"
    known = facts()
    st.markdown(fill(question.ask[lang], known))
    if not answering:
        if key in ss.get(REVEALED, set()):
            revealed_answer(question, lang, known)
        else:
            st.caption(_("The class answers on their own screens: Reveal on the class's strip shows the answer "
                         "everywhere."))
        return
    answer_widget(question, widget, lang, known)
    with st.container(horizontal=True, gap="small"):
        st.button(_("Check"), key=f"w_lesson_check_{n}", on_click=_check, args=(key, widget))
        st.button(_("Reveal"), key=f"w_lesson_reveal_{n}", on_click=_reveal, args=(key,))
    if question.kind == "task" and ss.get(widget + "_seen") is not None:
        st.caption(escape_markdown(translate(ss[widget + "_seen"])))
    result_line(lesson, n)
    if key in ss.get(REVEALED, set()):
        revealed_answer(question, lang, known)
    right, checked = score()
    if checked:
        st.caption(_("Your score: {right} of {checked}").format(right=right, checked=checked))
