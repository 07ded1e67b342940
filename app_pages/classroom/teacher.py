"""The teacher's side of a live class: "Start a class", the class's panel (join code, join link, QR code, the class's
results, End class), the live strip (followers, the class's answers: answers.py, Reveal) and the key cookie.

The teacher's key (code.secret) lives in the session and, so that a reload or a new tab keeps the class, in an
HttpOnly cookie that only the server sets (server/class_key.py): keep_key() hands the key courier (_class_js.KEY_JS) a
one-time ticket, and clears the cookie once the class has ended. The key is never in the page's address, a link
or the page itself. A button's store call that fails changes nothing: End class during an outage leaves the class,
its key and its cookie as they were, and says so.
"""
from __future__ import annotations

import functools
import time

import streamlit as st

from app_core.classroom import ClassClosed, ClassesFull, NotTeacher, StoreUnavailable, View, class_store, codes
from app_core.classroom.views import join_link, qr_png, read_question_key
from app_pages.classroom import answers
from app_pages.classroom import js as class_js
from app_pages.classroom.state import (
    ENDED_RESULTS,
    FORGET,
    HERE,
    HERE_S,
    KEY_TICKET,
    MAX_STARTED,
    POINT_KEYS,
    PUBLISHED,
    REMEMBERED,
    STARTED,
    STRIP_S,
    TEACHING,
    TROUBLE,
    trouble,
    unreachable_message,
)
from app_pages.frame import lesson_panel
from app_pages.frame.i18n import _, ngettext
from server import class_key, class_wait

QR_PX = 330                       # the whole panel fits the popover at 768 px: no scrolling to the code


def stop_teaching() -> None:
    """The class is over for this session (ended, or its key refused): the cookie is cleared too."""
    ss = st.session_state
    teaching = ss.pop(TEACHING, None)
    ss.pop(PUBLISHED, None)
    ss.pop(KEY_TICKET, None)
    if teaching:
        ss[FORGET] = teaching[0]


# ------------------------------------------------------------------------------------------------ key cookie
def keep_key() -> None:
    """The browser's key cookie follows the session: while teaching a class the cookie does not hold yet, the key
    courier is drawn with a one-time ticket; once the class is over, with the clearing. The courier acts once per
    ticket in a page (no trigger, no rerun), so it is drawn again, unchanged, in every run. Only where the server
    serves the key route (app.py); else the class lives in the session alone."""
    ss = st.session_state
    if not class_wait.served():
        return
    teaching = ss.get(TEACHING)
    if teaching:
        if ss.get(REMEMBERED) != teaching:
            try:
                ss[KEY_TICKET] = (teaching, class_store().issue_ticket(codes.teacher_token(*teaching)))
            except StoreUnavailable:
                return                                  # the next run asks again
            ss[REMEMBERED] = teaching
        if (ss.get(KEY_TICKET) or (None,))[0] == teaching:
            _courier({"ticket": ss[KEY_TICKET][1]})
    elif ss.get(FORGET):
        _courier({"forget": ss[FORGET]})


def _courier(data: dict) -> None:
    class_js.key_courier(key="class_key", data={"url": class_key.KEY_PATH, **data}, width="content", height=0)


# ------------------------------------------------------------------------------------------------ buttons
def _start_class() -> None:
    ss = st.session_state
    if ss.get(STARTED, 0) >= MAX_STARTED:
        ss[TROUBLE] = _("This page has started {n} classes: open the app in a new tab to start another.").format(
            n=MAX_STARTED)
        return
    try:
        code, secret = class_store().create(View("attention"))
    except StoreUnavailable as err:
        trouble(err)
        return
    except ClassesFull:
        ss[TROUBLE] = _("The server holds as many classes as it can just now: try again in a few minutes.")
        return
    ss[STARTED] = ss.get(STARTED, 0) + 1
    ss[TEACHING] = (code, secret)
    ss[HERE] = time.monotonic()
    for key in (PUBLISHED, FORGET, ENDED_RESULTS, POINT_KEYS):
        ss.pop(key, None)


def _lessons() -> list[str]:
    """The lesson the teacher is on, if any (its results can be downloaded before anyone answered)."""
    found = lesson_panel.active()
    return [found[0].id] if found is not None else []


def _end_class() -> None:
    """Ends the class in the store first, its results kept in the session to download: while the store cannot be
    reached, the class and its key stay."""
    teaching = st.session_state.get(TEACHING)
    if not teaching or not answers.keep_results(*teaching, _lessons()):
        return
    try:
        class_store().end(*teaching)
    except (NotTeacher, ClassClosed):
        pass
    except StoreUnavailable as err:
        trouble(err, _("The class could not be ended: the class server cannot be reached just now. The class goes "
                       "on; press End class again once it answers."))
        return
    stop_teaching()


def _reveal() -> None:
    """On every screen: the question's answer, and the view a predict step held. This screen's held view opens in
    the strip's run that follows the click (teacher_strip: a click inside a fragment reruns only the fragment, so the
    strip, seeing the reveal, reruns the whole page)."""
    teaching = st.session_state.get(TEACHING)
    if teaching:
        try:
            class_store().reveal(*teaching)
        except (NotTeacher, ClassClosed):
            stop_teaching()
        except StoreUnavailable as err:
            trouble(err)


def _revealed_here(question: str | None) -> bool:
    """The question revealed on this screen too; whether it was not already."""
    step = read_question_key(question)
    shown = st.session_state.setdefault(lesson_panel.REVEALED, set())
    if step is None or step in shown:
        return False
    shown.add(step)
    return True


@functools.lru_cache(maxsize=8)
def _qr(link: str) -> bytes:
    return qr_png(link)


def class_button(where) -> None:
    """In the presenter row: "Start a class" (icon only: the row is full); a class's own panel is on its line."""
    if not st.session_state.get(TEACHING):
        where.button(_("Start a class"), key="w_class_start", icon=":material/groups:", on_click=_start_class,
                     type="tertiary",
                     help=_("Start a class") + ": " + _("Students who open the join link follow this screen: page, "
                                                      "tab, text and settings"))          # the row is full at 1024 px


def class_popover(code: str) -> None:
    """The class's panel on the teacher's line: join code, link, QR code, End class."""
    link = join_link(st.context.url, code)
    with st.popover(codes.shown(code), icon=":material/groups:", key="class_panel",
                    help=_("The class: join code, link and QR code")):
        with st.container(horizontal=True, vertical_alignment="center", gap="small"):
            st.markdown("### " + _("Join code: **{code}**").format(code=codes.shown(code)), width="stretch")
            st.button(_("End class"), key="w_class_end", icon=":material/logout:", on_click=_end_class)
        st.code(link, language=None, wrap_lines=True)
        st.image(_qr(link), width=QR_PX)
        answers.results_buttons(code, st.session_state[TEACHING][1], _lessons())


@st.fragment(run_every=STRIP_S)
def teacher_strip() -> None:
    """The class at a glance on the teacher's screen: how many follow, the current question's answers and Reveal
    (answers.strip_answers). A reveal made elsewhere (another tab of the teacher's) opens this screen's view too."""
    ss = st.session_state
    teaching = ss.get(TEACHING)
    if not teaching:
        return
    code, secret = teaching
    store = class_store()
    try:
        if time.monotonic() - ss.get(HERE, 0.0) >= HERE_S:
            store.teacher_here(code, secret)
            ss[HERE] = time.monotonic()
        state = store.state(code)
        following = store.followers(code)
        counts = store.answers(code, secret) if state.view.question else {}
    except (NotTeacher, ClassClosed):
        stop_teaching()
        st.rerun(scope="app")
    except StoreUnavailable as err:
        st.caption(":material/cloud_off: " + unreachable_message(err.slow))
        return
    if state.view.revealed and _revealed_here(state.view.question):
        st.rerun(scope="app")
    live = st.container(gap="small", key="class_live", width="stretch")
    with live:
        with st.container(horizontal=True, vertical_alignment="center", gap="small", key="class_strip"):
            st.caption(ngettext("{n} student follows", "{n} students follow", following).format(n=following),
                       width="content")
            answers.strip_answers(state, counts, following, _reveal, live)
