"""The ``agentloop`` command (needs the ``[cli]`` extra: ``pip install 'agentloop[cli]'``).

``agentloop demo [--scripted] [--yes]``, ``agentloop chat [...]`` and
``agentloop replay session.jsonl``; see ``docs/cli.md``. Only this package
imports rich.
"""

try:
    import rich  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("the agentloop command needs rich: pip install 'agentloop[cli]'") from error

from ._main import main

__all__ = ["main"]
