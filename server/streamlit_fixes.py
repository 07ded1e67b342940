"""Slow paths of the pinned Streamlit (1.67) mended once per process: app.py calls mend() as the server starts (and
router.py again, for `streamlit run router.py`), before any session runs. Each gives Streamlit's own result.

- **Leading emoji.** Every widget's label and option goes through `string_util.extract_leading_icon`, and a label
  that is not ASCII (the Chinese interface's, a token pill's "␣the") reaches `extract_leading_emoji`, which calls
  `re.search(EMOJI_EXTRACTION_REGEX, text)`. re.search looks a compiled pattern up in re's cache by its hash, and a
  compiled pattern's hash is computed over its whole program: 23 KB of emoji alternatives, ~45 µs a label, ~1 ms
  for a 22-token text's query pills, every run of every session. The pattern's own `search` gives the same match,
  kept per label (LABELS_KEPT): the search itself was still 6% of sixty followers' runs (py-spy).
- **One hop to the event loop per batch of messages.** A script run hands every message it makes (each element,
  each widget) to the event loop with its own `call_soon_threadsafe`: a write to the loop's wake-up socket (a
  system call, which lets go of the GIL and waits to get it back behind the other threads), the loop woken, ~100
  times a page run; and the loop, for each message, wakes itself the same way to flush (Runtime's
  `_enqueued_some_message`). Sixty followers rerunning one after the other spent ~15% of their runs there (py-spy,
  2-core Xeon). Here a session's messages wait in its own list; the first of a list wakes the loop once, which
  handles the list, in order, EVENT_BATCH_S later; a run's start, end or the runner's shutdown wakes the loop at
  once, and the loop handles the list up to it (so a run's end reaches the loop as soon as with Streamlit's own
  code: a rerun asked for just after a run ends must find that end handled, or Streamlit drops the run's
  finished message as a stopped runner's; a lessons browser test saw it once with every event batched); an event
  sent from the loop itself is handled at once, before what the loop was asked to do after it. The loop asks for
  its own flush without the wake-up socket.
- **Messages sent without a turn of the loop after each.** Runtime's loop sends each session's queued messages one
  at a time and pauses (`await asyncio.sleep(0)`: a turn of the loop) after every one. Each turn is a system call
  (the selector's poll), and while a script thread wants the interpreter the loop gets it back only after the
  switch interval (5 ms): sixty followers' runs of ~41 messages each kept their messages waiting for ~0.3-0.8 s
  each, all sent at the end (the server's own timeline, 2-core Xeon). Here the loop sends every session's queued
  messages at once (send_queued), asked for once however many messages ask before it runs; Runtime's loop is no
  longer woken to send (it sends once, when the first session connects, before anything is queued). `send_now`
  (from a script's thread) has the loop send this session's messages now and waits until its socket has them: a
  following student's turn ends with its view sent (app_pages.classroom.panel.turn).
- **The theme read once.** Every run's first message (new_session) carries the theme: six sections of Streamlit's
  options, each section found by a walk over all ~370 options under their lock: ~6% of the interpreter behind sixty
  followers' reruns (py-spy --gil). Here a section's message is made again only when its options' values changed.
- **A fragment's timed rerun from a page the session has left, dropped.** A `st.fragment(run_every=...)` (the Train
  page's live view) has the browser ask for the fragment's rerun on a timer. A tick sent while a run is switching
  page (a lesson step's PageDown from a Train step whose runs train) reaches Streamlit while the fragment is still
  registered, so Streamlit queues it; it runs after the new page's run, as the old page (its own page hash): the new
  page's widget states reset as a page change, the fragment gone, and the browser left with the frame and an empty
  view (3 of 8 lessons walks under load). Streamlit drops such a tick only once the fragment is unregistered. Here
  a timed fragment rerun whose page is not the page the session runs now is dropped as it arrives.
- **A shared figure's JSON made once.** `st.plotly_chart` deep-copies a figure (`to_dict`) and writes its JSON at
  every run of every session. A shared figure (app_pages/frame/widgets.py: made once for every session, never
  changed) is frozen: its dict and JSON made once, and plotly.io.to_json answers a frozen dict with its JSON.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time

import plotly.io
from streamlit import config, string_util
from streamlit.emojis import EMOJI_EXTRACTION_REGEX
from streamlit.runtime import app_session
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.runtime import Runtime
from streamlit.runtime.scriptrunner.script_runner import ScriptRunnerEvent
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.runtime.session_manager import SessionClientDisconnectedError

STREAMLITS = string_util.extract_leading_emoji     # Streamlit's own, kept for the tests that compare the two
STREAMLITS_FLUSH = Runtime._enqueued_some_message
STREAMLITS_THEME = app_session._populate_theme_msg
PLOTLYS_TO_JSON = plotly.io.to_json
STREAMLITS_REQUEST_RERUN = AppSession.request_rerun
EVENT_BATCH_S = 0.005              # a script run's messages reach the event loop in batches this far apart
_LOG = logging.getLogger(__name__)
_QUEUED = "_atlas_events"          # an AppSession's script-runner events not handled yet
_SEND_ASKED = "_atlas_send_asked"  # on the Runtime: send_queued is asked for and has not run yet
LABELS_KEPT = 4096                 # non-ASCII labels whose leading emoji is kept (a few hundred bytes each)
SENT_POLL_S = 0.001                # how often the loop looks whether a client's socket has taken its messages
_QUEUE_LOCK = threading.Lock()
_SECTIONS: dict[str, tuple] = {}   # theme section -> (the options' parse, the section's options)
_THEMES: dict[str, tuple] = {}     # theme section -> (its option values, its message or None: left untouched)


def extract_leading_emoji(text: str) -> tuple[str, str]:
    """Streamlit's extract_leading_emoji: (the leading emoji or "", the rest without the separator)."""
    if not text or text.isascii():
        return "", text
    return _leading_emoji(text)


@functools.lru_cache(maxsize=LABELS_KEPT)
def _leading_emoji(text: str) -> tuple[str, str]:
    """extract_leading_emoji of a label that is not ASCII, kept: sixty followers show the same labels."""
    found = EMOJI_EXTRACTION_REGEX.search(text)
    return ("", text) if found is None else (found.group(1), found.group(2))


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread is running loop."""
    return asyncio._get_running_loop() is loop


def on_scriptrunner_event(session: AppSession, sender, event, **details) -> None:
    """AppSession._on_scriptrunner_event (on the script's thread, or the loop's): the event joins the session's
    list; the first message in the list has the loop handle them all, in order, EVENT_BATCH_S later; any other event
    (a run's start or end, the runner's shutdown) has it handle them now (from the loop's own thread: next, as
    Streamlit's call_soon would)."""
    with _QUEUE_LOCK:
        queued = session.__dict__.setdefault(_QUEUED, [])
        queued.append((sender, event, details))
        first = len(queued) == 1
    if _on_loop(session._event_loop):
        session._event_loop.call_soon(_handle_queued, session)
    elif event is not ScriptRunnerEvent.ENQUEUE_FORWARD_MSG:
        session._call_soon_on_event_loop(functools.partial(_handle_queued, session))
    elif first:
        session._call_soon_on_event_loop(functools.partial(_handle_later, session))


def _handle_later(session: AppSession) -> None:
    session._event_loop.call_later(EVENT_BATCH_S, _handle_queued, session)


def _handle_queued(session: AppSession) -> None:
    """On the event loop: every event queued so far, in order, each as Streamlit handles one."""
    with _QUEUE_LOCK:
        queued = session.__dict__.pop(_QUEUED, [])
    for sender, event, details in queued:
        try:
            session._handle_scriptrunner_event_on_event_loop(sender, event, **details)
        except Exception:           # as the loop's own handler would: logged, the next event still handled
            _LOG.exception("Streamlit could not handle the script runner's event %s", event)
    if Runtime.exists():
        send_queued(Runtime.instance())     # what the events queued goes out in this turn of the loop


def enqueued_some_message(runtime: Runtime) -> None:
    """Runtime._enqueued_some_message: the loop asked to send the queued messages (send_queued), once however many
    messages ask before it does (its wake-up socket written only from another thread)."""
    with _QUEUE_LOCK:
        if runtime.__dict__.get(_SEND_ASKED):
            return
        runtime.__dict__[_SEND_ASKED] = True
    loop = runtime._get_async_objs().eventloop
    if _on_loop(loop):
        loop.call_soon(send_queued, runtime)
    else:
        loop.call_soon_threadsafe(send_queued, runtime)


def send_queued(runtime: Runtime) -> None:
    """On the event loop, what Runtime's loop does when messages are queued, without a turn of the loop after each:
    every active session's queued messages to its client (serialized, queued on its socket's sender), in order, then
    the session told they are sent. A client that has gone is disconnected (Streamlit's own handling)."""
    with _QUEUE_LOCK:
        if not runtime.__dict__.get(_SEND_ASKED):
            return
        runtime.__dict__[_SEND_ASKED] = False
    for info in runtime._session_mgr.list_active_sessions():
        for msg in info.session.flush_browser_queue():
            try:
                runtime._send_message(info, msg)
            except SessionClientDisconnectedError:
                runtime.disconnect_session(info.session.id, client=info.client)
                break
        info.session.on_flushed_messages_sent()


def send_now(wait_s: float) -> None:
    """From a script's thread: the loop handles this session's queued events and sends its messages now; returns
    once its client's socket has taken them, or after wait_s (a slow client's socket). Nothing outside a server's
    session (AppTest)."""
    ctx = get_script_run_ctx()
    if ctx is None or not Runtime.exists():
        return
    sessions = getattr(Runtime.instance(), "_session_mgr", None)      # (AppTest's Runtime is a stand-in)
    info = None if sessions is None else sessions.get_active_session_info(ctx.session_id)
    if info is None:
        return
    sent = threading.Event()
    deadline = time.monotonic() + wait_s

    def taken() -> None:
        queue = getattr(info.client, "_send_queue", None)
        if queue is None or queue.empty() or time.monotonic() > deadline:
            sent.set()
        else:
            info.session._event_loop.call_later(SENT_POLL_S, taken)

    def on_loop() -> None:
        _handle_queued(info.session)                   # (and send_queued)
        info.session._event_loop.call_soon(taken)      # after the socket's sender, woken by send_queued, has run

    info.session._event_loop.call_soon_threadsafe(on_loop)
    sent.wait(wait_s)


def populate_theme_msg(msg, section: str = "theme") -> None:
    """app_session._populate_theme_msg: the section's theme message as Streamlit makes it, made again only when one
    of the section's option values changed (None: Streamlit leaves the message untouched)."""
    options = config.get_config_options()
    found = _SECTIONS.get(section)
    if found is None or found[0] is not options:          # a new parse of the options
        found = _SECTIONS[section] = (options, [o for o in options.values() if o.section == section])
    values = tuple(option.value for option in found[1])
    made = _THEMES.get(section)
    if made is None or made[0] != values:
        blank = type(msg)()
        STREAMLITS_THEME(blank, section)
        made = _THEMES[section] = (values, blank if any(value is not None for value in values) else None)
    if made[1] is not None:
        msg.SetInParent()
        msg.MergeFrom(made[1])


class FrozenSpec(dict):
    """A figure's dict, made once, with its JSON (`json`): what st.plotly_chart makes of a shared figure."""

    json: str


def freeze_figure(fig) -> int:
    """From now on fig.to_dict() is one dict made now and plotly.io.to_json of it the JSON made now; fig must never
    change again. Returns the JSON's length (for a cache's byte budget)."""
    spec = FrozenSpec(fig.to_dict())
    spec.json = PLOTLYS_TO_JSON(spec, validate=False)
    object.__setattr__(fig, "to_dict", lambda: spec)
    return len(spec.json)


def to_json(fig, *args, **kwargs) -> str:
    """plotly.io.to_json: a frozen figure's JSON as it was made, anything else as plotly writes it."""
    if isinstance(fig, FrozenSpec) and not args and set(kwargs) <= {"validate"}:
        return fig.json
    return PLOTLYS_TO_JSON(fig, *args, **kwargs)


def request_rerun(session: AppSession, client_state) -> None:
    """AppSession.request_rerun, without a fragment's timed rerun sent from a page the session has left."""
    if (client_state is not None and client_state.fragment_id and client_state.is_auto_rerun
            and client_state.page_script_hash
            and client_state.page_script_hash != session._pages_manager.current_page_script_hash):
        _LOG.debug("dropped a timed rerun of fragment %s from page %s", client_state.fragment_id,
                   client_state.page_script_hash)
        return
    STREAMLITS_REQUEST_RERUN(session, client_state)


def mend() -> None:
    string_util.extract_leading_emoji = extract_leading_emoji
    AppSession._on_scriptrunner_event = on_scriptrunner_event
    Runtime._enqueued_some_message = enqueued_some_message
    app_session._populate_theme_msg = populate_theme_msg
    plotly.io.to_json = to_json
    AppSession.request_rerun = request_rerun
