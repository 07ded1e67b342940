"""JobRunner: jobs compute one at a time in the order they were asked for, and each can tell how many are ahead."""
from __future__ import annotations

import threading
import time

from app_core.jobs import JobRunner


def test_jobs_queue_in_order_and_know_how_many_are_ahead():
    runner = JobRunner(2**20, size_of=lambda result: 0)
    release = {k: threading.Event() for k in "abc"}
    order: list[str] = []

    def work_of(key):
        def work(job):
            order.append(key)
            release[key].wait(10)
            return key
        return work

    jobs = {}
    for key in "abc":
        jobs[key] = runner.job(key, 1, work_of(key))
        deadline = time.monotonic() + 5
        while runner.ahead(jobs[key]) != "abc".index(key) and time.monotonic() < deadline:
            time.sleep(0.005)                            # the job's thread has taken its place in the queue
    assert [runner.ahead(jobs[k]) for k in "abc"] == [0, 1, 2] and order == ["a"]
    release["a"].set()
    jobs["a"].done.wait(5)
    deadline = time.monotonic() + 5
    while order != ["a", "b"] and time.monotonic() < deadline:
        time.sleep(0.005)
    assert [runner.ahead(jobs[k]) for k in "abc"] == [0, 0, 1] and order == ["a", "b"]
    release["b"].set()
    release["c"].set()
    jobs["c"].done.wait(5)
    assert order == ["a", "b", "c"] and jobs["c"].result == "c" and runner.ahead(jobs["c"]) == 0


def test_jobs_that_batch_themselves_do_not_queue():
    runner = JobRunner(2**20, size_of=lambda result: 0, one_at_a_time=False)
    both = threading.Barrier(2, timeout=5)
    jobs = [runner.job(k, 1, lambda job: both.wait() is not None) for k in "xy"]
    for job in jobs:
        assert job.done.wait(5) and job.error is None and runner.ahead(job) == 0
