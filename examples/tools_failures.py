"""Every bad tool call becomes one error result the model can read; nothing crashes or hangs.

Run: python examples/tools_failures.py
"""

from __future__ import annotations

import sys

import anyio
import structlog

import agentloop as al
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import call, tool_calls


@al.tool
async def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


@al.tool(timeout=0.1)
async def wait_forever() -> str:
    """Never answers."""
    await anyio.sleep_forever()
    return "unreachable"


@al.tool
async def essay(words: int) -> str:
    """Write a long text."""
    return "word " * words


async def main() -> None:
    # Tracebacks go to the log (here: stderr), never to the model.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    broken_json = al.ToolCallPart(
        "call-6", "divide", {}, metadata={al.tools.RAW_ARGUMENTS_KEY: '{"a": 1, "b":'}
    )
    model = al.testing.ScriptedModel(
        [
            tool_calls(
                call("divide", {"a": 1, "b": 4}, id="call-1"),
                call("divide", {"a": 1, "b": 0}, id="call-2"),
                call("divide", {"a": "one", "c": 2}, id="call-3"),
                call("translate", {}, id="call-4"),
                call("wait_forever", {}, id="call-5"),
                broken_json,
                call("essay", {"words": 100}, id="call-7"),
            ),
            "Sorry, let me fix those calls.",
        ]
    )
    registry = al.ToolRegistry().with_tool(divide).with_tool(wait_forever).with_tool(essay)
    executor = al.tools.BasicToolExecutor([registry], max_output_chars=40)
    agent = (
        al.Agent.builder()
        .model(model)
        .tool_executor(executor)
        .input([al.Item.text(al.ItemKind.USER, "Do some maths.")])
        .build()
    )
    driver = await agent.start("demo")
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    for item in driver.snapshot().transcript:
        for result in item.tool_results():
            outcome = al.tools.result_outcome(result)
            label = outcome.value if outcome else "ok"
            print(f"{result.call_id} [{label}]: {result.output}")
    al.transcript.validate_transcript(driver.snapshot().transcript)
    print("transcript valid:", step.result.finish_reason.value)


if __name__ == "__main__":
    anyio.run(main)
