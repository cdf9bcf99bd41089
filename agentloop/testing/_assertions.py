"""Assertions over transcripts: ``assert_transcript_valid`` and ``check_mutator``.

``assert_transcript_valid`` and ``format_transcript`` need nothing but
agentloop; ``check_mutator`` imports hypothesis when called.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import anyio

from ..core._items import (
    Item,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..core._transcript import TranscriptViolation, find_violation
from ..loop._mutators import LoopMutator, MutationContext, MutationPoint, TranscriptCursor

__all__ = ["assert_transcript_valid", "check_mutator", "format_transcript"]

_CONTEXT = 2  # items shown around each highlighted one


def _brief(value: Any, limit: int = 40) -> str:
    try:
        shown = value if isinstance(value, str) else json.dumps(value, default=str)
    except (TypeError, ValueError):
        shown = repr(value)
    shown = repr(shown) if isinstance(value, str) else shown
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def _describe_part(part: Part) -> str:
    if isinstance(part, ToolCallPart):
        return f"tool_call {part.id} {part.name}({_brief(part.input)})"
    if isinstance(part, ToolResultPart):
        error = " error" if part.is_error else ""
        return f"tool_result {part.call_id}{error}: {_brief(part.output)}"
    if isinstance(part, TextPart):
        return f"text {_brief(part.text)}"
    if isinstance(part, ReasoningPart):
        return f"reasoning {_brief(part.text)}"
    return type(part).__name__


def _involved(items: Sequence[Item], violation: TranscriptViolation) -> set[int]:
    ids = set(violation.call_ids)
    marked = {violation.item_index} if violation.item_index is not None else set()
    for index, item in enumerate(items):
        for part in item.parts:
            if (isinstance(part, ToolCallPart) and part.id in ids) or (
                isinstance(part, ToolResultPart) and part.call_id in ids
            ):
                marked.add(index)
    return marked


def format_transcript(items: Iterable[Item], highlight: Iterable[int] = ()) -> str:
    """One line per item (``[index] kind: parts``); highlighted items are marked ``>>``.

    With highlights, only those items and their neighbours are shown; runs of
    other items are elided.
    """
    listed = list(items)
    marked = set(highlight)
    shown = set(range(len(listed)))
    if marked:
        shown = {
            index
            for mark in marked
            for index in range(mark - _CONTEXT, mark + _CONTEXT + 1)
            if 0 <= index < len(listed)
        }
    lines: list[str] = []
    skipped = 0
    for index, item in enumerate(listed):
        if index not in shown:
            skipped += 1
            continue
        if skipped:
            lines.append(f"       ... {skipped} item(s) ...")
            skipped = 0
        arrow = ">>" if index in marked else "  "
        parts = "; ".join(_describe_part(part) for part in item.parts) or "(no parts)"
        lines.append(f"  {arrow} [{index}] {item.kind.value}: {parts}")
    if skipped:
        lines.append(f"       ... {skipped} item(s) ...")
    return "\n".join(lines) if lines else "  (empty transcript)"


def _violation_report(items: Sequence[Item], violation: TranscriptViolation) -> str:
    where = f" at item {violation.item_index}" if violation.item_index is not None else ""
    return f"{violation.message}{where}; transcript of {len(items)} item(s):\n" + format_transcript(
        items, _involved(items, violation)
    )


def assert_transcript_valid(items: Iterable[Item]) -> None:
    """Fail with the broken rule and the offending items if ``items`` break the pairing.

    Raises ``AssertionError`` (so pytest shows it as a test failure) naming
    the violation and listing the items involved, marked ``>>``.
    """
    listed = list(items)
    violation = find_violation(listed)
    if violation is not None:
        raise AssertionError(
            "transcript invariant violation: " + _violation_report(listed, violation)
        )


def _ensure_no_running_loop(operation: str) -> None:
    import sniffio

    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return
    raise RuntimeError(
        f"{operation} is synchronous and runs its own event loop, but it was called from "
        f"inside a running {library} loop; call it from a plain (non-async) test function"
    )


def check_mutator(
    mutator: LoopMutator | Callable[[], LoopMutator],
    *,
    points: Sequence[MutationPoint] = tuple(MutationPoint),
    max_examples: int = 100,
    backend: str = "asyncio",
    transcripts: Any = None,
) -> None:
    """Run ``mutator`` over generated transcripts at each mutation point; fail on the first break.

    ``mutator`` is a :class:`LoopMutator` or a zero-argument factory such as
    the class itself (use one for stateful mutators: each example gets a
    fresh instance). For each
    point the transcripts have that point's shape (new input for
    ``AFTER_TURN_ENDED``, a finished tool round for ``AFTER_TOOL_RESULT``).
    Like the driver, a pass that changed the cursor must still be valid. On
    failure, raises ``AssertionError`` showing the shrunk input transcript and
    what the mutator made of it. ``transcripts`` overrides the strategy (a
    function of the point). Call it from a synchronous test.
    """
    from hypothesis import HealthCheck, given, settings

    from ._strategies import TranscriptEnding
    from ._strategies import transcripts as transcript_strategy

    _ensure_no_running_loop("check_mutator")

    def fresh() -> LoopMutator:
        if not isinstance(mutator, type) and hasattr(mutator, "mutate"):
            return mutator
        made = mutator()
        if not hasattr(made, "mutate"):
            raise TypeError(f"check_mutator: factory returned {made!r}, not a LoopMutator")
        return made

    fresh()  # a bad factory fails here, before hypothesis runs
    test_settings = settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    for raw_point in points:
        point = MutationPoint(raw_point)
        ending: TranscriptEnding = (
            "input" if point is MutationPoint.AFTER_TURN_ENDED else "tool_result"
        )
        strategy = transcripts(point) if transcripts else transcript_strategy(ends_with=ending)

        test_settings(given(items=strategy)(_point_test(fresh, point, backend)))()


def _point_test(
    fresh: Callable[[], LoopMutator], point: MutationPoint, backend: str
) -> Callable[[list[Item]], None]:
    def run(items: list[Item]) -> None:
        _check_one(fresh(), items, point, backend)

    return run


def _check_one(mutator: LoopMutator, items: list[Item], point: MutationPoint, backend: str) -> None:
    original = list(items)
    cursor = TranscriptCursor(list(items))
    ctx = MutationContext("check-mutator", "turn-1", point, None, lambda event: None)
    name = str(getattr(mutator, "name", type(mutator).__name__))

    async def mutate() -> None:
        await mutator.mutate(cursor, ctx)

    try:
        anyio.run(mutate, backend=backend)
    except Exception as error:
        raise AssertionError(
            f"mutator {name!r} raised at {point.value} ({type(error).__name__}: {error}) "
            f"on this transcript of {len(original)} item(s):\n{format_transcript(original)}"
        ) from error
    if not cursor.dirty:
        return
    result = list(cursor.items)
    violation = find_violation(result)
    if violation is None:
        return
    raise AssertionError(
        f"mutator {name!r} broke the transcript at {point.value}: "
        + _violation_report(result, violation)
        + f"\ninput transcript ({len(original)} item(s)):\n{format_transcript(original)}"
    )
