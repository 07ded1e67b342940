"""A student's side of a live class: the bar (following or exploring), the wait for the teacher's next view (the
listener over server/class_wait.py's route, or a polling fragment without it), the class question and its answer, and a
join link read while the class store could not be reached (tried again every RETRY_S until it answers).
"""
from __future__ import annotations

import time

import streamlit as st

from app_core.classroom import ClassClosed, StoreUnavailable, View, class_store, codes
from app_core.lessons import check_answer, computed_answer
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
from app_pages.classroom.teacher import step_question
from app_pages.frame import session as caches
from app_pages.frame.i18n import _, language
from app_pages.frame.widgets import escape_markdown
from server import class_wait


def _detach() -> None:
    st.session_state[FOLLOWING] = False


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


def _answer_of(question):
    """The question's answer on this session's model and text (None: the text is empty)."""
    if not question.needs_model:
        return computed_answer(question)
    text = st.session_state.get("text") or ""
    if not text.strip():
        return None
    ws = caches.workspace()
    return computed_answer(question, ws.lm, ws.trace(text))


def _send(key: str, widget: str) -> None:
    """on_click of Send: the answer (a choice's number, or whether the typed answer is right) to the class."""
    ss = st.session_state
    found = step_question(key)
    given = ss.get(widget)
    if found is None or given in (None, ""):
        return
    question = found[2]
    if question.kind == "choice":
        sent = str(given)
    else:
        answer = _answer_of(question)
        sent = "right" if answer is not None and check_answer(question, answer, given) else "wrong"
    try:
        if class_store().answer(ss[JOINED], ss[ME], key, sent):
            ss[SENT] = (key, given)
    except (ClassClosed, ValueError):
        pass
    except StoreUnavailable as err:
        trouble(err)


def _class_question(view: View | None) -> None:
    """The teacher's question on a student's screen: answer and send; the answer once the teacher reveals it."""
    found = step_question(view.question if view else None)
    if found is None:
        return
    question = found[2]
    lang = language()
    with st.container(border=True, key="class_question"):
        st.markdown(":material/quiz: " + question.ask[lang])
        if view.revealed:
            answer = _answer_of(question)
            if answer is not None:
                said = question.choices[answer.value - 1][lang] if question.kind == "choice" else answer.shown
                st.success(_("Answer: {answer}").format(answer=escape_markdown(said)))
            return
        widget = f"class_answer_{view.question}"
        with st.container(horizontal=True, vertical_alignment="bottom", gap="small"):
            if question.kind == "choice":
                st.radio(_("Your answer"), options=list(range(1, len(question.choices) + 1)), index=None,
                         key=widget, horizontal=True, format_func=lambda i: question.choices[i - 1][lang],
                         label_visibility="collapsed")
            else:
                st.text_input(_("Your answer"), key=widget, label_visibility="collapsed",
                              placeholder=_("a number") if question.kind == "number" else _("a token"))
            st.button(_("Send"), key="w_class_send", icon=":material/send:", on_click=_send,
                      args=(view.question, widget))
        sent = st.session_state.get(SENT)
        if sent and sent[0] == view.question:
            st.caption(_("Sent. You can change your answer until the teacher reveals it."))
