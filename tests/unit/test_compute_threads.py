"""How many threads one model computation gets: ATLAS_TORCH_THREADS, else every usable core but one."""
import os

import pytest

from app_core.scheduling import compute_threads


@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 1), (4, 3), (16, 15)])
def test_all_cores_but_one(monkeypatch, cores, expected):
    monkeypatch.delenv("ATLAS_TORCH_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cores)), raising=False)
    assert compute_threads() == expected


@pytest.mark.parametrize(("raw", "expected"), [("2", 2), (" 6 ", 6), ("0", 3), ("-1", 3), ("many", 3), ("", 3)])
def test_environment_variable_wins_when_it_is_a_positive_count(monkeypatch, raw, expected):
    monkeypatch.setenv("ATLAS_TORCH_THREADS", raw)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(4)), raising=False)
    assert compute_threads() == expected
