"""The ``ag-ui-validate`` conformance validator (its command line, in another process)
on recorded SSE captures of every scenario, and on the live endpoint."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from agui_support import (
    ALLOWED_INFOS,
    HEADERS,
    TOKEN,
    build_agent,
    hypercorn_serving,
    resume,
    run_input,
)

from agentloop.store import MemorySessionStore
from agentloop.ui import AguiConfig, create_agui_app

pytestmark = pytest.mark.anyio

VALIDATOR = str(Path(sys.executable).parent / "ag-ui-validate")
OPEN = "approval:call-1"


def answered(thread: str, payload: Any, status: str = "resolved") -> list[dict[str, Any]]:
    return [
        run_input(thread, "r1", "deploy api"),
        run_input(thread, "r2", resume=resume((OPEN, status, payload))),
    ]


SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "approve": answered("approve", {"approved": True}),
    "edit": answered("edit", {"approved": True, "editedArgs": {"service": "web"}}),
    "deny": answered("deny", {"approved": False, "reason": "no"}),
    "cancel": answered("cancel", None, "cancelled"),
    "two-interrupts": [
        run_input("two", "r1", "deploy api and web"),
        run_input("two", "r2", resume=resume(("approval:call-2", "resolved", {"approved": True}))),
        run_input("two", "r3", resume=resume((OPEN, "resolved", {"approved": False}))),
    ],
    "text-and-reasoning": [run_input("chat", "r1", "hello"), run_input("chat", "r2", "think")],
    "refused": [
        run_input("refused", "r1", "deploy api"),
        run_input(
            "refused", "r2", resume=resume(("approval:nope", "resolved", {"approved": True}))
        ),
        run_input("refused", "r3", "new input while an interrupt is open"),
    ],
}


async def validate(*arguments: str) -> dict[str, Any]:
    """Run the validator's CLI; its JSON report (exit 0 required: no error, no warning)."""
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [VALIDATOR, *arguments, "--json", "--fail-on", "warning"], check=False
        )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    report: dict[str, Any] = json.loads(done.stdout)
    unexpected = [d for d in report["diagnostics"] if d["rule"] not in ALLOWED_INFOS]
    assert unexpected == []
    return report


async def test_every_recorded_scenario_passes_the_validator(tmp_path: Path) -> None:
    store = MemorySessionStore()
    app = create_agui_app(build_agent(store), config=AguiConfig(token=TOKEN))
    async with hypercorn_serving(app) as base, httpx.AsyncClient(base_url=base) as client:
        captures = []
        for name, bodies in SCENARIOS.items():
            for position, body in enumerate(bodies):
                response = await client.post("/", json=body, headers=HEADERS)
                assert response.status_code == 200
                capture = tmp_path / f"{name}-{position}.sse"
                capture.write_bytes(response.content)  # the SSE bytes as sent
                captures.append(capture)
    for capture in captures:
        report = await validate(str(capture))
        assert report["eventCount"] >= 2


async def test_the_live_endpoint_passes_the_validator() -> None:
    store = MemorySessionStore()
    app = create_agui_app(build_agent(store), config=AguiConfig(token=TOKEN))
    async with hypercorn_serving(app) as base:
        report = await validate(base + "/", "--header", f"Authorization: Bearer {TOKEN}")
    assert report["eventCount"] >= 2
