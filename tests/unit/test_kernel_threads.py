"""How many threads a native kernel call gets: ATLAS_KERNEL_THREADS, else every usable core (not torch's count, which
the app keeps one below)."""
import pytest
import torch

from model.native import threads


@pytest.mark.parametrize("cores", [1, 2, 16])
def test_every_usable_core(monkeypatch, cores):
    monkeypatch.delenv("ATLAS_KERNEL_THREADS", raising=False)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda _pid: set(range(cores)), raising=False)
    assert threads.kernel_threads() == cores


@pytest.mark.parametrize(("raw", "expected"), [("1", 1), (" 6 ", 6), ("0", 4), ("-1", 4), ("many", 4), ("", 4)])
def test_environment_variable_wins_when_it_is_a_positive_count(monkeypatch, raw, expected):
    monkeypatch.setenv("ATLAS_KERNEL_THREADS", raw)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda _pid: set(range(4)), raising=False)
    assert threads.kernel_threads() == expected


def test_independent_of_torchs_thread_count(monkeypatch):
    monkeypatch.delenv("ATLAS_KERNEL_THREADS", raising=False)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)                     # as the app's compute_threads() on 2 cores
        assert threads.kernel_threads() == 2
    finally:
        torch.set_num_threads(before)
