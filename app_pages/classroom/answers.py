"""The class's answers on the teacher's screen: on the live strip, a bar per answer, how many of the followers sent
one and, once revealed, the share right; for a point question, the class's clicks over the text's tokens in their
order, with the model's own row beside them once revealed (before, a projector would show the answer); and the
class's results as CSV (app_core/lessons/results.py: anonymous, counts per answer and the share right, steps in
order), to download at any time from the class's panel and after End class.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

from app_core import schemas as S
from app_core.classroom import ClassClosed, NotTeacher, StoreUnavailable, class_store, codes
from app_core.classroom.store import ClassState
from app_core.classroom.views import class_text, read_question_key, step_question
from app_core.derived.classroom import class_point
from app_core.lessons import load_catalog
from app_core.lessons.facts import fill
from app_core.lessons.results import RIGHT, WRONG, PointKey, class_results_csv
from app_pages.classroom.state import ENDED_RESULTS, POINT_KEYS, trouble
from app_pages.frame import session as caches
from app_pages.frame.i18n import _, language, translated
from app_pages.frame.lesson_question import facts
from app_pages.frame.widgets import show_figure
from viz import class_points as vc

BAR_PX = 150                      # one answer's bar on the teacher's strip


def _labels(question) -> list[tuple[str, str]]:
    """(answer as stored, its label) in the order the bars show them."""
    if question.kind == "choice":
        known = facts()
        return [(str(i), fill(c[language()], known)) for i, c in enumerate(question.choices, start=1)]
    return [(RIGHT, _("Right answer")), (WRONG, _("Not right"))]


def _share_right(question, counts: dict[str, int], point: PointKey | None) -> float | None:
    """The share of the answers that are right (None before any answer, or a point question without its key)."""
    answered = sum(counts.values())
    if not answered:
        return None
    if question.kind == "choice":
        right = counts.get(str(question.answer), 0)
    elif question.kind == "point":
        if point is None:
            return None
        right = sum(n for value, n in counts.items() if value.isdigit() and int(value) in point.right)
    else:
        right = counts.get(RIGHT, 0)
    return right / answered


def _point(key: str, question, text: str) -> tuple[PointKey, np.ndarray] | None:
    """A point question on the class's text: its key (remembered for the results) and the model's row; None when
    the text is empty."""
    if not text.strip():
        return None
    point, row = caches.workspace().compute(class_point, question, text)
    st.session_state.setdefault(POINT_KEYS, {})[key] = point
    return point, row


def _clicks(point: PointKey, counts: dict[str, int]) -> np.ndarray:
    """The class's clicks per position of the text ([T]; a position past its end is not counted)."""
    out = np.zeros(len(point.tokens), dtype=np.int64)                          # [T]
    for value, n in counts.items():
        if value.isdigit() and int(value) < len(out):
            out[int(value)] += n
    return out


def strip_answers(state: ClassState, counts: dict[str, int], following: int, reveal, below) -> None:
    """The strip's part for the current question (in the strip's row), and a point question's clicks in the
    container `below`. reveal: the Reveal button's on_click."""
    found = step_question(state.view.question)
    if found is None:
        return
    question, revealed = found[2], state.view.revealed
    answered = sum(counts.values())
    point = _point(state.view.question, question, class_text(state.view)) if question.kind == "point" else None
    with st.container(horizontal=True, vertical_alignment="center", gap="small", key="class_answers"):
        if question.kind != "point":
            for value, label in _labels(question):
                n = counts.get(value, 0)
                st.progress(n / answered if answered else 0.0, text=f"{label} · {n}", width=BAR_PX)
        st.caption(_("{n} of {m} answered").format(n=answered, m=max(following, answered)), width="content")
        share = _share_right(question, counts, point[0] if point else None)
        if revealed and share is not None:
            st.caption(":material/check_circle: " + _("{share:.0%} right").format(share=share), width="content")
        if revealed:
            st.caption(":material/visibility: " + _("Revealed on every screen"), width="content")
        else:
            if state.view.predict:
                st.caption(":material/visibility_off: " + _("The chart waits for Reveal"), width="content")
            st.button(_("Reveal"), key="w_class_reveal", icon=":material/visibility:", on_click=reveal)
    if point is not None and answered:
        tokens, row = point
        fig = vc.class_points(list(tokens.tokens), _clicks(tokens, counts), row if revealed else None,
                              sorted(tokens.right) if revealed else (), words=translated(vc.WORDS))
        with below:
            show_figure(fig, key="class_points", filename="class_clicks")


# ------------------------------------------------------------------------------------------------ results (CSV)
def _lesson_tallies(tallies: dict[str, dict[str, int]]) -> dict[str, dict[int, dict[str, int]]]:
    """{lesson id: {step n: tally}} of a class's tallies {question key: tally}."""
    out: dict[str, dict[int, dict[str, int]]] = {}
    for key, counts in tallies.items():
        step = read_question_key(key)
        if step is not None:
            out.setdefault(step[0], {})[step[1]] = counts
    return out


def _points(lesson, points: dict[str, PointKey], ws) -> dict[int, PointKey]:
    """The key of each point question of the lesson: as the strip saw it, else on the step's own text."""
    out = {}
    for n, step in enumerate(lesson.steps, start=1):
        if step.question is None or step.question.kind != "point":
            continue
        found = points.get(f"{lesson.id}/{n}")
        if found is None and ws is not None:
            text = step.query().get(S.TEXT.name) or S.TEXT.default
            found = ws.compute(class_point, step.question, text)[0]
        if found is not None:
            out[n] = found
    return out


def results_csvs(tallies: dict[str, dict[str, int]], lesson_ids, lang: str, points: dict[str, PointKey],
                 ws) -> dict[str, str]:
    """{lesson id: the CSV of its class results}, for the lessons with answers and those named in lesson_ids."""
    by_lesson = _lesson_tallies(tallies)
    catalog = load_catalog()
    out = {}
    for lesson_id in dict.fromkeys([*lesson_ids, *by_lesson]):
        lesson = catalog.get(lesson_id)
        if lesson is not None:
            out[lesson.id] = class_results_csv(lesson, lang, by_lesson.get(lesson.id, {}),
                                               _points(lesson, points, ws))
    return out


def _file_name(lesson_id: str) -> str:
    return f"class-results-{lesson_id}.csv"


def results_buttons(code: str, secret: str, lesson_ids: list[str]) -> None:
    """In the class's panel: a download of the class's results for each lesson it answered (and the teacher's
    lesson), made when clicked (the answers as they are then)."""
    ss = st.session_state
    try:
        answered = _lesson_tallies(class_store().tallies(code, secret))
    except (NotTeacher, ClassClosed, StoreUnavailable):
        answered = {}
    lang, points, ws = language(), ss.setdefault(POINT_KEYS, {}), caches.workspace()
    catalog = load_catalog()
    for lesson_id in dict.fromkeys([*lesson_ids, *answered]):
        lesson = catalog.get(lesson_id)
        if lesson is None:
            continue

        def made(lesson=lesson) -> str:                 # on the click, in a thread of its own: no session there
            return results_csvs(class_store().tallies(code, secret), [lesson.id], lang, points, ws)[lesson.id]
        st.download_button(_("Class results: {lesson} (CSV)").format(lesson=lesson.title[lang]), made,
                           _file_name(lesson.id), "text/csv", key=f"w_class_results_{lesson.id}",
                           icon=":material/download:", on_click="ignore")


def keep_results(code: str, secret: str, lesson_ids: list[str]) -> bool:
    """Before End class: the class's results into the session (ENDED_RESULTS), to download once it has ended.
    False when the store cannot be reached (said; the class is then not ended)."""
    try:
        tallies = class_store().tallies(code, secret)
    except (NotTeacher, ClassClosed):
        return True
    except StoreUnavailable as err:
        trouble(err, _("The class could not be ended: the class server cannot be reached just now. The class goes "
                       "on; press End class again once it answers."))
        return False
    ss = st.session_state
    ss[ENDED_RESULTS] = (code, results_csvs(tallies, lesson_ids, language(), ss.get(POINT_KEYS, {}),
                                            caches.workspace()))
    return True


def _forget_results() -> None:
    st.session_state.pop(ENDED_RESULTS, None)
    st.session_state.pop(POINT_KEYS, None)


def ended_results() -> None:
    """After End class: the class's results to download, until the teacher closes them or starts a class."""
    code, csvs = st.session_state[ENDED_RESULTS]
    catalog = load_catalog()
    lang = language()
    with st.container(horizontal=True, vertical_alignment="center", gap="small", key="class_ended"):
        st.caption(":material/groups: " + _("The class {code} has ended: its answers, anonymous, per step.")
                   .format(code=codes.shown(code)), width="content")
        for lesson_id, text in csvs.items():
            lesson = catalog.get(lesson_id)
            title = lesson.title[lang] if lesson is not None else lesson_id
            st.download_button(_("Class results: {lesson} (CSV)").format(lesson=title), text, _file_name(lesson_id),
                               "text/csv", key=f"w_class_ended_{lesson_id}", icon=":material/download:",
                               on_click="ignore")
        st.button(_("Close"), key="w_class_ended_close", icon=":material/close:", on_click=_forget_results,
                  type="tertiary")
