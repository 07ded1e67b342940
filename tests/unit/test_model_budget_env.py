"""ATLAS_MODEL_MEMORY_MB / ATLAS_MAX_UPLOAD_MB: megabytes, decimals allowed; anything else gives the default."""
import pytest

from app_core import models_folder as _models


@pytest.mark.parametrize(("raw", "expected"), [
    ("512", 512 * 2**20), ("514.25", int(514.25 * 2**20)), (" 2 ", 2 * 2**20),
    ("", _models.DEFAULT_MODEL_MEMORY_MB * 2**20), ("abc", _models.DEFAULT_MODEL_MEMORY_MB * 2**20),
    ("0", _models.DEFAULT_MODEL_MEMORY_MB * 2**20), ("-3", _models.DEFAULT_MODEL_MEMORY_MB * 2**20),
    ("nan", _models.DEFAULT_MODEL_MEMORY_MB * 2**20), ("inf", _models.DEFAULT_MODEL_MEMORY_MB * 2**20),
])
def test_the_model_budget_reads_megabytes(monkeypatch, raw, expected):
    monkeypatch.setenv("ATLAS_MODEL_MEMORY_MB", raw)
    assert _models.memory_budget_bytes() == expected


def test_an_unset_budget_is_the_default(monkeypatch):
    monkeypatch.delenv("ATLAS_MODEL_MEMORY_MB", raising=False)
    assert _models.memory_budget_bytes() == 1152 * 2**20
