"""app_core/budget.py: a cache bounded by the bytes its values hold, shared by threads."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from app_core.budget import ByteBudgetCache, nbytes

MB = 2**20


@dataclass(frozen=True)
class Trace:
    attention: np.ndarray
    checkpoints: dict


def test_nbytes_walks_dataclasses_dicts_and_lists():
    t = Trace(np.zeros((4, 4), np.float32), {0: np.zeros(10), 6: np.zeros(10)})
    assert nbytes(t) == 64 + 160
    assert nbytes([np.zeros(3, np.int8), {"a": (np.zeros(2),)}, "text"]) == 3 + 16


def test_total_stays_within_the_budget_least_recently_used_first():
    cache = ByteBudgetCache("t", 10 * MB)
    for key in range(5):
        cache.get(key, lambda: np.zeros(3 * MB, np.uint8))
        assert cache.total_bytes <= 10 * MB
    assert len(cache) == 3 and 0 not in cache and 1 not in cache
    cache.get(2, lambda: None)                                   # a hit: 2 becomes the most recent
    cache.get(9, lambda: np.zeros(3 * MB, np.uint8))
    assert 2 in cache and 3 not in cache and cache.stats.evictions == 3


def test_an_evicted_value_is_computed_again_and_a_too_big_one_is_served():
    cache = ByteBudgetCache("t", 4 * MB)
    calls = []

    def compute():
        calls.append(1)
        return np.ones(3 * MB, np.uint8)

    a = cache.get("a", compute)
    cache.get("b", compute)                                     # evicts a
    assert cache.get("a", compute) is not a and len(calls) == 3
    huge = cache.get("huge", lambda: np.zeros(8 * MB, np.uint8))
    assert huge.nbytes == 8 * MB and "huge" not in cache        # returned, not kept
    assert cache.total_bytes <= 4 * MB


def test_concurrent_requests_for_one_key_compute_once():
    cache = ByteBudgetCache("t", 10 * MB)
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return np.zeros(10, np.uint8)

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("k", slow))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(results) == 6 and all(r is results[0] for r in results)


def test_a_failed_computation_is_not_cached():
    cache = ByteBudgetCache("t", MB)

    def broken():
        raise ValueError("empty text")

    for _ in range(2):
        try:
            cache.get("x", broken)
        except ValueError:
            pass
    assert "x" not in cache
    assert cache.get("x", lambda: np.zeros(1)).shape == (1,)


def test_evictions_call_the_hook_after_the_lock():
    calls = []
    cache = ByteBudgetCache("t", 4 * MB, on_evict=lambda: calls.append(len(cache)))
    cache.get("a", lambda: np.zeros(3 * MB, np.uint8))
    assert calls == []
    cache.get("b", lambda: np.zeros(3 * MB, np.uint8))
    assert calls == [1]                                          # called once a (and only a) was dropped


def test_small_evictions_call_the_hook_once_they_add_up_to_a_quarter_of_the_budget():
    """A full cache of small values (a figure each) evicts one for every new one: the hook (a full garbage
    collection in the app) runs once a quarter of the budget was evicted, not after each."""
    calls = []
    cache = ByteBudgetCache("t", 16 * MB, on_evict=lambda: calls.append(cache.stats.evictions))
    for i in range(16):
        cache.get(i, lambda: np.zeros(MB, np.uint8))                # fills the budget: nothing evicted
    for i in range(16, 28):
        cache.get(i, lambda: np.zeros(MB, np.uint8))                # 12 evictions of 1 MB: 4 MB = a quarter, 3 times
    assert cache.stats.evictions == 12 and calls == [4, 8, 12]
    cache.get("big", lambda: np.zeros(3 * MB, np.uint8), expected_bytes=3 * MB)   # room made first: 3 MB, not yet
    assert calls == [4, 8, 12]
    cache.get("big2", lambda: np.zeros(3 * MB, np.uint8))           # 3 + 3 MB evicted since: the hook
    assert calls == [4, 8, 12, 18]


def test_room_is_made_before_a_value_of_known_size_is_computed():
    cache = ByteBudgetCache("t", 8 * MB)
    cache.get("a", lambda: np.zeros(4 * MB, np.uint8))
    cache.get("b", lambda: np.zeros(4 * MB, np.uint8))
    seen = []
    cache.get("c", lambda: seen.append(len(cache)) or np.zeros(4 * MB, np.uint8), expected_bytes=4 * MB)
    assert seen == [1]                                           # a was dropped before c was computed
    assert cache.total_bytes == 8 * MB and "b" in cache and "c" in cache
