"""Targets and how benchmarks hand their figures to ``run_all.py``.

A benchmark run with ``--json PATH`` writes ``{"benchmark": name, "checks": [...]}``
to PATH, one check per target: what was measured, the limit, and pass/fail.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import attrs


@attrs.frozen
class Check:
    """One target: ``measured`` must be at most ``limit`` (both in ``unit``)."""

    name: str
    measured: float
    limit: float
    unit: str
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.measured <= self.limit

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (
            f"{self.name}: {self.measured:.2f} {self.unit} "
            f"(target <= {self.limit:g} {self.unit}) {verdict}"
        )


def json_path(argv: Sequence[str] = sys.argv[1:]) -> str | None:
    """The PATH of a ``--json PATH`` argument, if given."""
    if "--json" not in argv:
        return None
    index = list(argv).index("--json")
    if index + 1 >= len(argv):
        raise SystemExit("--json needs a file path")
    return argv[index + 1]


def report(benchmark: str, checks: Sequence[Check], path: str | None) -> None:
    """Print each check; write them as JSON to ``path`` when given."""
    for check in checks:
        print(f"  {check.line()}")
    if path is None:
        return
    document = {
        "benchmark": benchmark,
        "checks": [
            {
                "name": c.name,
                "measured": c.measured,
                "limit": c.limit,
                "unit": c.unit,
                "passed": c.passed,
                "note": c.note,
            }
            for c in checks
        ],
    }
    with open(path, "w", encoding="utf-8") as file:
        json.dump(document, file, indent=2)
