"""The official AG-UI TypeScript client (``@ag-ui/client``, run by node) against the
endpoint on a real hypercorn on 127.0.0.1: a run through an approval, and a deny.

``scripts/install_node_clients.sh`` (run by ``make test``) installs the client into
``tests/ui/node/node_modules``; the test fails, never skips, when it is missing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from agui_support import TOKEN, Deploy, build_agent, hypercorn_serving

from agentloop.store import MemorySessionStore
from agentloop.ui import AguiConfig, create_agui_app

pytestmark = pytest.mark.anyio

NODE_DIR = Path(__file__).parent / "node"


async def drive_with_the_official_client(base: str, scenario: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is not installed (apt-get install -y nodejs npm)"
    assert (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir(), (
        "@ag-ui/client is not installed: run sh scripts/install_node_clients.sh"
    )
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [node, "agui_client.mjs", base + "/", TOKEN, scenario], cwd=NODE_DIR, check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


FIRST = [
    "RUN_STARTED",
    "STEP_STARTED",
    "STEP_FINISHED",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "STATE_SNAPSHOT",
    "RUN_FINISHED",
]


async def test_the_official_client_runs_through_an_approval_and_a_deny() -> None:
    store = MemorySessionStore()
    tool = Deploy()
    app = create_agui_app(build_agent(store, tool), config=AguiConfig(token=TOKEN))
    async with hypercorn_serving(app) as base:
        approved = await drive_with_the_official_client(base, "approve")
        denied = await drive_with_the_official_client(base, "deny")
    for result in (approved, denied):
        assert result["interrupts"] == [
            {"id": "approval:call-1", "reason": "tool_call", "toolCallId": "call-1"}
        ]
        assert result["first"] == FIRST
        assert result["second"][:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
        assert result["second"][-1] == "RUN_FINISHED"
        assert result["pendingAfter"] == 0
    assert tool.ran == [{"service": "api"}]  # the deny ran nothing
    assert approved["messages"] == [
        {
            "id": "user-1",
            "role": "user",
            "content": "deploy api",
            "toolCallId": None,
            "toolCalls": [],
        },
        {
            "id": "agentloop-1",
            "role": "assistant",
            "content": "Deploying.",
            "toolCallId": None,
            "toolCalls": ["deploy"],
        },
        {
            "id": "agentloop-2",
            "role": "tool",
            "content": "deployed api",
            "toolCallId": "call-1",
            "toolCalls": [],
        },
        {
            "id": "agentloop-3",
            "role": "assistant",
            "content": "Result: deployed api",
            "toolCallId": None,
            "toolCalls": [],
        },
    ]
    denial = denied["messages"][2]
    assert denial["role"] == "tool"
    assert denial["content"] == "not today"
    assert denied["messages"][3]["content"] == "Result: not today"
    transcript = await store.transcript("thread-deny")
    assert transcript is not None
    assert [item.kind.value for item in transcript] == ["user", "assistant", "tool", "assistant"]
