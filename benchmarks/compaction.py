"""A 500-turn session on the scripted model: compaction keeps it under budget, flat.

Run with ``python benchmarks/compaction.py``. Each turn the user asks, the
model calls a lookup tool (2-4 KB of output, every fifth call fails) and
answers. The model reports the request's estimated size as its input
tokens, as a provider reports usage. With ``default_compactor(8_000)`` the
session must stay within 8,000 tokens per request, and the per-turn cost
(input tokens sent and wall time) of turns 451-500 must be within 1.5x of
turns 51-100. The baseline is the same session without compaction, measured
in the same run: its per-turn cost grows with the transcript.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence

import anyio
import structlog
from _report import Check, json_path, report

import agentloop as al
import agentloop.model
import agentloop.tools
from agentloop.compaction import Compactor, default_compactor, estimate_transcript
from agentloop.testing import Reply, ScriptedModel, call, text, tool_calls

TURNS = 500
BUDGET = 8_000
EARLY = range(50, 100)
LATE = range(450, 500)


@al.tool
def lookup(n: int) -> str:
    """Look a record up (every fifth record is missing: an error result)."""
    if n % 5 == 4:
        raise LookupError(f"record {n} is missing: " + "frame\n" * 60)
    return f"record {n}: " + "field=value; " * (150 + 10 * (n % 15))


def model_reply(request: al.model.TurnRequest) -> Reply:
    usage = al.Usage(input_tokens=estimate_transcript(request.transcript), output_tokens=60)
    last = request.transcript[-1]
    if last.kind is al.ItemKind.USER:
        number = int(last.text_content.rsplit(" ", 1)[-1])
        return tool_calls(call("lookup", {"n": number}), usage=usage)
    return text("The record says: " + "details " * 30, usage=usage)


async def session(compactor: Compactor | None) -> tuple[list[int], list[float], ScriptedModel]:
    """Input tokens sent per turn and seconds per turn."""
    model = ScriptedModel(model_reply)
    builder = (
        al.Agent.builder()
        .model(model)
        .transcript([al.Item.text(al.ItemKind.SYSTEM, "You look records up. " * 20)])
        .add_tool_source(al.ToolRegistry().with_tool(lookup))
    )
    if compactor is not None:
        compactor.install(builder)
    driver = await builder.build().start("bench")
    tokens: list[int] = []
    seconds: list[float] = []
    for number in range(TURNS):
        calls_before = len(model.requests)
        start = time.perf_counter()
        driver.submit_input([al.Item.text(al.ItemKind.USER, f"look up record {number}")])
        while not isinstance(step := await driver.next(), al.Finished):
            assert isinstance(step, al.AfterToolResult), step
        seconds.append(time.perf_counter() - start)
        sent = model.requests[calls_before:]
        tokens.append(sum(estimate_transcript(request.transcript) for request in sent))
    return tokens, seconds, model


def window(values: Sequence[float], turns: range) -> float:
    return statistics.fmean(values[turns.start : turns.stop])


async def run() -> list[Check]:
    compactor = default_compactor(BUDGET)
    tokens, seconds, model = await session(compactor)
    base_tokens, base_seconds, _ = await session(None)
    largest = max(estimate_transcript(request.transcript) for request in model.requests)
    reports = list(compactor.reports)
    outcomes = {
        outcome: sum(r.outcome == outcome for r in reports)
        for outcome in ("compacted", "no_op", "over_budget")
    }
    print(f"{TURNS} turns, 2 model calls each, budget {BUDGET:,} tokens per request")
    print(f"  largest request with compaction:  {largest:>9,} tokens")
    print(f"  compaction passes: {len(reports)} ({outcomes})")
    print("  per turn (mean)                 turns 51-100   turns 451-500   late/early")
    for label, values in (
        ("input tokens, compaction", tokens),
        ("input tokens, no compaction", base_tokens),
    ):
        early, late = window(values, EARLY), window(values, LATE)
        print(f"  {label:<30} {early:>12,.0f}   {late:>13,.0f}   {late / early:>9.2f}x")
    for label, times in (("ms, compaction", seconds), ("ms, no compaction", base_seconds)):
        early, late = window(times, EARLY) * 1000, window(times, LATE) * 1000
        print(f"  {label:<30} {early:>12.2f}   {late:>13.2f}   {late / early:>9.2f}x")
    late_tokens = window(tokens, LATE)
    print(
        f"  turns 451-500 send {late_tokens / window(base_tokens, LATE):.3f}x the tokens "
        "of the same turns without compaction"
    )
    return [
        Check("largest request / budget", largest / BUDGET, 1.0, "x"),
        Check(
            "input tokens per turn, turns 451-500 / 51-100",
            late_tokens / window(tokens, EARLY),
            1.5,
            "x",
        ),
        Check(
            "ms per turn, turns 451-500 / 51-100",
            window(seconds, LATE) / window(seconds, EARLY),
            1.5,
            "x",
        ),
        Check("non-compacted passes", float(len(reports) - outcomes["compacted"]), 0.0, "passes"),
    ]


def main() -> None:
    # The failing lookups log a warning with a traceback each: keep the output to the figures.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    checks = anyio.run(run)
    report("compaction", checks, json_path())


if __name__ == "__main__":
    main()
