"""A call in doubt (``CallInDoubt``, the agent built with ``ask_in_doubt()``) over AG-UI:
a run that restores a session killed mid-call ends in RUN_FINISHED with a
``call_in_doubt`` interrupt; a run with ``resume`` settles, fails or runs it again
(checked first: a bad entry is RUN_ERROR ``bad_resume`` and nothing changes). In process
(httpx's ASGI transport), on both anyio backends, each stream checked by ag-ui-validate;
and the official ``@ag-ui/client`` (node) on a real hypercorn."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from agui_support import (
    TOKEN,
    assert_conformant,
    hypercorn_serving,
    post_run,
    resume,
    run_input,
    types,
)
from in_doubt_agents import Pay, crash_mid_call, park_in_doubt, pay_agent

from agentloop.store import MemorySessionStore, SessionStatus
from agentloop.tools._tool import idempotency_key
from agentloop.ui import AguiConfig, create_agui_app
from agentloop.ui._in_doubt import RESOLUTION_SCHEMA

pytestmark = pytest.mark.anyio

INTERRUPT = "in_doubt:call-pay"
REASON = (
    "it started before the session was restored and left no result, and its tool could "
    "not tell what it came to (no reconcile, or reconcile returned None)"
)


@asynccontextmanager
async def thread_client(store: MemorySessionStore, tool: Pay) -> AsyncIterator[httpx.AsyncClient]:
    app = create_agui_app(pay_agent(store, tool), config=AguiConfig(token=TOKEN))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


def texts(stored: Any) -> list[str]:
    return [
        part.get("text") or str(part.get("output"))
        for item in stored.checkpoint["transcript"]
        for part in item["parts"]
        if part["type"] in ("text", "tool_result")
    ]


async def test_a_restored_call_in_doubt_ends_the_run_with_its_interrupt() -> None:
    store, tool = MemorySessionStore(), Pay()
    await crash_mid_call(store, "t1")
    async with thread_client(store, tool) as client:
        events = await post_run(client, run_input("t1", "r2"))
    assert_conformant(events)
    assert types(events)[-1] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {
        "type": "interrupt",
        "interrupts": [
            {
                "id": INTERRUPT,
                "reason": "call_in_doubt",
                "message": f"call call-pay is in doubt: {REASON}",
                "toolCallId": "call-pay",
                "responseSchema": RESOLUTION_SCHEMA,
                "metadata": {
                    "agentloop": {
                        "toolName": "pay",
                        "input": {"amount": 42},
                        "idempotencyKey": idempotency_key("t1", "call-pay"),
                        "reruns": 0,
                    }
                },
            }
        ],
    }
    stored = await store.load("t1")
    assert stored is not None
    assert stored.status is SessionStatus.AWAITING_RESOLUTION
    assert tool.runs == 0


@pytest.mark.parametrize(
    ("payload", "last", "runs"),
    [
        ({"resolution": "settle", "result": "paid by hand"}, "done: paid by hand", 0),
        (
            {"resolution": "fail", "reason": "no such payment"},
            "error result: failed: no such payment",
            0,
        ),
        ({"resolution": "run_again"}, "done: paid 42 again ({key})", 1),
    ],
)
async def test_a_resume_entry_resolves_the_call_and_the_run_goes_on(
    payload: dict[str, Any], last: str, runs: int
) -> None:
    store, tool = MemorySessionStore(), Pay()
    await park_in_doubt(store, "t1")
    async with thread_client(store, tool) as client:
        events = await post_run(
            client, run_input("t1", "r2", resume=resume((INTERRUPT, "resolved", payload)))
        )
        assert_conformant(events)
        assert types(events)[-1] == "RUN_FINISHED"
        assert events[-1].get("outcome") is None
        again = await post_run(
            client, run_input("t1", "r3", resume=resume((INTERRUPT, "resolved", payload)))
        )
        assert (types(again)[-1], again[-1]["code"]) == ("RUN_ERROR", "unknown_interrupt")
    stored = await store.load("t1")
    assert stored is not None
    assert texts(stored)[-1] == last.format(key=idempotency_key("t1", "call-pay"))
    assert stored.status is SessionStatus.AWAITING_INPUT
    assert tool.runs == runs


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            (INTERRUPT, "cancelled", None),
            f"resume[0]: interrupt {INTERRUPT!r}: a call in doubt cannot be cancelled (it may "
            "have done its work): resolve it with status resolved and payload {resolution: "
            "settle | fail | run_again}; nothing was changed",
        ),
        (
            (INTERRUPT, "resolved", {"resolution": "forget"}),
            f"resume[0]: interrupt {INTERRUPT!r}: the payload must be an object whose "
            "resolution is settle, fail or run_again; got {'resolution': 'forget'}; nothing "
            "was changed",
        ),
        (
            (INTERRUPT, "resolved", {"resolution": "settle"}),
            f"resume[0]: interrupt {INTERRUPT!r}: settle needs result: what the call "
            "returned; nothing was changed",
        ),
        (
            (INTERRUPT, "resolved", {"resolution": "fail", "reason": " "}),
            f"resume[0]: interrupt {INTERRUPT!r}: fail needs reason: non-empty text; nothing "
            "was changed",
        ),
        (
            (INTERRUPT, "resolved", {"resolution": "run_again", "result": "x"}),
            f"resume[0]: interrupt {INTERRUPT!r}: run_again takes no result; nothing was changed",
        ),
    ],
)
async def test_a_bad_resolution_is_refused_and_changes_nothing(
    entry: tuple[str, str, Any], message: str
) -> None:
    store, tool = MemorySessionStore(), Pay()
    await park_in_doubt(store, "t1")
    before = await store.load("t1")
    async with thread_client(store, tool) as client:
        events = await post_run(client, run_input("t1", "r2", resume=resume(entry)))
        assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
        assert (events[-1]["code"], events[-1]["message"]) == ("bad_resume", message)
        assert_conformant(events)
        new_input = await post_run(client, run_input("t1", "r3", "something else"))
        assert new_input[-1]["code"] == "interrupt_open"
        assert new_input[-1]["message"] == (
            f"thread 't1' has open interrupts ({INTERRUPT}); new messages cannot be sent "
            "until they are answered: send a run with resume entries for them and no new "
            "messages. Nothing was changed"
        )
    assert await store.load("t1") == before
    assert tool.runs == 0


async def test_the_official_client_settles_a_call_in_doubt() -> None:
    """``@ag-ui/client`` (node) on a real hypercorn: the interrupt as the client reads it,
    and its resume entry settling the call."""
    node = shutil.which("node")
    folder = Path(__file__).parent / "node"
    assert node is not None, "node is not installed (apt-get install -y nodejs npm)"
    assert (folder / "node_modules" / "@ag-ui" / "client").is_dir(), (
        "@ag-ui/client is not installed: run sh scripts/install_node_clients.sh"
    )
    store, tool = MemorySessionStore(), Pay()
    await crash_mid_call(store, "thread-doubt")
    app = create_agui_app(pay_agent(store, tool), config=AguiConfig(token=TOKEN))
    async with hypercorn_serving(app) as base:
        with anyio.fail_after(60):
            done = await anyio.run_process(
                [node, "agui_in_doubt_client.mjs", base + "/", TOKEN, "thread-doubt"],
                cwd=folder,
                check=False,
            )
    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout)
    assert result["interrupts"] == [
        {
            "id": INTERRUPT,
            "reason": "call_in_doubt",
            "toolCallId": "call-pay",
            "responseSchema": RESOLUTION_SCHEMA,
        }
    ]
    assert result["first"][-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
    assert result["second"][:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert (result["second"][-1], result["pendingAfter"]) == ("RUN_FINISHED", 0)
    assert result["last"] == "done: paid by hand"
    assert tool.runs == 0
