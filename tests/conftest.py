"""Shared fixtures: every async test runs on both anyio backends; no test leaks logging setup."""

from collections.abc import Iterator

# Hypothesis imports its optimiser lazily, the first time a test reaches that phase:
# deep inside an async test, where pytest's assertion rewriter then parses it and
# CPython 3.11.7 can fail with "SystemError: AST constructor recursion depth
# mismatch" (a CPython bug). Imported here, at a shallow depth, it never is later.
import hypothesis.internal.conjecture.optimiser  # noqa: F401
import pytest
import structlog
from hypothesis import settings

# No per-example deadline: the machines that run the suite are shared and loaded, and
# a slow example is not a failure (speed lives in benchmarks/). A test's own
# ``@settings(deadline=...)`` still applies.
settings.register_profile("agentloop", deadline=None)
settings.load_profile("agentloop")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    """Undo any ``structlog.configure`` a test made (the CLI's ``main()`` configures it,
    as a host does), so later tests see the library's unconfigured default."""
    yield
    structlog.reset_defaults()
