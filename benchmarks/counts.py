"""Repeatable counts for the documented setup (``documented.py``): work per round, not time.

Wall and CPU time move by 10-20 % on a shared machine; these counts do not:

- calls per W1 tool round (cProfile): every call, Python functions only, and
  anyio's own functions; each the difference between a 200-round and a
  100-round turn, over 100;
- with ``--callgrind`` (needs ``valgrind``): instructions per W1 round (two
  processes running three turns of 50 and of 250 rounds after the same warm-up;
  difference / 600) and per W3 session (300 concurrent sessions of 5 rounds
  after a warm-up run, against the warm-up alone; difference / 300), whole
  process, ``PYTHONHASHSEED=0``. W3 moves by a few percent between runs
  (garbage collection over 300 sessions); ``--repeat N`` prints N of each.

``--against REF`` counts the package at git revision REF too (imported as
``agentloop_baseline``, see ``documented.baseline_package``)::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/counts.py --callgrind --against HEAD~3
"""

from __future__ import annotations

import cProfile
import os
import pstats
import re
import subprocess
import sys
from typing import Any

import anyio

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import documented as d  # noqa: E402 - beside this script

W1_ROUNDS = (50, 250)
W1_TURNS = 3
W3_SESSIONS = 300


def setup_for(ref: str | None) -> Any:
    return d.OURS if ref is None else d.Setup(d.baseline_package(ref))


# -- calls (cProfile) ---------------------------------------------------------------------


def _calls(setup: Any, rounds: int) -> dict[tuple[str, int, str], int]:
    profiler = cProfile.Profile()
    profiler.enable()
    anyio.run(d.agentloop_rounds, rounds, setup)
    profiler.disable()
    return {key: value[1] for key, value in pstats.Stats(profiler).stats.items()}


def calls_per_round(setup: Any) -> tuple[float, float, float]:
    """(all calls, Python functions, anyio's functions) per W1 round."""
    anyio.run(d.agentloop_rounds, 10, setup)
    short, long = _calls(setup, 100), _calls(setup, 200)
    every = python = in_anyio = 0.0
    for key, count in long.items():
        extra = (count - short.get(key, 0)) / 100
        every += extra
        if key[0] != "~":
            python += extra
        if f"{os.sep}anyio{os.sep}" in key[0]:
            in_anyio += extra
    return every, python, in_anyio


# -- instructions (callgrind) -------------------------------------------------------------


def _one(kind: str, amount: int, ref: str | None) -> None:
    """The process callgrind counts: W1 turns of ``amount`` rounds, or ``amount`` W3 runs."""
    setup = setup_for(ref)
    if kind == "w1":
        anyio.run(d.agentloop_rounds, 10, setup)
        for _ in range(W1_TURNS):
            anyio.run(d.agentloop_rounds, amount, setup)
    else:
        d.SESSIONS = W3_SESSIONS
        anyio.run(d.w3_untraced, setup)  # warm-up
        for _ in range(amount):
            anyio.run(d.w3_untraced, setup)


def _instructions(kind: str, amount: int, ref: str | None) -> int:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        os.path.abspath(__file__),
        "--one",
        kind,
        str(amount),
        *([ref] if ref is not None else []),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in callgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def instructions(ref: str | None) -> tuple[float, float]:
    """(instructions per W1 round, per W3 session)."""
    short, long = (_instructions("w1", rounds, ref) for rounds in W1_ROUNDS)
    idle, busy = (_instructions("w3", runs, ref) for runs in (0, 1))
    w1 = (long - short) / (W1_TURNS * (W1_ROUNDS[1] - W1_ROUNDS[0]))
    return w1, (busy - idle) / W3_SESSIONS


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--one"]:
        _one(argv[1], int(argv[2]), argv[3] if len(argv) > 3 else None)
        return 0
    refs: list[str | None] = [None]
    if "--against" in argv:
        refs.insert(0, argv[argv.index("--against") + 1])
    repeat = int(argv[argv.index("--repeat") + 1]) if "--repeat" in argv else 1
    for ref in refs:
        name = "this tree" if ref is None else ref
        every, python, in_anyio = calls_per_round(setup_for(ref))
        print(
            f"{name}: calls per W1 round {every:.1f} (Python functions {python:.1f}, "
            f"anyio's {in_anyio:.1f})"
        )
    if "--callgrind" in argv:
        for _ in range(repeat):
            for ref in refs:
                name = "this tree" if ref is None else ref
                w1, w3 = instructions(ref)
                print(f"{name}: instructions per W1 round {w1:,.0f}, per W3 session {w3:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
