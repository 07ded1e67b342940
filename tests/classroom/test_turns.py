"""The order of a class's page runs in one process (app_core/classroom/turns.py)."""
from __future__ import annotations

import threading
import time

from app_core.classroom.turns import Turns


def _follow(turns: Turns, code: str, log: list, hold_s: float = 0.0) -> threading.Thread:
    def run():
        with turns.follower(code):
            log.append(("start", time.monotonic()))
            time.sleep(hold_s)
            log.append(("end", time.monotonic()))
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_follower_waits_for_the_teachers_run_and_its_grace():
    turns, log = Turns(grace_s=0.1, wait_s=5.0), []
    with turns.teacher("C"):
        thread = _follow(turns, "C", log)
        time.sleep(0.3)
        assert log == []                                  # the teacher's run is going on
        ended = time.monotonic()
    thread.join(5)
    assert log and log[0][1] - ended >= 0.09


def test_another_class_does_not_wait_for_this_teacher():
    turns, log = Turns(grace_s=0.1, wait_s=5.0), []
    with turns.teacher("C"):
        _follow(turns, "D", log).join(2)
        assert [kind for kind, _ in log] == ["start", "end"]


def test_followers_run_one_at_a_time():
    turns, log = Turns(grace_s=0.0, wait_s=10.0), []
    threads = [_follow(turns, "C", log, hold_s=0.05) for _ in range(6)]
    for thread in threads:
        thread.join(10)
    kinds = [kind for kind, _ in log]
    assert kinds == ["start", "end"] * 6                  # never two runs between a start and its end


def test_a_stuck_teacher_holds_followers_back_at_most_wait_s():
    turns, log = Turns(grace_s=0.0, wait_s=0.3), []
    with turns.teacher("C"):
        t0 = time.monotonic()
        _follow(turns, "C", log).join(5)
        assert log and 0.25 <= log[0][1] - t0 < 2.0


def test_a_failing_run_gives_its_turn_back():
    turns = Turns(grace_s=0.0, wait_s=5.0)
    for _ in range(2):
        try:
            with turns.follower("C"):
                raise RuntimeError("the page failed")
        except RuntimeError:
            pass
    try:
        with turns.teacher("C"):
            raise RuntimeError("the teacher's page failed")
    except RuntimeError:
        pass
    t0 = time.monotonic()
    with turns.follower("C"):
        assert time.monotonic() - t0 < 0.2


def test_each_class_has_its_own_turn():
    """A follower of class D runs at once while a follower of class C holds C's turn (one slot per class, not one
    for the process), and the turns are forgotten once no run holds them."""
    turns, log_c, log_d = Turns(grace_s=0.0, wait_s=10.0), [], []
    holding = _follow(turns, "C", log_c, hold_s=0.5)
    time.sleep(0.05)
    t0 = time.monotonic()
    _follow(turns, "D", log_d).join(5)
    assert log_d and log_d[0][1] - t0 < 0.2                 # not behind C's half-second run
    waiting = _follow(turns, "C", log_c)
    holding.join(5)
    waiting.join(5)
    assert [kind for kind, _ in log_c] == ["start", "end", "start", "end"]
    assert turns.classes == 0


def test_teachers_ends_are_forgotten(monkeypatch):
    """A thousand classes' teachers ran once: their ends are kept FORGET_S, then pruned."""
    from app_core.classroom.turns import FORGET_S

    turns = Turns(grace_s=0.0)
    for i in range(1000):
        with turns.teacher(f"C{i}"):
            pass
    assert turns.classes == 1000
    real = time.monotonic
    monkeypatch.setattr(time, "monotonic", lambda: real() + FORGET_S + 1)
    with turns.teacher("new"):
        pass
    assert turns.classes == 1
