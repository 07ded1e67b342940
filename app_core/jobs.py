"""Background jobs for slow, shared computations (a 64-token generation takes seconds): pure threading, no Streamlit.

A page asks for a job by key; the first ask starts it in a thread, every later ask (from any session) gets the same
job and can show its progress while the page stays interactive. Jobs run one at a time (the machine's cores are
better used by one computation than split between several), finished results are kept in a ByteBudgetCache, and a
job nobody asked about for a while is cancelled at its next step. When the process exits, running jobs are asked to
stop at their next step and waited for (briefly): a daemon thread stopped inside torch as the interpreter shuts down
aborts the process ("terminate called without an active exception", exit status 134).
"""
from __future__ import annotations

import atexit
import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from app_core.budget import ByteBudgetCache

IDLE_CANCEL_S = 30.0       # a running job that no page has polled for this long is cancelled
EXIT_WAIT_S = 10.0         # at process exit, how long running jobs get to reach their next step and stop
_EXITING = threading.Event()
_THREADS: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


@dataclass
class Job:
    """One computation's progress: `partial` grows as it runs; `result` or `error` is set when it ends."""

    key: Hashable
    total: int
    partial: list = field(default_factory=list)
    result: Any = None
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)
    last_polled: float = field(default_factory=time.monotonic)

    @property
    def progress(self) -> float:
        return 1.0 if self.done.is_set() else min(1.0, len(self.partial) / max(1, self.total))

    def poll(self) -> Job:
        self.last_polled = time.monotonic()
        return self

    def abandoned(self, idle_s: float = IDLE_CANCEL_S) -> bool:
        """True when no page has polled this job for idle_s seconds, or the process is exiting: stop at this step."""
        return _EXITING.is_set() or time.monotonic() - self.last_polled > idle_s


class JobRunner:
    """Starts jobs in daemon threads, one computing at a time in the order they were asked for (unless the work
    batches itself: one_at_a_time=False); keeps finished results within a byte budget."""

    def __init__(self, budget_bytes: int, size_of: Callable[[Any], int], on_evict: Callable[[], None] | None = None,
                 one_at_a_time: bool = True):
        self._results = ByteBudgetCache("jobs", budget_bytes, size_of, on_evict)
        self._running: dict[Hashable, Job] = {}
        self._lock = threading.Lock()
        self._one_at_a_time = one_at_a_time
        self._turns = threading.Condition()
        self._queue: list[Job] = []      # one at a time: the computing job first, then the waiting ones in order

    def job(self, key: Hashable, total: int, work: Callable[[Job], Any]) -> Job:
        """The job for key: finished (from the cache), running, or started now. work(job) appends to job.partial
        as it goes, returns the result, and should stop early when job.abandoned() (return None then)."""
        cached = self._results.peek(key)
        if cached is not None:
            finished = Job(key, total, result=cached)
            finished.done.set()
            return finished
        with self._lock:
            running = self._running.get(key)
            if running is not None:
                return running.poll()
            job = self._running[key] = Job(key, total)
        thread = threading.Thread(target=self._run, args=(job, work), daemon=True, name=f"job-{hash(key) & 0xFFFF:x}")
        _THREADS.add(thread)
        thread.start()
        return job

    def running(self) -> int:
        """How many jobs are running now."""
        with self._lock:
            return len(self._running)

    def ahead(self, job: Job) -> int:
        """How many jobs compute or wait before this one (0: it computes now, is done, or jobs do not queue)."""
        with self._turns:
            return self._queue.index(job) if job in self._queue else 0

    @contextlib.contextmanager
    def _turn(self, job: Job):
        """The job's turn: jobs compute one at a time, in the order they were started."""
        if not self._one_at_a_time:
            yield
            return
        with self._turns:
            self._queue.append(job)
            self._turns.wait_for(lambda: self._queue[0] is job)
        try:
            yield
        finally:
            with self._turns:
                self._queue.remove(job)
                self._turns.notify_all()

    def _run(self, job: Job, work: Callable[[Job], Any]) -> None:
        try:
            with self._turn(job):
                job.result = work(job)
            if job.result is not None:
                self._results.put(job.key, job.result)
        except Exception as exc:   # a failed job reports its message to the page instead of dying silently
            job.error = f"{type(exc).__name__}: {exc}"
        finally:
            with self._lock:
                self._running.pop(job.key, None)
            job.done.set()


@atexit.register
def _stop_running_jobs() -> None:
    """At interpreter exit: every running job stops at its next step (abandoned() is True), and is waited for."""
    _EXITING.set()
    deadline = time.monotonic() + EXIT_WAIT_S
    for thread in list(_THREADS):
        thread.join(max(0.0, deadline - time.monotonic()))
