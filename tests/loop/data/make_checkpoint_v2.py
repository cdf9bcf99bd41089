"""Writes ``checkpoint_v2.json``: version-2 documents with what the driver did next.

Run once from the repository root with the driver that wrote version 2 as its
newest format (``python tests/loop/data/make_checkpoint_v2.py``); the file is
committed and read by ``test_checkpoint_format.py``. Each case is a document
taken at one step of ``test_checkpoint``'s scripted host, and the steps and
transcript that host saw after it. Further cases cover what those positions do
not reach: a retry point, queued steering and follow-up messages, and an
interrupted turn.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parents[2])]

from loop_support import ApproveFsReads, EchoTool, user  # noqa: E402
from test_checkpoint import comparable, drive, make_agent, planned_model  # noqa: E402

import agentloop as al  # noqa: E402
from agentloop.testing import call, tool_calls  # noqa: E402


async def positional() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rounds, allow_all, positions in (
        (1, False, (1, 2, 3)),
        (2, False, (2, 5, 7)),
        (2, True, (1, 2, 3)),
    ):
        for position in positions:
            extra = {"permissions": al.permissions.AllowAll()} if allow_all else {}
            driver = await make_agent(planned_model(rounds), **extra).start("s")
            driver.submit_input([user("first")])
            await drive(driver, 0, position)
            document = json.loads(json.dumps(driver.checkpoint()))
            key = json.dumps(document, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            steps = await drive(driver, position, 16)
            cases.append(
                {
                    "name": f"r{rounds}-p{position}-{'allow' if allow_all else 'ask'}",
                    "rounds": rounds,
                    "allow_all": allow_all,
                    "position": position,
                    "document": document,
                    "steps": steps,
                    "transcript": comparable(list(driver.snapshot().transcript)),
                }
            )
    return cases


async def special() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []

    # A retry point: the second model call of the turn failed.
    calls = 0

    def failing(request: al.model.TurnRequest) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise al.ProviderError("overloaded", status=529, error_type="overloaded_error")
        return _first_round(request)

    def _first_round(request: al.model.TurnRequest) -> Any:
        return tool_calls(call("echo", {"value": "x"}, id="call-r-0"))

    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(failing))
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(al.permissions.AllowAll())
        .build()
    )
    driver = await agent.start("s")
    driver.submit_input([user("first")])
    for _ in range(4):
        step = await driver.next()
        if isinstance(step, al.Finished | al.AwaitingInput):
            break
    assert driver.retry_point is not None
    cases.append({"name": "retry-point", "document": json.loads(json.dumps(driver.checkpoint()))})

    # Steering and follow-up messages queued while an approval waits.
    driver = await make_agent(planned_model(1)).start("s")
    driver.submit_input([user("first")])
    assert isinstance(await driver.next(), al.ApprovalRequest)
    driver.steer([user("use the other file")], label="ana")
    driver.follow_up([user("then summarise")])
    cases.append({"name": "queues", "document": json.loads(json.dumps(driver.checkpoint()))})

    # A turn an interrupt hit while its approval waited.
    controller = al.CancellationController()
    agent = (
        al.Agent.builder()
        .model(planned_model(1))
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .permissions(ApproveFsReads())
        .cancellation(controller.handle())
        .build()
    )
    driver = await agent.start("s")
    driver.submit_input([user("go")])
    assert isinstance(await driver.next(), al.ApprovalRequest)
    controller.interrupt()
    cases.append({"name": "interrupted", "document": json.loads(json.dumps(driver.checkpoint()))})
    return cases


async def main() -> None:
    cases = await positional() + await special()
    for case in cases:
        assert case["document"]["version"] == 2
    (HERE / "checkpoint_v2.json").write_text(json.dumps(cases, indent=1, sort_keys=True) + "\n")
    print(len(cases), "cases")


if __name__ == "__main__":
    anyio.run(main)
