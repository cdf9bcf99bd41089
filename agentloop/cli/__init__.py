"""The ``agentloop`` command (needs the ``[cli]`` extra: ``pip install 'agentloop-runtime[cli]'``).

``agentloop demo [--scripted] [--yes]``, ``agentloop chat [...]`` and
``agentloop replay FILE``; see ``docs/cli.md``. Only this package imports
rich, and only when the command runs: without the extra, ``main()`` prints
one line saying what to install.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from ._terminal import ReadLine

__all__ = ["main"]

MISSING_EXTRA = (
    "agentloop: the command needs the cli extra: pip install 'agentloop-runtime[cli]' "
    "(in a clone: pip install '.[cli]')"
)


def main(
    argv: Sequence[str] | None = None,
    *,
    console: Console | None = None,
    read_line: ReadLine | None = None,
) -> int:
    """Run the ``agentloop`` command; returns the exit status (see docs/cli.md)."""
    try:
        import rich  # noqa: F401
    except ImportError:
        print(MISSING_EXTRA, file=sys.stderr)
        return 2
    from ._main import main as run

    return run(argv, console=console, read_line=read_line)
