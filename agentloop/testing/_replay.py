"""Record and replay: a stored session's model turns as a script for :class:`ScriptedModel`.

Every run of assistant items in a stored transcript is one model reply; the
request that produced it is the transcript before it. ``ReplayScript`` keys
each reply by a digest of that request's transcript (kinds, parts and
metadata; not timestamps, usage or item ids), so a replayed agent gets the
recorded reply only if it sends the recorded request. Anything else is a
drift, reported with a diff of the request against the recorded one.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Sequence

import attrs

from ..core._items import FinishReason, Item, ItemKind, ToolCallPart
from ..loop._converter import unstructure
from ..loop._session_store import SessionStore
from ..model._protocol import ModelTurnResult, TurnRequest
from ._replies import Reply

__all__ = ["ReplayDriftError", "ReplayScript", "request_digest"]

_INTERRUPTED_KEY = "agentloop.interrupted"


class ReplayDriftError(AssertionError):
    """Raised when a replayed agent sends a request the recording does not have.

    ``expected`` is the recorded request transcript the agent was due to send
    next (``None`` past the end of the recording); ``found`` is what it sent.
    """

    def __init__(self, message: str, *, expected: list[Item] | None, found: list[Item]) -> None:
        super().__init__(message)
        self.expected = expected
        self.found = found


def _compact(value: object) -> object:
    """``value`` without empty fields (``None``, ``{}``), so diffs show what matters."""
    if isinstance(value, dict):
        return {
            key: _compact(entry)
            for key, entry in value.items()
            if entry is not None and entry != {}
        }
    if isinstance(value, list):
        return [_compact(entry) for entry in value]
    return value


def _stable(item: Item) -> object:
    return _compact(unstructure(attrs.evolve(item, created_at=None, usage=None, id=None)))


def _lines(items: Sequence[Item]) -> list[str]:
    return [
        f"[{index}] " + json.dumps(_stable(item), sort_keys=True, ensure_ascii=False)
        for index, item in enumerate(items)
    ]


def request_digest(transcript: Sequence[Item]) -> str:
    """A digest of a request's transcript that ignores timestamps, usage and item ids."""
    digest = hashlib.sha256()
    for line in _lines(transcript):
        digest.update(line.encode())
        digest.update(b"\n")
    return digest.hexdigest()


@attrs.frozen
class _Turn:
    request: tuple[Item, ...]
    output: tuple[Item, ...]


def _model_turns(items: Sequence[Item]) -> list[_Turn]:
    turns: list[_Turn] = []
    index = 0
    while index < len(items):
        if not _is_model_output(items[index]):
            index += 1
            continue
        end = index
        while end < len(items) and _is_model_output(items[end]):
            end += 1
        turns.append(_Turn(tuple(items[:index]), tuple(items[index:end])))
        index = end
    return turns


def _is_model_output(item: Item) -> bool:
    return item.kind is ItemKind.ASSISTANT and not item.metadata.get(_INTERRUPTED_KEY)


class ReplayScript:
    """A :class:`ScriptedModel` script that answers recorded requests with recorded replies.

    Requests are matched by :func:`request_digest`, in any order and any
    number of times (a state machine may replay a prefix of the session
    again and again). A request the recording lacks raises
    :class:`ReplayDriftError` with a unified diff against the recorded
    request due next. ``used`` counts the replies given.
    """

    def __init__(self, transcript: Sequence[Item], *, session_id: str = "") -> None:
        self.session_id = session_id
        self.turns = _model_turns(list(transcript))
        self._by_digest = {request_digest(turn.request): turn for turn in self.turns}
        self.used = 0
        self._used: set[str] = set()

    @classmethod
    async def from_session(cls, store: SessionStore, session_id: str) -> ReplayScript:
        """The model turns of ``session_id`` as recorded in ``store``."""
        transcript = await store.transcript(session_id)
        if transcript is None:
            raise LookupError(
                f"cannot replay session {session_id!r}: {type(store).__name__} has no such "
                "session; record it first (run the agent with .store(store))"
            )
        return cls(transcript, session_id=session_id)

    def __call__(self, request: TurnRequest) -> Reply:
        reply = self.reply_for(request)
        if reply is None:
            raise self._drift(list(request.transcript))
        return reply

    def assert_complete(self) -> None:
        """Fail if some recorded model call was never replayed."""
        unused = [turn for turn in self.turns if request_digest(turn.request) not in self._used]
        if unused:
            raise AssertionError(
                f"replay: {len(unused)} of {len(self.turns)} recorded model call(s) were never "
                f"made; the first expected a request of {len(unused[0].request)} item(s)"
            )

    def reply_for(self, request: TurnRequest) -> Reply | None:
        """The recorded reply to ``request``, or ``None`` if the recording lacks it."""
        found = list(request.transcript)
        digest = request_digest(found)
        turn = self._by_digest.get(digest)
        if turn is None:
            return None
        self.used += 1
        self._used.add(digest)
        calls = [call for item in turn.output for call in item.tool_calls()]
        last = turn.output[-1]
        reason = last.finish_reason or (FinishReason.TOOL_CALL if calls else FinishReason.COMPLETED)
        output = tuple(attrs.evolve(item, created_at=None) for item in turn.output)
        result = ModelTurnResult(reason, output, last.usage)
        steps: list[ToolCallPart | ModelTurnResult] = [*calls, result]
        return Reply(tuple(steps))

    def _drift(self, found: list[Item]) -> ReplayDriftError:
        expected = self._due(found)
        where = f" in session {self.session_id!r}" if self.session_id else ""
        if expected is None:
            return ReplayDriftError(
                f"replay drift{where}: a request of {len(found)} item(s) goes past the end of "
                f"the recording ({len(self.turns)} recorded model call(s)); last item sent: "
                + (_lines(found)[-1] if found else "(none)"),
                expected=None,
                found=found,
            )
        diff = difflib.unified_diff(
            _lines(expected), _lines(found), "recorded request", "replayed request", lineterm=""
        )
        return ReplayDriftError(
            f"replay drift{where}: the agent sent a request the recording does not have; "
            f"diff against the recorded request due next ({len(expected)} item(s)):\n"
            + "\n".join(diff),
            expected=expected,
            found=found,
        )

    def _due(self, found: list[Item]) -> list[Item] | None:
        """The recorded request this one was meant to be (the longest shared prefix; the
        earliest on a tie), or ``None`` if it goes on past the last recorded request."""
        found_lines = _lines(found)

        def shared(turn: _Turn) -> int:
            count = 0
            for recorded, sent in zip(_lines(turn.request), found_lines, strict=False):
                if recorded != sent:
                    break
                count += 1
            return count

        if not self.turns:
            return None
        scores = [shared(turn) for turn in self.turns]
        best = max(range(len(self.turns)), key=lambda index: (scores[index], -index))
        last = self.turns[-1]
        if best == len(self.turns) - 1 and scores[best] == len(last.request):
            return None  # the whole last request, and more: an extra model call
        return list(self.turns[best].request)
