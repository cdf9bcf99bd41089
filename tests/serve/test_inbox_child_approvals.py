"""A child agent's approval (``Agent.as_tool``) in the inbox, over HTTP: its card shows
the child's tool, arguments and path; ``POST /api/answer`` approves, edits (checked
against the child's tool's schema) or denies it as ``/api/decide`` does a top-level
call, recorded as the parent call's question answer (single use); a worker resuming the
session goes on from it. A bad answer records nothing. Both anyio backends."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from child_agents import Echo, parent_agent
from serve_support import TOKEN

import agentloop as al
import agentloop.agents
import agentloop.host
import agentloop.model
import agentloop.permissions
import agentloop.tasks
import agentloop.testing
from agentloop.serve import MemoryAuditLog, ServeConfig, create_app
from agentloop.store import SessionStatus, SqliteSessionStore

pytestmark = pytest.mark.anyio

ORIGIN = "http://127.0.0.1:8765"
QUESTION = "question:p-1:1"


async def advance(store: SqliteSessionStore, echo: Echo, owner: str) -> Any:
    async with parent_agent(store, echo) as agent:
        worker = al.host.SessionWorker(store=store, agent=agent, owner=owner, ttl=30)
        return await worker.advance("s1")


class Inbox:
    def __init__(self, store: SqliteSessionStore, client: httpx.AsyncClient) -> None:
        self.store, self.client, self.csrf, self.ref = store, client, "", ""

    async def sign_in(self) -> str:
        assert (await self.client.get(f"/?token={TOKEN}")).status_code == 303
        page = await self.client.get("/")
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text)
        ref = re.search(r'data-question-ref="(ref-[0-9a-f]+)"', page.text)
        assert csrf is not None
        assert ref is not None
        self.csrf, self.ref = csrf.group(1), ref.group(1)
        return page.text

    async def answer(self, **body: Any) -> httpx.Response:
        body = {"session_id": "s1", "question_ref": self.ref, **body}
        headers = {"x-csrf-token": self.csrf, "origin": ORIGIN}
        return await self.client.post("/api/answer", json=body, headers=headers)


@asynccontextmanager
async def inbox_for(tmp_path: Path, echo: Echo) -> AsyncIterator[Inbox]:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        async with parent_agent(store, echo) as agent:
            driver = await agent.start("s1")
            driver.submit_input("start")
            await driver.save()
        parked = await advance(store, echo, "w0")
        assert isinstance(parked.step, al.agents.ChildApprovalRequest)
        config = ServeConfig(token=TOKEN, identity="alice", worker=False)
        async with parent_agent(store, echo) as agent:
            app = create_app(store, config=config, audit=MemoryAuditLog(), agent=agent)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
                yield Inbox(store, client)


async def test_the_card_shows_the_childs_call_its_arguments_and_path(tmp_path: Path) -> None:
    echo = Echo()
    async with inbox_for(tmp_path, echo) as inbox:
        page = await inbox.sign_in()
    assert 'data-mode="approval"' in page
    assert (
        '<span class="child-tool">echo</span> (call <code>c-1</code>, in '
        '<code class="child-path">helper:p-1</code>): sensitive_path'
    ) in page
    assert '<pre class="arguments">{\n  &#34;value&#34;: &#34;x&#34;\n}</pre>' in page
    assert echo.inputs == []


@pytest.mark.parametrize(
    ("body", "ran", "text"),
    [
        ({"action": "approve"}, [{"value": "x"}], "parent: child: echoed x"),
        ({"action": "approve_with", "input": '{"value": "y"}'}, [{"value": "y"}], "echoed y"),
        ({"action": "deny", "reason": "no reads"}, [], "parent: child: "),
    ],
)
async def test_an_answer_goes_to_the_child_when_a_worker_resumes(
    tmp_path: Path, body: dict[str, Any], ran: list[Any], text: str
) -> None:
    echo = Echo()
    async with inbox_for(tmp_path, echo) as inbox:
        await inbox.sign_in()
        response = await inbox.answer(**body)
        assert response.status_code == 200
        assert response.json()["ok"] is True
        again = await inbox.answer(action="approve")
        assert again.status_code == 409
        assert again.json()["error"] == "this question was already answered; nothing was changed"
        recorded = (await inbox.store.load("s1")).answers[QUESTION]  # type: ignore[union-attr]
        assert recorded.action == "accept"
        advanced = await advance(inbox.store, echo, "w1")
        transcript = await inbox.store.transcript("s1")
    assert isinstance(advanced.step, al.Finished)
    assert echo.inputs == ran
    assert transcript is not None
    assert transcript[-1].text_content.startswith("parent: child: ")
    assert text in transcript[-1].text_content


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            {"action": "accept", "content": {"kind": "approve_with", "input": {"value": 3}}},
            "refused: a child agent's approval is answered with action approve, approve_with "
            "or deny; got 'accept'; nothing was recorded",
        ),
        (
            {"action": "approve_with", "input": '{"value": 3}'},
            "refused: the edited arguments do not match the tool's schema: at value: 3 is not "
            "of type 'string'; nothing was recorded",
        ),
        (
            {"action": "approve_with", "input": "{nope"},
            "refused: the edited arguments are not JSON: Expecting property name enclosed in "
            "double quotes at line 1 column 2; nothing was recorded",
        ),
        (
            {"action": "deny", "input": '{"value": "y"}'},
            "refused: input goes with action approve_with only, not deny; nothing was recorded",
        ),
        (
            {"action": "deny", "reason": "x" * 2001},
            "refused: reason must be a string of at most 2000 characters; nothing was recorded",
        ),
    ],
)
async def test_a_bad_answer_records_nothing(
    tmp_path: Path, body: dict[str, Any], error: str
) -> None:
    echo = Echo()
    async with inbox_for(tmp_path, echo) as inbox:
        await inbox.sign_in()
        before = await inbox.store.load("s1")
        response = await inbox.answer(**body)
        assert response.status_code == 422
        assert response.json()["error"] == error
        after = await inbox.store.load("s1")
        assert before is not None
        assert after is not None
        assert after.answers == {}
        assert after.version == before.version
        assert after.status is SessionStatus.AWAITING_ANSWER
        assert (await inbox.answer(action="approve")).status_code == 200
        await advance(inbox.store, echo, "w1")
    assert echo.inputs == [{"value": "x"}]
