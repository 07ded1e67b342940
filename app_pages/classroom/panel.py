"""The live class on screen (app_core/classroom holds the state); the entry points the shell and the router call.
The teacher's side is teacher.py (Start a class, the class's panel, the live strip, the key cookie) and answers.py
(the class's answers on the strip, the results to download), a student's student.py (the bar, the wait for the next
view, the class question), the browser-side scripts js.py, the session's keys and messages state.py. A lesson
step's question is the class's on both sides (lesson_panel.CLASS_HOLD, CLASS_TEACHER).

router.py runs each page inside turn() (a follower's run waits while the teacher's runs, then runs alone among its
class's followers: app_core/classroom/turns.py). The shell calls settle(page, ...) first in every run (a join link
or the teacher's key cookie on the first run; a follower opens the teacher's newer view as a fresh link, switching
page when it is another), class_button(row) in the presenter row, and link_params(page, wanted) where it works out
the link: at the start of the run and at its end (the teacher publishes the view there, once per view: other
replicas hear of it while the teacher's run goes on, and prepare it, app_pages/classroom/prepared.py). The
teacher's key is never in an address: `teach=` in a link is dropped at once and not used.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import streamlit as st

from app_core.classroom import (
    ClassClosed,
    NotTeacher,
    StoreUnavailable,
    View,
    class_store,
    class_turns,
    codes,
    follower_key,
    followers,
)
from app_core.classroom.views import JOIN, PERSONAL, TEACH, keys_to_reset, question_key, read_question_key, teacher_view
from app_core.link import shown
from app_core.scheduling import OUT_OF_TURN_PAGES, SENT_WAIT_S
from app_pages import navigation
from app_pages.classroom.answers import ended_results
from app_pages.classroom.state import (
    ENDED_RESULTS,
    FOLLOWING,
    FORGET,
    HERE,
    JOINED,
    ME,
    PENDING_JOIN,
    PUBLISHED,
    REMEMBERED,
    SEEN,
    SENT,
    TEACHING,
    TROUBLE,
    VIEW,
    closed_message,
    trouble,
)
from app_pages.classroom.student import pending_join, student_bar
from app_pages.classroom.teacher import class_button, class_popover, keep_key, stop_teaching, teacher_strip
from app_pages.frame import lesson_panel as lesson_panel
from app_pages.frame.i18n import _
from server import class_key, streamlit_fixes

__all__ = ["class_button", "following", "link_params", "settle", "teaching", "turn"]


def following() -> bool:
    """Whether this session is a student following the teacher: its screen is the teacher's view, so the frame leaves
    out what would take it elsewhere (examples, the model picker, the share link, the keys, Start a class) until the
    student explores on their own. Sixty followers rerun at each of the teacher's changes: those controls were a
    quarter of a follower's run."""
    ss = st.session_state
    return bool(ss.get(JOINED) and ss.get(FOLLOWING))


def teaching() -> bool:
    """Whether this session teaches a class (its runs publish the class's view: link_params)."""
    return bool(st.session_state.get(TEACHING))


def turn(page: str):
    """A context around this session's page run: a teacher's goes first, a follower's waits its class's turn
    (except on a page whose run waits for a background job, OUT_OF_TURN_PAGES: holding a turn there would hold every
    follower)."""
    ss = st.session_state
    if ss.get(TEACHING):
        return class_turns().teacher(ss[TEACHING][0])
    if ss.get(JOINED) and ss.get(FOLLOWING) and page not in OUT_OF_TURN_PAGES:
        return _follower_turn(ss[JOINED])
    return contextlib.nullcontext()


@contextlib.contextmanager
def _follower_turn(code: str):
    """A follower's turn, ended once its view has left (streamlit_fixes.send_now): sent by the event loop while the
    next follower waits, not in the next one's run (SENT_WAIT_S)."""
    with class_turns().follower(code):
        yield
        streamlit_fixes.send_now(SENT_WAIT_S)


def _closed(code: str) -> str:
    try:
        class_store().state(code)
    except ClassClosed as err:
        return closed_message(code, err.ended)
    return closed_message(code, False)


# ------------------------------------------------------------------------------------------------ link and state
def _read_link(say: Callable[[str], None]) -> None:
    """A session's first run: ?join=<code> (follow), else the teacher's key cookie (this browser teaches a class).
    A `teach=` parameter leaves the address at once, unused. StoreUnavailable (the join is kept and tried again)."""
    joined, keyed = st.query_params.get(JOIN), TEACH in st.query_params
    for name in (JOIN, TEACH):
        if name in st.query_params:
            del st.query_params[name]
    if keyed:
        say(_("This link held a class key, which links no longer carry: a class is taught from the browser that "
              "started it. The key was not used."))
    if joined is not None:
        code = codes.normalize(joined)
        if code is None:
            say(_("join={value} is not a class code (12 letters and digits, such as K7QM-3XPD-H9TF): this is the "
                  "normal app.").format(value=shown(joined)))
        else:
            _join(code, say)
        return
    _adopt(st.context.cookies.get(class_key.COOKIE), say)


def _join(code: str, say: Callable[[str], None]) -> None:
    """Join class code (a follower id issued and signed for it); while the store cannot be reached the join waits
    (PENDING_JOIN, still in the address). StoreUnavailable."""
    ss = st.session_state
    ss[PENDING_JOIN] = code
    version = class_store().version(code)
    key = follower_key()
    ss.pop(PENDING_JOIN, None)
    if version is None:
        say(_closed(code))
        return
    ss.update({JOINED: code, FOLLOWING: True, ME: followers.issue(key, code)})
    ss.pop(SEEN, None)


def _adopt(cookie: str | None, say: Callable[[str], None]) -> None:
    """The class of this browser's key cookie, if it is open and the key is its teacher's (else the cookie is
    cleared). While the store cannot be reached the class is kept unchecked: every change it makes is checked.
    StoreUnavailable."""
    found = codes.read_teacher_token(cookie) if isinstance(cookie, str) and cookie else None
    if found is None:
        return
    ss = st.session_state
    try:
        class_store().teacher_here(*found)
    except (NotTeacher, ClassClosed):
        ss[FORGET] = found[0]
        return
    except StoreUnavailable:
        ss[TEACHING] = ss[REMEMBERED] = found
        ss[HERE] = 0.0                         # the strip checks the key as soon as the store answers
        raise
    ss[TEACHING] = ss[REMEMBERED] = found
    ss[HERE] = time.monotonic()


def _open(view: View, version: int, page: str, url_read: str) -> None:
    """Open the teacher's view as a fresh link would (personal settings kept: the shell reads the link again);
    switches page when it is another."""
    ss = st.session_state
    ss[SEEN], ss[VIEW] = version, view
    for key in keys_to_reset(view.page):
        ss.pop(key, None)
    ss.pop(lesson_panel.ACTIVE, None)
    step = read_question_key(view.question)
    if step is None:
        ss.pop(lesson_panel.CLASS_HOLD, None)
    else:
        ss[lesson_panel.CLASS_HOLD] = step          # the class's box asks it; a predict step holds its view
        if view.revealed:
            ss.setdefault(lesson_panel.REVEALED, set()).add(step)
    ss.pop(url_read, None)
    own = {k: st.query_params[k] for k in PERSONAL if k in st.query_params}     # a join link's own lang=, present=
    if view.page != page:
        navigation.switch_to(view.page, query_params={**view.params, **own})
    st.query_params.from_dict({**view.params, **own})


def settle(page: str, url_read: str, say: Callable[[str], None]) -> None:
    """First in every run: read a class link (first run: the shell's state key url_read unset); a follower opens
    the teacher's view when it changed. Draws the teacher's strip or the student's bar. When the store cannot be
    reached, says so and leaves the view as it is."""
    ss = st.session_state
    try:
        _follow(page, url_read, say)
    except StoreUnavailable as err:
        if not ss.get(PENDING_JOIN):             # (a waiting join says so itself)
            trouble(err)
    if ss.get(TROUBLE):
        st.warning(ss.pop(TROUBLE), icon=":material/cloud_off:")
    keep_key()
    if ss.get(TEACHING):
        ss[lesson_panel.CLASS_TEACHER] = True
        with st.container(horizontal=True, vertical_alignment="center", gap="small", key="class_line"):
            class_popover(ss[TEACHING][0])
            teacher_strip()
        return
    ss.pop(lesson_panel.CLASS_TEACHER, None)
    if ss.get(JOINED):
        student_bar()
    elif ss.get(PENDING_JOIN):
        pending_join()
    elif ss.get(ENDED_RESULTS):
        ended_results()


def _follow(page: str, url_read: str, say: Callable[[str], None]) -> None:
    """A class link (first run), or a join waiting for the store; a follower opens the teacher's newer view.
    StoreUnavailable."""
    ss = st.session_state
    if not ss.get(url_read):
        _read_link(say)
    elif ss.get(PENDING_JOIN) and not ss.get(JOINED):
        _join(ss[PENDING_JOIN], say)
    code = ss.get(JOINED)
    if code:
        version = class_store().version(code)
        if version is None:
            say(_closed(code))
            for key in (JOINED, FOLLOWING, SEEN, VIEW, SENT, lesson_panel.CLASS_HOLD):
                ss.pop(key, None)
        elif ss.get(FOLLOWING) and version != ss.get(SEEN):
            state = class_store().state(code)
            _open(state.view, state.version, page, url_read)


def _current_question(page: str) -> tuple[str | None, bool]:
    """The question key of the lesson step the teacher is on (on this page), if it has a question, and whether the
    step holds its view until the question is answered (predict)."""
    found = lesson_panel.active()
    if found is None or found[0].step(found[1]).page != page or found[0].step(found[1]).question is None:
        return None, False
    return question_key(found[0].id, found[1]), found[0].step(found[1]).predict


def link_params(page: str, link: dict[str, str]) -> dict[str, str]:
    """The class's params for this session's own address: join=<code> for a student (also while the join waits for
    the store), nothing for the teacher (the key is never in an address); the teacher publishes the view here."""
    ss = st.session_state
    teaching = ss.get(TEACHING)
    if teaching:
        code, secret = teaching
        view = teacher_view(page, link, ss, *_current_question(page))
        if ss.get(PUBLISHED) != (code, view):
            try:
                class_store().publish(code, secret, view)
                ss[PUBLISHED] = (code, view)
            except (NotTeacher, ClassClosed):
                stop_teaching()
            except (StoreUnavailable, ValueError):      # published at a later run (or never: a view too long)
                pass
        return {}
    code = ss.get(JOINED) or ss.get(PENDING_JOIN)
    return {JOIN: code} if code else {}
