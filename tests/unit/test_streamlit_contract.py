"""Everything the app, its tests and bench/ rely on in the pinned Streamlit that Streamlit does not promise, one test
each: an upgrade that changes one of them fails here, by name, instead of a feature quietly stopping to help.
ARCHITECTURE.md ("Streamlit's internals") lists the same assumptions and the modules that make them."""
from __future__ import annotations

import inspect
import re
import socket
from pathlib import Path

import pytest
import streamlit as st
from streamlit import file_util, string_util
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.testing.v1 import AppTest

from server import frontend_mends, static_assets, streamlit_fixes

ROOT = Path(__file__).resolve().parents[2]
STATIC = Path(file_util.get_static_dir())


def _pinned(package: str) -> str:
    line = next(x for x in (ROOT / "requirements.txt").read_text().splitlines() if x.startswith(package + "=="))
    return line.split("==")[1].strip()


def test_streamlit_is_the_pinned_version():
    """The assumptions below were checked against this version; requirements.txt pins it exactly."""
    assert st.__version__ == _pinned("streamlit")


def test_each_script_run_gets_a_new_cursors_dict():
    """_i18n.language() works the language out once per run, keyed on the identity of ScriptRunContext.cursors,
    which Streamlit replaces at each run's start (and keeps during the run)."""
    def script():
        import streamlit as st
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        first = ctx.cursors
        st.write("x")
        st.session_state.setdefault("seen", []).append((first, ctx.cursors is first))

    at = AppTest.from_function(script).run()
    at.run()
    (a, same_a), (b, same_b) = at.session_state["seen"]
    assert same_a and same_b and a is not b


def test_the_static_folder_has_the_chunk_the_page_imports_early():
    """server/static_assets.py serves static/<...> from Streamlit's static folder and imports the "PlotlyChart"
    chunk with the page (index.html has a head to put it in)."""
    files = static_assets.hashed_asset_files(str(STATIC))
    early = static_assets.early_imports(files)
    assert early.count(b"<script") == len(static_assets.EARLY_CHUNKS) == 1 and b"/static/js/PlotlyChart." in early
    assert b"</head>" in (STATIC / "index.html").read_bytes()


def test_each_frontend_mend_finds_its_text_once_in_the_pinned_frontend():
    """server/frontend_mends.py replaces text in Streamlit's compiled chunks; each text must occur exactly once in
    the chunk it names (another Streamlit: the mend would be left out, and its chart drawn twice again)."""
    for mend in frontend_mends.MENDS:
        files = [p for p in (STATIC / "static" / "js").glob(mend.chunk + ".*.js")]
        assert len(files) == 1, (mend.name, files)
        assert frontend_mends.applies(mend, files[0].read_bytes()), mend.name


def _sources() -> str:
    folders = ("app_pages", "app_core", "viz", "tests/e2e", "tests/app", "bench")
    return "\n".join(p.read_text(encoding="utf-8") for folder in folders for p in (ROOT / folder).rglob("*.py"))


@pytest.fixture(scope="module")
def frontend() -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in (STATIC / "static" / "js").glob("*.js"))


def test_the_frontend_has_every_data_testid_we_select(frontend):
    """The CSS of the shell and the lesson / class panels, the e2e harness and bench/ find Streamlit's elements by
    data-testid; each must exist in the shipped frontend."""
    used = set(re.findall(r'data-testid=\\?["\']?(st[A-Za-z]+)', _sources()))
    assert {"stPlotlyChart", "stSidebar", "stMainBlockContainer", "stApp"} <= used
    missing = sorted(t for t in used if not re.search(f"[`'\"]{t}[`'\"]", frontend))
    assert not missing, f"data-testids no longer in Streamlit's frontend: {missing}"


def test_the_frontend_marks_run_state_and_keys(frontend):
    """The e2e harness reads the app's run and connection state from data attributes; every keyed element gets the
    class st-key-<key> (the panels' CSS and the tests select by it)."""
    for attribute in ("data-test-script-state", "data-test-connection-state", "data-stale"):
        assert attribute in frontend, attribute
    assert "st-key-" in frontend


def test_forward_msg_fields_the_harness_counts():
    """harness/browser.py's RUN_COUNTER_INIT_JS counts runs from raw frames by field number: a run starts with
    new_session (4) and ends with script_finished (6); bench/ reads ForwardMsg / BackMsg by name."""
    fields = ForwardMsg.DESCRIPTOR.fields_by_name
    assert (fields["new_session"].number, fields["script_finished"].number) == (4, 6)
    assert {"delta", "ref_hash", "page_info_changed", "auto_rerun", "stop_auto_rerun", "navigation", "metadata",
            "new_session", "script_finished"} <= set(fields)
    new_session = ForwardMsg.DESCRIPTOR.fields_by_name["new_session"].message_type.fields_by_name
    assert "script_run_id" in new_session or "page_script_hash" in new_session
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.BidiComponent_pb2 import BidiComponent

    assert {"rerun_script"} <= set(BackMsg.DESCRIPTOR.fields_by_name)
    assert {"component_name", "json"} <= set(BidiComponent.DESCRIPTOR.fields_by_name)


def test_the_leading_emoji_lookup_we_mend():
    """server/streamlit_fixes.py replaces string_util.extract_leading_emoji (a 23 KB pattern hashed per label) with
    the same match made by the compiled pattern itself."""
    assert callable(string_util.extract_leading_emoji)
    for text in ("🔭 Atlas", "注意力 a", "␣the", "plain", "", "🙂"):
        assert streamlit_fixes.extract_leading_emoji(text) == streamlit_fixes.STREAMLITS(text)


def test_streamlit_binds_its_socket_with_protocol_0():
    """server/tcp_nodelay.py exists because Streamlit binds its listening socket as socket.socket(family): protocol 0,
    on which asyncio leaves Nagle's algorithm on."""
    from streamlit.web.server.starlette import starlette_server

    sock = starlette_server._bind_socket("127.0.0.1", 0, 8)
    try:
        assert sock.proto == 0 and sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
    finally:
        sock.close()


def test_the_api_parameters_the_app_uses():
    """st.App serves our routes and middleware with a lifespan; widgets keep their value across pages with
    persist_state="session"; buttons take keyboard shortcuts; components v2 take on_<state>_change callbacks
    and defaults (the presenter keys and the class listener)."""
    assert {"routes", "lifespan", "middleware"} <= set(inspect.signature(st.App).parameters)
    for widget in (st.slider, st.toggle, st.selectbox, st.text_area):
        assert "persist_state" in inspect.signature(widget).parameters, widget.__name__
    assert "shortcut" in inspect.signature(st.button).parameters

    def script():
        import streamlit as st

        mount = st.components.v2.component("contract_probe", js="export default function () {}")
        st.session_state["got"] = mount(key="probe", data={"a": 1}, default={"target": 7},
                                        on_target_change=lambda: None)["target"]

    assert AppTest.from_function(script).run().session_state["got"] == 7


def test_apptest_opens_a_function_page_by_the_hash_of_its_url_path():
    """harness/apptest.go_to: AppTest.switch_page knows only file pages; Streamlit knows a registered page by
    calc_hash(url_path), the hash AppTest runs the script with (its private _page_hash)."""
    from streamlit.util import calc_hash

    def script():
        import streamlit as st

        pages = [st.Page(lambda: st.write("first"), title="A", url_path="", default=True),
                 st.Page(lambda: st.write("second"), title="B", url_path="second")]
        st.navigation(pages).run()

    at = AppTest.from_function(script).run()
    at._page_hash = calc_hash("second")
    assert [m.value for m in at.run().markdown] == ["second"]


def test_the_event_hop_and_the_figure_path_we_mend():
    """server/streamlit_fixes.py queues a session's script-runner events (AppSession._on_scriptrunner_event, connected
    to each new ScriptRunner, handing each event to _handle_scriptrunner_event_on_event_loop through
    _call_soon_on_event_loop), and answers st.plotly_chart's to_dict and plotly.io.to_json for a frozen figure."""
    import inspect

    from streamlit.elements import plotly_chart
    from streamlit.runtime.app_session import AppSession

    assert "self._scriptrunner.on_event.connect(self._on_scriptrunner_event)" in inspect.getsource(AppSession)
    handler = inspect.signature(AppSession._handle_scriptrunner_event_on_event_loop).parameters
    assert list(handler)[:3] == ["self", "sender", "event"]
    assert callable(AppSession._call_soon_on_event_loop)
    assert "_populate_theme_msg(msg.new_session.custom_theme)" in inspect.getsource(
        AppSession._create_new_session_message)                      # looked up in the module at each call
    from streamlit.runtime.runtime import Runtime

    assert Runtime._enqueued_some_message in (streamlit_fixes.STREAMLITS_FLUSH, streamlit_fixes.enqueued_some_message)
    assert "call_soon_threadsafe(async_objs.need_send_data.set)" in inspect.getsource(streamlit_fixes.STREAMLITS_FLUSH)
    chart = inspect.getsource(plotly_chart)
    assert "plotly.io.to_json(figure, validate=False)" in chart
    assert "return_figure_from_figure_or_data" in chart
    assert "figure = figure_or_data.to_dict()" in inspect.getsource(
        __import__("plotly.tools", fromlist=["x"]).return_figure_from_figure_or_data)


def test_the_message_flush_we_take_over():
    """server/streamlit_fixes.send_queued does what Runtime's loop does with queued messages (each active session's
    flush_browser_queue to _send_message, then on_flushed_messages_sent; a gone client's session disconnected with
    that client) without the loop's pause after every message, and send_now watches a client's socket sender:
    StarletteSessionClient's asyncio queue, drained by its _sender task."""
    from streamlit.runtime.runtime import Runtime
    from streamlit.web.server.starlette.starlette_websocket import StarletteSessionClient

    flush = inspect.getsource(Runtime._loop_coroutine)
    for line in ("msg_list = active_session_info.session.flush_browser_queue()",
                 "self._send_message(active_session_info, msg)", "await asyncio.sleep(0)",
                 "active_session_info.session.on_flushed_messages_sent()", "client=active_session_info.client"):
        assert line in flush, line
    assert "asyncio.create_task(async_objs.need_send_data.wait())" in flush      # only woken through need_send_data
    init, sender = inspect.getsource(StarletteSessionClient.__init__), inspect.getsource(StarletteSessionClient._sender)
    assert "self._send_queue: asyncio.Queue[bytes] = asyncio.Queue(" in init
    assert "payload = await self._send_queue.get()" in sender and "await self._websocket.send_bytes(payload)" in sender


def test_a_timed_fragment_rerun_waits_behind_a_page_switch_and_runs_as_its_own_page():
    """Why server/streamlit_fixes.request_rerun drops a fragment's timed rerun from a page the session left:
    AppSession.request_rerun drops one only when the fragment is unregistered, and keeps the tick's page hash and
    auto-rerun flag; a fragment rerun does not stop a full run in progress (it waits behind it, then runs as the page
    its tick named); the session's current page is the PagesManager's, set by each run."""
    from streamlit.runtime.app_session import AppSession
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.runtime.scriptrunner_utils import script_requests

    request = inspect.getsource(streamlit_fixes.STREAMLITS_REQUEST_RERUN)
    for line in ("if fragment_id and not self.has_fragment(fragment_id):",
                 "page_script_hash=client_state.page_script_hash,", "is_auto_rerun=client_state.is_auto_rerun,"):
        assert line in request, line
    assert script_requests._fragment_run_should_not_preempt_script(["fragment"], False)
    assert not script_requests._fragment_run_should_not_preempt_script([], False)
    assert isinstance(inspect.getattr_static(PagesManager, "current_page_script_hash"), property)
    assert "self._pages_manager = PagesManager(" in inspect.getsource(AppSession.__init__)


def test_a_new_apptest_finds_components_through_the_scan_the_harness_answers(monkeypatch):
    """harness/apptest.scan_components_once: a new AppTest's first run finds the installed components by calling
    manifest_scanner.scan_component_manifests as it is then (looked up at the call), once; the harness's answer
    is Streamlit's own scan."""
    from streamlit.components.v2 import manifest_scanner

    from harness import apptest

    calls = []
    monkeypatch.setattr(manifest_scanner, "scan_component_manifests",
                        lambda max_workers=None: calls.append(max_workers) or [])
    AppTest.from_function(lambda: None).run()
    assert len(calls) == 1
    assert list(apptest.installed_components()) == apptest.STREAMLITS_SCAN()


SLOW_SCRIPT = "import time\nimport streamlit as st\nst.write('started')\ntime.sleep(2)\nst.write('ended')\n"


def test_a_run_stopped_for_a_newer_one_never_sends_its_end(tmp_path):
    """harness/browser.py's RERUN_DONE_JS waits for "the run started last has ended", not for as many ends as starts:
    with runner.fastReruns (the default, and ours) a rerun asked for during a run stops that run's runner and starts
    a new one, and AppSession drops the stopped runner's events, its script_finished with them. Two reruns asked
    for on a real server's websocket, the second while the first sleeps: two new_session, one script_finished."""
    from harness.script_server import forward_msgs, rerun_frame, script_server, session

    (tmp_path / "slow.py").write_text(SLOW_SCRIPT)
    kinds = []
    with script_server(tmp_path, "slow.py") as port:
        sock = session(port, "contract-test")
        for msg in forward_msgs(sock):
            kinds.append(msg.WhichOneof("type"))
            if kinds.count("new_session") == 1 and kinds[-1] == "delta" and kinds.count("delta") == 1:
                sock.sendall(rerun_frame())                             # while the first sleeps
            if kinds[-1] == "script_finished":
                break
        sock.close()
    runs = [k for k in kinds if k in ("new_session", "script_finished")]
    assert runs == ["new_session", "new_session", "script_finished"], kinds


def test_a_run_knows_it_comes_from_back_or_forward():
    """app_pages/frame/shell.reopen_link_on_history_navigation reads ScriptRunContext.is_history_navigation: the
    frontend marks the rerun a popstate (the browser's Back / Forward) asks for (ClientState.is_history_navigation)."""
    import dataclasses

    from streamlit.proto.ClientState_pb2 import ClientState
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext

    from app_pages.frame import shell

    assert "is_history_navigation" in {f.name for f in dataclasses.fields(ScriptRunContext)}
    assert "is_history_navigation" in ClientState.DESCRIPTOR.fields_by_name
    assert shell.get_script_run_ctx is get_script_run_ctx
