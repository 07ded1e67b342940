"""A follower's wait for the next view (app_core/classroom/waiting.py) and its HTTP route (app_pages/_class_wait.py),
on the in-memory store and a real Redis."""
from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from starlette.requests import Request

from app_core.classroom import View
from app_core.classroom.memory import MemoryStore
from app_core.classroom.redis_store import RedisStore
from app_core.classroom.turns import Turns
from app_core.classroom.waiting import Busy, ViewWaits
from app_pages import _class_wait as class_wait

ME = "0123456789abcdef"


@pytest.fixture(params=["memory", "redis"])
def store(request):
    return MemoryStore() if request.param == "memory" else RedisStore(request.getfixturevalue("redis_url"))


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_changed_view_is_answered_at_once_and_a_closed_class_with_none(store):
    code, _ = store.create(View("attention"))
    waits = ViewWaits(store, Turns().until_teacher_done)

    async def asks():
        t0 = time.monotonic()
        changed = await waits.wait(code, 0, 5.0)
        closed = await waits.wait("0" * 12, 1, 5.0)
        return changed, closed, time.monotonic() - t0
    changed, closed, took = run(asks())
    assert (changed, closed) == (1, None) and took < 0.5


def test_a_wait_ends_when_the_teacher_publishes_and_after_its_timeout_without(store):
    code, secret = store.create(View("attention"))
    waits = ViewWaits(store, Turns().until_teacher_done, every_s=0.02)

    async def asks():
        t0 = time.monotonic()
        quiet = await waits.wait(code, 1, 0.3)
        quiet_s = time.monotonic() - t0
        asyncio.get_running_loop().call_later(0.2, store.publish, code, secret, View("softmax"))
        t1 = time.monotonic()
        found = await asyncio.gather(*(waits.wait(code, 1, 5.0) for _ in range(5)))
        return quiet, quiet_s, found, time.monotonic() - t1, waits.waiting
    quiet, quiet_s, found, found_s, left = run(asks())
    assert quiet == 1 and 0.29 <= quiet_s < 1.0                    # the same version after the timeout
    assert found == [2] * 5 and 0.19 <= found_s < 1.0              # every waiter, at the change
    assert left == 0


def test_followers_hear_of_a_change_only_once_the_teachers_run_here_is_done():
    store, turns = MemoryStore(), Turns(grace_s=0.1)
    code, secret = store.create(View("attention"))
    waits = ViewWaits(store, turns.until_teacher_done, every_s=0.02)
    ended = []

    def teachers_run():
        with turns.teacher(code):
            store.publish(code, secret, View("softmax"))            # published early in the run
            time.sleep(0.5)
            ended.append(time.monotonic())

    async def ask():
        threading.Thread(target=teachers_run).start()
        version = await waits.wait(code, 1, 5.0)
        return version, time.monotonic()
    version, heard = run(ask())
    assert version == 2 and heard - ended[0] >= 0.09                 # after the run and its grace


def test_too_many_waiting_are_told_to_come_back():
    store = MemoryStore()
    code, _ = store.create(View("attention"))
    waits = ViewWaits(store, Turns().until_teacher_done, max_waiting=2)

    async def asks():
        held = [asyncio.create_task(waits.wait(code, 1, 0.5)) for _ in range(2)]
        await asyncio.sleep(0.05)
        with pytest.raises(Busy):
            await waits.wait(code, 1, 0.5)
        return await asyncio.gather(*held)
    assert run(asks()) == [1, 1]


def _ask(query: str) -> tuple[int, dict, dict]:
    request = Request({"type": "http", "method": "GET", "path": class_wait.WAIT_PATH, "headers": [],
                       "query_string": query.encode()})
    response = run(class_wait.wait_for_view(request))
    return response.status_code, json.loads(response.body), dict(response.headers)


def test_the_route_answers_counts_the_follower_and_refuses_malformed_asks(monkeypatch):
    monkeypatch.delenv("ATLAS_REDIS_URL", raising=False)
    class_wait._waits.cache_clear()
    from app_core.classroom import class_store

    code, _ = class_store().create(View("attention"))
    status, body, headers = _ask(f"code={code.lower()}&seen=0&me={ME}")
    assert (status, body) == (200, {"version": 1}) and headers["cache-control"] == "no-store"
    assert class_store().followers(code) == 1                       # the ask was the follower's heartbeat
    assert _ask(f"code=ZZZZ-ZZZZ-ZZZZ&seen=1&me={ME}")[:2] == (200, {"closed": True})
    for bad in (f"code=nope&seen=1&me={ME}", f"code={code}&seen=-1&me={ME}", f"code={code}&seen=1&me=<b>",
                f"code={code}&seen=1", f"code={code}&seen={'9' * 40}&me={ME}"):
        assert _ask(bad)[0] == 400, bad
