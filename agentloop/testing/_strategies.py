"""Hypothesis strategies for transcript data: JSON values, parts, items, transcripts.

``transcripts()`` builds provider-valid transcripts out of the shapes the
driver writes: optional system/developer/context prelude, then turns of input,
tool rounds (parallel calls, results in any order, error and synthesized
results, interjections, late notifications) and an answer, a cancelled
ending, or nothing yet. ``invalid_transcripts()`` plants exactly one
violation of the tool_call/tool_result pairing in such a transcript.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, TypeAlias

import attrs
from hypothesis import strategies as st

from ..core._items import (
    OUTCOME_KEY,
    CustomPart,
    FilePart,
    FinishReason,
    Item,
    ItemKind,
    MediaPart,
    Part,
    ReasoningPart,
    ResultOutcome,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from ..core._tool_spec import ToolSpec
from ..core._transcript import VIOLATION_KINDS
from ._json_strategies import json_values

__all__ = [
    "VIOLATION_KINDS",
    "InvalidTranscript",
    "TranscriptEnding",
    "TranscriptShape",
    "continuations",
    "invalid_transcripts",
    "items",
    "parts",
    "transcripts",
]

TranscriptEnding: TypeAlias = Literal["any", "input", "tool_result", "answer"]
"""How a generated transcript ends: ``input`` (a fresh turn's input, as at
``MutationPoint.AFTER_TURN_ENDED``), ``tool_result`` (a finished tool round,
maybe with interjected input, as at ``AFTER_TOOL_RESULT``), ``answer``, or ``any``."""


_INTERRUPTED = {"agentloop.interrupted": True, "agentloop.interrupt_stage": "tool"}
_TOOL_NAMES = ("read_file", "search", "echo", "run_shell", "fetch_url")

_words = st.text(alphabet=string.ascii_letters + string.digits + " .,-", max_size=16)
_stock_words = st.sampled_from(
    ["", "ok", "done", "see above", "checking the logs", "Done. Anything else?", "x" * 12]
)
_stock_inputs = st.sampled_from([{}, {"path": "src/app.py"}, {"query": "status"}, {"n": 3}])
"""Cheap stand-ins for long transcripts: one choice per text instead of one per character."""
_keys = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=8)
_ids = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=10)


@functools.cache
def _metadata() -> st.SearchStrategy[dict[str, Any]]:
    return st.just({}) | st.dictionaries(_keys, json_values(max_leaves=2), max_size=2)


@functools.cache
def _json_objects() -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(_keys, json_values(max_leaves=3), max_size=3)


@functools.cache
def _flat_objects() -> st.SearchStrategy[dict[str, Any]]:
    scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | _words
    return st.dictionaries(_keys, scalars, max_size=2)


@functools.cache
def _content_parts() -> st.SearchStrategy[Part]:
    meta = _metadata()
    data = st.none() | st.text(alphabet=string.ascii_letters + "+/=", max_size=12)
    return st.one_of(
        st.builds(TextPart, st.text(max_size=30), metadata=meta),
        st.builds(ReasoningPart, st.text(max_size=30), redacted=st.booleans(), metadata=meta),
        st.builds(StructuredPart, json_values(), metadata=meta),
        st.builds(MediaPart, st.sampled_from(["image/png", "audio/wav"]), data=data, uri=st.none()),
        st.builds(FilePart, st.none() | _words, mime_type=st.none() | st.just("text/plain")),
        st.builds(CustomPart, _keys, json_values(max_leaves=2), metadata=meta),
    )


@functools.cache
def _result_outputs() -> st.SearchStrategy[Any]:
    text_parts = st.lists(st.builds(TextPart, st.text(max_size=12)), min_size=1, max_size=2)
    return st.text(max_size=30) | text_parts | _json_objects()


def parts(*, tool_parts: bool = True) -> st.SearchStrategy[Part]:
    """Any single part; with ``tool_parts``, also tool calls and results (unpaired)."""
    content = _content_parts()
    if not tool_parts:
        return content
    return (
        content
        | st.builds(ToolCallPart, _ids, _keys, _json_objects())
        | st.builds(ToolResultPart, _ids, _result_outputs(), st.booleans())
    )


@functools.cache
def _usages() -> st.SearchStrategy[Usage]:
    counts = st.integers(0, 100_000)
    return st.builds(Usage, counts, counts, counts, counts, counts, st.none() | st.floats(0, 10))


def items(
    *, kinds: Sequence[ItemKind] | None = None, tool_parts: bool = True
) -> st.SearchStrategy[Item]:
    """Single items of any kind (or of ``kinds``), with every optional field exercised.

    Tool parts (with ``tool_parts``) are not paired: use :func:`transcripts`
    for valid sequences. Good for serialization round trips.
    """
    kind_strategy = st.sampled_from(list(kinds) if kinds is not None else list(ItemKind))
    return st.builds(
        Item,
        kind_strategy,
        st.lists(parts(tool_parts=tool_parts), min_size=1, max_size=3),
        id=st.none() | _ids,
        metadata=_metadata(),
        usage=st.none() | _usages(),
        finish_reason=st.none() | st.sampled_from(list(FinishReason)),
        created_at=st.none() | st.floats(0, 2e9),
    )


class InvalidTranscript(NamedTuple):
    """A transcript with exactly one planted violation; ``kind`` names it."""

    items: list[Item]
    kind: str


@attrs.frozen(kw_only=True)
class TranscriptShape:
    """The size knobs of generated transcripts (see :func:`transcripts`).

    ``min_turns``/``max_turns`` finished turns before the ending,
    ``max_rounds`` tool rounds per turn, ``max_parallel`` calls per round,
    ``max_output_size`` characters per tool output (outputs above 30
    characters are long repeated text), ``background_notifications``:
    some calls get a detached/background placeholder result and their real
    result arrives later as a notification item, as the driver writes it.
    """

    min_turns: int = 0
    max_turns: int = 3
    max_rounds: int = 3
    max_parallel: int = 3
    max_output_size: int = 30
    background_notifications: bool = True
    stock_text: bool | None = None
    """Draw texts, inputs and short outputs from a small stock (one choice each):
    much cheaper for long transcripts. ``None``: when ``max_turns > 6`` or
    ``max_parallel > 6``."""

    def __attrs_post_init__(self) -> None:
        counts = {
            "min_turns": self.min_turns,
            "max_turns": self.max_turns,
            "max_rounds": self.max_rounds,
            "max_parallel": self.max_parallel,
            "max_output_size": self.max_output_size,
        }
        negative = [name for name, value in counts.items() if value < 0]
        if negative or self.min_turns > self.max_turns or self.max_parallel < 1:
            raise ValueError(
                f"TranscriptShape: counts must be >= 0, min_turns <= max_turns and "
                f"max_parallel >= 1, got {counts}"
            )


_LOREM = "lorem ipsum dolor sit amet, consectetur adipiscing elit. "


def _filler(seed: str, size: int) -> str:
    unit = (seed.strip() + " ") if seed.strip() else _LOREM
    return (unit * (size // len(unit) + 1))[:size]


class _Builder:
    """Accumulates a transcript and hands out fresh call ids."""

    def __init__(
        self,
        draw: st.DrawFn,
        tools: Sequence[ToolSpec],
        shape: TranscriptShape | None = None,
        items: Sequence[Item] = (),
        prefix: str | None = None,
    ) -> None:
        self.draw = draw
        self.tools = tools
        self.shape = shape or TranscriptShape()
        self.items: list[Item] = list(items)
        self.prefix = prefix or draw(st.sampled_from(["call_", "toolu_", "c", "fc-"]))
        self.counter = 0
        self.running_in_background: list[ToolCallPart] = []
        long = self.shape.stock_text
        if long is None:
            long = self.shape.max_turns > 6 or self.shape.max_parallel > 6
        self.words = _stock_words if long else _words
        self.inputs = _stock_inputs if long else _flat_objects()
        self.outputs = _stock_words if long else _words | _result_outputs()

    def fresh_id(self) -> str:
        self.counter += 1
        return f"{self.prefix}{self.counter}"

    def text_item(self, kind: ItemKind) -> Item:
        return Item.text(kind, self.draw(self.words))

    def prelude(self) -> None:
        if self.draw(st.booleans()):
            self.items.append(self.text_item(ItemKind.SYSTEM))
        if self.draw(st.integers(0, 3)) == 0:
            self.items.append(self.text_item(ItemKind.DEVELOPER))
        if self.draw(st.integers(0, 3)) == 0:
            self.items.append(self.text_item(ItemKind.CONTEXT))

    def notifications(self) -> None:
        """Some background calls finish: their results arrive as notification items."""
        while self.running_in_background:
            if not self.draw(st.booleans()):
                return
            call = self.running_in_background.pop(0)
            label = self.draw(st.sampled_from(["completed", "failed"]))
            output = self.output()
            brief = output if isinstance(output, str) else "..."
            self.items.append(Item.notification(f"Background tool call {call.id} {label}: {brief}"))

    def output(self) -> Any:
        if self.shape.max_output_size > 30 and self.draw(st.integers(0, 2)) == 0:
            size = self.draw(st.integers(31, self.shape.max_output_size))
            return _filler(self.draw(self.words), size)
        return self.draw(self.outputs)

    def input_block(self) -> None:
        self.notifications()
        if self.draw(st.integers(0, 4)) == 0:
            self.items.append(self.text_item(ItemKind.CONTEXT))
        last = self.draw(st.sampled_from([ItemKind.USER, ItemKind.USER, ItemKind.NOTIFICATION]))
        self.items.append(self.text_item(last))

    def call(self) -> ToolCallPart:
        call_id = self.fresh_id()
        if self.tools:
            from ._tool_strategies import tool_inputs

            spec = self.draw(st.sampled_from(list(self.tools)))
            return ToolCallPart(call_id, spec.name, self.draw(tool_inputs(spec)))
        name = self.draw(st.sampled_from(_TOOL_NAMES))
        return ToolCallPart(call_id, name, self.draw(self.inputs))

    def result(self, call: ToolCallPart, *, cancelled: bool = False) -> ToolResultPart:
        outcome: ResultOutcome | None = ResultOutcome.CANCELLED
        if not cancelled:
            outcome = self.draw(st.none() | st.none() | st.sampled_from(list(ResultOutcome)))
        if outcome is None:
            return ToolResultPart(call.id, self.output(), self.draw(st.booleans()))
        if outcome in (ResultOutcome.DETACHED, ResultOutcome.BACKGROUND):
            if self.shape.background_notifications:
                self.running_in_background.append(call)
            running = "is now running" if outcome is ResultOutcome.DETACHED else "is running"
            return ToolResultPart(
                call.id,
                f"Tool {call.name} {running} in the background; the result will be delivered "
                "when it completes.",
                False,
                metadata={OUTCOME_KEY: outcome.value},
            )
        return ToolResultPart(
            call.id, f"{outcome.value}: {call.name}", True, metadata={OUTCOME_KEY: outcome.value}
        )

    def tool_round(self, *, max_parallel: int, cancelled: bool = False) -> None:
        assistant_parts: list[Part] = []
        if self.draw(st.integers(0, 3)) == 0:
            assistant_parts.append(ReasoningPart(self.draw(self.words)))
        if self.draw(st.booleans()):
            assistant_parts.append(TextPart(self.draw(self.words)))
        calls = [self.call() for _ in range(self.draw(st.integers(1, max_parallel)))]
        assistant_parts.extend(calls)
        self.items.append(
            Item(ItemKind.ASSISTANT, assistant_parts, finish_reason=FinishReason.TOOL_CALL)
        )
        ordered = self.draw(st.permutations(calls)) if self.draw(st.booleans()) else calls
        results = [self.result(call, cancelled=cancelled) for call in ordered]
        if not cancelled and len(results) > 1 and self.draw(st.integers(0, 3)) == 0:
            self.items.append(Item(ItemKind.TOOL, results))  # grouped in one item
        else:
            self.items.extend(Item(ItemKind.TOOL, (result,)) for result in results)
        if not cancelled and self.draw(st.integers(0, 4)) == 0:
            kind = self.draw(st.sampled_from([ItemKind.USER, ItemKind.NOTIFICATION]))
            self.items.append(self.text_item(kind))  # an interjection or a late notification
        if not cancelled:
            self.notifications()

    def answer(self) -> None:
        answer_parts: list[Part] = []
        if self.draw(st.integers(0, 3)) == 0:
            answer_parts.append(ReasoningPart(self.draw(self.words)))
        answer_parts.append(TextPart(self.draw(self.words)))
        self.items.append(
            Item(ItemKind.ASSISTANT, answer_parts, finish_reason=FinishReason.COMPLETED)
        )

    def interrupted(self, max_parallel: int) -> None:
        if self.draw(st.booleans()):
            self.tool_round(max_parallel=max_parallel, cancelled=True)
        self.items.append(
            Item(
                ItemKind.ASSISTANT,
                (TextPart("[interrupted]", metadata=_INTERRUPTED),),
                metadata=_INTERRUPTED,
            )
        )

    def turn(self, *, ending: str) -> None:
        self.input_block()
        if ending == "input":
            return
        self.rounds(low=1 if ending == "tool_result" else 0)
        if ending == "tool_result":
            return
        self.finish(ending)

    def rounds(self, *, low: int) -> None:
        max_rounds = self.shape.max_rounds
        for _ in range(self.draw(st.integers(low, max(low, max_rounds)))):
            self.tool_round(max_parallel=self.shape.max_parallel)

    def finish(self, ending: str) -> None:
        max_parallel = self.shape.max_parallel
        if ending == "complete" and self.draw(st.integers(0, 5)) == 0:
            self.interrupted(max_parallel)
        else:
            self.answer()


@st.composite
def _valid_transcripts(
    draw: st.DrawFn, ends_with: TranscriptEnding, shape: TranscriptShape, tools: Sequence[ToolSpec]
) -> list[Item]:
    builder = _Builder(draw, tools, shape)
    builder.prelude()
    finished_turns = draw(st.integers(shape.min_turns, shape.max_turns))
    for _ in range(finished_turns):
        builder.turn(ending="complete")
    ending: str = ends_with
    if ending == "any":
        ending = draw(st.sampled_from(["input", "tool_result", "answer", "none"]))
    if ending == "answer" and finished_turns and draw(st.booleans()):
        ending = "none"  # the last finished turn already ends with an answer
    if ending != "none":
        builder.turn(ending=ending)
    if ends_with == "answer" and builder.items[-1].kind is not ItemKind.ASSISTANT:
        builder.answer()
    return builder.items


def transcripts(
    valid: bool = True,
    *,
    ends_with: TranscriptEnding = "any",
    min_turns: int = 0,
    max_turns: int = 3,
    max_rounds: int = 3,
    max_parallel: int = 3,
    max_output_size: int = 30,
    background_notifications: bool = True,
    tools: Sequence[ToolSpec] = (),
) -> st.SearchStrategy[list[Item]]:
    """Transcripts that pass ``validate_transcript`` (or, with ``valid=False``, that fail it).

    Shapes: system/developer/context prelude; ``min_turns`` to ``max_turns``
    finished turns of user or notification input, then the ending; up to
    ``max_rounds`` tool rounds per turn with up to ``max_parallel`` calls
    each, results in call order or shuffled, one per tool item or grouped,
    real, error and synthesized results, outputs up to ``max_output_size``
    characters, interjections; detached and background calls whose results
    arrive later as notification items (``background_notifications``);
    answers with or without reasoning; cancelled turns. With ``tools``, calls
    use those names and schema-valid inputs. ``ends_with`` picks the ending.
    For long histories raise ``min_turns``/``max_turns``; for big outputs
    ``max_output_size``; for wide rounds ``max_parallel``.
    """
    shape = TranscriptShape(
        min_turns=min_turns,
        max_turns=max_turns,
        max_rounds=max_rounds,
        max_parallel=max_parallel,
        max_output_size=max_output_size,
        background_notifications=background_notifications,
    )
    if not valid:
        return invalid_transcripts(max_turns=max_turns, tools=tools).map(lambda bad: bad.items)
    return _valid_transcripts(ends_with, shape, tuple(tools))


def continuations(
    items: Sequence[Item],
    *,
    ends_with: Literal["input", "tool_result"],
    shape: TranscriptShape | None = None,
    tools: Sequence[ToolSpec] = (),
    call_id_prefix: str = "next_",
) -> st.SearchStrategy[list[Item]]:
    """``items`` grown by what the loop appends before the next mutation point.

    The open turn is finished (tool rounds, an answer), maybe more turns
    follow, and the result ends as ``ends_with`` asks; for ``tool_result``
    the open turn may also just get its next tool round. New calls get ids
    starting with ``call_id_prefix`` (pick one per pass so ids stay unique).
    """
    return _continuations(
        list(items), ends_with, shape or TranscriptShape(), tuple(tools), call_id_prefix
    )


@st.composite
def _continuations(
    draw: st.DrawFn,
    items: list[Item],
    ends_with: str,
    shape: TranscriptShape,
    tools: Sequence[ToolSpec],
    prefix: str,
) -> list[Item]:
    builder = _Builder(draw, tools, shape, items, prefix)
    open_turn = bool(items) and items[-1].kind is not ItemKind.ASSISTANT
    if ends_with == "tool_result" and open_turn and draw(st.booleans()):
        builder.rounds(low=1)  # the next round of the same turn
        return builder.items
    if open_turn:
        builder.rounds(low=0)
        builder.finish("complete")
    for _ in range(draw(st.integers(0, max(0, shape.max_turns)))):
        builder.turn(ending="complete")
    builder.turn(ending=ends_with)
    return builder.items


def _call_positions(items: Sequence[Item]) -> list[tuple[int, ToolCallPart]]:
    return [(index, call) for index, item in enumerate(items) for call in item.tool_calls()]


def _result_positions(items: Sequence[Item]) -> list[tuple[int, ToolResultPart]]:
    return [(index, result) for index, item in enumerate(items) for result in item.tool_results()]


@st.composite
def _plant(draw: st.DrawFn, base: list[Item], kind: str) -> InvalidTranscript:
    transcript = list(base)
    if kind != "orphaned" and not _call_positions(transcript):
        transcript.append(Item(ItemKind.ASSISTANT, (ToolCallPart("seed-1", "echo", {}),)))
        transcript.append(Item(ItemKind.TOOL, (ToolResultPart("seed-1", "ok"),)))
    if kind == "orphaned":
        used = {call.id for _, call in _call_positions(transcript)}
        orphan_id = next(f"orphan-{n}" for n in range(len(used) + 1) if f"orphan-{n}" not in used)
        position = draw(st.integers(0, len(transcript)))
        transcript.insert(position, Item(ItemKind.TOOL, (ToolResultPart(orphan_id, "?"),)))
    elif kind == "duplicate":
        index, result = draw(st.sampled_from(_result_positions(transcript)))
        position = draw(st.integers(index + 1, len(transcript)))
        transcript.insert(position, Item(ItemKind.TOOL, (ToolResultPart(result.call_id, "again"),)))
    elif kind == "duplicate_call":
        index, call = draw(st.sampled_from(_call_positions(transcript)))
        position = draw(st.integers(index + 1, len(transcript)))
        transcript.insert(
            position, Item(ItemKind.ASSISTANT, (ToolCallPart(call.id, call.name, {}),))
        )
    elif kind == "unanswered":
        index, result = draw(st.sampled_from(_result_positions(transcript)))
        item = transcript[index]
        kept = tuple(part for part in item.parts if part is not result)
        if kept:
            transcript[index] = Item(item.kind, kept, metadata=item.metadata)
        else:
            del transcript[index]
    elif kind == "interleaved":
        index, call = draw(st.sampled_from(_call_positions(transcript)))
        round_ids = {round_call.id for round_call in transcript[index].tool_calls()}
        last = max(i for i, result in _result_positions(transcript) if result.call_id in round_ids)
        position = draw(st.integers(index + 1, last))
        intruder = draw(
            st.sampled_from(
                [ItemKind.CONTEXT, ItemKind.USER, ItemKind.NOTIFICATION, ItemKind.ASSISTANT]
            )
        )
        transcript.insert(position, Item.text(intruder, "between a call and its result"))
    elif kind == "misplaced":
        tool_parts = [(i, True) for i, _ in _call_positions(transcript)]
        tool_parts += [(i, False) for i, _ in _result_positions(transcript)]
        index, is_call = draw(st.sampled_from(tool_parts))
        wrong = [k for k in ItemKind if k is not (ItemKind.ASSISTANT if is_call else ItemKind.TOOL)]
        item = transcript[index]
        transcript[index] = Item(draw(st.sampled_from(wrong)), item.parts, metadata=item.metadata)
    else:  # pragma: no cover - guarded by invalid_transcripts
        raise ValueError(f"unknown violation kind {kind!r}")
    return InvalidTranscript(transcript, kind)


def invalid_transcripts(
    *,
    kinds: Sequence[str] = VIOLATION_KINDS,
    max_turns: int = 3,
    tools: Sequence[ToolSpec] = (),
) -> st.SearchStrategy[InvalidTranscript]:
    """``(transcript, kind)`` pairs: a valid transcript with one planted violation.

    ``find_violation(transcript).kind == kind`` for every example; ``kinds``
    restricts the planted violations to a subset of :data:`VIOLATION_KINDS`.
    """
    unknown = sorted(set(kinds) - set(VIOLATION_KINDS))
    if unknown or not kinds:
        raise ValueError(
            f"invalid_transcripts: kinds must be a non-empty subset of {VIOLATION_KINDS}, "
            f"got {tuple(kinds)!r}"
        )
    base = transcripts(max_turns=max_turns, tools=tools)
    return st.tuples(base, st.sampled_from(list(kinds))).flatmap(
        lambda pair: _plant(pair[0], pair[1])
    )
