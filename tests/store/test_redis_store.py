"""RedisSessionStore: a real redis-server (Debian's, started by the tests) passes the suite."""

import pytest

from agentloop.store import RedisBackend, RedisSessionStore
from agentloop.testing.store_conformance import OpenStore, StoreConformance, check_backend

pytestmark = pytest.mark.anyio


class TestRedisStore(StoreConformance):
    @pytest.fixture
    def open_store(self, redis_server: str, redis_prefix: str) -> OpenStore:
        return lambda: RedisSessionStore(redis_server, prefix=redis_prefix)


async def test_the_redis_backend_keeps_every_primitive(
    redis_server: str, redis_prefix: str
) -> None:
    backend = RedisBackend(redis_server, prefix=redis_prefix)
    await check_backend(backend)
    assert await backend.heads() == {}
    await backend.aclose()
