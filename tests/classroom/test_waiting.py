"""A follower's wait for the next view (app_core/classroom/waiting.py) and its HTTP route (server/class_wait.py),
on the in-memory store and a real Redis."""
from __future__ import annotations

import asyncio
import functools
import json
import secrets
import threading
import time

import pytest
from starlette.requests import Request

from app_core.classroom import StoreUnavailable, View, codes, followers
from app_core.classroom.memory import MemoryStore
from app_core.classroom.redis_store import RedisStore
from app_core.classroom.turns import Turns
from app_core.classroom.waiting import CALLS_PER_CLASS, ViewWaits
from server import class_wait

ME = "0123456789abcdef" * 2


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
        changed = await waits.wait(code, ME, 0, 5.0)
        closed = await waits.wait("0" * 12, ME, 1, 5.0)
        return changed, closed, time.monotonic() - t0
    changed, closed, took = run(asks())
    assert (changed, closed) == (1, None) and took < 0.5


def test_a_wait_ends_when_the_teacher_publishes_and_after_its_timeout_without(store):
    code, secret = store.create(View("attention"))
    waits = ViewWaits(store, Turns().until_teacher_done, every_s=0.02)

    async def asks():
        t0 = time.monotonic()
        quiet = await waits.wait(code, ME, 1, 0.3)
        quiet_s = time.monotonic() - t0
        asyncio.get_running_loop().call_later(0.2, store.publish, code, secret, View("softmax"))
        t1 = time.monotonic()
        found = await asyncio.gather(*(waits.wait(code, f"{i:032x}", 1, 5.0) for i in range(5)))
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
        version = await waits.wait(code, ME, 1, 5.0)
        return version, time.monotonic()
    version, heard = run(ask())
    assert version == 2 and heard - ended[0] >= 0.09                 # after the run and its grace


def test_a_new_view_is_prepared_once_before_its_followers_here_are_told(store):
    code, secret = store.create(View("attention"))
    prepared = []

    def prepare(asked):                               # a replica computing the new view's trace: 0.4 s
        time.sleep(0.4)
        prepared.append((asked, store.version(asked), time.monotonic()))
    waits = ViewWaits(store, Turns().until_teacher_done, every_s=0.02, prepare=prepare)

    async def asks():
        asyncio.get_running_loop().call_later(0.1, store.publish, code, secret, View("softmax"))
        followers_ = [waits.wait(code, f"{i:032x}", 1, 5.0) for i in range(4)]
        answered = await asyncio.gather(*(timed(ask) for ask in followers_))
        late = await timed(waits.wait(code, ME, 1, 5.0))              # one that missed the change: no new work
        return answered, late
    answered, late = run(asks())
    assert [version for version, _ in answered] == [2] * 4 and late[0] == 2
    assert len(prepared) == 1 and prepared[0][:2] == (code, 2)
    assert all(heard >= prepared[0][2] for _, heard in answered)     # told only once the view was prepared


def test_a_slow_or_failing_preparation_never_keeps_the_followers_waiting_long(store, caplog):
    code, secret = store.create(View("attention"))

    def slow(asked):
        time.sleep(1.5)

    def failing(asked):
        raise RuntimeError("no model")
    for prepare, most_s in ((slow, 0.3), (failing, 5.0)):
        waits = ViewWaits(store, Turns().until_teacher_done, every_s=0.02, prepare=prepare, prepare_wait_s=most_s)
        seen = store.version(code)
        store.publish(code, secret, View("softmax", {"text": prepare.__name__}))

        async def ask(waits=waits, seen=seen):
            return await timed(waits.wait(code, ME, seen, 5.0))
        t0 = time.monotonic()
        version, heard = run(ask())
        assert version == seen + 1 and heard - t0 < min(most_s, 1.0) + 0.3, (prepare.__name__, heard - t0)
    assert "no model" in caplog.text


async def timed(ask):
    """(the ask's answer, when it came)."""
    answer = await ask
    return answer, time.monotonic()


def test_waiting_is_bounded_per_follower_per_class_and_per_process_and_nobody_is_turned_away():
    """A follower id holds one wait (asking again answers the previous ask unchanged); a class at most per_class
    waits (one more answers the class's oldest at once, unchanged), so a flood on one class leaves another its
    room; the process at most max_waiting (one more answers the oldest of the fullest class)."""
    store = MemoryStore()
    flooded, other = (store.create(View("attention"))[0] for _ in range(2))
    waits = ViewWaits(store, Turns().until_teacher_done, max_waiting=5, per_class=3)

    async def asks():
        first = asyncio.create_task(waits.wait(flooded, ME, 1, 5.0))
        await asyncio.sleep(0.02)
        again = asyncio.create_task(waits.wait(flooded, ME, 1, 0.5))      # the same follower asks again
        await asyncio.sleep(0.02)
        superseded = first.done() and first.result() == 1 and waits.waiting == 1
        flood = [asyncio.create_task(waits.wait(flooded, f"{i:032x}", 1, 0.5)) for i in range(6)]
        await asyncio.sleep(0.02)
        answered_early = [task.done() for task in [again, *flood]]
        held_on_flooded = waits.waiting_on(flooded)
        room = [asyncio.create_task(waits.wait(other, f"{i:032x}", 1, 0.3)) for i in range(3)]
        await asyncio.sleep(0.02)
        counts = (waits.waiting_on(flooded), waits.waiting_on(other), waits.waiting)
        await asyncio.gather(again, *flood, *room)
        return superseded, answered_early, held_on_flooded, counts, waits.waiting
    superseded, answered_early, held_on_flooded, counts, left = run(asks())
    assert superseded and held_on_flooded == 3
    assert answered_early == [True] * 4 + [False] * 3                   # the four oldest made room, in order
    assert counts == (2, 3, 5) and left == 0                            # the fullest class gave one for `other`


class SlowNetworkStore(MemoryStore):
    """A store on a slow network: every call of version() or follow() takes STORE_CALL_S in its thread."""

    networked = True

    def version(self, code):
        time.sleep(STORE_CALL_S)
        return super().version(code)

    def follow(self, code, follower):
        time.sleep(STORE_CALL_S)
        return super().follow(code, follower)


STORE_CALL_S = 0.02


def test_a_flood_of_one_class_s_store_calls_never_queues_another_class_s_behind_it():
    """300 heartbeats of one class at once on a networked store whose calls take 20 ms: they pass their class's gate
    CALLS_PER_CLASS at a time, so another class's version read (a watcher's, or its own follower's ask) finds a thread
    free at once instead of queueing behind 300 x 20 ms shared by asyncio's few threads (the cores + 4)."""
    store = SlowNetworkStore()
    flooded, other = (store.create(View("attention"))[0] for _ in range(2))
    waits = ViewWaits(store, Turns().until_teacher_done)

    async def asks():
        t0 = time.monotonic()
        flood = [asyncio.create_task(waits.call(store.follow, flooded, f"{i:032x}")) for i in range(300)]
        await asyncio.sleep(0.05)                                       # the flood is on
        t1 = time.monotonic()
        version = await waits.call(store.version, other)
        other_s = time.monotonic() - t1
        await asyncio.gather(*flood)
        return version, other_s, time.monotonic() - t0, len(waits._gates)
    version, other_s, flood_s, gates_left = run(asks())
    assert version == 1 and other_s < 0.3, other_s
    assert flood_s >= 300 * STORE_CALL_S / CALLS_PER_CLASS * 0.9, flood_s     # the flood's class waited its turn
    assert gates_left == 0                                                    # no gate kept once its calls are done


def _ask(query: str) -> tuple[int, dict, dict]:
    request = Request({"type": "http", "method": "GET", "path": class_wait.WAIT_PATH, "headers": [],
                       "query_string": query.encode()})
    response = run(class_wait.wait_for_view(request))
    return response.status_code, json.loads(response.body), dict(response.headers)


def route_on(monkeypatch, store):
    """The wait route on `store` (ATLAS_CLASS_KEY unset: the store's own key); returns it."""
    from app_core import classroom

    monkeypatch.delenv("ATLAS_REDIS_URL", raising=False)
    monkeypatch.delenv(followers.KEY_ENV, raising=False)
    monkeypatch.setattr(classroom, "_store_for", functools.cache(lambda url, most: store))
    class_wait._waits.cache_clear()
    return classroom.class_store()


@pytest.fixture
def memory_route(monkeypatch):
    """The wait route on a fresh in-memory store of this process."""
    yield route_on(monkeypatch, MemoryStore())
    class_wait._waits.cache_clear()


class FailingStore(MemoryStore):
    """A store whose next `failures` calls of follow() fail as Redis's do: slow (no answer in time; calls then fail
    at once for PAUSE_S) or refused."""

    def __init__(self, failures: int, slow: bool):
        super().__init__()
        self.failures, self.slow = failures, slow

    def follow(self, code, follower):
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("the class store (Redis) is not answering", slow=self.slow, retry_in_s=PAUSE_S)
        return super().follow(code, follower)


PAUSE_S = 0.2


@pytest.mark.parametrize(("failures", "slow", "status"), [(1, True, 200), (2, True, 503), (1, False, 503)],
                         ids=["slow-once", "slow-twice", "refused"])
def test_a_store_slow_once_costs_a_follower_a_pause_not_a_503(monkeypatch, failures, slow, status):
    """A store that did not answer in time once (a Redis pausing under a flood or a fork) is asked again after its
    pause: the follower is answered, late; twice, or a store that refuses, is a 503 (the page says the store is
    down), the refused one at once."""
    from app_core.classroom import follower_key

    store = route_on(monkeypatch, FailingStore(0, slow))
    try:
        code, _ = store.create(View("attention"))
        me = followers.issue(follower_key(), code)
        store.failures = failures
        t0 = time.monotonic()
        got, body, _ = _ask(f"code={code}&seen=0&me={me}")
        took = time.monotonic() - t0
    finally:
        class_wait._waits.cache_clear()
    assert got == status, body
    assert (body == {"version": 1}) if status == 200 else ("not answering" in body["error"])
    assert took >= PAUSE_S if slow else took < PAUSE_S / 2
    assert store.failures == 0 and store.followers(code) == (status == 200)


def test_the_route_answers_and_counts_a_follower_the_server_issued(memory_route):
    from app_core.classroom import follower_key

    store = memory_route
    code, _ = store.create(View("attention"))
    me = followers.issue(follower_key(), code)
    status, body, headers = _ask(f"code={code.lower()}&seen=0&me={me}")
    assert (status, body) == (200, {"version": 1}) and headers["cache-control"] == "no-store"
    assert store.followers(code) == 1                                  # the ask was the follower's heartbeat
    closed = codes.new_code()
    assert _ask(f"code={closed}&seen=1&me={followers.issue(follower_key(), closed)}")[:2] == (200, {"closed": True})


def test_invented_follower_ids_are_refused_and_never_counted(memory_route):
    """Any 32 hex digits, an id of another class, an id signed with another key: 403, not a follower."""
    from app_core.classroom import follower_key

    store = memory_route
    code, _ = store.create(View("attention"))
    other, _ = store.create(View("attention"))
    real = followers.issue(follower_key(), code)
    assert _ask(f"code={code}&seen=0&me={real}")[0] == 200
    invented = [secrets.token_hex(16) for _ in range(100)]
    invented += [followers.issue(follower_key(), other), followers.issue(b"another key", code),
                 real[:16] + ("0" if real[16] != "0" else "1") + real[17:]]
    for me in invented:
        assert _ask(f"code={code}&seen=0&me={me}")[0] == 403, me
    assert store.followers(code) == 1 and store.followers(other) == 0


def test_every_malformed_ask_is_a_400(memory_route):
    from app_core.classroom import follower_key

    code, _ = memory_route.create(View("attention"))
    me = followers.issue(follower_key(), code)
    bad = ["", f"code=nope&seen=1&me={me}", f"code={code}&seen=-1&me={me}", f"code={code}&seen=1&me=<b>",
           f"code={code}&seen=1", f"code={code}&seen={'9' * 40}&me={me}", f"code={code}&seen=%C2%B2&me={me}",
           f"code={code}&seen=%D9%A3&me={me}", f"code={code}&seen=1&me={me.upper()}",
           f"code={code}&seen=1&me={me}&x=1", f"code={code}&code={code}&seen=1&me={me}",
           f"code={code}&seen=1&seen=2&me={me}", f"code={code}%0A&seen=1&me={me}", f"code={code}&seen=1%20&me={me}",
           f"code=UUUUUUUUUUUU&seen=1&me={me}", f"code={code}&seen=1&me={me}&" + "y" * 5000,
           f"code={code}&seen=1&me={me}%00"]
    for query in bad:
        status, body, _ = _ask(query)
        assert status == 400 and "error" in body, (query, status)
    assert memory_route.followers(code) == 0
