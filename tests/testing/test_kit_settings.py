"""Kit entry points take hypothesis settings and a seed; shrinking is bounded."""

from __future__ import annotations

from typing import ClassVar

import hypothesis
import pytest
from hypothesis import HealthCheck, Phase, reporting
from hypothesis.internal.conjecture import engine
from hypothesis.stateful import invariant

from agentloop import Item, ItemKind
from agentloop.testing import AgentStateMachine, bounded_shrinking, check_mutator
from agentloop.transcript import MutationContext, TranscriptCursor


class ModelIsNeverCalled(AgentStateMachine):
    """A deliberately failing invariant: any run that reaches the model breaks it."""

    probes: ClassVar[bool] = False
    shrink_seconds: ClassVar[float] = 0.0

    @invariant()
    def the_model_was_not_called(self) -> None:
        assert not self.model.requests, "the model was called"


SETTINGS = hypothesis.settings(
    max_examples=50,
    stateful_step_count=8,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_a_failing_machine_reports_once_the_shrink_bound_is_hit(anyio_backend: str) -> None:
    before = engine.MAX_SHRINKING_SECONDS
    messages: list[object] = []
    machine = type("Failing", (ModelIsNeverCalled,), {"backend": anyio_backend})
    with reporting.with_reporter(messages.append), pytest.raises(AssertionError) as raised:
        machine.run(settings=SETTINGS, seed=2)
    assert "the model was called" in str(raised.value)
    assert (
        "agentloop.testing stopped shrinking after 0 s (shrink_seconds); the failure below is "
        "the smallest found by then"
    ) in messages
    assert before == engine.MAX_SHRINKING_SECONDS  # restored


def test_without_the_shrink_phase_the_first_failure_is_reported_at_once() -> None:
    unshrunk = hypothesis.settings(SETTINGS, phases=[Phase.generate])
    with pytest.raises(AssertionError, match="the model was called"):
        ModelIsNeverCalled.run(settings=unshrunk, seed=2)


def test_bounded_shrinking_restores_the_bound_after_an_error() -> None:
    before = engine.MAX_SHRINKING_SECONDS
    inside: list[float] = []

    def fail_inside() -> None:
        with bounded_shrinking(1.5):
            inside.append(engine.MAX_SHRINKING_SECONDS)
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        fail_inside()
    assert inside == [1.5]
    assert before == engine.MAX_SHRINKING_SECONDS


class Counting:
    def __init__(self) -> None:
        self.passes = 0

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        self.passes += 1


def test_check_mutator_takes_settings_max_examples_and_a_seed() -> None:
    counter = Counting()
    few = hypothesis.settings(max_examples=4, database=None, phases=[Phase.generate])
    check_mutator(counter, settings=few, passes=1, points=["after_turn_ended"])  # type: ignore[list-item]
    assert counter.passes == 4
    check_mutator(counter, settings=few, max_examples=6, passes=1, points=["after_tool_result"])  # type: ignore[list-item]
    assert counter.passes == 10

    seen: list[list[Item]] = []

    class Recording:
        async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
            seen.append(list(cursor))

    check_mutator(Recording(), settings=few, seed=11, passes=1)
    first, seen[:] = list(seen), []
    check_mutator(Recording(), settings=few, seed=11, passes=1)
    assert seen == first
    assert all(items[-1].kind is not ItemKind.ASSISTANT for items in first)
