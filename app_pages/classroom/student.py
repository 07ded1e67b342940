"""A student's side of a live class: the bar (following or exploring), the wait for the teacher's next view (the
listener over server/class_wait.py's route, or a polling fragment without it), the class question (any kind: the
lesson frame's widgets and checks, lesson_question.py) and its answer, and a join link read while the class store
could not be reached (tried again every RETRY_S until it answers).
"""
from __future__ import annotations

import time

import streamlit as st

from app_core.classroom import ClassClosed, StoreUnavailable, View, class_store, codes
from app_core.classroom.views import class_text, step_question
from app_core.lessons.facts import fill
from app_core.lessons.results import RIGHT, WRONG
from app_pages.classroom import js as class_js
from app_pages.classroom.state import (
    BEAT,
    BEAT_S,
    FOLLOWING,
    JOINED,
    ME,
    PENDING_JOIN,
    POLL_S,
    RETRY_S,
    SEEN,
    SENT,
    VIEW,
    trouble,
    unreachable_message,
)
from app_pages.frame import lesson_panel
from app_pages.frame import lesson_question as question_ui
from app_pages.frame.i18n import _, language
from app_pages.frame.widgets import escape_markdown
from server import class_wait


def _detach() -> None:
    """Explore on my own: the teacher's question is no longer the class's on this screen (the lesson's own is)."""
    st.session_state[FOLLOWING] = False
    st.session_state.pop(lesson_panel.CLASS_HOLD, None)


def _rejoin() -> None:
    st.session_state[FOLLOWING] = True
    st.session_state.pop(SEEN, None)


def _listen() -> None:
    """A follower's browser waits for the next view (LISTENER_JS over server/class_wait.py's route); its trigger
    reruns the page, whose settle opens the view."""
    ss = st.session_state
    class_js.listener(key="class_listener", data={"url": class_wait.WAIT_PATH, "code": ss[JOINED],
                                                  "seen": ss.get(SEEN, 0), "me": ss[ME]}, width="content", height=0)


@st.fragment(run_every=POLL_S)
def _poll() -> None:
    """Without the wait route, a follower's poll: one read of the version; the whole page reruns (and opens the
    view) when it changed."""
    ss = st.session_state
    code = ss.get(JOINED)
    if not code or not ss.get(FOLLOWING):
        return
    store = class_store()
    try:
        if store.version(code) != ss.get(SEEN):
            st.rerun(scope="app")
        now = time.monotonic()
        if now - ss.get(BEAT, 0.0) >= BEAT_S:
            ss[BEAT] = now
            store.follow(code, ss[ME])
    except ClassClosed:
        st.rerun(scope="app")
    except StoreUnavailable as err:
        st.caption(":material/cloud_off: " + unreachable_message(err.slow))


@st.fragment(run_every=RETRY_S)
def pending_join() -> None:
    """A join link read while the store could not be reached: says so, and reruns the page (which joins) once the
    store answers."""
    code = st.session_state.get(PENDING_JOIN)
    if not code:
        return
    try:
        class_store().version(code)
    except StoreUnavailable:
        st.warning(_("The class server cannot be reached just now: this page joins the class {code} as soon as it "
                     "answers.").format(code=codes.shown(code)), icon=":material/cloud_off:")
        return
    st.rerun(scope="app")


def student_bar() -> None:
    ss = st.session_state
    code = codes.shown(ss[JOINED])
    with st.container(horizontal=True, vertical_alignment="center", gap="small", key="class_bar"):
        if ss.get(FOLLOWING):
            st.caption(":material/groups: " + _("Following the teacher · class {code}").format(code=code))
            st.button(_("Explore on my own"), key="w_class_detach", icon=":material/explore:", on_click=_detach)
        else:
            st.caption(":material/explore: " + _("Exploring on your own · class {code}").format(code=code))
            st.button(_("Follow the teacher"), key="w_class_follow", icon=":material/groups:", on_click=_rejoin)
    if ss.get(FOLLOWING):
        if class_wait.served():
            _listen()
        else:
            _poll()
        _class_question(ss.get(VIEW))


def _send(key: str, widget: str) -> None:
    """on_click of Send: the answer to the class (one per student, the last one counts): a choice's number, a clicked
    position, or whether the typed answer is right (a task: whether the model, run on the text, meets its goal);
    the step's view, if it was held, opens."""
    ss = st.session_state
    found = step_question(key)
    given = ss.get(widget)
    if found is None or not question_ui.given_something(given):
        return
    lesson, n, question = found
    view = ss.get(VIEW)
    right, seen = question_ui.judge(question, given, class_text(view) if view is not None else None)
    if seen is not None:
        ss[widget + "_seen"] = seen
    if right is None:                                    # the text is empty: nothing to check it on
        return
    sent = str(given) if question.kind in ("choice", "point") else RIGHT if right else WRONG
    try:
        if class_store().answer(ss[JOINED], ss[ME], key, sent):
            ss[SENT] = (key, given, right)
            ss.setdefault(lesson_panel.ANSWERED, set()).add((lesson.id, n))
    except (ClassClosed, ValueError):
        pass
    except StoreUnavailable as err:
        trouble(err)


def _class_question(view: View | None) -> None:
    """The teacher's question on a student's screen: answer and send (a task: what the model did with the text);
    once the teacher reveals it, whether the answer sent was right, the answer and why."""
    found = step_question(view.question if view else None)
    if found is None:
        return
    question, text = found[2], class_text(view)        # the page reads the view's text after this (the shell)
    lang, known = language(), question_ui.facts()
    ss = st.session_state
    sent = ss.get(SENT) if (ss.get(SENT) or (None,))[0] == view.question else None
    widget = f"class_answer_{view.question}"
    with st.container(border=True, key="class_question"):
        st.markdown(":material/quiz: " + fill(question.ask[lang], known))
        if view.revealed:
            if sent is not None:
                st.markdown(":green[:material/check_circle: " + _("Your answer was right.") + "]" if sent[2] else
                            ":orange[:material/cancel: " + _("Your answer was not right.") + "]")
            question_ui.revealed_answer(question, lang, known, text)
            return
        question_ui.answer_widget(question, widget, lang, known, text)
        with st.container(horizontal=True, vertical_alignment="center", gap="small"):
            st.button(_("Send"), key="w_class_send", icon=":material/send:", on_click=_send,
                      args=(view.question, widget))
            if question.kind == "task" and ss.get(widget + "_seen") is not None:
                done = sent is not None and sent[2]
                st.caption((":material/check_circle: " if done else ":material/cancel: ")
                           + escape_markdown(question_ui.translate(ss[widget + "_seen"])))
            if sent is not None:
                st.caption(_("Sent. You can change your answer until the teacher reveals it."))
