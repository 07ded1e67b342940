import pytest

from harness.redis_server import running_redis


@pytest.fixture(scope="session")
def redis_url():
    """One real redis-server for the session's tests (each test uses its own classes' keys)."""
    with running_redis() as url:
        yield url
