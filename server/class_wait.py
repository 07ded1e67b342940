"""A following student's browser waits for the teacher's next view over HTTP, beside Streamlit (app.py serves the
route): GET WAIT_PATH?code=<join code>&seen=<version>&me=<follower id> answers {"version": n} when the class's view
is not `seen` (at once, or as soon as it changes and the teacher's run here is done: app_core/classroom/waiting.py),
{"version": seen} after HOLD_S without a change, {"closed": true} when no open class has the code. Each ask is the
follower's heartbeat.

Every ask is checked before anything is counted or held: exactly the three parameters, each matching its whole
pattern (ASK), else 400; a follower id the server did not issue for this class (followers.py) 403; 503 when the
store cannot be reached. A store that did not answer in time is asked once more after its pause (the ask is a long
poll: a follower waits a second rather than being told the store is down; a slow answer under load, such as a
flood's, is not an outage). Waits are bounded per follower, per class and per process without turning anyone away
(waiting.py: the oldest wait is answered early, unchanged).

The browser's side is _class_panel's listener (a component whose script asks in a loop and reruns the page when the
view changed). A follower so costs the server nothing between changes (a fragment polling every 0.5 s was a whole
script run each time: ~3 ms of the GIL, 120 a second for 60 followers, beside the teacher's own run).
`streamlit run router.py` serves no such route (`served()` is False): followers there poll in a fragment.
"""
from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app_core.classroom import ClassClosed, StoreUnavailable, class_store, class_turns, codes, follower_key, followers
from app_core.classroom.waiting import Busy, ViewWaits
from app_core.scheduling import HEAD_START_S

WAIT_PATH = "/_atlas/class/wait"
HOLD_S = 5.0                      # an ask without a change is answered after this long (the heartbeat: the store
                                  # counts a follower's asks of the last 15 s)
ASK = {"code": re.compile(r"[0-9A-Za-z]{12}"), "seen": re.compile(r"[0-9]{1,12}"), "me": followers.FOLLOWER_ID}
SLOW_RETRY_S = 1.0                # a store that answered too slowly is asked again after its pause, up to this long
QUERY_CHARS = 120                 # the longest ask's query string (12 + 12 + 32 characters and the names)
NO_STORE = {"Cache-Control": "no-store"}
_serving = False
_preparer: list[Callable[[str], object]] = []     # how a class's new view is prepared here (app.py: prepared.py)


def served() -> bool:
    """Whether this server process answers WAIT_PATH (app.py asked for routes())."""
    return _serving


def routes(prepare: Callable[[str], object] | None = None) -> list[Route]:
    """The route, for st.App(routes=...); this process then serves it. prepare(code): a class's new view prepared
    before the followers waiting here are told of it (app_core/classroom/waiting.py)."""
    global _serving
    _serving = True
    if prepare is not None:
        _preparer[:] = [prepare]
    return [Route(WAIT_PATH, wait_for_view, methods=["GET"])]


@functools.cache
def _waits() -> ViewWaits:
    return ViewWaits(class_store(), functools.partial(class_turns().until_teacher_done, grace_s=HEAD_START_S),
                     prepare=_preparer[0] if _preparer else None)


def _answer(body: dict, status: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=NO_STORE)


def read_ask(query: str, items: list[tuple[str, str]]) -> tuple[str, int, str] | None:
    """(code, seen, follower id) of an ask: its raw query string and its parsed items; None unless it holds exactly
    code, seen and me, once each, each matching its whole pattern."""
    if len(query) > QUERY_CHARS or len(items) != len(ASK) or {name for name, _ in items} != ASK.keys():
        return None
    asked = dict(items)
    if not all(ASK[name].fullmatch(value) for name, value in asked.items()):
        return None
    code = codes.normalize(asked["code"])
    return None if code is None else (code, int(asked["seen"]), asked["me"])


def heartbeat(code: str, me: str) -> bool:
    """The follower's heartbeat when me is an id issued for this class (else False, and nothing is counted).
    ClassClosed, StoreUnavailable."""
    if not followers.is_signed(follower_key(), code, me):
        return False
    class_store().follow(code, me)
    return True


async def wait_for_view(request: Request) -> JSONResponse:
    ask = read_ask(request.url.query, request.query_params.multi_items())
    if ask is None:
        return _answer({"error": "ask with code=<join code>&seen=<version>&me=<follower id>, nothing else"}, 400)
    code, seen, me = ask
    waits = _waits()
    for last_try in (False, True):
        try:
            if not await waits.call(heartbeat, code, me):
                return _answer({"error": "not a follower id of this class"}, 403)
            version = await waits.wait(code, me, seen, HOLD_S)
        except ClassClosed:
            version = None
        except StoreUnavailable as err:
            if last_try or not err.slow or err.retry_in_s > SLOW_RETRY_S:
                return _answer({"error": str(err)}, 503)
            await asyncio.sleep(err.retry_in_s)
            continue
        except Busy as err:
            return _answer({"error": str(err)}, 503)
        return _answer({"closed": True} if version is None else {"version": version})
