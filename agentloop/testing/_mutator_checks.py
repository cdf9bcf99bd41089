"""``check_mutator``: a loop mutator checked against generated transcripts (imports
hypothesis when called), and the hypothesis settings the kit's checks share."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import anyio
import attrs

from ..core._items import (
    Item,
)
from ..core._tool_spec import ToolSpec
from ..core._transcript import find_violation
from ..loop._mutators import LoopMutator, MutationContext, MutationPoint, TranscriptCursor
from ._assertions import format_transcript, violation_report

__all__ = ["bounded_shrinking", "check_mutator", "kit_settings"]


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
    tools: Sequence[ToolSpec] = (),
    passes: int = 3,
    max_turns: int = 20,
    max_output_size: int = 4000,
    max_parallel: int = 12,
    max_examples: int | None = None,
    settings: Any = None,
    seed: int | None = None,
    shrink_seconds: float = 10.0,
    backend: str = "asyncio",
    transcripts: Any = None,
) -> None:
    """Run ``mutator`` over generated transcripts at each mutation point; fail on the first break.

    ``mutator`` is a :class:`LoopMutator` or a zero-argument factory such as
    the class itself (use one for stateful mutators: each example gets a
    fresh instance). For each point the transcripts have that point's shape
    (new input for ``AFTER_TURN_ENDED``, a finished tool round for
    ``AFTER_TOOL_RESULT``) and mix small ones with long histories (up to
    ``max_turns`` turns), big tool outputs (up to ``max_output_size``
    characters), wide rounds (up to ``max_parallel`` calls) and background
    calls whose results arrive as notifications; hypothesis is steered
    (``hypothesis.target``) toward the inputs the mutator changes most, that
    is toward the sizes and shapes it reacts to. Each example runs up to ``passes`` passes of the
    same mutator instance on a transcript that grows between passes, as in a
    long session. With ``tools``, calls name those tools with schema-valid
    inputs.

    Whatever the mutator leaves must satisfy the provider invariant
    (:func:`agentloop.find_violation`), as the driver requires. On failure,
    raises ``AssertionError`` showing the (shrunk) input transcript, the pass
    and what the mutator made of it; the driver raises ``MutatorError`` for
    the same break at run time. ``max_examples`` (default 100), ``settings``
    (a ``hypothesis.settings``: phases, deadline, database, ...) and
    ``seed`` tune hypothesis; shrinking a failure stops after
    ``shrink_seconds`` (the smallest failure found by then is reported);
    ``transcripts`` replaces the first pass's
    strategy (a function of the point). Call it from a synchronous test.
    """
    _ensure_no_running_loop("check_mutator")
    if passes < 1:
        raise ValueError(f"check_mutator: passes must be >= 1, got {passes}")
    fresh = _mutator_factory(mutator)
    fresh()  # a bad factory fails here, before hypothesis runs
    test_settings = _mutator_settings(settings, max_examples)
    limits = _Limits(tuple(tools), passes, max_turns, max_output_size, max_parallel)
    for raw_point in points:
        point = MutationPoint(raw_point)
        strategy = transcripts(point) if transcripts else _sized_transcripts(point, limits)
        test = _point_test(fresh, point, backend, strategy, limits)
        _run_hypothesis(test, test_settings, seed, shrink_seconds)


def _mutator_factory(
    mutator: LoopMutator | Callable[[], LoopMutator],
) -> Callable[[], LoopMutator]:
    """A function giving the mutator of each example: ``mutator`` itself, or a fresh
    one from a factory (refused when it makes something that is not a mutator)."""

    def fresh() -> LoopMutator:
        if not isinstance(mutator, type) and hasattr(mutator, "mutate"):
            return mutator
        made = mutator()
        if not hasattr(made, "mutate"):
            raise TypeError(f"check_mutator: factory returned {made!r}, not a LoopMutator")
        return made

    return fresh


def _mutator_settings(settings: Any, max_examples: int | None) -> Any:
    """``check_mutator``'s hypothesis settings: the kit's, without the health checks
    its big generated transcripts trip on purpose."""
    import hypothesis
    from hypothesis import HealthCheck

    test_settings = kit_settings(settings, max_examples=max_examples, default_examples=100)
    return hypothesis.settings(
        test_settings,
        suppress_health_check=[
            *test_settings.suppress_health_check,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


def _run_hypothesis(
    test: Callable[..., None], test_settings: Any, seed: int | None, shrink_seconds: float
) -> None:
    """Run ``test`` (taking hypothesis ``data``) under ``test_settings``, seeded when
    ``seed`` is given, with shrinking bounded by ``shrink_seconds``."""
    import hypothesis
    from hypothesis import given

    wrapped = test_settings(given(data=_data())(test))
    if seed is not None:
        wrapped = hypothesis.seed(seed)(wrapped)
    with bounded_shrinking(shrink_seconds):
        wrapped()


def kit_settings(settings: Any, *, max_examples: int | None, default_examples: int) -> Any:
    """The hypothesis settings a kit entry point runs with.

    Without ``settings``: ``default_examples`` examples, no deadline, no
    example database and no explain phase (on transcripts it re-runs a failure
    hundreds of times to annotate it: a minute for a failure found in seconds).
    With them, the user's settings as given; an explicit ``max_examples`` wins
    over both.
    """
    import hypothesis

    if settings is None:
        phases = [phase for phase in hypothesis.Phase if phase is not hypothesis.Phase.explain]
        settings = hypothesis.settings(
            max_examples=default_examples, deadline=None, database=None, phases=phases
        )
    elif not isinstance(settings, hypothesis.settings):
        raise TypeError(f"settings must be a hypothesis.settings, got {settings!r}")
    if max_examples is not None:
        settings = hypothesis.settings(settings, max_examples=max_examples)
    return settings


@contextlib.contextmanager
def bounded_shrinking(seconds: float) -> Iterator[None]:
    """Within the block, hypothesis stops shrinking a failure after ``seconds``.

    It then reports the smallest failing example found so far (with a
    warning that it stopped early). Sets hypothesis's documented,
    monkeypatchable ``MAX_SHRINKING_SECONDS`` and restores it on exit.
    """
    from hypothesis import reporting
    from hypothesis.internal.conjecture import engine

    forward = reporting.current_reporter()

    def report(text: object) -> None:
        if isinstance(text, str) and text.startswith("WARNING: Hypothesis has spent more than"):
            text = (
                f"agentloop.testing stopped shrinking after {seconds:g} s (shrink_seconds); "
                "the failure below is the smallest found by then"
            )
        forward(text)

    previous = engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]
    try:
        with reporting.with_reporter(report):
            yield
    finally:
        engine.MAX_SHRINKING_SECONDS = previous


def _data() -> Any:
    from hypothesis import strategies as st

    return st.data()


@attrs.frozen
class _Limits:
    tools: tuple[ToolSpec, ...]
    passes: int
    max_turns: int
    max_output_size: int
    max_parallel: int

    def growth_shape(self) -> Any:
        from ._strategies import TranscriptShape

        return TranscriptShape(
            max_turns=2,
            max_rounds=2,
            max_parallel=min(4, self.max_parallel),
            max_output_size=self.max_output_size,
            stock_text=True,
        )


def _ending(point: MutationPoint) -> Any:
    return "input" if point is MutationPoint.AFTER_TURN_ENDED else "tool_result"


def _sized_transcripts(point: MutationPoint, limits: _Limits) -> Any:
    """Small transcripts, long histories, big outputs and wide rounds, in equal parts."""
    from ._strategies import transcripts

    ending = _ending(point)
    tools = limits.tools
    return (
        transcripts(ends_with=ending, tools=tools)
        | transcripts(
            ends_with=ending,
            min_turns=limits.max_turns // 2,
            max_turns=limits.max_turns,
            max_rounds=2,
            tools=tools,
        )
        | transcripts(ends_with=ending, max_output_size=limits.max_output_size, tools=tools)
        | transcripts(
            ends_with=ending,
            max_turns=1,
            max_rounds=2,
            max_parallel=limits.max_parallel,
            tools=tools,
        )
    )


def _point_test(
    fresh: Callable[[], LoopMutator],
    point: MutationPoint,
    backend: str,
    strategy: Any,
    limits: _Limits,
) -> Callable[[Any], None]:
    def run(data: Any) -> None:
        from hypothesis import strategies as st
        from hypothesis import target

        from ._strategies import continuations

        mutator = fresh()
        items: list[Item] = data.draw(strategy, label="transcript")
        count = data.draw(st.integers(1, limits.passes), label="passes") if limits.passes > 1 else 1
        changed = 0
        for number in range(1, count + 1):
            if number > 1:
                items = data.draw(
                    continuations(
                        items,
                        ends_with=_ending(point),
                        shape=limits.growth_shape(),
                        tools=limits.tools,
                        call_id_prefix=f"pass{number}_",
                    ),
                    label=f"transcript before pass {number}",
                )
            result = _check_one(mutator, items, point, backend, number, count)
            changed += _changes(items, result)
            items = result
        target(float(changed), label="items the mutator changed")

    return run


def _changes(before: Sequence[Item], after: Sequence[Item]) -> int:
    kept = sum(1 for old, new in zip(before, after, strict=False) if old is new)
    return max(len(before), len(after)) - kept


def _check_one(
    mutator: LoopMutator,
    items: list[Item],
    point: MutationPoint,
    backend: str,
    number: int = 1,
    count: int = 1,
) -> list[Item]:
    original = list(items)
    source = list(items)  # stands for the driver's list: only the cursor may change it
    cursor = TranscriptCursor(source)
    ctx = MutationContext("check-mutator", f"turn-{number}", point, None, lambda event: None)
    name = str(getattr(mutator, "name", type(mutator).__name__))
    where = f"{point.value}" + (f" (pass {number} of {count})" if count > 1 else "")

    async def mutate() -> None:
        await mutator.mutate(cursor, ctx)

    try:
        anyio.run(mutate, backend=backend)
    except Exception as error:
        raise AssertionError(
            f"mutator {name!r} raised at {where} ({type(error).__name__}: {error}) "
            f"on this transcript of {len(original)} item(s):\n{format_transcript(original)}"
        ) from error
    if source != original:
        raise AssertionError(
            f"mutator {name!r} changed the transcript list it was given in place at {where}, "
            "bypassing the cursor (the driver would not validate it); write through the "
            "cursor's methods instead"
        )
    result = list(cursor.items)
    if not cursor.dirty and result != original:  # pragma: no cover - the view is read-only
        raise AssertionError(f"mutator {name!r} changed the transcript without the cursor noticing")
    violation = find_violation(result)
    if violation is None:
        return result
    raise AssertionError(
        f"mutator {name!r} broke the transcript at {where}: "
        + violation_report(result, violation)
        + f"\ninput transcript ({len(original)} item(s)):\n{format_transcript(original)}"
    )
