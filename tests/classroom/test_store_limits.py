"""The class store under attack, both backends (memory, and a real redis-server): the cap on open classes, 2,000
started classes (the cap holds, memory stays bounded, the sweep forgets them on a fake clock), heartbeats and
answers per class, one-time tickets, the shared signing key, views too long; Redis as deploy/redis.conf runs it
(password, noeviction under a flood, stopped and restarted mid-class, hung)."""
from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

import pytest
import redis

from app_core.classroom import ClassClosed, ClassesFull, StoreUnavailable, View, codes
from app_core.classroom import memory as memory_module
from app_core.classroom import redis_store as redis_module
from app_core.classroom.memory import MemoryStore
from app_core.classroom.redis_store import RedisStore
from app_core.classroom.store import MAX_CLASSES, VIEW_CHARS
from harness.browser import free_port
from harness.redis_server import redis_server
from tests.classroom.test_store import Clock

ROOT_CONF = Path(__file__).resolve().parents[2] / "deploy/redis.conf"
TEXT = "注意力 attention " * 1800                  # ~27,000 characters: near the longest view a page publishes


@pytest.fixture(params=["memory", "redis"])
def make(request, redis_url):
    """make(**kwargs) -> (store, clock). Redis: a clean database each time."""
    def build(**kwargs):
        clock = Clock()
        if request.param == "memory":
            return MemoryStore(clock=clock, **kwargs), clock
        redis.Redis.from_url(redis_url).flushdb()
        return RedisStore(redis_url, clock=clock, **kwargs), clock
    return build


def test_open_classes_are_capped_and_only_an_idle_class_gives_its_place(make):
    store, clock = make(max_classes=3, idle_s=100)
    (live, secret), (idle, _), (third, _) = (store.create(View("attention")) for _ in range(3))
    with pytest.raises(ClassesFull):
        store.create(View("attention"))
    clock.now += 60
    store.teacher_here(live, secret)
    with pytest.raises(ClassesFull):                          # nobody idle 100 s yet
        store.create(View("attention"))
    clock.now += 50                                           # idle and third: 110 s without their teacher
    new, _ = store.create(View("attention"))
    assert store.version(live) == 1 and store.version(new) == 1 and store.open_classes() == 3
    gone = [code for code in (idle, third) if store.version(code) is None]
    assert len(gone) == 1                                     # one idle class gave its place, and reads as ended
    with pytest.raises(ClassClosed) as err:
        store.state(gone[0])
    assert err.value.ended


def test_two_thousand_started_classes_stay_within_the_cap_and_are_swept(make, redis_url):
    """A flood of 2,000 classes, one a second on the fake clock, beside a live class whose teacher is there every
    30 s: never more than MAX_CLASSES open, the live class never displaced, memory bounded by the cap; the sweep
    forgets them all once their teachers have been away ttl_s, ended codes after another ttl_s."""
    store, clock = make()
    live, secret = store.create(View("attention", {"text": TEXT}))
    started, refused, most = 0, 0, 0
    tracemalloc.start()
    for i in range(2000):
        clock.now += 1
        if i % 30 == 0:
            store.teacher_here(live, secret)
        try:
            store.create(View("attention", {"text": f"{i} {TEXT}"}))       # each its own text
            started += 1
        except ClassesFull:
            refused += 1
        most = max(most, store.open_classes())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert most == MAX_CLASSES and store.version(live) == 1
    assert started > MAX_CLASSES and refused > 0              # idle classes gave their places, others were refused
    print(f"\n{type(store).__name__}: {started} started, {refused} refused, traced peak {peak / 1e6:.1f} MB")
    if isinstance(store, MemoryStore):
        assert peak < (MAX_CLASSES + 1) * sys.getsizeof(TEXT) * 1.5      # the classes' texts, little else
        store.end(live, secret)
        clock.now += store.ttl_s + 1
        assert store.sweep() >= MAX_CLASSES and store.open_classes() == 0
        clock.now += store.ttl_s + 1
        store.sweep()
        assert not store._classes and not store._ended and not store._tickets
    else:
        keys = redis.Redis.from_url(redis_url).keys("atlas:class:*")
        assert len([k for k in keys if k.count(b":") == 2]) == MAX_CLASSES      # class hashes: the cap
        clock.now += store.ttl_s + 1
        assert store.sweep() == MAX_CLASSES and store.open_classes() == 0


def test_heartbeats_and_answers_are_bounded_and_stale_heartbeats_swept(make, monkeypatch):
    monkeypatch.setattr(memory_module, "MAX_FOLLOWERS", 5)
    monkeypatch.setattr(redis_module, "MAX_FOLLOWERS", 5)
    store, clock = make(follow_window_s=15)
    code, secret = store.create(View("attention"))
    store.publish(code, secret, View("attention", question="l/1"))
    for i in range(8):
        store.follow(code, f"f{i}")
        clock.now += 1
    assert store.followers(code) == 5                         # the five newest
    assert [store.answer(code, f"f{i}", "l/1", "1") for i in range(7)] == [True] * 5 + [False] * 2
    assert store.answer(code, "f0", "l/1", "2")               # an answer already counted can change
    assert store.answers(code, secret) == {"1": 4, "2": 1}
    monkeypatch.setattr(memory_module, "MAX_QUESTIONS", 2)
    monkeypatch.setattr(redis_module, "MAX_QUESTIONS", 2)
    for question, taken in (("l/2", True), ("l/3", False), ("l/1", True)):   # two questions a class
        store.publish(code, secret, View("attention", question=question))
        assert store.answer(code, "f0", question, "3") is taken
    assert set(store.tallies(code, secret)) == {"l/1", "l/2"}
    clock.now += 20
    store.follow(code, "late")
    store.sweep()
    assert store.followers(code) == 1
    if isinstance(store, MemoryStore):
        assert list(store._classes[code].heartbeats) == ["late"]


def test_a_ticket_swaps_once_for_the_key_within_its_time(make, monkeypatch):
    store, clock = make()
    code, secret = store.create(View("attention"))
    token = codes.teacher_token(code, secret)
    ticket = store.issue_ticket(token)
    assert codes.is_secret(ticket) and ticket not in token
    assert store.redeem_ticket(ticket) == token
    assert store.redeem_ticket(ticket) is None                # spent
    for forged in ("", "x" * 32, codes.new_ticket(), ticket[:-1] + ("A" if ticket[-1] != "A" else "B"), "é" * 32):
        assert store.redeem_ticket(forged) is None
    late = store.issue_ticket(token)
    if isinstance(store, MemoryStore):
        clock.now += 61
    else:
        store.redis.expire(redis_module.TICKETS + codes.ticket_id(late), 1)
        time.sleep(1.2)
    assert store.redeem_ticket(late) is None


def test_redis_keeps_neither_a_key_nor_a_ticket_in_clear_and_every_replica_signs_alike(redis_url):
    store, replica = RedisStore(redis_url), RedisStore(redis_url)
    code, secret = store.create(View("attention"))
    ticket = store.issue_ticket(codes.teacher_token(code, secret))
    client = redis.Redis.from_url(redis_url)
    stored = b"".join(client.dump(key) or b"" for key in client.keys("atlas:*"))
    assert secret.encode() not in stored and ticket.encode() not in stored
    assert replica.redeem_ticket(ticket) == codes.teacher_token(code, secret)     # on another replica
    assert store.shared_key() == replica.shared_key() and len(store.shared_key()) == 32
    assert MemoryStore().shared_key() != MemoryStore().shared_key()


def test_a_view_too_long_is_refused(make):
    store, _ = make()
    code, secret = store.create(View("attention"))
    huge = View("attention", {"text": "x" * (VIEW_CHARS + 1)})
    with pytest.raises(ValueError):
        store.create(huge)
    with pytest.raises(ValueError):
        store.publish(code, secret, huge)
    assert store.version(code) == 1


# ---------------------------------------------------------------------------------- Redis as deploy/ runs it
def test_deploy_redis_needs_the_apps_password_and_limits_its_user():
    with redis_server(ROOT_CONF) as server:
        anonymous = f"redis://127.0.0.1:{server.port}/0"
        with pytest.raises(StoreUnavailable):
            RedisStore(anonymous).create(View("attention"))
        store = RedisStore(server.url)
        code, _ = store.create(View("attention"))
        assert store.version(code) == 1
        app = redis.Redis.from_url(server.url)
        for forbidden in (lambda: app.flushall(), lambda: app.keys("*"), lambda: app.config_get("*"),
                          lambda: app.set("other:key", "1"), lambda: app.shutdown()):
            with pytest.raises(redis.ResponseError, match="no permissions"):
                forbidden()
        assert server.admin().config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}


def test_under_noeviction_a_flood_of_classes_never_evicts_a_live_one():
    """deploy/redis.conf's policy with a maxmemory far too small for the cap: new classes are refused (ClassesFull),
    the live class stays whole; with the app's cap and the config's 64 MB, a flood of the longest views stops at
    the cap far below maxmemory."""
    with redis_server(ROOT_CONF, extra=("--maxmemory", "4mb")) as server:
        store = RedisStore(server.url, max_classes=100_000)
        live, secret = store.create(View("attention", {"text": TEXT}))
        refused = 0
        for _ in range(400):
            try:
                store.create(View("attention", {"text": TEXT}))
            except ClassesFull:
                refused += 1
        assert refused > 0 and store.state(live).view.params["text"] == TEXT
        assert server.admin().info("stats")["evicted_keys"] == 0
    with redis_server(ROOT_CONF) as server:
        store = RedisStore(server.url)
        made = 0
        for _ in range(2 * MAX_CLASSES):
            try:
                store.create(View("attention", {"text": TEXT}))
                made += 1
            except ClassesFull:
                pass
        used = server.admin().info("memory")["used_memory"]
        print(f"\n{made} classes of {len(TEXT)} characters: Redis uses {used / 1e6:.1f} MB of 64")
        assert made == MAX_CLASSES and used < 64e6 / 2


def test_redis_stopped_and_restarted_mid_class_keeps_the_class():
    """Stopped: every call says so at once (StoreUnavailable, not slow), End class included, and nothing is lost;
    started again (deploy/redis.conf keeps an append-only file), the class goes on and can be ended."""
    with redis_server(ROOT_CONF) as server:
        store = RedisStore(server.url)
        code, secret = store.create(View("attention"))
        store.publish(code, secret, View("softmax", {"temperature": "2.0"}))
        store.follow(code, "f" * 32)
        server.stop()
        for call in (lambda: store.version(code), lambda: store.end(code, secret), lambda: store.follow(code, "f")):
            t0 = time.monotonic()
            with pytest.raises(StoreUnavailable) as err:
                call()
            assert not err.value.slow and time.monotonic() - t0 < 1.0
        server.start()
        time.sleep(redis_module.RETRY_AFTER_S)
        state = store.state(code)
        assert (state.version, state.view.page) == (2, "softmax")
        store.end(code, secret)
        assert store.version(code) is None


def test_a_hung_redis_costs_one_short_timeout_then_fails_at_once():
    with redis_server() as server:
        store = RedisStore(server.url)
        code, _ = store.create(View("attention"))
        server.pause()
        try:
            took = []
            for _ in range(5):
                t0 = time.monotonic()
                with pytest.raises(StoreUnavailable) as err:
                    store.version(code)
                took.append(time.monotonic() - t0)
                assert err.value.slow
            print(f"\na hung Redis: calls took {', '.join(f'{t * 1000:.0f}' for t in took)} ms")
            assert took[0] < redis_module.CALL_TIMEOUT_S * 2.5 and max(took[1:]) < 0.05
        finally:
            server.resume()
        time.sleep(redis_module.RETRY_AFTER_S)
        assert store.version(code) == 1


def test_nothing_listening_fails_fast():
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0")
    t0 = time.monotonic()
    for _ in range(3):
        with pytest.raises(StoreUnavailable):
            store.version("K7QM3XPDH9TF")
    assert time.monotonic() - t0 < 1.0
