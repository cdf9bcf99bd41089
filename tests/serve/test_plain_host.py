"""A decision made in the inbox is applied exactly by any process resuming the session.

The reason of a denial and the edited arguments of an approval are stored with
the decision in the session store, so a separate plain host process (no serve
code, no audit log) that resumes the session applies them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from serve_support import TOKEN, build_agent, park_async

import agentloop as al
from agentloop.serve import ServeConfig, SqliteAuditLog, create_app
from agentloop.store import SqliteSessionStore, input_digest

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ASKED = {"path": "/reports/q3.txt"}


async def decide(client: httpx.AsyncClient, csrf: str, session_id: str, **body: str) -> str:
    response = await client.post(
        "/api/decide",
        json={
            "session_id": session_id,
            "call_id": "call-1",
            "digest": input_digest("publish_report", ASKED),
            **body,
        },
        headers={"x-csrf-token": csrf},
    )
    assert response.status_code == 200, response.text
    message: str = response.json()["message"]
    return message


def resume_in_a_plain_host(database: Path, backend: str, *session_ids: str) -> list[dict[str, str]]:
    done = subprocess.run(
        [sys.executable, str(HERE / "plain_host.py"), str(database), backend, *session_ids],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}"},
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


async def test_a_plain_host_applies_the_reason_and_the_edit_recorded_by_serve(
    tmp_path: Path, anyio_backend: str
) -> None:
    database = tmp_path / "sessions.db"
    async with SqliteSessionStore(database) as store:
        for session_id in ("denied", "edited", "approved"):
            await park_async(store, session_id, ASKED["path"])
        config = ServeConfig(token=TOKEN, identity="alice", worker=False)
        app = create_app(
            store, config=config, audit=SqliteAuditLog(database), agent=build_agent(store)
        )
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://127.0.0.1",
            headers={"authorization": f"Bearer {TOKEN}"},
        ) as client:
            page = await client.get("/")
            found = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text)
            assert found is not None
            csrf = found.group(1)
            waiting = "waiting for an external worker to resume the session."
            assert await decide(
                client, csrf, "denied", action="deny", reason="not before the audit <b>"
            ) == (f"Denied by alice; {waiting}")
            assert await decide(
                client, csrf, "edited", action="approve_with", input='{"path": "/reports/v2.txt"}'
            ) == (f"Approved with edited arguments by alice; {waiting}")
            assert await decide(client, csrf, "approved", action="approve") == (
                f"Approved by alice; {waiting}"
            )
        stored = await store.load("edited")
        assert stored is not None
        approval = stored.approvals["call-1"]
        assert (approval.approved, approval.edited_input, approval.reason) == (
            True,
            {"path": "/reports/v2.txt"},
            None,
        )
        assert approval.input_digest == input_digest("publish_report", {"path": "/reports/v2.txt"})

    outcomes = resume_in_a_plain_host(database, anyio_backend, "denied", "edited", "approved")

    assert outcomes == [
        {
            "session_id": "denied",
            "step": "Finished",
            "state": "IDLE",
            "result": "not before the audit <b>",
            "is_error": True,
            "answer": "Done: not before the audit <b>",
        },
        {
            "session_id": "edited",
            "step": "Finished",
            "state": "IDLE",
            "result": "published /reports/v2.txt",
            "is_error": False,
            "answer": "Done: published /reports/v2.txt",
        },
        {
            "session_id": "approved",
            "step": "Finished",
            "state": "IDLE",
            "result": "published /reports/q3.txt",
            "is_error": False,
            "answer": "Done: published /reports/q3.txt",
        },
    ]
    async with SqliteSessionStore(database) as store:
        edited = await store.transcript("edited")
        assert edited is not None
        # The transcript keeps the model's original arguments; the call ran with the edit.
        call = next(p for p in edited[1].parts if isinstance(p, al.ToolCallPart))
        assert call.input == ASKED
        assert [s.session_id for s in await store.sessions_ready()] == []
        assert await store.sessions_awaiting_approval() == []
