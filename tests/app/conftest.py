"""AppTest runs the app in this process: its model passes keep the process's torch thread count, so the pages'
numbers equal the reference computations in the tests to the last bit (the server's default, all cores but one,
would change torch's reduction order for every later test in the process; app_core/scheduling.compute_threads)."""
import os

import pytest
import torch

os.environ.setdefault("ATLAS_TORCH_THREADS", str(torch.get_num_threads()))


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """A folder of tiny GGUFs of every architecture (tests/app/models_folder.py), written once."""
    from tests.app.models_folder import write_models

    return write_models(tmp_path_factory.mktemp("models"))


@pytest.fixture
def models_dir(tiny_models, monkeypatch):
    """The app's models folder is the tiny models' (ATLAS_MODELS_DIR) for this test."""
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(tiny_models))
    return tiny_models


@pytest.fixture(scope="session")
def tiny_encoders(tiny_models, tmp_path_factory):
    """A folder with a tiny BERT, a tiny T5 and a tiny decoder, and their references (tests/app/encoders_folder.py)."""
    from tests.app.encoders_folder import write_encoders

    return write_encoders(tmp_path_factory.mktemp("encoders"), tiny_models)


@pytest.fixture
def encoders_dir(tiny_encoders, monkeypatch):
    """The app's models folder is the tiny encoders' for this test."""
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(tiny_encoders.path))
    return tiny_encoders
