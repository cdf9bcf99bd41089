"""A build's progress as one line per step: compile steps as a percentage with the time left.

The compilers' output is turned into ``compiling 42% [81/193], 1m20s so far,
about 1m50s left`` (ninja's ``[81/193]`` counters or make's ``[ 42%]``); pip's
outcome lines pass through; everything else stays in the build log only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import attrs

__all__ = ["Progress", "ProgressMeter", "ignore"]

Progress = Callable[[str], None]
"""Receives one human-readable line per build step."""

_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]")  # ninja
_PERCENT = re.compile(r"^\s*\[\s*(\d+)%\]")  # make


def ignore(_line: str) -> None:
    """The ``Progress`` of a caller that wants no lines."""
    return None


@attrs.define
class ProgressMeter:
    """Turns compiler output into ``compiling 42% [81/193], 1m20s so far, about 1m50s left``.

    One line per whole percent; the estimate extrapolates the time since the
    first compile step and is given from 5% on. pip's outcome lines
    (``Successfully ...``, ``ERROR ...``) pass through.
    """

    clock: Callable[[], float] = time.monotonic
    first_step: float | None = None
    last_percent: int = -1

    def line(self, line: str) -> str | None:
        """The progress line to show for one line of build output, or ``None``."""
        step = _STEP.match(line)
        percent_line = _PERCENT.match(line)
        if step is not None:
            done, total = int(step.group(1)), int(step.group(2))
            fraction = done / total if total else 0.0
            counter = f" [{done}/{total}]"
        elif percent_line is not None:
            fraction = int(percent_line.group(1)) / 100
            counter = ""
        else:
            if line.startswith(("Successfully", "ERROR")):
                return line.rstrip()
            return None
        now = self.clock()
        if self.first_step is None:
            self.first_step = now
        percent = min(int(fraction * 100), 100)
        if percent <= self.last_percent:
            return None
        self.last_percent = percent
        elapsed = now - self.first_step
        shown = f"compiling {percent}%{counter}, {_duration(elapsed)} so far"
        if percent >= 100:
            return shown
        if fraction >= 0.05 and elapsed > 0:
            return f"{shown}, about {_duration(elapsed * (1 - fraction) / fraction)} left"
        return f"{shown}, estimating the time left"


def _duration(seconds: float) -> str:
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    return f"{whole // 60}m{whole % 60:02d}s"
