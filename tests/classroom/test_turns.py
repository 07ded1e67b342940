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
