"""mypy --strict checks a tool's use of its dependencies and a host's use of the output.

One mypy run over two files: ``typed_use.py`` must pass, ``typed_misuse.py`` must fail
on exactly the lines marked ``# error:``. Hermetic: mypy runs in-process on files of
this directory, with the project's configuration.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def marked_lines(path: Path) -> set[int]:
    lines = path.read_text().splitlines()
    return {number for number, line in enumerate(lines, 1) if "# error:" in line}


def test_mypy_accepts_the_typed_use_and_rejects_each_misuse() -> None:
    good, bad = HERE / "typed_use.py", HERE / "typed_misuse.py"
    stdout, stderr, _status = mypy_api.run(
        ["--strict", "--config-file", str(ROOT / "pyproject.toml"), str(good), str(bad)]
    )
    assert stderr == ""
    errors = re.findall(r"^(.+?):(\d+): error: (.*)$", stdout, re.MULTILINE)
    assert [e for e in errors if Path(e[0]).name == "typed_use.py"] == []
    flagged = {int(line) for file, line, _ in errors if Path(file).name == "typed_misuse.py"}
    assert flagged == marked_lines(bad), stdout
