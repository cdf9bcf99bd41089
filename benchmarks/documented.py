"""The setup the docs show, against a hand-written floor measured in the same run.

``run.py`` measures the friendliest configuration (``SimpleTaskManager``, a
hand-written tool class, a model that never yields). A user who follows the
docs gets something else: an ``@tool`` function, ``AsyncTaskManager`` entered
around the driver (docs/tasks.md), a model that passes control to the event
loop once per request as a network read would, and ``agentloop.run()``.

Printed, each as a ratio against a floor measured in this process, agentloop
and floor interleaved, median of several repeats after a warm-up:

- W1: microseconds per tool round at R = 10, 100 and 400 rounds, against a
  hand-written loop *without* schema validation (the work a loop cannot skip:
  build a request, call the model, look the tool up, run it, append two
  items); and R400/R10 (flat in transcript length). For information, also
  the least a loop with agentloop's guarantees costs (``least_rounds``):
  the same typed model, typed items, one compiled schema check and one anyio
  cancel scope per call, and nothing else (no permissions, events, limits,
  records, steps or task bookkeeping). What it costs over the floor is
  spent before any of agentloop's own logic runs.
- W3: 1,000 concurrent sessions of 5 rounds each: wall time, and peak traced
  memory per session (``tracemalloc``; the sessions are alive together).

``--json PATH`` writes the checks for ``run_all.py``; ``--profile`` prints
the top functions by cumulative and own time for W1 at R = 100 (CPU time, so
that other processes on a shared machine do not count). ``--against REF``
(a git revision) also measures the package as it was at REF, imported as
``agentloop_baseline`` beside this one, interleaved with it in the same
process: before/after figures that share the machine's load. ``--cpu`` times
W1 in process CPU time instead of wall time.
"""

from __future__ import annotations

import cProfile
import gc
import importlib
import pathlib
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
from _report import Check, json_path, report

import agentloop as al
import agentloop.model
import agentloop.tasks
import agentloop.tools
from agentloop.core._transcript import TranscriptView
from agentloop.tools._fast_check import compile_fast_check


def _home(al: Any, package: str, name: str) -> Any:
    """``al.<package>.<name>``, or ``al.<name>`` for a ``--against`` baseline from before
    issue 36 moved it out of the root."""
    return getattr(getattr(al, package), name, None) or getattr(al, name)


CLOCK = time.process_time if "--cpu" in sys.argv else time.perf_counter
"""W1's clock: ``--cpu`` counts this process's CPU time only (on a loaded machine
wall time grows with a turn's length, as longer turns are preempted more)."""

ROUND_COUNTS = (10, 100, 400)
REPEATS = 7
ROUNDS_PER_SIZE = 3000
RATIO_TARGET = 6.0
GROWTH_TARGET = 1.1
SESSIONS = 1000
SESSION_ROUNDS = 5
W3_SECONDS_TARGET = 0.5
W3_KIB_TARGET = 16.0
W3_COMPARE_REPEATS = 5  # --against: W3's wall time varies a lot on a shared machine


class Setup:
    """The documented setup built from one copy of the package (``al``)."""

    def __init__(self, package: Any) -> None:
        self.al = package

        @package.tool
        async def echo(value: str) -> str:
            """Return ``value``."""
            return value

        self.echo = echo

    def model(self, rounds: int) -> Any:
        return _FastModel(self.al, rounds)

    def make_agent(self, rounds: int, manager: Any) -> Any:
        al = self.al
        return (
            al.Agent.builder()
            .model(self.model(rounds))
            .add_tool_source(al.ToolRegistry().with_tool(self.echo))
            .task_manager(manager)
            .build()
        )

    def limits(self, rounds: int, session_id: str = "bench") -> Any:
        al = self.al
        return al.SessionConfig(
            session_id, limits=al.LoopLimits(max_model_calls_per_turn=rounds + 1)
        )


class _FastModel:
    """``_fixtures.FastModel`` (yielding once per request) for any copy of the package."""

    provider_name = "bench"
    model_name = "bench"

    def __init__(self, al: Any, rounds: int) -> None:
        self.al = al
        self.rounds = rounds

    async def start_session(self, config: Any) -> _FastSession:
        return _FastSession(self.al, self.rounds)


class _FastSession:
    __slots__ = ("al", "calls", "in_turn", "rounds")

    def __init__(self, al: Any, rounds: int) -> None:
        self.al = al
        self.rounds = rounds
        self.calls = 0
        self.in_turn = 0

    async def begin_turn(self, request: Any, cancellation: Any) -> Any:
        al = self.al
        self.in_turn += 1
        if self.in_turn <= self.rounds:
            self.calls += 1
            part = al.ToolCallPart(f"call-{self.calls}", "echo", {"value": "x"})
            result = _home(al, "model", "ModelTurnResult")(
                al.FinishReason.TOOL_CALL, (al.Item(al.ItemKind.ASSISTANT, (part,)),)
            )
        else:
            self.in_turn = 0
            result = _home(al, "model", "ModelTurnResult")(
                al.FinishReason.COMPLETED, (al.Item.text(al.ItemKind.ASSISTANT, "done"),)
            )
        return _one(result)


async def _one(result: Any) -> Any:
    await anyio.lowlevel.checkpoint()  # one network read per request
    yield result


OURS = Setup(al)


def baseline_package(ref: str) -> Any:
    """The ``agentloop`` package as it was at git revision ``ref``, as ``agentloop_baseline``."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="agentloop-baseline-"))
    archive = subprocess.run(
        ["git", "archive", ref, "agentloop"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    (root / "agentloop").rename(root / "agentloop_baseline")
    sys.path.insert(0, str(root))
    return importlib.import_module("agentloop_baseline")


async def agentloop_rounds(rounds: int, setup: Setup = OURS) -> float:
    """Seconds for one ``agentloop.run()`` turn of ``rounds`` tool rounds."""
    al = setup.al
    async with al.tasks.AsyncTaskManager() as manager:
        agent = setup.make_agent(rounds, manager)
        start = CLOCK()
        result = await al.run(agent, "go", config=setup.limits(rounds), max_steps=10 * rounds + 10)
        elapsed = CLOCK() - start
    assert result.stop_reason == "finished", result.stop_reason
    assert len(result.transcript) == 2 * rounds + 2, len(result.transcript)
    return elapsed


async def floor_rounds(rounds: int) -> float:
    """A hand-written loop doing the essential work, without schema validation."""
    transcript: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    tools = {"echo": lambda arguments: arguments["value"]}
    specs = [{"name": "echo"}]
    calls = 0

    async def model(request: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        await anyio.lowlevel.checkpoint()  # one network read per request
        calls += 1
        if calls <= rounds:
            call = {"id": f"c{calls}", "name": "echo", "arguments": {"value": "x"}}
            return {"role": "assistant", "tool_calls": [call]}
        return {"role": "assistant", "content": "done"}

    start = CLOCK()
    while True:
        reply = await model({"messages": transcript, "tools": specs})
        transcript.append(reply)
        tool_calls = reply.get("tool_calls")
        if not tool_calls:
            break
        for call in tool_calls:
            output = tools[call["name"]](call["arguments"])
            transcript.append({"role": "tool", "call_id": call["id"], "content": output})
    elapsed = CLOCK() - start
    assert len(transcript) == 2 * rounds + 2
    return elapsed


async def least_rounds(rounds: int) -> float:
    """The documented workload with only what a loop with agentloop's guarantees cannot skip.

    The same typed fake model (one event-loop pass per request), a typed
    request, the tool's compiled input check, a start checkpoint and one
    anyio cancel scope per call (``AsyncTaskManager`` cancels each call on its
    own), and a typed result item. Nothing else: no permissions, events,
    limits, usage, records, steps, task ids or snapshots.
    """
    echo = OURS.echo
    check = compile_fast_check(echo.spec.input_schema)
    assert check is not None
    tools = {"echo": (echo.function, check)}
    session = await OURS.model(rounds).start_session(None)
    transcript: list[Any] = [al.Item.text(al.ItemKind.USER, "go")]
    start = CLOCK()
    while True:
        request = _home(al, "model", "TurnRequest")("bench", "turn-1", TranscriptView(transcript))
        events = [event async for event in await session.begin_turn(request, None)]
        result = events[-1]  # the stream's closing ModelTurnResult
        transcript += result.output_items
        calls = [p for i in result.output_items for p in i.parts if type(p) is al.ToolCallPart]
        if not calls:
            break
        for call in calls:
            function, valid = tools[call.name]
            if not valid(call.input):
                raise ValueError(call.input)
            await anyio.lowlevel.checkpoint_if_cancelled()
            with anyio.CancelScope():
                output = await function(**call.input)
            transcript.append(al.Item(al.ItemKind.TOOL, (al.ToolResultPart(call.id, output),)))
    elapsed = CLOCK() - start
    assert len(transcript) == 2 * rounds + 2
    return elapsed


def repeats_for(rounds: int) -> int:
    return max(REPEATS, ROUNDS_PER_SIZE // rounds)


async def w1(
    setups: tuple[Setup, ...] = (OURS,),
) -> tuple[list[dict[int, float]], dict[int, float], dict[int, float]]:
    """Median microseconds per round for each setup, the floor and ``least_rounds``."""
    for setup in setups:
        await agentloop_rounds(10, setup)  # warm-up: imports, compiled validators
    await floor_rounds(10)
    await least_rounds(10)
    ours: list[dict[int, float]] = [{} for _ in setups]
    floor: dict[int, float] = {}
    least: dict[int, float] = {}
    for rounds in ROUND_COUNTS:
        a: list[list[float]] = [[] for _ in setups]
        f: list[float] = []
        m: list[float] = []
        for _ in range(repeats_for(rounds)):
            for index, setup in enumerate(setups):
                a[index].append(await agentloop_rounds(rounds, setup))
            f.append(await floor_rounds(rounds))
            m.append(await least_rounds(rounds))
        for index in range(len(setups)):
            ours[index][rounds] = statistics.median(a[index]) / rounds * 1e6
        floor[rounds] = statistics.median(f) / rounds * 1e6
        least[rounds] = statistics.median(m) / rounds * 1e6
    return ours, floor, least


async def w3(setup: Setup = OURS, *, shared: bool = False) -> tuple[float, float]:
    """Wall seconds and peak traced KiB per session for many concurrent sessions.

    Each session enters its own manager and builds its own agent (the
    single-session pattern of docs/tasks.md, 1,000 times); ``shared``: all run
    on one agent and one manager (the server pattern of docs/performance.md).
    """
    al = setup.al
    async with al.tasks.AsyncTaskManager() as manager:
        agent = setup.make_agent(SESSION_ROUNDS, manager)
        await al.run(agent, "warm", config=setup.limits(SESSION_ROUNDS))
        gc.collect()
        tracemalloc.start()
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for index in range(SESSIONS):
                if shared:
                    group.start_soon(one_shared_session, index, agent, setup)
                else:
                    group.start_soon(one_session, index, setup)
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return elapsed, (peak - base) / SESSIONS / 1024


async def one_session(index: int, setup: Setup = OURS) -> None:
    al = setup.al
    async with al.tasks.AsyncTaskManager() as manager:
        agent = setup.make_agent(SESSION_ROUNDS, manager)
        config = setup.limits(SESSION_ROUNDS, f"s{index}")
        result = await al.run(agent, "go", config=config)
    assert result.stop_reason == "finished", result.stop_reason


async def one_shared_session(index: int, agent: Any, setup: Setup = OURS) -> None:
    result = await setup.al.run(agent, "go", config=setup.limits(SESSION_ROUNDS, f"s{index}"))
    assert result.stop_reason == "finished", result.stop_reason


async def w3_untraced(setup: Setup = OURS) -> float:
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for index in range(SESSIONS):
            group.start_soon(one_session, index, setup)
    return time.perf_counter() - start


def profile() -> None:
    """Top functions for W1 at R = 100 (cumulative and own CPU time)."""
    anyio.run(agentloop_rounds, 10)
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for _ in range(30):
        anyio.run(agentloop_rounds, 100)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)


def main() -> int:
    if "--profile" in sys.argv:
        profile()
        return 0
    if "--against" in sys.argv:
        return compare(sys.argv[sys.argv.index("--against") + 1])
    (ours,), floor, least = anyio.run(w1)
    print("W1, documented setup (@tool, AsyncTaskManager, yielding model, run()):")
    checks: list[Check] = []
    for rounds in ROUND_COUNTS:
        ratio = ours[rounds] / floor[rounds]
        print(
            f"  R={rounds:>3}: agentloop {ours[rounds]:7.1f} us/round, "
            f"floor (no validation) {floor[rounds]:5.1f} us, ratio {ratio:5.1f}x; "
            f"least loop with the same guarantees {least[rounds]:5.1f} us "
            f"({least[rounds] / floor[rounds]:3.1f}x)"
        )
        checks.append(Check(f"documented setup, R={rounds}, vs floor", ratio, RATIO_TARGET, "x"))
    growth = ours[400] / ours[10]
    print(f"  R400/R10: {growth:.2f}")
    checks.append(Check("documented setup, R400/R10", growth, GROWTH_TARGET, "x"))
    seconds = min(anyio.run(w3_untraced) for _ in range(3))
    _, kib = anyio.run(w3)
    print(
        f"W3: {SESSIONS} sessions x {SESSION_ROUNDS} rounds: {seconds:.2f} s (best of 3), "
        f"{kib:.1f} KiB peak traced memory per session"
    )
    _, shared_kib = anyio.run(partial(w3, shared=True))
    print(
        f"   the same on one agent and one manager (docs/performance.md): "
        f"{shared_kib:.1f} KiB per session (for information)"
    )
    checks.append(Check(f"W3 {SESSIONS} sessions wall", seconds, W3_SECONDS_TARGET, "s"))
    checks.append(Check("W3 peak memory per session", kib, W3_KIB_TARGET, "KiB"))
    report("documented", checks, json_path())
    return 0


def compare(ref: str) -> int:
    """Before (the package at ``ref``) and after (this tree), interleaved in one process."""
    before = Setup(baseline_package(ref))
    (after_w1, before_w1), floor, _least = anyio.run(w1, (OURS, before))
    print(f"W1 per round, median of repeats; before = {ref}, interleaved with after and floor:")
    for rounds in ROUND_COUNTS:
        b, a = before_w1[rounds], after_w1[rounds]
        print(
            f"  R={rounds:>3}: before {b:7.1f} us ({b / floor[rounds]:4.1f}x), "
            f"after {a:7.1f} us ({a / floor[rounds]:4.1f}x), "
            f"floor {floor[rounds]:5.1f} us"
        )
    print(
        f"  R400/R10: before {before_w1[400] / before_w1[10]:.2f}, "
        f"after {after_w1[400] / after_w1[10]:.2f}"
    )
    walls: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(W3_COMPARE_REPEATS):
        walls["before"].append(anyio.run(w3_untraced, before))
        walls["after"].append(anyio.run(w3_untraced, OURS))
    kib = {"before": anyio.run(w3, before)[1], "after": anyio.run(w3, OURS)[1]}
    for name in ("before", "after"):
        print(
            f"W3 {name}: {statistics.median(walls[name]):.2f} s (median of "
            f"{W3_COMPARE_REPEATS}, range {min(walls[name]):.2f}-{max(walls[name]):.2f}), "
            f"{kib[name]:.1f} KiB peak traced memory per session"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
