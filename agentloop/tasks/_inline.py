"""Awaiting a coroutine in a context of its own, inside the current task."""

from __future__ import annotations

import contextvars
from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar

__all__ = ["InContext"]

T = TypeVar("T")


class InContext(Generic[T]):
    """``await InContext(coro, context)`` runs ``coro`` with ``context`` current.

    Each step of the coroutine runs in ``context`` (as a task of its own would
    run it: context variables it sets stay there), while the awaiting task
    carries its suspensions, cancellations and cancel scopes.
    """

    __slots__ = ("_context", "_coro")

    def __init__(self, coro: Coroutine[Any, Any, T], context: contextvars.Context) -> None:
        self._coro = coro
        self._context = context

    def __await__(self) -> Generator[Any, Any, T]:
        coro, run = self._coro, self._context.run
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                yielded = run(coro.send, value) if error is None else run(coro.throw, error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            value = error = None
            try:
                value = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as thrown:  # the awaiting task's cancellation, say
                error = thrown
