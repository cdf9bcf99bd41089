"""Tool I/O: what the driver does with the executor and the task manager.

Reads the tool catalog, prepares a call (permission evaluation and input
validation, synchronous), starts its task, waits for the turn's running tasks,
and stops them at an interrupt. Every decision about what these outcomes mean
is the core's (``_rounds.py``). A driver with observers gets :class:`ObservedToolIO`
(chosen once, :func:`tool_io_for`), which tells the observers about the
catalog's changes and each call's start; the plain one tells nobody.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from functools import partial
from typing import Any

import anyio
import attrs

from .._log import get_logger
from ..core._items import ToolResultPart
from ..core._tool_spec import ToolSpec
from ..tasks._protocol import TaskLaunch, TaskLaunched, TaskResult, TurnUpdate
from ..tools._executor import (
    PendingApproval,
    PreparedCall,
    interrupted_result,
    reconciled_result,
)
from ..tools._permission_check import granted_permissions
from ..tools._questions import QuestionAnswer, Resumed
from ..tools._tool import ToolContext
from ._driver_parts import UNGUARDED, DriverParts
from ._observer import NOBODY, Nobody
from ._questions import Asked, QuestionBox
from ._session_history import inherited_keys
from ._state import RoundCall, TurnState
from ._steps import AnswerKind, CallQuestion

__all__ = ["ObservedToolIO", "ToolIO", "tool_io_for"]

log = get_logger()


class ToolIO:
    """One driver's tool effects (see the module docstring)."""

    __slots__ = (
        "_drain_with_specs",
        "_executor",
        "_key_sessions",
        "_permissions",
        "_resources",
        "_session_id",
        "_timeout",
        "questions",
        "tasks",
    )

    def __init__(self, parts: DriverParts) -> None:
        self._executor = parts.executor
        self.tasks = parts.task_manager
        self._permissions = parts.permissions
        self._resources = parts.resources
        self._session_id = parts.config.session_id
        self._key_sessions = inherited_keys(parts.config.metadata)
        """Calls a fork inherited: the session each one's idempotency key comes from."""
        self._timeout = parts.config.limits.tool_timeout
        self.questions = QuestionBox()  # where the running calls' questions wait
        # BasicToolExecutor drains catalog changes and lists specs in one pass. The
        # class's function, not a bound method: one object less per session (W3).
        self._drain_with_specs = getattr(type(self._executor), "_drain_with_specs", None)

    # -- the catalog (the core's ``Catalog``) ---------------------------------

    def changes(self) -> tuple[Sequence[Any], tuple[ToolSpec, ...] | None]:
        """The catalog's changes since the last model call, and (with none) the specs."""
        drain_with_specs = self._drain_with_specs
        if drain_with_specs is not None:  # BasicToolExecutor: one listing for both
            changes, specs = drain_with_specs(self._executor)
            return changes, specs
        return self._executor.drain_catalog_events(), None

    def specs(self) -> tuple[ToolSpec, ...]:
        """The specs to offer the model."""
        return tuple(self._executor.specs())

    # -- one call --------------------------------------------------------------

    def prepare(self, call: RoundCall) -> ToolResultPart | PendingApproval | PreparedCall:
        """Check ``call`` (with the host's edit, if any) against the permissions granted."""
        decision = call.decision
        request = call.request
        if decision is not None and decision.kind is AnswerKind.APPROVE_WITH:
            request = attrs.evolve(request, input=decision.input)
        return self._executor.prepare(
            request, self._permissions, approved=granted_permissions(call)
        )

    async def start(
        self, turn: TurnState, call: RoundCall, prepared: PreparedCall, *, sole: bool
    ) -> TaskResult | TaskLaunched:
        """Start ``call``'s task (``sole``: the only call of its round)."""
        if turn.cancellation is not None:
            call.cancellation = turn.cancellation.for_call()
        ctx = ToolContext(
            self._session_id,
            turn.turn_id,
            call.call.id,
            call.cancellation,
            self._resources,
            call.call.metadata,
            self.questions,
            resumed=None if call.resumed is None else resumed(call.resumed),
            key_session_id=self._key_sessions.get(call.call.id),
        )
        questions = self.questions
        if getattr(prepared.tool, "asks_host", False):
            questions.allow(call.call.id)
            sole = False  # it may ask: never inline, so next() can return its question
        launch = TaskLaunch(
            prepared.request, partial(self._executor.invoke, prepared, ctx), call.task_id, sole=sole
        )
        questions.starting = call.call.id  # an ask while it starts runs inline: refused
        try:
            return await self.tasks.start_task(launch, turn.turn_id)
        finally:
            questions.starting = None

    def key_session(self, call_id: str) -> str | None:
        """The session ``call_id``'s idempotency key comes from, when a fork inherited it."""
        return self._key_sessions.get(call_id)

    async def reconcile(self, turn: TurnState, call: RoundCall) -> ToolResultPart | None:
        """What ``call``'s tool says a call left in doubt came to (``None``: unknown), within
        the session's tool timeout."""
        ctx = ToolContext(
            self._session_id,
            turn.turn_id,
            call.call.id,
            turn.cancellation,
            self._resources,
            call.call.metadata,
            key_session_id=self._key_sessions.get(call.call.id),
        )
        with anyio.move_on_after(self._timeout) if self._timeout is not None else UNGUARDED:
            return await reconciled_result(self._executor, call.request, ctx)
        log.warning("reconcile timed out; the call stays in doubt", call_id=call.call.id)
        return None

    def wait(self, turn_id: str) -> Awaitable[TurnUpdate | Asked | None]:
        """The next update of the turn's running tasks (``None``: none runs), or ``ASKED``
        when a running call asks the host first."""
        questions = self.questions
        if not questions.may_ask:  # nothing running may ask: a plain wait
            return self.tasks.wait_for_turn(turn_id)
        return questions.race(self.tasks.wait_for_turn, turn_id)

    def interrupted(self, call_id: str) -> ToolResultPart | None:
        """What the executor saw a running call's worker do at an interrupt, if anything."""
        return interrupted_result(self._executor, call_id)

    def take_background(self) -> list[TaskResult]:
        """The background results that finished since the last look."""
        return self.tasks.take_background_results()


class ObservedToolIO(ToolIO):
    """The tool I/O of a driver with observers: tells the observers about the catalog's
    changes when they are read and about each call as its task starts."""

    __slots__ = ("_observer",)

    def __init__(self, parts: DriverParts, observer: Nobody) -> None:
        super().__init__(parts)
        self._observer = observer

    def changes(self) -> tuple[Sequence[Any], tuple[ToolSpec, ...] | None]:
        changes, specs = super().changes()
        self._observer.catalog_changed(changes)
        return changes, specs

    async def start(
        self, turn: TurnState, call: RoundCall, prepared: PreparedCall, *, sole: bool
    ) -> TaskResult | TaskLaunched:
        self._observer.tool_started(call.call.id, call.call.name, call.task_id)
        return await super().start(turn, call, prepared, sole=sole)


def tool_io_for(parts: DriverParts, observer: Nobody) -> ToolIO:
    """The tool I/O for a driver, chosen once: with observers or without."""
    return ToolIO(parts) if observer is NOBODY else ObservedToolIO(parts, observer)


def resumed(asked: tuple[CallQuestion, QuestionAnswer]) -> Resumed:
    """What a call running again from the answer to its question receives."""
    step, answer = asked
    return Resumed(step.question, answer)
