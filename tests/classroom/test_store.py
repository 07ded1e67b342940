"""The class store, both backends through the same tests: in memory, and in a real redis-server."""
from __future__ import annotations

import time

import pytest
import redis

from app_core.classroom import ClassClosed, NotTeacher, View, codes
from app_core.classroom.memory import MemoryStore
from app_core.classroom.redis_store import RedisStore


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "redis"])
def make(request, redis_url):
    """make(**kwargs) -> (store, clock, wait): wait(s) moves the clock and, for Redis (whose TTLs run on its own
    clock), also sleeps."""
    def build(**kwargs):
        clock = Clock()
        if request.param == "memory":
            store = MemoryStore(clock=clock, **kwargs)
        else:
            store = RedisStore(redis_url, clock=clock, **kwargs)

        def wait(seconds: float) -> None:
            clock.now += seconds
            if request.param == "redis":
                time.sleep(seconds)
        return store, clock, wait
    return build


VIEW = View("attention", {"layer": "3", "head": "5", "text": "Count: 1, 2, 3 <b> 注意力 🙂"})


def test_codes_are_unguessable_and_easy_to_type():
    assert codes.CODE_BITS >= 40 and len(codes.ALPHABET) == 32
    made = {codes.new_code() for _ in range(2000)}
    assert len(made) == 2000
    code = "K7QM3XPDH9TF"
    assert codes.shown(code) == "K7QM-3XPD-H9TF"
    assert codes.normalize(" k7qm-3xpd h9tf ") == code
    assert codes.normalize("O1IL" + "0" * 8) == "0111" + "0" * 8          # O -> 0, I and L -> 1
    for bad in ("", "K7QM-3XPD", "K7QM3XPDH9TFX", "K7QM3XPDH9T!", "<b>", "U" * 12, None):
        assert codes.normalize(bad) is None
    secret = codes.new_secret()
    assert codes.is_secret(secret) and len(secret) * 6 >= 128
    assert codes.read_teacher_token(codes.teacher_token(code, secret)) == (code, secret)
    assert codes.read_teacher_token(code) is None and codes.read_teacher_token(f"{code}.short") is None


def test_a_new_class_shows_the_teachers_view(make):
    store, _, _ = make()
    code, secret = store.create(VIEW)
    assert codes.normalize(code) == code and secret not in code
    assert store.version(code) == 1
    state = store.state(code)
    assert (state.code, state.version, state.view) == (code, 1, VIEW)


def test_only_the_teacher_changes_the_view(make):
    store, _, _ = make()
    code, secret = store.create(VIEW)
    other_code, other_secret = store.create(VIEW)
    moved = View("softmax", {"temperature": "2.0"})
    for forged in ("", "x" * 32, codes.new_secret(), other_secret, secret[:-1] + ("A" if secret[-1] != "A" else "B")):
        for write in (lambda s: store.publish(code, s, moved), lambda s: store.reveal(code, s),
                      lambda s: store.end(code, s), lambda s: store.answers(code, s),
                      lambda s: store.tallies(code, s), lambda s: store.teacher_here(code, s)):
            with pytest.raises(NotTeacher):
                write(forged)
    assert store.state(code).view == VIEW and store.version(code) == 1
    assert store.publish(code, secret, moved) == 2
    assert store.publish(code, secret, moved) == 2                          # the same view: no new version
    assert store.state(code).view == moved
    assert store.state(other_code).view == VIEW                            # another class is untouched


def test_answers_are_counted_for_the_current_question_until_revealed(make):
    store, _, _ = make()
    code, secret = store.create(VIEW)
    asked = View("attention", {"layer": "3"}, question="lesson-1/4")
    version = store.publish(code, secret, asked)
    assert store.answer(code, "s1", "lesson-1/4", "2") and store.answer(code, "s2", "lesson-1/4", "3")
    assert store.answer(code, "s3", "lesson-1/4", "2") and store.answer(code, "s2", "lesson-1/4", "2")  # the last
    assert not store.answer(code, "s4", "lesson-1/3", "1")                  # not the current question
    assert store.answers(code, secret) == {"2": 3}
    with pytest.raises(ValueError):
        store.answer(code, "s5", "lesson-1/4", "x" * 100)
    assert store.reveal(code, secret) == version + 1
    assert store.reveal(code, secret) == version + 1                       # revealed once
    assert store.state(code).view.revealed
    assert not store.answer(code, "s6", "lesson-1/4", "1")                  # too late
    assert store.publish(code, secret, asked) == version + 1               # the teacher's rerun keeps the reveal
    assert store.state(code).view.revealed
    store.publish(code, secret, View("attention", {"layer": "4"}, question="lesson-1/5"))
    assert store.answers(code, secret) == {} and not store.state(code).view.revealed


def test_answers_are_kept_per_question_until_the_class_ends(make):
    """One answer per student and question, the last one counting; a question the teacher comes back to keeps its
    answers (and, once revealed, stays revealed: it takes no more); every question's tally until End class."""
    store, _, _ = make()
    code, secret = store.create(VIEW)
    first, second = "lesson-1/4", "lesson-1/6"
    store.publish(code, secret, View("attention", {"layer": "3"}, question=first, predict=True))
    assert store.state(code).view.predict
    assert store.answer(code, "s1", first, "3") and store.answer(code, "s2", first, "2")
    assert store.answer(code, "s1", first, "2")                             # s1 changes their mind
    assert store.answer(code, "s1", first, "2")                             # the same again: counted once
    assert store.answers(code, secret) == {"2": 2}
    store.publish(code, secret, View("softmax", question=second))
    assert not store.state(code).view.predict and store.answers(code, secret) == {}
    assert store.answer(code, "s1", second, "right") and store.answer(code, "s2", second, "wrong")
    assert not store.answer(code, "s3", first, "1")                         # no longer the current question
    version = store.reveal(code, secret)
    assert not store.answer(code, "s3", second, "right")                    # revealed: too late
    back = store.publish(code, secret, View("attention", {"layer": "3"}, question=first))
    assert back == version + 1 and not store.state(code).view.revealed
    assert store.answers(code, secret) == {"2": 2}                          # its answers waited
    assert store.answer(code, "s2", first, "1") and store.answer(code, "s4", first, "5")
    assert store.tallies(code, secret) == {first: {"2": 1, "1": 1, "5": 1}, second: {"right": 1, "wrong": 1}}
    store.publish(code, secret, View("softmax", question=second))
    assert store.state(code).view.revealed and store.answers(code, secret) == {"right": 1, "wrong": 1}
    store.publish(code, secret, View("softmax"))                            # no question: nothing to count
    assert store.answers(code, secret) == {} and store.tallies(code, secret)[first] == {"2": 1, "1": 1, "5": 1}
    for bad in ("", "x" * 100, "1\x1f2"):
        with pytest.raises(ValueError):
            store.answer(code, "s5", first, bad)
    store.end(code, secret)
    with pytest.raises(ClassClosed):
        store.tallies(code, secret)


def test_redis_forgets_every_answer_of_an_ended_class_and_keeps_none_past_its_time(redis_url):
    store = RedisStore(redis_url)
    code, secret = store.create(VIEW)
    store.publish(code, secret, View("attention", question="l/1"))
    store.answer(code, "s1", "l/1", "2")
    store.reveal(code, secret)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    kept = client.keys(f"atlas:class:{code}*")
    assert {key.rpartition(":")[2] for key in kept} >= {"a", "t", "n", "r"}
    assert all(0 < client.ttl(key) <= 12 * 3600 for key in kept)
    store.end(code, secret)
    assert client.keys(f"atlas:class:{code}*") == [f"atlas:class:{code}:ended"]


def test_followers_count_while_their_heartbeats_are_recent(make):
    store, clock, _ = make(follow_window_s=15)
    code, _ = store.create(VIEW)
    store.follow(code, "a")
    store.follow(code, "b")
    store.follow(code, "a")
    assert store.followers(code) == 2
    clock.now += 10
    store.follow(code, "a")
    clock.now += 10                                                         # b's last heartbeat is 20 s old
    assert store.followers(code) == 1


def test_an_ended_or_unknown_code_reads_as_closed(make):
    store, _, _ = make()
    code, secret = store.create(VIEW)
    store.end(code, secret)
    forged = codes.new_code()
    for closed, ended in ((code, True), (forged, False)):
        assert store.version(closed) is None
        with pytest.raises(ClassClosed) as err:
            store.state(closed)
        assert err.value.ended is ended
        with pytest.raises(ClassClosed):
            store.follow(closed, "a")
        with pytest.raises(ClassClosed):
            store.answer(closed, "a", "q", "1")
        with pytest.raises(ClassClosed):
            store.publish(closed, secret, VIEW)
    assert store.followers(code) == 0


def test_a_class_ends_when_its_teacher_is_away_too_long(make):
    store, _, wait = make(ttl_s=2)
    code, secret = store.create(VIEW)
    wait(1.2)
    store.follow(code, "a")                                                 # followers do not keep it open
    store.teacher_here(code, secret)                                        # the teacher does
    wait(1.2)
    assert store.version(code) == 1
    wait(2.3)
    assert store.version(code) is None
    with pytest.raises(ClassClosed):
        store.publish(code, secret, VIEW)


def test_redis_keeps_no_secret_and_a_poll_is_one_read(redis_url):
    store = RedisStore(redis_url)
    code, secret = store.create(VIEW)
    store.follow(code, "a")
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    dumped = [str(client.dump(key)) + str(client.hgetall(key) if client.type(key) == "hash" else "")
              for key in client.keys(f"atlas:class:{code}*")]
    assert dumped and not any(secret in d for d in dumped)
    assert all(0 < client.ttl(key) <= 12 * 3600 for key in client.keys(f"atlas:class:{code}*"))
    before = client.info("commandstats")
    assert store.version(code) == 1
    after = client.info("commandstats")
    calls = {k: after[k]["calls"] - before.get(k, {"calls": 0})["calls"] for k in after}
    calls["cmdstat_info"] -= 1                                              # our own INFO
    assert {k: n for k, n in calls.items() if n} == {"cmdstat_hget": 1}


def test_an_unreachable_redis_raises_store_unavailable():
    from app_core.classroom import StoreUnavailable
    from harness.browser import free_port

    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0")
    for call in (lambda: store.create(VIEW), lambda: store.version("K7QM3XPDH9TF"),
                 lambda: store.follow("K7QM3XPDH9TF", "a")):
        with pytest.raises(StoreUnavailable):
            call()
