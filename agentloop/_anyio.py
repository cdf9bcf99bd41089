"""The running event loop's anyio backend, for hot paths that cannot afford the lookup.

``anyio.lowlevel.checkpoint_if_cancelled()`` and ``anyio.CancelScope()`` find the
backend anew on every call (``sniffio`` plus a task lookup: ~0.3 us each). An
object bound to one event loop for its whole life (an entered
``AsyncTaskManager``) looks it up once and calls the backend directly. Where
anyio does not offer the lookup (it is internal to anyio), the public functions
are used instead: the same behaviour, only slower.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel

_get_async_backend: Any
try:
    from anyio._core._eventloop import get_async_backend as _get_async_backend
except ImportError:  # pragma: no cover - an anyio without it
    _get_async_backend = None

__all__ = ["PUBLIC_BACKEND", "event_loop_backend"]


class PUBLIC_BACKEND:
    """The backend methods agentloop calls, through anyio's public functions."""

    @staticmethod
    async def checkpoint_if_cancelled() -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()

    @staticmethod
    def create_cancel_scope() -> anyio.CancelScope:
        return anyio.CancelScope()


def event_loop_backend() -> Any:
    """The running event loop's backend: ``checkpoint_if_cancelled()`` and
    ``create_cancel_scope()`` as anyio's own functions would run them."""
    if _get_async_backend is None:  # pragma: no cover
        return PUBLIC_BACKEND
    backend = _get_async_backend()
    if not all(
        callable(getattr(backend, name, None))
        for name in ("checkpoint_if_cancelled", "create_cancel_scope")
    ):  # pragma: no cover - a backend without them
        return PUBLIC_BACKEND
    return backend
