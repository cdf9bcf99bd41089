"""The size limits of a request: body bytes and JSON nesting (no framework imports)."""

from __future__ import annotations

import re

__all__ = ["MAX_BODY", "MAX_DEPTH", "depth_problem"]

MAX_BODY = 1024 * 1024
"""The largest request body accepted, in bytes (a decision is a few hundred)."""

MAX_DEPTH = 32
"""How deeply a decision's JSON (and edited arguments) may nest."""

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def depth_problem(text: str, what: str) -> str | None:
    """Why ``text`` (JSON) nests too deeply to parse safely, or ``None``.

    Counts brackets outside strings without parsing, so a malicious value
    never reaches the recursive parser.
    """
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return (
                    f"JSON nested more than {MAX_DEPTH} levels deep in {what}; "
                    f"send at most {MAX_DEPTH} levels of arrays and objects"
                )
        elif token in "]}":
            depth -= 1
    return None
