"""A following student's browser waits for the teacher's next view over HTTP, beside Streamlit (app.py serves the
route): GET WAIT_PATH?code=<join code>&seen=<version>&me=<follower id> answers {"version": n} when the class's view
is not `seen` (at once, or as soon as it changes and the teacher's run here is done: app_core/classroom/waiting.py),
{"version": seen} after HOLD_S without a change, {"closed": true} when no open class has the code; 400 for a
malformed ask, 503 when the store cannot be reached or too many wait. Each ask is the follower's heartbeat.

The browser's side is _class_panel's listener (a component whose script asks in a loop and reruns the page when the
view changed). A follower so costs the server nothing between changes (a fragment polling every 0.5 s was a whole
script run each time: ~3 ms of the GIL, 120 a second for 60 followers, beside the teacher's own run).
`streamlit run router.py` serves no such route (`served()` is False): followers there poll in a fragment.
"""
from __future__ import annotations

import functools
import re

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app_core.classroom import ClassClosed, StoreUnavailable, class_store, class_turns, codes
from app_core.classroom.waiting import Busy, ViewWaits

WAIT_PATH = "/_atlas/class/wait"
HOLD_S = 5.0                      # an ask without a change is answered after this long (the heartbeat: the store
                                  # counts a follower's asks of the last 15 s)
HEAD_START_S = 0.15               # followers hear of a change this long after the teacher's run here ended: the
                                  # teacher's browser draws the view before sixty reruns share the machine's cores
FOLLOWER_ID = re.compile(r"[0-9a-f]{16}")
NO_STORE = {"Cache-Control": "no-store"}
_serving = False


def served() -> bool:
    """Whether this server process answers WAIT_PATH (app.py asked for routes())."""
    return _serving


def routes() -> list[Route]:
    """The route, for st.App(routes=...); this process then serves it."""
    global _serving
    _serving = True
    return [Route(WAIT_PATH, wait_for_view, methods=["GET"])]


@functools.cache
def _waits() -> ViewWaits:
    return ViewWaits(class_store(), functools.partial(class_turns().until_teacher_done, grace_s=HEAD_START_S))


def _answer(body: dict, status: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=NO_STORE)


async def wait_for_view(request: Request) -> JSONResponse:
    asked = request.query_params
    code = codes.normalize(asked.get("code", ""))
    seen, me = asked.get("seen", ""), asked.get("me", "")
    if code is None or not seen.isdigit() or len(seen) > 12 or not FOLLOWER_ID.fullmatch(me):
        return _answer({"error": "ask with code=<join code>&seen=<version>&me=<16 hex digits>"}, 400)
    waits = _waits()
    try:
        await waits.call(class_store().follow, code, me)
        version = await waits.wait(code, int(seen), HOLD_S)
    except ClassClosed:
        version = None
    except (StoreUnavailable, Busy) as err:
        return _answer({"error": str(err)}, 503)
    return _answer({"closed": True} if version is None else {"version": version})
