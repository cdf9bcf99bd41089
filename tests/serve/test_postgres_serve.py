"""The inbox over a real PostgreSQL store: the audit table, a decision, the worker."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from serve_support import TOKEN, build_agent, park_async

from agentloop.serve import AuditEntry, DecisionAction, ServeConfig, Worker, create_app, open_store
from agentloop.store import input_digest

pytestmark = pytest.mark.anyio

DIGEST = input_digest("publish_report", {"path": "/reports/q3.txt"})


async def test_a_decision_over_postgres_is_audited_and_the_session_resumed(
    postgres_uri: str, anyio_backend: str
) -> None:
    session_id = f"pg-{anyio_backend}"
    async with open_store(postgres_uri) as (store, audit):
        await park_async(store, session_id, "/reports/q3.txt")
        app = create_app(
            store,
            config=ServeConfig(token=TOKEN, identity="dana"),
            audit=audit,
            agent=build_agent(store),
        )
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as client:
            page = await client.get("/partials/inbox", headers=headers)
            assert f'data-session="{session_id}"' in page.text
            import re

            full = await client.get("/", headers=headers)
            csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', full.text)
            assert csrf is not None
            response = await client.post(
                "/api/decide",
                json={
                    "session_id": session_id,
                    "call_id": "call-1",
                    "digest": DIGEST,
                    "action": "deny",
                    "reason": "not on a Friday",
                },
                headers={**headers, "x-csrf-token": csrf.group(1)},
            )
            assert response.json()["message"] == "Denied by dana; a worker resumes the session."
        found = await audit.find(session_id, "call-1", approved=False, input_digest=DIGEST)
        assert found is not None
        assert (found.decided_by, found.action, found.reason) == (
            "dana",
            DecisionAction.DENY,
            "not on a Friday",
        )
        assert await Worker(store, build_agent(store)).advance(session_id) is True
        items = await store.transcript(session_id)
        assert items is not None
        assert items[-1].text_content == "Done: not on a Friday"


async def test_the_postgres_audit_log_keeps_removes_and_finds(
    postgres_uri: str, anyio_backend: str
) -> None:
    async with open_store(postgres_uri) as (_, audit):
        when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        entry = AuditEntry(
            session_id=f"audit-{anyio_backend}",
            call_id="c1",
            tool_name="t",
            action=DecisionAction.APPROVE_WITH,
            input_digest="sha256:1",
            decided_by="eve",
            decided_at=when,
            input={"a": [1, "<b>"]},
        )
        await audit.add(entry)
        assert (
            await audit.find(entry.session_id, "c1", approved=True, input_digest="sha256:1")
            == entry
        )
        assert (
            await audit.find(entry.session_id, "c1", approved=False, input_digest="sha256:1")
            is None
        )
        assert entry in await audit.entries()
        await audit.remove(entry)
        assert (
            await audit.find(entry.session_id, "c1", approved=True, input_digest="sha256:1") is None
        )
