"""A task manager that reports results the driver did not wait for.

A custom ``TaskManager`` may report, from ``wait_for_turn``, a result for a call
already answered (a duplicate, or the real result of a call answered "cancelled")
or for a call that is not in the round at all. The driver delivers each as a
notification, but only once the round's own results are all in: an item between
an assistant's tool calls and their results would make the transcript invalid
for every provider.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


class Echo:
    spec = al.ToolSpec("echo", "Echo.", {"type": "object"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return f"ok:{request.call_id}"


def stray(call_id: str) -> al.tasks.TaskResult:
    return al.tasks.TaskResult(f"stray-{call_id}", al.ToolResultPart(call_id, f"stray:{call_id}"))


class Straying(al.tasks.SimpleTaskManager):
    """Runs each call at once; reports some results only from ``wait_for_turn``, with
    stray results (``(position, call_id)``) slipped in among them."""

    def __init__(self, deferred: set[str], strays: list[tuple[int, str]]) -> None:
        super().__init__()
        self._deferred = deferred
        self._strays = strays
        self._queue: list[al.tasks.TaskResult] = []
        self._reported = 0

    async def start_task(
        self, launch: al.tasks.TaskLaunch, turn_id: str
    ) -> al.tasks.TaskResult | al.tasks.TaskLaunched:
        done = await super().start_task(launch, turn_id)
        if launch.request.call_id not in self._deferred:
            return done
        self._queue.append(done)
        return al.tasks.TaskLaunched(done.task_id, al.tasks.TaskKind.FOREGROUND)

    async def wait_for_turn(self, turn_id: str) -> al.tasks.TurnUpdate | None:
        for index, (position, call_id) in enumerate(self._strays):
            if position <= self._reported:
                del self._strays[index]
                return stray(call_id)
        if not self._queue:
            return None
        self._reported += 1
        return self._queue.pop(0)


async def run_round(calls: int, manager: Straying) -> al.RunResult:
    reply = tool_calls(*(call("echo", id=f"c{index}") for index in range(calls)))
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel([reply, "done"]))
        .add_tool_source(al.ToolRegistry().with_tool(Echo()))
        .task_manager(manager)
        .build()
    )
    return await al.run(agent, "go")


def results_and_notifications(
    transcript: tuple[al.Item, ...],
) -> tuple[list[tuple[str, object]], list[str]]:
    results = [(part.call_id, part.output) for item in transcript for part in item.tool_results()]
    notes = [item.text_content for item in transcript if item.kind is al.ItemKind.NOTIFICATION]
    return results, notes


async def test_a_duplicate_result_comes_after_the_round_as_a_notification() -> None:
    manager = Straying(deferred={"c1"}, strays=[(0, "c0")])
    result = await run_round(2, manager)
    assert result.stop_reason == "finished"
    assert [item.kind for item in result.transcript] == [
        al.ItemKind.USER,
        al.ItemKind.ASSISTANT,
        al.ItemKind.TOOL,
        al.ItemKind.TOOL,
        al.ItemKind.NOTIFICATION,
        al.ItemKind.ASSISTANT,
    ]
    results, notes = results_and_notifications(result.transcript)
    assert results == [("c0", "ok:c0"), ("c1", "ok:c1")]
    assert notes == ["Background tool call c0 completed: stray:c0"]
    al.transcript.validate_transcript(result.transcript)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
async def test_stray_results_never_come_between_calls_and_their_results(
    data: st.DataObject,
) -> None:
    calls = data.draw(st.integers(1, 4), label="calls")
    ids = [f"c{index}" for index in range(calls)]
    deferred = data.draw(st.sets(st.sampled_from(ids)), label="deferred")
    # Strays name calls already answered (run at start_task) or no call of the round;
    # a "stray" for a call still running would simply be its result.
    answered = [call_id for call_id in ids if call_id not in deferred]
    strays = data.draw(
        st.lists(
            st.tuples(
                st.integers(0, len(deferred)),
                st.sampled_from([*answered, "ghost", "call-9"]),
            ),
            max_size=4,
        ),
        label="strays",
    )
    manager = Straying(set(deferred), list(strays))
    result = await run_round(calls, manager)

    assert result.stop_reason == "finished"
    al.transcript.validate_transcript(result.transcript)
    results, notes = results_and_notifications(result.transcript)
    # Every call answered once, by its own run, in call order.
    assert results == [(call_id, f"ok:{call_id}") for call_id in ids]
    # Every stray the driver was told about became one notification, after the results.
    # (Strays still queued when the round ended were never reported.)
    reported = Counter(call_id for _, call_id in strays) - Counter(
        call_id for _, call_id in manager._strays
    )
    assert Counter(notes) == Counter(
        {
            f"Background tool call {call_id} completed: stray:{call_id}": n
            for call_id, n in reported.items()
        }
    )
    kinds = [item.kind for item in result.transcript]
    assert kinds == [
        al.ItemKind.USER,
        al.ItemKind.ASSISTANT,
        *[al.ItemKind.TOOL] * calls,
        *[al.ItemKind.NOTIFICATION] * len(notes),
        al.ItemKind.ASSISTANT,
    ]
