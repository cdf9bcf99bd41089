"""a2a-sdk runs on asyncio only (its server and client use asyncio queues and tasks):
the A2A tests run on that backend alone."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
