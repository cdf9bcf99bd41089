"""Run by tests/test_user_install.py inside a user's venv (``python -I``): what imports there.

Prints one JSON object: where agentloop was imported from, every module of the
installed package that does not import (with the top-level module it missed, or
the error), a scripted turn's outcome, and the messages of the entry points
whose extras may be missing. Standard library and agentloop only.
"""

from __future__ import annotations

import importlib
import json
import pathlib
import sys


def _modules(root: pathlib.Path) -> dict[str, str]:
    failed: dict[str, str] = {}
    for file in sorted(root.rglob("*.py")):
        parts = list(file.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:
            failed[name] = f"missing {(error.name or '?').partition('.')[0]}"
        except Exception as error:
            failed[name] = f"{type(error).__name__}: {error}"
    return failed


def _turn() -> dict[str, object]:
    import anyio

    import agentloop as al
    import agentloop.testing
    import agentloop.tools

    @al.tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    def agent(*replies: object) -> al.Agent:
        return (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(list(replies)))  # type: ignore[arg-type]
            .add_tool_source(al.ToolRegistry().with_tool(add))
            .build()
        )

    from agentloop.testing import call, chunked, tool_calls

    result = al.run_sync(agent(tool_calls(call("add", {"a": 2, "b": 40})), "42"), "2 + 40?")

    async def streamed() -> list[str]:
        async with al.stream(agent(chunked("It is ", "42.")), "2 + 40?") as events:
            return [text async for text in events.text_deltas()]

    return {
        "final_text": result.final_text,
        "kinds": [item.kind.value for item in result.transcript],
        "deltas": anyio.run(streamed),
    }


def _message(code: str) -> str:
    try:
        exec(code, {})
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "ok"


ENTRY_POINTS = {
    "cli": "import agentloop.cli._main",  # the public agentloop.cli.main says it in one line
    "postgres": "from agentloop.store import PostgresSessionStore as P; "
    "P('postgresql://me@127.0.0.1:1/db')",
    "redis": "from agentloop.store import RedisSessionStore as R; R('redis://127.0.0.1:1/0')",
    "otel": "from agentloop.observe import OtelObserver",
    "testing": "from agentloop.testing import transcripts",
    "mcp": "import agentloop.mcp",
    "dbos": "import agentloop.durable.dbos",
    "serve": "from agentloop.serve import create_app; "
    "from agentloop.store import MemorySessionStore; create_app(MemorySessionStore())",
    "agui": "import agentloop as al; from agentloop.store import MemorySessionStore; "
    "from agentloop.ui import create_agui_app; create_agui_app(al.Agent.builder()"
    ".model(al.testing.ScriptedModel(['hi'])).store(MemorySessionStore()).build())",
    "a2a": "import agentloop as al; from agentloop.store import MemorySessionStore; "
    "from agentloop.a2a import A2AConfig, create_a2a_app; create_a2a_app(al.Agent.builder()"
    ".model(al.testing.ScriptedModel(['hi'])).store(MemorySessionStore()).build(), "
    "config=A2AConfig(url='http://127.0.0.1:1/'))",
}


def main() -> None:
    import agentloop

    root = pathlib.Path(agentloop.__file__).parent
    report = {
        "agentloop": str(root),
        "prefix": sys.prefix,
        "failed": _modules(root),
        "entry_points": {name: _message(code) for name, code in ENTRY_POINTS.items()},
    }
    if "--turn" in sys.argv:
        report["turn"] = _turn()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
