"""``parse_source``: ``ast.parse`` of a library file for the tests that read the code.

CPython 3.11 before 3.11.8 keeps the AST constructor's recursion depth in state shared
by the interpreter's threads (gh-106905): while another thread of the test process uses
``ast`` (a server or library running beside the test), a parse can fail with
``SystemError: AST constructor recursion depth mismatch``. That is not the file's fault:
parse again (a handful of times) before letting it fail.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

_ATTEMPTS = 5


def parse_source(path: Path) -> ast.Module:
    """The module ``path`` holds, parsed; retries only CPython 3.11's spurious
    recursion-depth ``SystemError``."""
    text = path.read_text(encoding="utf-8")
    for attempt in range(_ATTEMPTS):
        try:
            return ast.parse(text, filename=str(path))
        except SystemError as error:
            if "recursion depth mismatch" not in str(error) or attempt == _ATTEMPTS - 1:
                raise
            time.sleep(0.01)
    raise AssertionError("unreachable")
