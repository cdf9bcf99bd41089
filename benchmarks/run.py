"""Orchestration overhead per tool round, against a hand-written floor.

A zero-latency scripted model asks for one echo call per model call, N times
in one turn, then answers. Printed: microseconds per round for N = 10, 100 and
400 rounds, the same for a minimal hand-written loop over a list of dicts (the
floor), and the ratios. Timings are best-of-several in one process.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio

import agentloop as al


class Echo:
    spec = al.ToolSpec(
        "echo",
        "Echo.",
        {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]},
    )

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return str(request.input["value"])


class FastModel:
    """Answers with one tool call until ``rounds`` calls were made, then with text."""

    provider_name = "bench"
    model_name = "bench"

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self.calls = 0

    async def start_session(self, config: al.SessionConfig) -> FastModel:
        return self

    async def begin_turn(self, request: al.TurnRequest, cancellation: Any) -> Any:
        self.calls += 1
        if self.calls <= self.rounds:
            part = al.ToolCallPart(f"call-{self.calls}", "echo", {"value": "x"})
            result = al.ModelTurnResult(
                al.FinishReason.TOOL_CALL, (al.Item(al.ItemKind.ASSISTANT, (part,)),)
            )
        else:
            result = al.ModelTurnResult(
                al.FinishReason.COMPLETED, (al.Item.text(al.ItemKind.ASSISTANT, "done"),)
            )
        return _one(result)


async def _one(result: al.ModelTurnResult) -> Any:
    yield result


async def agentloop_rounds(rounds: int) -> float:
    agent = (
        al.Agent.builder()
        .model(FastModel(rounds))
        .add_tool_source(al.ToolRegistry().with_tool(Echo()))
        .input([al.Item.text(al.ItemKind.USER, "go")])
        .build()
    )
    driver = await agent.start(
        al.SessionConfig("bench", limits=al.LoopLimits(max_model_calls_per_turn=rounds + 1))
    )
    start = time.perf_counter()
    step = await driver.run_until_blocked()
    elapsed = time.perf_counter() - start
    assert isinstance(step, al.Finished), step
    assert len(driver.snapshot().transcript) == 2 * rounds + 2
    return elapsed


async def floor_rounds(rounds: int) -> float:
    """The least a loop can do: append a call, run the tool, append the result."""
    transcript: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    calls = 0

    async def model(history: list[dict[str, Any]]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls <= rounds:
            return {"role": "assistant", "tool_call": {"id": f"c{calls}", "args": {"value": "x"}}}
        return {"role": "assistant", "content": "done"}

    async def echo(args: dict[str, Any]) -> str:
        return str(args["value"])

    start = time.perf_counter()
    while True:
        reply = await model(transcript)
        transcript.append(reply)
        call = reply.get("tool_call")
        if call is None:
            break
        transcript.append({"role": "tool", "id": call["id"], "content": await echo(call["args"])})
    return time.perf_counter() - start


async def best(fn: Any, rounds: int, repeats: int = 5) -> float:
    return min([await fn(rounds) for _ in range(repeats)]) / rounds * 1e6


async def main() -> None:
    print(f"python {sys.version.split()[0]}, anyio backend asyncio")
    print(f"{'rounds':>7} {'agentloop us/round':>20} {'floor us/round':>16} {'ratio':>7}")
    per_round = {}
    for rounds in (10, 100, 400):
        ours = await best(agentloop_rounds, rounds)
        floor = await best(floor_rounds, rounds)
        per_round[rounds] = ours
        print(f"{rounds:>7} {ours:>20.1f} {floor:>16.2f} {ours / floor:>7.1f}")
    growth = per_round[400] / per_round[10]
    print(f"per-round cost at 400 rounds / at 10 rounds: {growth:.2f} (target <= 1.5)")


if __name__ == "__main__":
    anyio.run(main)
