"""Orchestration overhead per tool round, against a hand-written floor.

A zero-latency model asks for one echo call per model call, N times in one
turn, then answers. Printed: microseconds per round for N = 10, 100 and 400
rounds, the same for a minimal hand-written loop over a list of dicts doing
the same essential work (the floor), and the ratios. Timings are the best of
several repeats in one process, agentloop and floor interleaved, after one
warm-up turn (imports loaded, the echo schema's validator compiled: what a
long-running host sees). ``--json PATH`` also writes the checks for
``run_all.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import jsonschema
from _fixtures import ECHO_SCHEMA, Echo, FastModel
from _report import Check, json_path, report

import agentloop as al
import agentloop.tools

ROUND_COUNTS = (10, 100, 400)
MIN_REPEATS = 7
ROUNDS_PER_SIZE = 4000  # at least this many rounds measured per size (more repeats when small)
RATIO_TARGET = 10.0
GROWTH_TARGET = 1.5


async def agentloop_rounds(rounds: int) -> float:
    """Seconds for one turn of ``rounds`` tool rounds through ``LoopDriver``."""
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


ECHO_VALIDATOR = jsonschema.Draft202012Validator(ECHO_SCHEMA)


async def floor_rounds(rounds: int, *, validate: bool = True) -> float:
    """The least a loop can do for the same work as agentloop, written by hand.

    Per round, as the driver does: build a request (the history by reference
    and the tool list, as agentloop hands the model an O(1) view), "call" a
    zero-latency model, take the tool call out of its reply, look the tool up
    by name, validate the arguments against a pre-compiled jsonschema
    validator (agentloop validates every call, with a compiled validator
    cached per schema), run the echo tool, and append the call and its result.
    Nothing else: no events, ids, limits, permissions, cancellation or state
    machine, so this is a floor, not a competitor. ``validate=False`` skips the
    validation, for reference only (jsonschema is most of the floor's cost).
    """
    transcript: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    tools_schema = [{"name": "echo", "parameters": ECHO_SCHEMA}]
    calls = 0

    async def model(request: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls <= rounds:
            call = {"id": f"c{calls}", "name": "echo", "arguments": {"value": "x"}}
            return {"role": "assistant", "tool_calls": [call]}
        return {"role": "assistant", "content": "done"}

    async def echo(args: dict[str, Any]) -> str:
        return str(args["value"])

    tools = {"echo": (echo, ECHO_VALIDATOR)}
    start = time.perf_counter()
    while True:
        reply = await model({"messages": transcript, "tools": tools_schema})
        transcript.append(reply)
        tool_calls = reply.get("tool_calls")
        if not tool_calls:
            break
        for call in tool_calls:
            function, validator = tools[call["name"]]
            errors = (
                [error.message for error in validator.iter_errors(call["arguments"])]
                if validate
                else []
            )
            if errors:
                content = "invalid input: " + "; ".join(errors)
            else:
                content = await function(call["arguments"])
            transcript.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    elapsed = time.perf_counter() - start
    assert len(transcript) == 2 * rounds + 2
    return elapsed


async def best_per_round(rounds: int, *runners: Callable[[int], Awaitable[float]]) -> list[float]:
    """Best microseconds per round of each runner, repeats interleaved."""
    repeats = max(MIN_REPEATS, ROUNDS_PER_SIZE // rounds)
    bests = [float("inf")] * len(runners)
    for _ in range(repeats):
        for index, runner in enumerate(runners):
            bests[index] = min(bests[index], await runner(rounds))
    return [seconds / rounds * 1e6 for seconds in bests]


async def unvalidated_floor_rounds(rounds: int) -> float:
    return await floor_rounds(rounds, validate=False)


async def measure() -> dict[int, tuple[float, float, float]]:
    """``{rounds: (agentloop, floor, floor without validation)}`` in us per round."""
    await agentloop_rounds(3)  # warm-up
    await floor_rounds(3)
    figures = {}
    for rounds in ROUND_COUNTS:
        ours, floor, bare = await best_per_round(
            rounds, agentloop_rounds, floor_rounds, unvalidated_floor_rounds
        )
        figures[rounds] = (ours, floor, bare)
    return figures


async def main() -> None:
    print(f"python {sys.version.split()[0]}, anyio backend asyncio")
    print(f"best of >= {MIN_REPEATS} repeats (>= {ROUNDS_PER_SIZE} rounds per size)")
    figures = await measure()
    print(
        f"{'rounds':>7} {'agentloop us/round':>19} {'floor us/round':>15} {'ratio':>6}"
        f" {'floor w/o validation':>21}"
    )
    for rounds, (ours, floor, bare) in figures.items():
        print(f"{rounds:>7} {ours:>19.1f} {floor:>15.1f} {ours / floor:>6.1f} {bare:>21.1f}")
    worst_ratio = max(ours / floor for ours, floor, _ in figures.values())
    growth = figures[400][0] / figures[10][0]
    report(
        "orchestration overhead",
        [
            Check(
                "per-round overhead vs floor (worst of 10/100/400)",
                worst_ratio,
                RATIO_TARGET,
                "x",
                f"agentloop {figures[100][0]:.1f} us vs floor {figures[100][1]:.1f} us at 100",
            ),
            Check("per-round cost at 400 / at 10 rounds", growth, GROWTH_TARGET, "x"),
        ],
        json_path(),
    )


if __name__ == "__main__":
    anyio.run(main)
