"""The tool protocol and what a tool receives when it runs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Generic, Protocol, runtime_checkable

import attrs
from typing_extensions import TypeVar

from ..core._cancellation import TurnCancellation
from ..core._errors import InvalidStateError
from ..core._items import Metadata, _empty_metadata
from ..core._tool_spec import ToolSpec
from ..permissions._requests import PermissionRequest
from ._questions import Question, QuestionAnswer, QuestionHost, Resumed

__all__ = ["Tool", "ToolContext", "ToolOutput", "ToolRequest"]

DepsT = TypeVar("DepsT", default=Any)


@attrs.frozen
class ToolRequest:
    """One call of a tool, as the executor and permission checks see it."""

    call_id: str
    tool_name: str
    input: Any
    session_id: str
    turn_id: str
    metadata: Metadata = attrs.field(default=_empty_metadata())


@attrs.frozen
class ToolContext(Generic[DepsT]):
    """What a running tool may use: ids, the turn's cancellation snapshot, host resources.

    ``resources`` is what the agent was given with ``AgentBuilder.resources``;
    annotate a tool's context ``ToolContext[MyDeps]`` and the type checker checks
    the tool's use of it.
    """

    session_id: str
    turn_id: str
    call_id: str
    cancellation: TurnCancellation | None = None
    resources: DepsT = None  # type: ignore[assignment]
    metadata: Metadata = attrs.field(default=_empty_metadata())
    questions: QuestionHost | None = attrs.field(default=None, eq=False, repr=False)
    """Where :meth:`ask` sends questions (the driver running the call)."""
    resumed: Resumed | None = attrs.field(default=None, kw_only=True)
    """Set when this call runs again after a restart, to go on from the answer to a
    question it asked before (one whose ``Question.resume`` was set)."""
    key_session_id: str | None = attrs.field(default=None, kw_only=True)
    """The session the call's idempotency key is derived from when it is not
    ``session_id``: a call a fork inherited keeps the key it had in its original."""

    async def ask(self, question: Question) -> QuestionAnswer:
        """Ask the host ``question`` and wait for its answer: ``driver.next()`` returns it
        as a ``CallQuestion`` step while this call runs on (the round's other calls too).

        Raises ``InvalidStateError`` when nobody can answer: the context has no driver
        (a tool called by hand), or the call runs inline in the driver's step (give the
        agent an entered ``AsyncTaskManager``, so the call runs in a task of its own).
        """
        host = self.questions
        if host is None:
            raise InvalidStateError(
                f"cannot ask the host from call {self.call_id}: its context has no driver "
                "(the tool was called outside a driver's round); nobody can answer"
            )
        return await host.ask(self.call_id, question)

    @property
    def idempotency_key(self) -> str:
        """A key for this call, the same in every process, resume, retry and worker that
        runs or settles it (derived from the session and call ids only): pass it to an
        API that deduplicates requests, and look it up in ``reconcile``."""
        return idempotency_key(self.key_session_id or self.session_id, self.call_id)


def idempotency_key(session_id: str, call_id: str) -> str:
    """``ToolContext.idempotency_key`` of ``call_id`` in ``session_id``."""
    # JSON, not a separator: no two (session, call) pairs encode alike.
    digest = hashlib.sha256(json.dumps([session_id, call_id]).encode()).hexdigest()
    return f"agentloop-{digest[:32]}"


@attrs.frozen
class ToolOutput:
    """An explicit tool output: ``value`` as for ``ToolResultPart.output``, plus error flag."""

    value: Any
    is_error: bool = False
    metadata: Metadata = attrs.field(default=_empty_metadata())


@runtime_checkable
class Tool(Protocol):
    """A callable capability.

    Optional methods a tool may define:

    - ``current_spec() -> ToolSpec | None``: the spec to advertise now (``None``
      hides the tool from the model; it can still be called by name);
    - ``proposed_requests(request) -> Sequence[PermissionRequest]``: what the
      call needs permission for; checked before ``invoke``;
    - ``async reconcile(request, ctx) -> output | None``: settle a call left in doubt
      (it started before a restart and left no result), e.g. by asking the service
      whether ``ctx.idempotency_key`` was used; the output becomes the call's result,
      ``None`` leaves it in doubt.

    Optional attributes the executor reads: ``timeout`` (seconds per call),
    ``max_output_chars`` (this tool's output limit instead of the executor's) and
    ``asks_host`` (``True``: a call may ``await ctx.ask(...)``, so the driver starts
    it as a task of its own even when it is the round's only call).
    """

    @property
    def spec(self) -> ToolSpec:
        """The tool's static spec; ``spec.name`` is how the model calls it."""
        ...

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        """Run the call: return the output (``str``, JSON value, parts or
        :class:`ToolOutput`) or raise; an exception becomes an error result."""
        ...


def current_spec(tool: Tool) -> ToolSpec | None:
    """The spec ``tool`` advertises now (its ``current_spec()`` if it has one)."""
    dynamic = getattr(tool, "current_spec", None)
    return dynamic() if dynamic is not None else tool.spec


def proposed_requests(tool: Tool, request: ToolRequest) -> Sequence[PermissionRequest]:
    """The permission requests ``tool`` proposes for ``request`` (none if it defines none)."""
    propose = getattr(tool, "proposed_requests", None)
    return propose(request) if propose is not None else ()
