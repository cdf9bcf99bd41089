"""The parts a driver performs its effects with (model, executor, task manager, store)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import attrs

from .._log import get_logger
from ..core._cancellation import CancellationHandle
from ..core._items import Item
from ..model._protocol import ModelSession
from ..model._session_config import SessionConfig
from ..permissions._requests import PermissionChecker
from ..tasks._protocol import TaskManager
from ..tools._executor import ToolExecutor
from ._events import LoopObserver, TranscriptObserver
from ._mutators import LoopMutator
from ._session_store import SessionStore
from ._state import TurnState

__all__ = ["CLEANUP_SECONDS", "UNGUARDED", "DriverParts", "cancel_scope", "transcript_listener"]


class _Unguarded(AbstractContextManager[None]):
    """A shared context manager that does nothing (no cancel scope, no deadline).

    Its ``__enter__`` and ``__exit__`` are static: a ``with`` block keeps the
    looked-up ``__exit__`` for as long as it is suspended, and a static one is
    the shared function itself, where ``nullcontext`` would give a new bound
    method (80 bytes held per waiting session for each such block).
    """

    __slots__ = ()

    @staticmethod
    def __enter__() -> None:
        return None

    @staticmethod
    def __exit__(*exc_info: object) -> None:
        return None


UNGUARDED = _Unguarded()

log = get_logger()

CLEANUP_SECONDS = 5.0
"""How long shielded cleanup (closing a stream, interrupting tasks) may take."""


@attrs.frozen
class DriverParts:
    """Everything an ``Agent`` hands a new driver (internal)."""

    config: SessionConfig
    session: ModelSession
    executor: ToolExecutor
    task_manager: TaskManager
    permissions: PermissionChecker
    resources: Any
    cancellation: CancellationHandle | None
    mutators: tuple[LoopMutator, ...]
    observers: tuple[LoopObserver, ...]
    transcript_observers: tuple[TranscriptObserver, ...]
    store: SessionStore | None = None
    model_name: str | None = None
    """The adapter's ``model_name`` (prices a response that names no model)."""
    ask_in_doubt: bool = False
    """A call a restore leaves in doubt that its tool cannot reconcile surfaces as a
    ``CallInDoubt`` for the host (``AgentBuilder.ask_in_doubt``)."""


def cancel_scope(turn: TurnState) -> AbstractContextManager[Any]:
    """The turn's cancel scope (none without a cancellation handle)."""
    if turn.cancellation is None:
        return UNGUARDED
    return turn.cancellation.scope()


def transcript_listener(
    observers: tuple[TranscriptObserver, ...],
) -> Callable[[Item], None] | None:
    """What the core calls for each appended item: nothing without transcript observers
    (no call per item, and no bound method kept per session)."""
    if not observers:
        return None

    def appended(item: Item) -> None:
        for observer in observers:
            try:
                observer.on_item_appended(item)
            except Exception:
                log.exception("transcript observer raised", observer=type(observer).__name__)

    return appended
