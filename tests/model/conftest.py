import pytest


@pytest.fixture(scope="session")
def lm():
    from model import load_model

    return load_model()
