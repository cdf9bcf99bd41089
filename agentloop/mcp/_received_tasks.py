"""One task the client runs for a server (its state machine), and the checks of the
``task`` and ``taskId`` parameters a server sends."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import anyio
import attrs
import mcp_types
from mcp.shared.exceptions import MCPError

__all__ = ["MIN_TTL_MS", "ReceivedTask", "task_id_of", "ttl_of"]

MIN_TTL_MS = 1000
"""The shortest ttl a task is kept for (a shorter request is raised to it)."""

_ENDED = frozenset({"completed", "failed", "cancelled"})


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@attrs.define(eq=False)
class ReceivedTask:
    """A task-augmented request the client answers: ``working`` -> ``input_required``
    -> ``completed`` | ``failed`` | ``cancelled`` (an ended task never changes)."""

    task_id: str
    method: str
    number: int  # creation order: the tasks/list cursor
    ttl_ms: int
    expires: float  # anyio time after which it is dropped
    created_at: str
    updated_at: str
    status: str = "working"
    message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: mcp_types.ErrorData | None = None
    done: anyio.Event = attrs.field(factory=anyio.Event)

    @classmethod
    def start(cls, task_id: str, method: str, number: int, ttl_ms: int) -> ReceivedTask:
        """A new ``working`` task, kept ``ttl_ms`` from now."""
        now = _now()
        expires = anyio.current_time() + ttl_ms / 1000
        return cls(task_id, method, number, ttl_ms, expires, now, now)

    @property
    def ended(self) -> bool:
        """Whether the task reached an end state."""
        return self.status in _ENDED

    def update(self, status: str, message: str | None) -> None:
        """Move a running task to ``status`` (an ended one stays as it is)."""
        if self.ended:
            return
        self.status, self.message, self.updated_at = status, message, _now()
        if self.ended:
            self.done.set()

    def complete(self, result: dict[str, Any], message: str) -> None:
        """The request's answer is ``result``."""
        if not self.ended:
            self.result = result
            self.update("completed", message)

    def fail(self, error: mcp_types.ErrorData) -> None:
        """The request's answer is the JSON-RPC ``error``."""
        if not self.ended:
            self.error = error
            self.update("failed", error.message)

    def cancel(self, why: str) -> None:
        """End a running task as ``cancelled`` (``tasks/result`` then says ``why``)."""
        if not self.ended:
            self.error = mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message=f"task {self.task_id!r} was cancelled ({why}); it has no result",
            )
            self.update("cancelled", why)

    def wire(self) -> dict[str, Any]:
        """The task as ``tasks/get`` answers it."""
        task = mcp_types.Task(
            task_id=self.task_id,
            status=self.status,  # type: ignore[arg-type]
            status_message=self.message,
            created_at=self.created_at,
            last_updated_at=self.updated_at,
            ttl=self.ttl_ms,
            poll_interval=self.poll_interval_ms,
        )
        data: dict[str, Any] = task.model_dump(mode="json", by_alias=True, exclude_none=True)
        return data


def _invalid(message: str) -> MCPError:
    return MCPError(code=mcp_types.INVALID_PARAMS, message=message)


def task_id_of(method: str, params: Mapping[str, Any] | None) -> str:
    """``params.taskId``; ``MCPError`` (invalid params) unless it is a non-empty string."""
    value = params.get("taskId") if isinstance(params, Mapping) else None
    if not isinstance(value, str) or not value:
        raise _invalid(
            f"{method}: params.taskId must be the non-empty string a CreateTaskResult "
            f"gave, got {value!r}"
        )
    return value


def ttl_of(method: str, task: object, default_ms: int, max_ms: int) -> int:
    """The ttl (ms) to keep a task for: ``task.ttl`` (``None``: ``default_ms``) within
    ``[MIN_TTL_MS, max_ms]``; ``MCPError`` (invalid params) for a malformed ``task``."""
    if not isinstance(task, Mapping):
        raise _invalid(
            f'{method}: params.task must be an object ({{"ttl": ms}}), got {task!r}; no task made'
        )
    ttl = task.get("ttl")
    if ttl is None:
        return max(MIN_TTL_MS, min(default_ms, max_ms))
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 <= ttl < 2**53:
        raise _invalid(
            f"{method}: params.task.ttl must be a number of milliseconds >= 0 (or null), "
            f"got {ttl!r}; no task made"
        )
    return max(MIN_TTL_MS, min(int(ttl), max_ms))
