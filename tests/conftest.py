"""Shared test fixtures. Keep this file small and stable: other test files rely on these names.

- lm: the default model (SmolLM2-135M-Instruct), loaded once per test session.
- hf_model: transformers' model of the same GGUF file (float32, eager attention), the reference of tests/model and of
  the lessons' computed answers, loaded once per test session (~18 s).

A run with any skipped test fails: CI must never pass by silently not testing something.

The README's command runs the tests on three workers (pytest-xdist, `-n 3 --dist loadfile --no-loadscope-reorder`):
whole files, handed to whichever worker is free in the order collected. The files that take minutes are collected
first (MINUTES_FIRST), so the last files handed out are short and the workers end together (handed out by their
number of tests, xdist's default, the class and lessons browser files came last: ~100 s of one idle worker).
The browser tests' app server is one for all workers: the controller starts it as the run is configured and
stops it at the end (harness/shared_app.py).

OMP_WAIT_POLICY=PASSIVE (set here, before anything imports torch; the workers and every server they start inherit
it): torch's OpenMP threads sleep at once when they wait, instead of spinning. Three workers, their app servers and
Chromium share 2 cores, and a spinning thread takes the core from the one it waits for: a matrix loop beside two busy
processes took 44 s and 44 CPU-s spinning, 29 s and 23 CPU-s passive (alone: 10 s either way); six CPU-bound test
files on three workers, 186 s against 166 s (2-core AMD EPYC). How a thread waits changes no result.
"""
import os
import sys
from pathlib import Path

assert "torch" not in sys.modules, "tests/conftest.py must set OMP_WAIT_POLICY before torch is imported"
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402

# Files by their seconds in a clean-clone run (--durations=0, 2-core Xeon), longest first; every other file after.
MINUTES_FIRST = ("tests/e2e/test_browser.py", "tests/e2e/test_class_browser.py", "tests/e2e/test_lessons_browser.py",
                 "tests/app/test_lessons_pages.py", "tests/e2e/test_i18n_browser.py", "tests/model/test_fetch.py",
                 "tests/app/test_share_links.py", "tests/app/test_hostile_texts.py", "tests/app/test_model_picker.py",
                 "tests/app/test_memory_budget.py", "tests/model/test_hub.py", "tests/e2e/test_class_haproxy.py")


@pytest.fixture(scope="session")
def lm():
    """The default model, loaded once per session (read-only: do not mutate it)."""
    from model import load_model

    return load_model()


@pytest.fixture(scope="session")
def hf_model():
    """transformers' model of the default GGUF file (tests/model/conftest.py's reference_model, float32). Read-only; a
    test that changes it restores it (as tests/model's hf_kv_heads does)."""
    import torch

    from tests.model.conftest import reference_model

    return reference_model(torch.float32)


def pytest_collection_modifyitems(items):
    """MINUTES_FIRST's files first, in its order; every other test in the order collected."""
    rank = {path: i for i, path in enumerate(MINUTES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(MINUTES_FIRST)))


def pytest_sessionfinish(session, exitstatus):
    """Turn a green run with skipped tests red (exit status 1)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter is not None else 0
    if skipped and exitstatus == 0:
        reporter.write_line(f"FAILED: {skipped} test(s) skipped; every test must run.", red=True)
        session.exitstatus = 1


def pytest_configure(config):
    """The controller of an xdist run whose paths hold the browser tests starts the app server its workers share
    (harness/shared_app.py), so it loads the model while they start."""
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None) and _runs_e2e(config.args):
        from harness.shared_app import start_shared_app

        start_shared_app(Path(__file__).resolve().parents[1], os.getpid())


def _runs_e2e(args: list[str]) -> bool:
    """Whether these command-line paths include tests/e2e (none: the testpaths, tests/)."""
    paths = [Path(a.split("::")[0]).resolve() for a in args] or [Path(__file__).resolve().parent]
    e2e = Path(__file__).resolve().parent / "e2e"
    return any(p == e2e or e2e in p.parents or p in e2e.parents for p in paths)


def pytest_unconfigure(config):
    """The controller of an xdist run stops the app server its workers shared (harness/shared_app.py)."""
    if not hasattr(config, "workerinput"):
        from harness.shared_app import stop_shared_app

        stop_shared_app(os.getpid())
