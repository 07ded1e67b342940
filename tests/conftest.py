"""Shared test fixtures. Keep this file small and stable: other test files rely on these names.

- lm: the default model (SmolLM2-135M-Instruct), loaded once per test session.
- hf_model: transformers' model of the same GGUF file (float32, eager attention), the reference of tests/model and of
  the lessons' computed answers, loaded once per test session (~18 s).

A run with any skipped test fails: CI must never pass by silently not testing something.
"""
import pytest


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


def pytest_sessionfinish(session, exitstatus):
    """Turn a green run with skipped tests red (exit status 1)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter is not None else 0
    if skipped and exitstatus == 0:
        reporter.write_line(f"FAILED: {skipped} test(s) skipped; every test must run.", red=True)
        session.exitstatus = 1
