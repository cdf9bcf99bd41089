"""A call in doubt as an AG-UI interrupt, and its resolution from ``resume``.

A run resting on a ``CallInDoubt`` (the agent was built with
``ask_in_doubt()``) ends in ``RUN_FINISHED`` with an interrupt outcome: one
interrupt per call in doubt of the round, id ``in_doubt:CALL_ID``, reason
``call_in_doubt``, the doubt's reason as message, the call's id, and as
``responseSchema`` :data:`RESOLUTION_SCHEMA`; ``metadata.agentloop`` says the
tool, its input, the idempotency key (look the call up where its side effect
lands) and how often it was run again. A resume entry resolves it:
``status: "resolved"`` with ``payload`` ``{"resolution": "settle", "result":
...}``, ``{"resolution": "fail", "reason": "..."}`` or ``{"resolution":
"run_again"}``. A call in doubt cannot be cancelled (it may have done its
work): a ``cancelled`` entry is refused. Entries are checked before the
session is resumed; the resumed driver applies each (``resolve_in_doubt_for``,
which checks a settled result as a tool's return), and a refusal there ends
the run with ``RUN_ERROR bad_resume``, nothing saved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from ag_ui.core import Interrupt

from ..core._errors import InvalidInputError, InvalidStateError
from ..loop._driver import LoopDriver
from ..loop._in_doubt import RESOLUTIONS
from ..loop._session_store import SessionStatus, StoredSession
from ..loop._steps import CallInDoubt
from ..serve._in_doubt import calls_in_doubt
from ._problems import RunRefused

__all__ = [
    "IN_DOUBT_REASON",
    "RESOLUTION_SCHEMA",
    "Resolution",
    "apply_resolutions",
    "doubt_interrupt",
    "open_doubts",
    "read_resolutions",
    "step_doubt",
]

IN_DOUBT_REASON = "call_in_doubt"
"""The ``reason`` of a call in doubt's interrupt."""

RESOLUTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "resolution": {"enum": list(RESOLUTIONS)},
        "result": {"description": "settle: what the call returned (a tool's return value)"},
        "reason": {"type": "string", "minLength": 1, "description": "fail: why"},
    },
    "required": ["resolution"],
    "additionalProperties": False,
}
"""What a resume entry's payload for a call in doubt holds."""


@attrs.frozen(kw_only=True)
class Resolution:
    """One checked resolution of a call in doubt, from ``resume[position]``."""

    position: int
    call_id: str
    how: str
    value: Any = None


def open_doubts(stored: StoredSession | None) -> list[Mapping[str, Any]]:
    """The calls in doubt a stored session rests on (none unless it awaits a resolution)."""
    if stored is None or stored.status is not SessionStatus.AWAITING_RESOLUTION:
        return []
    return calls_in_doubt(stored.checkpoint)


def step_doubt(step: CallInDoubt) -> Mapping[str, Any]:
    """``step`` in the form a saved document's ``doubt`` entry has."""
    return {
        "call_id": step.call_id,
        "tool_name": step.tool_name,
        "input": step.input,
        "idempotency_key": step.idempotency_key,
        "reason": step.reason,
        "reruns": step.reruns,
    }


def doubt_interrupt(doubt: Mapping[str, Any]) -> Interrupt:
    """The interrupt a run ends with while the call ``doubt`` describes waits."""
    call_id = str(doubt["call_id"])
    return Interrupt(
        id=f"in_doubt:{call_id}",
        reason=IN_DOUBT_REASON,
        message=f"call {call_id} is in doubt: {doubt.get('reason', '')}",
        tool_call_id=call_id,
        response_schema=RESOLUTION_SCHEMA,
        metadata={
            "agentloop": {
                "toolName": doubt.get("tool_name"),
                "input": doubt.get("input"),
                "idempotencyKey": doubt.get("idempotency_key"),
                "reruns": doubt.get("reruns", 0),
            }
        },
    )


def read_resolutions(
    entries: Sequence[Any], doubts: Sequence[Mapping[str, Any]]
) -> list[Resolution]:
    """The ``resume`` entries that resolve ``doubts``, each checked; ``RunRefused`` names
    the first bad one (nothing changed)."""
    asked = {f"in_doubt:{doubt['call_id']}": str(doubt["call_id"]) for doubt in doubts}
    found: list[Resolution] = []
    for position, entry in enumerate(entries):
        call_id = asked.get(entry.interrupt_id)
        if call_id is None:
            continue
        where = f"resume[{position}]: interrupt {entry.interrupt_id!r}"
        if any(r.call_id == call_id for r in found):
            raise RunRefused(
                f"{where} is answered a second time; send one entry per interrupt. Nothing "
                "was changed",
                code="duplicate_interrupt",
            )
        how, value = _checked(where, entry)
        found.append(Resolution(position=position, call_id=call_id, how=how, value=value))
    return found


def _checked(where: str, entry: Any) -> tuple[str, Any]:
    if entry.status != "resolved":
        raise _bad(
            where,
            "a call in doubt cannot be cancelled (it may have done its work): resolve it "
            "with status resolved and payload {resolution: settle | fail | run_again}",
        )
    payload = entry.payload
    if not isinstance(payload, dict) or payload.get("resolution") not in RESOLUTIONS:
        raise _bad(
            where,
            "the payload must be an object whose resolution is settle, fail or run_again; "
            f"got {payload!r}",
        )
    how = payload["resolution"]
    extra = set(payload) - {"resolution", {"settle": "result", "fail": "reason"}.get(how, "")}
    if extra:
        raise _bad(where, f"{how} takes no {', '.join(sorted(extra))}")
    if how == "settle" and payload.get("result") is None:
        raise _bad(where, "settle needs result: what the call returned")
    reason = payload.get("reason")
    if how == "fail" and (not isinstance(reason, str) or not reason.strip()):
        raise _bad(where, "fail needs reason: non-empty text")
    return how, payload.get("result") if how == "settle" else reason


def apply_resolutions(driver: LoopDriver, resolutions: Sequence[Resolution]) -> None:
    """Resolve each call on the resumed ``driver``; ``RunRefused`` for one it refuses."""
    for resolution in resolutions:
        try:
            driver.resolve_in_doubt_for(resolution.call_id, resolution.how, resolution.value)
        except (InvalidInputError, InvalidStateError) as error:
            raise _bad(
                f"resume[{resolution.position}]: interrupt 'in_doubt:{resolution.call_id}'",
                str(error),
            ) from None


def _bad(where: str, problem: str) -> RunRefused:
    return RunRefused(f"{where}: {problem}; nothing was changed", code="bad_resume")
