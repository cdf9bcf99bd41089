"""A question asked after its turn was cancelled is answered "cancel" at once.

Found by the nested-agent property test on trio (tests/agents/test_nested_property.py):
a call asking the host in a turn an interrupt had just cancelled left the question
unshown, and the step loop went round without suspending (the wait returned "asked" at
once), so the cancellation never landed. That interleaving depends on the scheduler;
this test pins the outcome (the question is answered "cancel", the turn ends cancelled).
"""

from __future__ import annotations

import anyio
import pytest

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


async def test_a_question_in_a_cancelled_turn_is_cancelled_and_the_turn_ends() -> None:
    controller = al.CancellationController()
    answers: list[al.QuestionAnswer] = []

    class Ask:
        """Interrupts the turn, then asks at once (the driver has not run in between)."""

        spec = al.ToolSpec("ask", "Asks after the interrupt.", {"type": "object"})
        asks_host = True

        async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
            await anyio.lowlevel.checkpoint()  # the driver waits for the round now
            controller.interrupt()
            with anyio.CancelScope(shield=True):
                answers.append(await ctx.ask(al.tools.Question("confirm", "Sure?")))
            return "asked"

    model = al.testing.ScriptedModel([tool_calls(call("ask", {}, id="a"))])
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(model)
            .add_tool_source(al.ToolRegistry().with_tool(Ask()))
            .task_manager(manager)
            .cancellation(controller.handle())
            .input([al.Item.text(al.ItemKind.USER, "go")])
            .build()
        )
        driver = await agent.start("s")
        with anyio.fail_after(10):
            step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.CANCELLED
    assert answers == [al.QuestionAnswer.cancel()]
    al.testing.assert_transcript_valid(list(driver.snapshot().transcript))
