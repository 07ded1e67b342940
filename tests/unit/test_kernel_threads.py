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


def in_new_thread(fn):
    """fn() run in a thread started now: its result."""
    import threading

    result = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join()
    return result[0]


def mkl_threads() -> int:
    """MKL's own answer for the calling thread."""
    import ctypes

    runtime = threads._torch_runtime()
    runtime.MKL_Get_Max_Threads.restype = ctypes.c_int
    return runtime.MKL_Get_Max_Threads()


def first_use_inside() -> tuple[int, int]:
    """torch's and MKL's counts inside the context, after an operation, in a thread that had not used torch."""
    with threads.torch_on_calling_thread():
        torch.ones(100_000).exp().sum()
        return torch.get_num_threads(), mkl_threads()


@pytest.mark.skipif(threads._torch_runtime() is None, reason="torch without its OpenMP runtime / MKL")
def test_torch_runs_on_the_calling_thread_alone_inside_the_context_and_other_threads_keep_theirs():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert mkl_threads() == 2
        with threads.torch_on_calling_thread():
            assert torch.get_num_threads() == 1 and mkl_threads() == 1
            assert in_new_thread(torch.get_num_threads) == 2          # a session starting meanwhile: torch's count
            with threads.torch_on_calling_thread(active=False):
                assert torch.get_num_threads() == 1                   # inactive: changes nothing
        assert torch.get_num_threads() == 2 and mkl_threads() == 2    # put back
        assert in_new_thread(first_use_inside) == (1, 1)            # a thread whose first torch use is in the context
        with threads.torch_on_calling_thread(active=False):
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_the_count_is_put_back_when_the_pass_fails():
    before = torch.get_num_threads()
    with pytest.raises(ValueError), threads.torch_on_calling_thread():
        raise ValueError("a bad input")
    assert torch.get_num_threads() == before
