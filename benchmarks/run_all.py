"""Run every benchmark in this folder, then print one table of targets.

Each ``*.py`` here except this file and ``_``-prefixed helpers runs in its own
process (so memory figures and warm caches don't leak from one into the
next), in a fixed order: ``run.py``, ``parallel_round.py``,
``many_sessions.py``, ``checkpoint.py``, ``stores.py`` (when present), then
any others by name. A benchmark that uses ``_report`` gets ``--json PATH`` and its checks
join the summary; others only have their output shown. Exits 1 if a
benchmark failed to run (a missed target is reported, not an error: the
machine may be busy).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ORDER = ("run.py", "parallel_round.py", "many_sessions.py", "checkpoint.py", "stores.py")


def benchmarks() -> list[Path]:
    found = {
        path.name: path
        for path in HERE.glob("*.py")
        if not path.name.startswith("_") and path.name != Path(__file__).name
    }
    first = [found.pop(name) for name in ORDER if name in found]
    return first + [found[name] for name in sorted(found)]


def run(path: Path) -> tuple[int, list[dict[str, Any]]]:
    """Run one benchmark, streaming its output; its exit code and reported checks."""
    print(f"\n=== {path.name} ===", flush=True)
    reports = "_report" in path.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as folder:
        result_path = Path(folder) / "checks.json"
        command = [sys.executable, str(path)]
        if reports:
            command += ["--json", str(result_path)]
        code = subprocess.run(command, cwd=HERE.parent, check=False).returncode
        if not reports or not result_path.exists():
            return code, []
        checks: list[dict[str, Any]] = json.loads(result_path.read_text())["checks"]
        return code, checks


def main() -> int:
    rows: list[tuple[str, dict[str, Any] | None]] = []
    failed: list[str] = []
    for path in benchmarks():
        code, checks = run(path)
        if code != 0:
            failed.append(f"{path.name} (exit {code})")
        rows.extend((path.name, check) for check in checks)
        if not checks:
            rows.append((path.name, None))
    print("\n=== summary (best of several repeats; the machine's load adds noise) ===")
    print(f"{'benchmark':<18} {'target':<52} {'measured':>11} {'limit':>9} {'ratio':>6}  result")
    for name, check in rows:
        if check is None:
            print(f"{name:<18} {'(no targets reported; see its output above)':<52}")
            continue
        unit = check["unit"]
        measured = f"{check['measured']:.2f} {unit}"
        limit = f"{check['limit']:g} {unit}"
        ratio = check["measured"] / check["limit"] if check["limit"] else float("inf")
        verdict = "PASS" if check["passed"] else "FAIL"
        print(f"{name:<18} {check['name']:<52} {measured:>11} {limit:>9} {ratio:>6.2f}  {verdict}")
    print("(ratio = measured / limit: at most 1.00 meets the target)")
    if failed:
        print(f"benchmarks that did not run to the end: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
