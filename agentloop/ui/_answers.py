"""Answers to approvals (``RunAgentInput.resume``, an A2A reply), checked against the calls.

An open interrupt is a call of the saved round waiting for approval with no
decision recorded: its id is ``approval:CALL_ID``. A resume entry answers one:
``status: "resolved"`` with ``payload: {approved: bool, editedArgs?: value,
reason?: str}``, or ``status: "cancelled"`` (a denial). Every entry is
checked before any is recorded, so a bad one changes nothing; edited
arguments are checked against the tool's input schema as the inbox checks
them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

import attrs

from ..serve._decide import MAX_REASON, Decider, DecisionRefused, validate_input
from ..serve._inbox import InboxRow
from ._problems import RunRefused

__all__ = [
    "CANCELLED_REASON",
    "Answer",
    "ResumeAnswer",
    "Payload",
    "interrupt_id",
    "record_decisions",
    "read_payload",
    "read_resume",
    "response_schema",
]

CANCELLED_REASON = "the approval was cancelled in the client"
"""The reason a denial records when the client cancels an interrupt."""

_PREFIX = "approval:"
_KEYS = ("approved", "editedArgs", "reason")


def interrupt_id(call_id: str) -> str:
    """The AG-UI interrupt id of the approval of ``call_id``."""
    return f"{_PREFIX}{call_id}"


def response_schema(tool_schema: Any) -> dict[str, Any]:
    """The JSON Schema of a resume payload for a tool with input schema ``tool_schema``."""
    edited = tool_schema if isinstance(tool_schema, Mapping) else {}
    return {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "editedArgs": dict(edited),
            "reason": {"type": "string", "maxLength": MAX_REASON},
        },
        "required": ["approved"],
        "additionalProperties": False,
    }


class ResumeAnswer(Protocol):
    """One answer to an interrupt: what ``ag_ui.core.ResumeEntry`` carries."""

    @property
    def interrupt_id(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def payload(self) -> Any: ...


@attrs.frozen(kw_only=True)
class Answer:
    """One checked answer: the decision to record on ``row``'s call."""

    row: InboxRow
    action: str
    """``approve``, ``approve_with`` or ``deny`` (the inbox's actions)."""
    reason: str | None = None
    edited_input: str | None = None
    """The edited arguments as JSON text (what the inbox's decider takes)."""


def read_resume(
    entries: Sequence[ResumeAnswer],
    rows: Sequence[InboxRow],
    *,
    now: datetime,
    label: str = "resume",
) -> list[Answer]:
    """Every entry checked against the open interrupts ``rows`` at ``now``.

    ``RunRefused`` names the first bad entry (as ``label[N]``); nothing is
    recorded here.
    """
    open_ids = {interrupt_id(row.call_id): row for row in rows}
    listed = ", ".join(open_ids) or "none"
    answers: list[Answer] = []
    seen: set[str] = set()
    for position, entry in enumerate(entries):
        where = f"{label}[{position}]"
        row = open_ids.get(entry.interrupt_id)
        if row is None:
            raise RunRefused(
                f"{where} answers interrupt {entry.interrupt_id!r}, which is not open on this "
                f"thread (open interrupts: {listed}); it may have been answered already. "
                "Nothing was recorded",
                code="unknown_interrupt",
            )
        if entry.interrupt_id in seen:
            raise RunRefused(
                f"{where} answers interrupt {entry.interrupt_id!r} a second time; send one "
                "entry per interrupt. Nothing was recorded",
                code="duplicate_interrupt",
            )
        seen.add(entry.interrupt_id)
        if row.deadline is not None and row.expired(now):
            raise RunRefused(
                f"{where}: interrupt {entry.interrupt_id!r} expired at "
                f"{row.deadline:%Y-%m-%d %H:%M:%S} UTC; nothing was recorded",
                code="interrupt_expired",
            )
        answers.append(_answer(where, entry, row))
    return answers


def _answer(where: str, entry: ResumeAnswer, row: InboxRow) -> Answer:
    checked = read_payload(where, entry, row.schema)
    if checked.edited is None:
        return Answer(row=row, action=checked.action, reason=checked.reason)
    edited_input = json.dumps(checked.edited, ensure_ascii=False)
    return Answer(row=row, action="approve_with", edited_input=edited_input)


@attrs.frozen(kw_only=True)
class Payload:
    """A checked resume payload: ``action`` (``approve``, ``approve_with``, ``deny``),
    the denial's ``reason`` and the ``edited`` arguments (``None`` unless edited)."""

    action: str
    reason: str | None = None
    edited: Any = None


def read_payload(where: str, entry: ResumeAnswer, schema: Any) -> Payload:
    """``entry``'s approval payload checked (edited arguments against the tool's input
    ``schema``); ``RunRefused`` says what is wrong, as ``where``."""
    if entry.status == "cancelled":
        if entry.payload is not None:
            raise _bad(where, "a cancelled entry carries no payload")
        return Payload(action="deny", reason=CANCELLED_REASON)
    payload = entry.payload
    if not isinstance(payload, dict):
        raise _bad(where, f"payload must be an object, got {_json_type(payload)}")
    extra = sorted(set(payload) - set(_KEYS))
    if extra:
        raise _bad(where, f"payload has unknown keys {extra}; expected {list(_KEYS)}")
    approved = payload.get("approved")
    if not isinstance(approved, bool):
        raise _bad(where, f"payload.approved must be true or false, got {_json_type(approved)}")
    reason = payload.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise _bad(where, f"payload.reason must be a string, got {_json_type(reason)}")
    if reason is not None and len(reason) > MAX_REASON:
        raise _bad(where, f"payload.reason is longer than {MAX_REASON} characters")
    if reason is not None and not _unicode(reason):
        raise _bad(where, "payload.reason is not valid Unicode text")
    if "editedArgs" not in payload:
        action = "approve" if approved else "deny"
        return Payload(action=action, reason=None if approved else reason)
    if not approved:
        raise _bad(where, "payload.editedArgs goes with approved: true only")
    edited = payload["editedArgs"]
    if edited is None:
        raise _bad(where, "payload.editedArgs is null; send the tool's arguments")
    problem = validate_input(schema, edited)
    if problem is not None:
        raise _bad(where, f"payload.editedArgs do not match the tool's schema: {problem}")
    return Payload(action="approve_with", edited=edited)


def _bad(where: str, problem: str) -> RunRefused:
    return RunRefused(
        f"{where}: {problem} (payload: {{approved: bool, editedArgs?: the tool's arguments, "
        "reason?: string}); nothing was recorded",
        code="bad_resume",
    )


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def record_decisions(
    decider: Decider,
    session_id: str,
    answers: Sequence[Answer],
    *,
    who: str,
    name: Callable[[str], str],
) -> None:
    """Record each checked answer with ``decider``, in order.

    A refused one raises ``RunRefused`` (``decision_refused``) naming the call as
    ``name(call_id)`` says; the answers before it stay recorded (each is single use).
    """
    for answer in answers:
        try:
            await decider.decide(
                session_id,
                answer.row.call_id,
                action=answer.action,
                shown_digest=answer.row.digest,
                who=who,
                reason=answer.reason,
                edited_input=answer.edited_input,
            )
        except DecisionRefused as refused:
            raise RunRefused(
                f"{name(answer.row.call_id)}: {refused.message}", code="decision_refused"
            ) from None
