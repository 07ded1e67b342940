"""The live class on screen (app_core/classroom holds the state): the teacher's "Start a class" button and its
panel (join code, join link, QR code, followers, End class), the teacher's live strip (followers, the class's
answers, Reveal), and a student's bar (following or exploring, the class question).

router.py runs each page inside turn() (a follower's run waits while the teacher's runs, then runs alone among
followers: app_core/classroom/turns.py). The shell calls settle(page, ...) first in every run (a join or teacher
link on the first run; a follower opens the teacher's newer view as a fresh link, switching page when it is
another), class_button(row) in the presenter row, and link_params(page, wanted) where it writes the link (the
teacher publishes the view there).
A follower's browser waits for the class's next view over HTTP (_class_wait.py: no script run while nothing
changes) and reruns the page when it comes (the listener component, LISTENER_JS); a server without that route
(`streamlit run router.py`) has followers poll in a fragment every POLL_S. The teacher's strip refreshes every
STRIP_S.
"""
from __future__ import annotations

import contextlib
import functools
import json
import secrets
import time
from collections.abc import Callable

import streamlit as st

from app_core.classroom import ClassClosed, NotTeacher, StoreUnavailable, View, class_store, class_turns, codes
from app_core.classroom.views import (
    JOIN,
    PERSONAL,
    TEACH,
    join_link,
    keys_to_reset,
    qr_png,
    question_key,
    read_question_key,
    teacher_view,
)
from app_core.lessons import check_answer, computed_answer, load_catalog
from app_core.link import shown
from app_pages import _caches as caches
from app_pages import _class_wait as class_wait
from app_pages import _lesson_panel as lesson_panel
from app_pages._i18n import _, language, ngettext
from app_pages._widgets import escape_markdown

TEACHING = "_class_teaching"      # (code, secret): this session teaches that class
PUBLISHED = "_class_published"    # (code, View): what the teacher published last
JOINED = "_class_joined"          # code: this session joined that class
FOLLOWING = "_class_following"    # whether the joined student follows (else explores on their own)
SEEN = "_class_seen"              # the version of the view the follower opened
VIEW = "_class_view"              # that view
ME = "_class_me"                  # the follower's id (random, per session)
BEAT = "_class_beat"              # when the follower last sent a heartbeat
HERE = "_class_here"              # when the teacher last said they are there
SENT = "_class_sent"              # (question key, answer as typed): the student's answer sent
REMEMBERED = "_class_remembered"  # the (code, secret) this browser's cookie holds
FORGET = "_class_forget"          # the cookie is to be cleared (the class ended)
COOKIE = "atlas_teach"            # the teacher's browser: code.secret (a session cookie, never in a URL)
TROUBLE = "_class_trouble"        # a button's call could not reach the store: say so in the next run
POLL_S = 0.5                      # a follower's poll of the version without the wait route
STRIP_S = 1.0                     # the teacher's strip (followers, answers)
BEAT_S = 5.0                      # a follower's heartbeat (the store counts those of the last 15 s)
HERE_S = 60.0                     # the teacher's keep-alive (a class ends 12 h after the last)
QR_PX = 330                       # the whole panel fits the popover at 768 px: no scrolling to the code
BAR_PX = 150                      # one answer's bar on the teacher's strip
WAITING_PAGES = {"generate"}      # pages whose run waits for a job (a generation): followers run there out of turn

# A following browser's loop: ask the server for the class's next view (it answers when the view is not `seen`, or
# after a few seconds: ask again); when it changed, rerun the page (a trigger) and wait until the page shows it (new
# data), asking again after 5 s if it never does. When the server cannot answer (the class store is down), the page
# reruns once to say so, and once more when it answers again; meanwhile the loop asks every second. One loop per
# tab (window.atlasClassListener), whatever remounts; the last mount's cleanup stops it.
LISTENER_JS = """
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const FIELDS = ["url", "code", "seen", "me"];

async function listen(w) {
  while (w.data) {
    const d = w.data;
    const ctl = new AbortController();
    w.ctl = ctl;
    let answer = null;
    try {
      const asked = new URLSearchParams({code: d.code, seen: String(d.seen), me: d.me});
      const reply = await fetch(`${d.url}?${asked}`, {cache: "no-store", signal: ctl.signal});
      answer = reply.ok ? await reply.json() : null;
    } catch (err) {
      answer = null;
    }
    if (w.data !== d) continue;
    if ((answer === null) !== Boolean(w.trouble)) {
      w.trouble = answer === null;
      w.trigger("changed", -1);
    }
    if (answer === null) {
      await sleep(1000);
    } else if (answer.closed || answer.version !== d.seen) {
      w.trigger("changed", answer.closed ? 0 : answer.version);
      for (let i = 0; i < 100 && w.data === d; i++) await sleep(50);
    }
  }
  w.running = false;
}

export default function (component) {
  const { data, setTriggerValue } = component;
  const w = (window.atlasClassListener ??= { data: null, running: false, mounts: 0 });
  const mount = ++w.mounts;
  if (!w.data || FIELDS.some((k) => w.data[k] !== data[k])) {
    w.ctl?.abort();
    w.data = data;
  }
  w.trigger = setTriggerValue;
  if (!w.running) {
    w.running = true;
    listen(w);
  }
  return () => {
    if (w.mounts === mount) {
      w.data = null;
      w.ctl?.abort();
    }
  };
}
"""
_listener = st.components.v2.component("atlas_class_listener", js=LISTENER_JS)


def closed_message(code: str, ended: bool) -> str:
    return (_("The class {code} has ended: this is the normal app, yours to explore.") if ended else
            _("No class is open with the code {code}: check the code with your teacher. This is the normal app."))\
        .format(code=codes.shown(code))


def unreachable_message() -> str:
    return _("The class server cannot be reached just now: the class goes on when it answers again.")


def turn(page: str):
    """A context around this session's page run: a teacher's goes first, a follower's waits its turn (except on a
    page whose run waits for a background job, WAITING_PAGES: holding a turn there would hold every follower)."""
    ss = st.session_state
    if ss.get(TEACHING):
        return class_turns().teacher(ss[TEACHING][0])
    if ss.get(JOINED) and ss.get(FOLLOWING) and page not in WAITING_PAGES:
        return class_turns().follower(ss[JOINED])
    return contextlib.nullcontext()


def _closed(code: str) -> str:
    try:
        class_store().state(code)
    except ClassClosed as err:
        return closed_message(code, err.ended)
    return closed_message(code, False)


# ------------------------------------------------------------------------------------------------ link and state
def _read_link(say: Callable[[str], None]) -> None:
    """A session's first run: ?join=<code> (follow) or ?teach=<code.secret> (the teacher's own address)."""
    ss = st.session_state
    joined, token = st.query_params.get(JOIN), st.query_params.get(TEACH)
    for name in (JOIN, TEACH):
        if name in st.query_params:
            del st.query_params[name]
    store = class_store()
    if joined is not None:
        code = codes.normalize(joined)
        if code is None:
            say(_("join={value} is not a class code (12 letters and digits, such as K7QM-3XPD-H9TF): this is the "
                  "normal app.").format(value=shown(joined)))
        elif store.version(code) is None:
            say(_closed(code))
        else:
            ss.update({JOINED: code, FOLLOWING: True, ME: secrets.token_hex(8)})
            ss.pop(SEEN, None)
        return
    cookie = st.context.cookies.get(COOKIE) if token is None else None   # another link opened in the teacher's tab
    remembered = cookie if isinstance(cookie, str) and cookie else None
    if token is not None or remembered:
        found = codes.read_teacher_token(token or remembered)
        try:
            if found is None:
                raise NotTeacher(token)
            store.teacher_here(*found)
            ss[TEACHING] = found
        except NotTeacher:
            if remembered:
                ss[FORGET] = True
            else:
                say(_("This address's class key is not valid: you are not teaching a class here."))
        except ClassClosed as err:
            if remembered:
                ss[FORGET] = True
            else:
                say(closed_message(err.code, err.ended))


def _cookie(teaching: tuple[str, str] | None) -> None:
    """The teacher's key in a session cookie of this browser (None: forgotten), so that another link of the app
    opened in the teacher's tab keeps the class. Drawn in the (hidden in presenter mode) sidebar."""
    value = (f"{COOKIE}={codes.teacher_token(*teaching)}; path=/; SameSite=Strict" if teaching
             else f"{COOKIE}=; path=/; max-age=0; SameSite=Strict")
    st.sidebar.html(f"<script>document.cookie = {json.dumps(value)};</script>", unsafe_allow_javascript=True)


def _open(view: View, version: int, page: str, url_read: str) -> None:
    """Open the teacher's view as a fresh link would (personal settings kept: the shell reads the link again);
    switches page when it is another."""
    ss = st.session_state
    ss[SEEN], ss[VIEW] = version, view
    for key in keys_to_reset(view.page):
        ss.pop(key, None)
    ss.pop(lesson_panel.ACTIVE, None)
    step = read_question_key(view.question)
    if view.revealed and step is not None:
        ss.setdefault(lesson_panel.REVEALED, set()).add(step)
    ss.pop(url_read, None)
    own = {k: st.query_params[k] for k in PERSONAL if k in st.query_params}     # a join link's own lang=, present=
    if view.page != page:
        st.switch_page(lesson_panel.page_file(view.page), query_params={**view.params, **own})
    st.query_params.from_dict({**view.params, **own})


def settle(page: str, url_read: str, say: Callable[[str], None]) -> None:
    """First in every run: read a class link (first run: the shell's state key url_read unset); a follower opens
    the teacher's view when it changed. Draws the teacher's strip or the student's bar. When the store cannot be
    reached, says so and leaves the view as it is."""
    ss = st.session_state
    try:
        _follow(page, url_read, say)
    except StoreUnavailable:
        ss[TROUBLE] = True
    if ss.pop(TROUBLE, False):
        st.warning(unreachable_message(), icon=":material/cloud_off:")
    if ss.get(TEACHING) and ss.get(REMEMBERED) != ss[TEACHING]:
        _cookie(ss[TEACHING])
        ss[REMEMBERED] = ss[TEACHING]
    elif ss.pop(FORGET, False):
        _cookie(None)
        ss.pop(REMEMBERED, None)
    if ss.get(TEACHING):
        with st.container(horizontal=True, vertical_alignment="center", gap="small", key="class_line"):
            _class_popover(ss[TEACHING][0])
            _teacher_strip()
    elif ss.get(JOINED):
        _student_bar()


def _follow(page: str, url_read: str, say: Callable[[str], None]) -> None:
    """A class link (first run); a follower opens the teacher's newer view. StoreUnavailable."""
    ss = st.session_state
    if not ss.get(url_read):
        _read_link(say)
    code = ss.get(JOINED)
    if code:
        version = class_store().version(code)
        if version is None:
            say(_closed(code))
            for key in (JOINED, FOLLOWING, SEEN, VIEW, SENT):
                ss.pop(key, None)
        elif ss.get(FOLLOWING) and version != ss.get(SEEN):
            state = class_store().state(code)
            _open(state.view, state.version, page, url_read)


def _step_question(key: str | None):
    """(lesson, n, question) of a question key, if its lesson reads and the step has a question."""
    step = read_question_key(key)
    lesson = load_catalog().get(step[0]) if step else None
    if lesson is None:
        return None
    n = step[1]
    question = lesson.step(n).question if 1 <= n <= len(lesson.steps) else None
    return (lesson, n, question) if question is not None else None


def _current_question(page: str) -> str | None:
    """The question key of the lesson step the teacher is on (on this page), if it has a question."""
    found = lesson_panel.active()
    if found is None or found[0].step(found[1]).page != page or found[0].step(found[1]).question is None:
        return None
    return question_key(found[0].id, found[1])


def link_params(page: str, link: dict[str, str]) -> dict[str, str]:
    """The class's params for this session's own address (join=<code> for a student, teach=<code.secret> for the
    teacher, never in a share link); the teacher publishes the view (link) here."""
    ss = st.session_state
    teaching = ss.get(TEACHING)
    if teaching:
        code, secret = teaching
        view = teacher_view(page, link, ss, _current_question(page))
        if ss.get(PUBLISHED) != (code, view):
            try:
                class_store().publish(code, secret, view)
                ss[PUBLISHED] = (code, view)
            except (NotTeacher, ClassClosed):
                ss.pop(TEACHING, None)
                ss[FORGET] = True
                return {}
            except StoreUnavailable:                      # published at a later run
                pass
        return {TEACH: codes.teacher_token(code, secret)}
    return {JOIN: ss[JOINED]} if ss.get(JOINED) else {}


# ------------------------------------------------------------------------------------------------------ teacher
def _start_class() -> None:
    try:
        code, secret = class_store().create(View("attention"))
    except StoreUnavailable:
        st.session_state[TROUBLE] = True
        return
    st.session_state[TEACHING] = (code, secret)
    st.session_state[HERE] = time.monotonic()
    st.session_state.pop(PUBLISHED, None)


def _end_class() -> None:
    ss = st.session_state
    teaching = ss.pop(TEACHING, None)
    ss.pop(PUBLISHED, None)
    ss[FORGET] = True
    if teaching:
        try:
            class_store().end(*teaching)
        except (NotTeacher, ClassClosed):
            pass
        except StoreUnavailable:
            st.session_state[TROUBLE] = True


def _reveal() -> None:
    teaching = st.session_state.get(TEACHING)
    if teaching:
        try:
            class_store().reveal(*teaching)
        except (NotTeacher, ClassClosed):
            st.session_state.pop(TEACHING, None)
        except StoreUnavailable:
            st.session_state[TROUBLE] = True


@functools.lru_cache(maxsize=8)
def _qr(link: str) -> bytes:
    return qr_png(link)


def class_button(where) -> None:
    """In the presenter row: "Start a class" (icon only: the row is full); a class's own panel is on its line."""
    if not st.session_state.get(TEACHING):
        where.button("", key="w_class_start", icon=":material/groups:", on_click=_start_class, type="tertiary",
                     help=_("Start a class") + ": " + _("Students who open the join link follow this screen: page, "
                                                      "tab, text and settings"))          # the row is full at 1024 px


def _class_popover(code: str) -> None:
    """The class's panel on the teacher's line: join code, link, QR code, End class."""
    link = join_link(st.context.url, code)
    with st.popover(codes.shown(code), icon=":material/groups:", key="class_panel",
                    help=_("The class: join code, link and QR code")):
        with st.container(horizontal=True, vertical_alignment="center", gap="small"):
            st.markdown("### " + _("Join code: **{code}**").format(code=codes.shown(code)), width="stretch")
            st.button(_("End class"), key="w_class_end", icon=":material/logout:", on_click=_end_class)
        st.code(link, language=None, wrap_lines=True)
        st.image(_qr(link), width=QR_PX)


def _labels(question) -> list[tuple[str, str]]:
    """(answer as stored, its label) in the order the bars show them."""
    if question.kind == "choice":
        return [(str(i), c[language()]) for i, c in enumerate(question.choices, start=1)]
    return [("right", _("Right answer")), ("wrong", _("Not right"))]


@st.fragment(run_every=STRIP_S)
def _teacher_strip() -> None:
    """The class at a glance on the teacher's screen, in one row: how many follow, a bar per answer, n of m
    answered, Reveal."""
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
        ss.pop(TEACHING, None)
        ss[FORGET] = True
        st.rerun(scope="app")
    except StoreUnavailable:
        st.caption(":material/cloud_off: " + unreachable_message())
        return
    found = _step_question(state.view.question)
    with st.container(horizontal=True, vertical_alignment="center", gap="small", key="class_strip"):
        st.caption(ngettext("{n} student follows", "{n} students follow", following).format(n=following),
                   width="content")
        if found is None:
            return
        answered = sum(counts.values())
        with st.container(horizontal=True, vertical_alignment="center", gap="small", key="class_answers"):
            for value, label in _labels(found[2]):
                n = counts.get(value, 0)
                st.progress(n / answered if answered else 0.0, text=f"{label} · {n}", width=BAR_PX)
            st.caption(_("{n} of {m} answered").format(n=answered, m=max(following, answered)), width="content")
            if state.view.revealed:
                st.caption(":material/visibility: " + _("Revealed on every screen"), width="content")
            else:
                st.button(_("Reveal"), key="w_class_reveal", icon=":material/visibility:", on_click=_reveal)


# ------------------------------------------------------------------------------------------------------ student
def _detach() -> None:
    st.session_state[FOLLOWING] = False


def _rejoin() -> None:
    st.session_state[FOLLOWING] = True
    st.session_state.pop(SEEN, None)


def _listen() -> None:
    """A follower's browser waits for the next view (LISTENER_JS over _class_wait's route); its trigger reruns the
    page, whose settle opens the view."""
    ss = st.session_state
    _listener(key="class_listener", data={"url": class_wait.WAIT_PATH, "code": ss[JOINED], "seen": ss.get(SEEN, 0),
                                          "me": ss[ME]}, width="content", height=0)


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
    except StoreUnavailable:
        st.caption(":material/cloud_off: " + unreachable_message())


def _student_bar() -> None:
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
    return computed_answer(question, caches.get_model(), caches.get_trace(text)) if text.strip() else None


def _send(key: str, widget: str) -> None:
    """on_click of Send: the answer (a choice's number, or whether the typed answer is right) to the class."""
    ss = st.session_state
    found = _step_question(key)
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
    except StoreUnavailable:
        ss[TROUBLE] = True


def _class_question(view: View | None) -> None:
    """The teacher's question on a student's screen: answer and send; the answer once the teacher reveals it."""
    found = _step_question(view.question if view else None)
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
