"""The mended Streamlit slow path (server/streamlit_fixes.py) gives Streamlit's own answers."""
from __future__ import annotations

import random

from streamlit import string_util
from streamlit.emojis import ALL_EMOJIS
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.scriptrunner.script_runner import ScriptRunnerEvent as Event

from server import streamlit_fixes as fixes


def test_the_leading_emoji_is_streamlits_for_every_kind_of_label():
    rng = random.Random(0)
    emojis = sorted(ALL_EMOJIS)
    labels = ["", "Layer 3", "第 3 层", "␣the", "注意力 🙂", "🚨 Error occurred", "🚨Error", "🚨 - note", "🚨: note",
              "<b>", "Count: 1, 2, 3", "\u200b", "🫶🏽 hands", ":material/warning: Caution", "é", "🙂"]
    labels += [f"{e} {rng.choice(['x', '层', ''])}" for e in rng.sample(emojis, 300)]
    labels += [f"x{e}" for e in rng.sample(emojis, 50)]
    for label in labels:
        assert fixes.extract_leading_emoji(label) == fixes.STREAMLITS(label), label


def test_mend_puts_it_where_widget_labels_go():
    fixes.mend()
    assert string_util.extract_leading_icon("🚨 Error") == ("🚨", "Error")
    assert string_util.extract_leading_emoji is fixes.extract_leading_emoji
    assert fixes.STREAMLITS is not fixes.extract_leading_emoji


class _Session:
    """What on_scriptrunner_event needs of an AppSession: its loop, a way to call soon on it, a handler that records."""

    def __init__(self, loop):
        self._event_loop, self.handled, self.wakes = loop, [], 0

    def _call_soon_on_event_loop(self, callback):
        self.wakes += 1
        self._event_loop.call_soon_threadsafe(callback)

    def _handle_scriptrunner_event_on_event_loop(self, sender, event, **details):
        if details.get("forward_msg") == "boom":
            raise RuntimeError("a handler that fails")
        self.handled.append((sender, event, details.get("forward_msg")))


def test_a_sessions_events_are_handled_in_order_after_few_wakes():
    import asyncio
    import threading
    import time

    loop = asyncio.new_event_loop()
    session = _Session(loop)
    sent = [("runner", Event.ENQUEUE_FORWARD_MSG, "boom" if i == 500 else i) for i in range(2000)]

    def script_thread():
        for sender, event, i in sent:
            fixes.on_scriptrunner_event(session, sender, event, forward_msg=i)
            if i != "boom" and i % 100 == 0:
                time.sleep(0.002)                     # a run's pauses: its events still wait for the batch
        loop.call_soon_threadsafe(loop.stop)

    threading.Thread(target=script_thread).start()
    loop.run_forever()
    loop.run_until_complete(asyncio.sleep(3 * fixes.EVENT_BATCH_S))      # the last batch's wait
    loop.close()
    assert session.handled == [s for s in sent if s[2] != "boom"]     # every event, in order; a failing one logged
    assert session.wakes < len(sent) / 20


def test_an_event_sent_on_the_loop_is_handled_before_what_the_loop_is_asked_next():
    """AppSession.handle_backmsg_exception sends events from the loop, then asks the loop (call soon) for the
    exception's message, which must come after them, even behind events of the script's thread still waiting."""
    import asyncio
    import threading

    loop = asyncio.new_event_loop()
    session = _Session(loop)
    order = []

    async def on_the_loop():
        script = threading.Thread(target=fixes.on_scriptrunner_event,
                                  args=(session, "runner", Event.ENQUEUE_FORWARD_MSG),
                                  kwargs={"forward_msg": "from the script"})
        script.start()
        script.join()
        await asyncio.sleep(0.001)                     # its wake handled: the batch waits EVENT_BATCH_S
        assert session.wakes == 1 and session.handled == []
        fixes.on_scriptrunner_event(session, "runner", Event.SCRIPT_STOPPED_WITH_SUCCESS, forward_msg="from the loop")
        loop.call_soon(lambda: order.append(list(session.handled)))
        await asyncio.sleep(3 * fixes.EVENT_BATCH_S)

    loop.run_until_complete(on_the_loop())
    loop.close()
    assert order == [[("runner", Event.ENQUEUE_FORWARD_MSG, "from the script"),
                      ("runner", Event.SCRIPT_STOPPED_WITH_SUCCESS, "from the loop")]]
    assert len(session.handled) == 2


def test_a_runs_end_reaches_the_loop_without_waiting_for_the_batch():
    """A run's end (and start, and the runner's shutdown) from the script's thread: the loop handles it, with the
    messages queued before it, at its next turn; a rerun asked for just after a run ends must find the end handled
    (Streamlit drops a stopped runner's events once a new runner has started)."""
    import asyncio
    import threading

    loop = asyncio.new_event_loop()
    session = _Session(loop)
    events = [(Event.SCRIPT_STARTED, "start"), (Event.ENQUEUE_FORWARD_MSG, "chart"),
              (Event.SCRIPT_STOPPED_WITH_SUCCESS, "end"), (Event.SHUTDOWN, "shutdown")]
    seen = []

    async def on_the_loop():
        def script():
            for event, msg in events:
                fixes.on_scriptrunner_event(session, "runner", event, forward_msg=msg)

        thread = threading.Thread(target=script)
        thread.start()
        thread.join()
        await asyncio.sleep(0)                 # one turn of the loop: what the script thread asked for runs
        await asyncio.sleep(0)
        seen.append([msg for _, _, msg in session.handled])
        await asyncio.sleep(3 * fixes.EVENT_BATCH_S)

    loop.run_until_complete(on_the_loop())
    loop.close()
    assert seen == [["start", "chart", "end", "shutdown"]]
    assert session.handled == [("runner", event, msg) for event, msg in events]


def test_a_frozen_figure_is_shown_as_streamlit_shows_the_figure():
    """st.plotly_chart's spec of a frozen figure is the one Streamlit writes for the same figure not frozen."""
    from streamlit.testing.v1 import AppTest

    def script():
        import plotly.graph_objects as go
        import streamlit as st

        from server import streamlit_fixes

        streamlit_fixes.mend()
        figs = []
        for _ in range(2):
            fig = go.Figure(go.Heatmap(z=[[0.1, 0.9], [0.5, float("nan")]], x=["<b>", "我¹⁄₂"], y=["a", "b"]))
            fig.update_layout(title="Count: 1, 2, 3", height=300)
            figs.append(fig)
        streamlit_fixes.freeze_figure(figs[1])
        for i, fig in enumerate(figs):
            st.plotly_chart(fig, key=f"chart{i}")

    at = AppTest.from_function(script).run()
    assert not at.exception
    plain, frozen = (at.get("plotly_chart")[i].proto.spec for i in range(2))
    assert plain == frozen
    assert "Count: 1, 2, 3" in plain and "我¹⁄₂" in plain


def test_to_json_writes_anything_not_frozen_as_plotly_does():
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=[1, 2], y=[3, 4]))
    assert fixes.to_json(fig) == fixes.PLOTLYS_TO_JSON(fig)
    spec = fig.to_dict()
    assert fixes.to_json(spec, validate=False, pretty=True) == fixes.PLOTLYS_TO_JSON(spec, validate=False, pretty=True)
    length = fixes.freeze_figure(fig)
    assert fixes.to_json(fig.to_dict(), validate=False) == fixes.PLOTLYS_TO_JSON(go.Figure(fig).to_dict(),
                                                                               validate=False)
    assert length == len(fig.to_dict().json)


def test_the_theme_is_streamlits_for_every_section_and_follows_a_changed_option():
    from streamlit import config
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    sections = ("theme", "theme.sidebar", "theme.light", "theme.dark", "theme.light.sidebar", "theme.dark.sidebar")

    def both(section):
        ours, streamlits = ForwardMsg(), ForwardMsg()
        fixes.populate_theme_msg(ours.new_session.custom_theme, section)
        fixes.STREAMLITS_THEME(streamlits.new_session.custom_theme, section)
        assert ours.new_session.HasField("custom_theme") == streamlits.new_session.HasField("custom_theme"), section
        return ours.SerializeToString(), streamlits.SerializeToString()

    for _ in range(2):
        for section in sections:
            ours, streamlits = both(section)
            assert ours == streamlits, section
    config.set_option("theme.primaryColor", "#123456")
    try:
        ours, streamlits = both("theme")
        assert ours == streamlits and b"#123456" in ours
    finally:
        config.set_option("theme.primaryColor", None)


class _Client:
    def __init__(self, gone: bool = False):
        self.sent, self.gone = [], gone


class _Queued:
    """What send_queued needs of an AppSession: its queued messages, told when they are sent."""

    def __init__(self, sid: str, messages: list):
        self.id, self.queue, self.told = sid, list(messages), 0

    def flush_browser_queue(self):
        out, self.queue = self.queue, []
        return out

    def on_flushed_messages_sent(self):
        self.told += 1


class _Runtime:
    """What enqueued_some_message and send_queued need of Streamlit's Runtime (its loop, sessions, send, disconnect)."""

    def __init__(self, loop, infos):
        from types import SimpleNamespace

        self.loop, self.disconnected = loop, []
        self._session_mgr = SimpleNamespace(list_active_sessions=lambda: list(infos))

    def _get_async_objs(self):
        from types import SimpleNamespace

        return SimpleNamespace(eventloop=self.loop)

    def _send_message(self, info, msg):
        from streamlit.runtime.session_manager import SessionClientDisconnectedError

        if info.client.gone:
            raise SessionClientDisconnectedError
        info.client.sent.append(msg)

    def disconnect_session(self, session_id, client=None):
        self.disconnected.append((session_id, client))


def test_queued_messages_are_sent_in_order_in_one_turn_of_the_loop_asked_once():
    """Runtime's loop paused a turn after each message; send_queued sends every session's queue in order in one go,
    asked for once however many messages ask before it runs (from the loop or another thread); a client that has
    gone is disconnected and the other sessions still get theirs."""
    import asyncio
    import threading
    from types import SimpleNamespace

    loop = asyncio.new_event_loop()
    sessions = [_Queued("a", [f"a{i}" for i in range(41)]), _Queued("gone", ["g0", "g1"]), _Queued("b", ["b0"])]
    infos = [SimpleNamespace(session=s, client=_Client(gone=s.id == "gone")) for s in sessions]
    runtime = _Runtime(loop, infos)
    turns = []

    async def on_the_loop():
        thread = threading.Thread(target=lambda: [fixes.enqueued_some_message(runtime) for _ in range(50)])
        thread.start()
        thread.join()
        fixes.enqueued_some_message(runtime)                   # asked again from the loop: still once
        turns.append(len(loop._ready))
        await asyncio.sleep(0)                                 # one turn: everything sent
        turns.append([list(info.client.sent) for info in infos])
        sessions[2].queue.append("b1")
        fixes.enqueued_some_message(runtime)
        await asyncio.sleep(0)

    loop.run_until_complete(on_the_loop())
    loop.close()
    assert turns[0] == 1, "one send asked for, not one per message"
    assert turns[1] == [[f"a{i}" for i in range(41)], [], ["b0"]]
    assert infos[2].client.sent == ["b0", "b1"]
    assert runtime.disconnected == [("gone", infos[1].client)]
    assert [s.told for s in sessions] == [2, 2, 2]


def test_send_now_returns_once_the_sessions_messages_are_on_its_socket(tmp_path):
    """A real server (an st.App mending Streamlit as app.py does): a run writes 40 elements, send_now, then reads
    where its messages are: none waits in the session's batch, its browser queue or its socket's send queue (before
    the mend's flush they waited EVENT_BATCH_S in the batch). Every message reaches the client, in order."""
    import os

    from harness.apptest import ROOT
    from harness.script_server import forward_msgs, script_server, session

    (tmp_path / "serve.py").write_text(
        "import streamlit as st\nfrom server import streamlit_fixes\nstreamlit_fixes.mend()\n"
        "app = st.App('page.py')\n")
    (tmp_path / "page.py").write_text(
        "import streamlit as st\n"
        "from streamlit.runtime import Runtime\n"
        "from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx\n"
        "from server import streamlit_fixes\n"
        "for i in range(40):\n"
        "    st.write(f'before {i}')\n"
        "streamlit_fixes.send_now(10.0)\n"
        "info = Runtime.instance()._session_mgr.get_active_session_info(get_script_run_ctx().session_id)\n"
        "where = (len(info.session.__dict__.get(streamlit_fixes._QUEUED, [])), info.session._browser_queue.is_empty(),"
        " info.client._send_queue.qsize())\n"
        "st.write(f'waiting {where}')\n"
        "st.write('last')\n")
    texts, kinds = [], []
    with script_server(tmp_path, "serve.py", env={**os.environ, "PYTHONPATH": str(ROOT)}) as port:
        sock = session(port, "fixes-test")
        for msg in forward_msgs(sock):
            kinds.append(msg.WhichOneof("type"))
            if kinds[-1] == "delta" and msg.delta.new_element.WhichOneof("type") == "markdown":
                texts.append(msg.delta.new_element.markdown.body)
            if kinds[-1] == "script_finished":
                break
        sock.close()
    assert texts == [f"before {i}" for i in range(40)] + ["waiting (0, True, 0)", "last"], texts
    assert kinds[0] == "new_session" and "script_finished" in kinds


def test_a_timed_fragment_rerun_from_a_page_the_session_left_is_dropped(monkeypatch):
    """A fragment's timer tick (run_every) that names another page than the one the session runs now never reaches
    Streamlit's request_rerun; every other request does, unchanged: a tick on the page shown, a click in a fragment,
    a rerun that changes page, a rerun without client state."""
    passed = []
    monkeypatch.setattr(fixes, "STREAMLITS_REQUEST_RERUN", lambda session, state: passed.append(state))
    session = type("Session", (), {})()
    session._pages_manager = type("Pages", (), {"current_page_script_hash": "efficient"})()

    def state(page: str, fragment: str = "", auto: bool = False) -> ClientState:
        return ClientState(page_script_hash=page, fragment_id=fragment, is_auto_rerun=auto, query_string="step=10")

    fixes.request_rerun(session, state("train", "live", auto=True))
    assert passed == []
    kept = [state("efficient", "live", auto=True), state("train", "live"), state("train"), None]
    for s in kept:
        fixes.request_rerun(session, s)
    assert passed == kept
    fixes.mend()
    assert AppSession.request_rerun is fixes.request_rerun
