"""``run_sync()``: :func:`~agentloop.run` for scripts and notebooks without ``await``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from typing import Any

import anyio
import sniffio
from typing_extensions import TypeVar

from ..core._errors import InvalidInputError, InvalidStateError
from ..core._items import Item
from ..loop._agent import Agent
from ..model._session_config import SessionConfig
from ._run import DEFAULT_MAX_STEPS, Approver, RunResult, TurnRetryPolicy, prompt_items, run

__all__ = ["run_sync"]

OutT = TypeVar("OutT")

_BACKENDS = ("asyncio", "trio")


def run_sync(
    agent: Agent[Any, OutT],
    prompt: str | Sequence[Item],
    *,
    approve: Approver | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    config: SessionConfig | str | None = None,
    retry: TurnRetryPolicy | None = None,
    backend: str = "asyncio",
) -> RunResult[OutT]:
    """:func:`~agentloop.run`, started in an event loop of its own and waited for.

    For scripts and a REPL: ``result = agentloop.run_sync(agent, "Hi")``. It
    refuses to start inside a running event loop (a notebook cell, an ``async
    def``), where ``await agentloop.run(agent, "Hi")`` is what to call.
    ``backend`` is the anyio backend, ``"asyncio"`` (default) or ``"trio"``.
    """
    if not isinstance(agent, Agent):
        raise InvalidInputError(
            f"run_sync: expected an Agent as the first argument, got {type(agent).__name__} "
            "(build one with Agent.builder()...build())"
        )
    prompt_items("run_sync", prompt)
    if backend not in _BACKENDS:
        raise InvalidInputError(f"run_sync: backend must be 'asyncio' or 'trio', got {backend!r}")
    running = _running_loop()
    if running is not None:
        raise InvalidStateError(
            f"run_sync: cannot start an event loop inside the running {running} loop; in "
            "async code (a notebook cell, an async function) call "
            "`await agentloop.run(agent, prompt)` instead"
        )
    call = partial(
        run, agent, prompt, approve=approve, max_steps=max_steps, config=config, retry=retry
    )
    return anyio.run(call, backend=backend)


def _running_loop() -> str | None:
    """The event loop running in this thread (``"asyncio"``, ``"trio"``), or ``None``."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return "asyncio"
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return None
