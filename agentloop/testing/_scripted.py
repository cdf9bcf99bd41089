"""``ScriptedModel``: a deterministic fake model that answers from a script."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeAlias

import anyio
import attrs

from ..core._cancellation import TurnCancellation
from ..core._errors import ProviderError
from ..core._items import (
    Item,
    ToolCallPart,
)
from ..loop._session_store import SessionStore
from ..model._protocol import ModelEvent, ModelTurnResult, TurnRequest
from ..model._session_config import SessionConfig
from ._replay import ReplayScript
from ._replies import (
    Reply,
    ScriptStep,
    _Raise,
    _Sleep,
    text,
)

__all__ = ["ScriptedModel"]


Script: TypeAlias = (
    Sequence[Reply | str] | Callable[[TurnRequest], Reply | str | Awaitable[Reply | str]]
)


class ScriptedModel:
    """A model adapter that answers from a list of replies or a function of the request.

    With a list, replies are used in order and :meth:`assert_complete` fails
    if some were never used; a model call past the end is a ``ProviderError``.
    With a function, it is called with each ``TurnRequest``. A ``str`` reply
    is shorthand for :func:`text`. Every request is recorded in ``requests``;
    tool calls without an id get ``{call_id_prefix}N``.
    """

    provider_name = "scripted"

    def __init__(
        self,
        script: Script,
        *,
        model_name: str = "scripted-model",
        call_id_prefix: str = "call-",
    ) -> None:
        self.model_name = model_name
        self.call_id_prefix = call_id_prefix
        self.requests: list[TurnRequest] = []
        self.sessions: list[SessionConfig] = []
        self._function: Callable[[TurnRequest], Any] | None = None
        self._replies: list[Reply | str] = []
        if callable(script):
            self._function = script
        else:
            self._replies = list(script)
        self._used = 0
        self._call_counter = 0
        self.replay: ReplayScript | None = None

    @classmethod
    async def from_session(
        cls, store: SessionStore, session_id: str, *, model_name: str = "scripted-model"
    ) -> ScriptedModel:
        """A model that replays the session ``session_id`` recorded in ``store``.

        Each recorded model call is matched by a digest of its request's
        transcript (timestamps, usage and item ids aside): an agent that sends
        the recorded requests gets the recorded replies, so a recorded session
        becomes a regression test. A request the recording lacks raises
        :class:`ReplayDriftError` (an ``AssertionError``) with a diff of the
        request against the recorded one; :meth:`assert_complete` fails if a
        recorded call was never made. ``replay`` holds the
        :class:`ReplayScript`.
        """
        script = await ReplayScript.from_session(store, session_id)
        model = cls(script, model_name=model_name)
        model.replay = script
        return model

    async def start_session(self, config: SessionConfig) -> ScriptedModel:
        """Sessions share the script; each start is recorded in ``sessions``."""
        self.sessions.append(config)
        return self

    @property
    def remaining(self) -> int:
        """Replies not yet used (always 0 for a function script)."""
        return len(self._replies) - self._used

    def assert_complete(self) -> None:
        """Fail if the script has replies the agent never asked for."""
        if self.replay is not None:
            self.replay.assert_complete()
        if self._function is None and self._used != len(self._replies):
            raise AssertionError(
                f"ScriptedModel: {self.remaining} of {len(self._replies)} scripted replies "
                f"were never used (the agent made {self._used} model calls)"
            )

    @property
    def last_request(self) -> TurnRequest:
        """The most recent request (``AssertionError`` if the model was never called)."""
        if not self.requests:
            raise AssertionError("ScriptedModel: the model was never called")
        return self.requests[-1]

    def transcripts(self) -> list[list[Item]]:
        """The transcript of every recorded request, as lists, in call order."""
        return [list(request.transcript) for request in self.requests]

    def assert_requests_valid(self) -> None:
        """Fail if any request broke the provider invariant or ended with nothing to answer.

        The invariant is :func:`agentloop.find_violation`'s; the tail rule: a
        request ends with user, tool or notification input.
        """
        from ..core._transcript import has_pending_input
        from ._assertions import assert_transcript_valid, format_transcript

        for number, transcript in enumerate(self.transcripts(), start=1):
            try:
                assert_transcript_valid(transcript)
            except AssertionError as error:
                raise AssertionError(f"ScriptedModel: request {number}: {error}") from None
            if not has_pending_input(transcript):
                raise AssertionError(
                    f"ScriptedModel: request {number} ends with nothing to answer (the last "
                    "item must be user, tool or notification input):\n"
                    + format_transcript(transcript[-3:])
                )

    async def begin_turn(
        self, request: TurnRequest, cancellation: TurnCancellation | None
    ) -> AsyncIterator[ModelEvent]:
        """Record the request and stream the next reply."""
        self.requests.append(request)
        reply = await self._next_reply(request)
        if isinstance(reply, str):
            reply = text(reply)
        if not isinstance(reply, Reply):
            raise ProviderError(f"ScriptedModel: a script step gave {reply!r}, not a Reply or str")
        return self._play(self._assign_ids(reply))

    async def _next_reply(self, request: TurnRequest) -> Reply | str:
        if self._function is not None:
            value = self._function(request)
            if inspect.isawaitable(value):
                value = await value
            return value  # type: ignore[no-any-return]
        if self._used >= len(self._replies):
            tail = request.transcript[-1].kind.value if len(request.transcript) else "empty"
            raise ProviderError(
                f"ScriptedModel: script exhausted after {len(self._replies)} replies; "
                f"unexpected model call {self._used + 1} (transcript ends with a {tail} item)"
            )
        reply = self._replies[self._used]
        self._used += 1
        return reply

    def _assign_ids(self, reply: Reply) -> Reply:
        if not any(_lacks_id(step) for step in reply.steps):
            return reply  # nothing to number: play the reply as it is
        ids: dict[int, str] = {}

        def fix(part: Any) -> Any:
            if isinstance(part, ToolCallPart) and not part.id:
                key = id(part)
                if key not in ids:
                    self._call_counter += 1
                    ids[key] = f"{self.call_id_prefix}{self._call_counter}"
                return attrs.evolve(part, id=ids[key])
            return part

        steps: list[ScriptStep] = []
        for step in reply.steps:
            if isinstance(step, ModelTurnResult):
                items = tuple(
                    attrs.evolve(item, parts=tuple(fix(p) for p in item.parts))
                    for item in step.output_items
                )
                step = attrs.evolve(step, output_items=items)
            steps.append(fix(step))
        return Reply(tuple(steps))

    async def _play(self, reply: Reply) -> AsyncIterator[ModelEvent]:
        for step in reply.steps:
            if isinstance(step, _Sleep):
                if step.seconds is None:
                    await anyio.sleep_forever()
                else:
                    await anyio.sleep(step.seconds)
            elif isinstance(step, _Raise):
                raise step.error
            else:
                yield step


def _lacks_id(step: ScriptStep) -> bool:
    """Whether ``step`` is, or (as a result) holds, a tool call without an id."""
    if isinstance(step, ToolCallPart):
        return not step.id
    if isinstance(step, ModelTurnResult):
        return any(
            isinstance(part, ToolCallPart) and not part.id
            for item in step.output_items
            for part in item.parts
        )
    return False
