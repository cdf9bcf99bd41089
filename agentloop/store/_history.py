"""Each session's step history, written once on the storage protocol's rows.

Every save is a numbered *step* (1, 2, ...) and writes, in its own commit,
two rows keyed by :func:`step_key`: a ``steps`` row (:class:`StepRow`, what
``history()`` lists) and a ``history`` row (:class:`HistoryRow`: the head
document and the list rows the save wrote, as the commit applies them), so a
save still writes O(new items). A step is rebuilt by applying the rows from a
*base* step (whose rows are its whole lists) up to it. A base is written at
the first step and every ``limit`` steps; writing one drops the steps before
the previous base, so a session keeps between ``limit`` + 1 and 2 x ``limit``
steps, each one rebuildable. ``limit`` 0 keeps none (and drops what was kept
at the next save).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..core._errors import InvalidInputError
from ..loop._session_store import SessionStatus
from ._codec import EncodedCheckpoint
from ._records import ITEMS, TURN_LIST_PREFIX, HistoryMark, encode_record

__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "HISTORY",
    "STEPS",
    "HistoryPlan",
    "HistoryRow",
    "SideRows",
    "StepRow",
    "check_limit",
    "plan_history",
    "rebuild",
    "step_key",
    "summary_of",
]

STEPS = "steps"
"""The table of each kept step's description, by :func:`step_key`."""
HISTORY = "history"
"""The table of each kept step's head document and list rows, by :func:`step_key`."""

DEFAULT_HISTORY_LIMIT = 100
"""How many of a session's latest steps a store keeps at least, unless told otherwise."""

Lists = dict[str, tuple[int, tuple[str, ...]]]


@attrs.frozen(kw_only=True)
class StepRow:
    """A kept step, as ``history()`` lists it; ``base``: its lists are whole."""

    version: int
    revision: int
    saved_at: float
    state: str
    status: SessionStatus
    item_count: int
    turn_counts: str | None
    base: bool
    summary: str
    origin: str | None = None


@attrs.frozen(kw_only=True)
class HistoryRow:
    """A kept step's head document and the list rows its save wrote."""

    document: str
    lists: Lists


def step_key(step: int) -> str:
    """A step's key in the tables: its number, zero-padded (so keys sort as numbers)."""
    return f"{step:012d}"


def check_limit(limit: object) -> int:
    """``limit`` as a count of steps, ``InvalidInputError`` unless an int >= 0."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidInputError(
            f"history_limit must be an int >= 0 (0 keeps no step history), got {limit!r}"
        )
    return limit


@attrs.frozen
class SideRows:
    """Rows a save also puts and drops (a rewind moving claims and decisions)."""

    rows: Mapping[str, Mapping[str, str]]
    drop: Mapping[str, tuple[str, ...]]


@attrs.frozen
class HistoryPlan:
    """What a save writes into the history: the new mark, the rows (but the step row,
    which needs the version) and the keys to drop."""

    mark: HistoryMark | None
    step: int | None = None
    history_text: str = ""
    step_fields: Mapping[str, Any] = attrs.field(factory=dict)
    drop: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)

    def rows(self, version: int, revision: int) -> dict[str, dict[str, str]]:
        """The history rows of the save that got ``version`` at ``revision``."""
        if self.step is None:
            return {}
        key = step_key(self.step)
        row = StepRow(version=version, revision=revision, **self.step_fields)
        return {STEPS: {key: encode_record(row)}, HISTORY: {key: self.history_text}}


def plan_history(
    mark: HistoryMark | None,
    limit: int,
    encoded: EncodedCheckpoint,
    lists: Lists,
    fields: Mapping[str, Any],
) -> HistoryPlan:
    """The history a save of ``encoded`` (writing ``lists``) adds after ``mark``.

    ``fields`` are the step row's other fields (time, state, status, counts,
    summary, origin).
    """
    if limit == 0:
        return HistoryPlan(None, drop={} if mark is None else _dropped(mark.first, mark.last + 1))
    step = 1 if mark is None else mark.last + 1
    drop: Mapping[str, tuple[str, ...]] = {}
    if mark is None or step - mark.base >= limit:  # a base step: its lists whole
        lists = {ITEMS: (0, encoded.items)}
        lists.update({TURN_LIST_PREFIX + name: (0, rows) for name, rows in encoded.turn.items()})
        new_mark = HistoryMark(last=step, base=step, first=step if mark is None else mark.base)
        if mark is not None:
            drop = _dropped(mark.first, mark.base)
    else:
        new_mark = attrs.evolve(mark, last=step)
    text = encode_record(HistoryRow(document=encoded.head, lists=dict(lists)))
    step_fields = {**fields, "base": new_mark.base == step}
    return HistoryPlan(new_mark, step, text, step_fields, drop)


def _dropped(first: int, end: int) -> dict[str, tuple[str, ...]]:
    keys = tuple(step_key(step) for step in range(first, end))
    return {STEPS: keys, HISTORY: keys} if keys else {}


def rebuild(rows: Sequence[HistoryRow]) -> tuple[list[str], dict[str, list[str]]]:
    """The item rows and turn list rows of the last step of ``rows`` (a base step's row
    first, then each later step's, all of them), applying the list rows each save wrote."""
    lists: dict[str, list[str]] = {}
    for row in rows:
        for name, (start, texts) in row.lists.items():
            stored = lists.setdefault(name, [])
            del stored[start:]
            stored.extend(texts)
    items = lists.pop(ITEMS, [])
    return items, {name.removeprefix(TURN_LIST_PREFIX): texts for name, texts in lists.items()}


def summary_of(checkpoint: Mapping[str, Any]) -> str:
    """A short text for a step: the start of its queued input, else of its last item."""
    queued = checkpoint.get("pending_input")
    if isinstance(queued, list) and queued:
        return "queued " + _item_text(queued[0])
    transcript = checkpoint.get("transcript")
    if not isinstance(transcript, list) or not transcript:
        return "(empty transcript)"
    return _item_text(transcript[-1])


def _item_text(item: object) -> str:
    """``kind: text``, the text cut at 80 characters."""
    kind = item.get("kind", "?") if isinstance(item, Mapping) else "?"
    parts = item.get("parts") if isinstance(item, Mapping) else None
    said = [_said(part) for part in parts if isinstance(part, Mapping)] if parts else []
    text = " ".join(part for part in said if part)
    return f"{kind}: {text[:77] + '...' if len(text) > 80 else text}".rstrip(": ")


def _said(part: Mapping[str, Any]) -> str:
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", "")).replace("\n", " ")
    if kind == "tool_call":
        return f"calls {part.get('name')}"
    if kind == "tool_result":
        return f"result of {part.get('call_id')}"
    return f"[{kind}]"
