"""The pool of loaded models: one load per model however many threads ask, least recently used unloaded first, a
model larger than the budget refused before loading."""
import threading
import time

import pytest

from app_core.model_pool import ModelPool, TooLarge


def test_least_recently_used_is_unloaded_first():
    pool = ModelPool(100)
    pool.get("a", 40, lambda: "A")
    pool.get("b", 40, lambda: "B")
    pool.peek("a")                                   # a used after b
    pool.get("c", 40, lambda: "C")
    assert pool.keys() == ["a", "c"] and pool.total_bytes == 80


def test_a_model_larger_than_the_budget_is_refused_before_loading():
    pool = ModelPool(100)
    pool.get("a", 60, lambda: "A")
    with pytest.raises(TooLarge) as err:
        pool.get("big", 101, lambda: pytest.fail("loaded"))
    assert (err.value.needed, err.value.budget) == (101, 100)
    assert pool.keys() == ["a"]                      # nothing unloaded for a model that cannot fit


def test_threads_asking_at_once_load_once():
    pool, calls = ModelPool(100), []

    def load():
        calls.append(1)
        time.sleep(0.2)
        return object()

    got = []
    threads = [threading.Thread(target=lambda: got.append(pool.get("m", 10, load))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and pool.loads == 1 and len({id(m) for m in got}) == 1
