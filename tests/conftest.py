"""Shared test fixtures. Keep this file small and stable: other test files rely on these names.

- lm: the default model (SmolLM2-135M-Instruct), loaded once per test session.
"""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:          # `pytest` (not `python -m pytest`) from anywhere: import app_pages, model, viz
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def lm():
    """The default model, loaded once per session (read-only: do not mutate it)."""
    from model import load_model

    return load_model()
