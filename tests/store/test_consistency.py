"""The store-level consistency check: a stored status that disagrees with its transcript
is reported (``session_problems``, ``find_session_problems``, the worker, the inbox),
never silently parked; a session an older agentloop stranded is continued.

Every session here is made by a real driver and then damaged the way a crash, an
older version or a hand-edited store would leave it. On the memory store and
SQLite, on both anyio backends.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

import agentloop as al
import agentloop.host
import agentloop.model
import agentloop.permissions
import agentloop.testing
import agentloop.tools
from agentloop.serve import MemoryAuditLog, ServeConfig, create_app
from agentloop.store import (
    MemorySessionStore,
    SessionStatus,
    SessionStore,
    SqliteSessionStore,
    StoredSession,
    find_session_problems,
    session_problems,
)
from agentloop.testing import call, fail, tool_calls

pytestmark = pytest.mark.anyio

TOKEN = "consistency-token-0123456789"
OPEN_TURN = (
    "its state is IDLE but turn 'turn-1' is open: saved before its next model call, it "
    "waits for a worker to continue it (restored, it continues)"
)
UNANSWERED = (
    "it awaits input but its transcript ends in tool results the model never answered "
    "(a turn ended at a limit, or was cut short): submit input, or continue_turn() to let "
    "the model answer them"
)


class Killed(BaseException):
    """The worker process died (during the model call after the tool round)."""


class Pay:
    spec = al.ToolSpec("pay", "Pay the bill.", {"type": "object"})

    def __init__(self) -> None:
        self.runs = 0

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.runs += 1
        return "paid"


class AskFirst:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if isinstance(request, al.permissions.ToolInvocation):
            return al.permissions.AskApproval("confirm", request.summary)
        return al.permissions.Allow()


def agent(store: SessionStore, pay: Pay, *, die: bool = False) -> al.Agent:
    def reply(request: al.model.TurnRequest) -> Any:
        if request.transcript[-1].kind is al.ItemKind.USER:
            return tool_calls(call("pay", {}, id="call-1"))
        if die:
            return fail(Killed())
        return "the bill is paid"

    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(reply))
        .add_tool_source(al.ToolRegistry().with_tool(pay))
        .permissions(AskFirst())
        .store(store)
        .build()
    )


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        yield MemorySessionStore()
        return
    async with SqliteSessionStore(tmp_path / "consistency.db") as opened:
        yield opened


async def killed_after_the_round(store: SessionStore, pay: Pay, session_id: str) -> None:
    """Approve the call; the worker dies while the model answers its result."""
    driver = await agent(store, pay, die=True).start(session_id)
    driver.submit_input([al.Item.text(al.ItemKind.USER, "pay the bill")])
    pending = await driver.next()
    assert isinstance(pending, al.ApprovalRequest)
    pending.approve()
    with pytest.raises(Killed):
        await driver.next()


async def finished(store: SessionStore, pay: Pay, session_id: str) -> dict[str, Any]:
    driver = await agent(store, pay).start(session_id)
    driver.submit_input([al.Item.text(al.ItemKind.USER, "pay the bill")])
    pending = await driver.next()
    assert isinstance(pending, al.ApprovalRequest)
    pending.approve()
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    stored = await store.load(session_id)
    assert stored is not None
    return copy.deepcopy(stored.checkpoint)


async def overwrite(store: SessionStore, session_id: str, document: dict[str, Any]) -> None:
    stored = await store.load(session_id)
    assert stored is not None
    await store.save_checkpoint(session_id, document, expected_version=stored.version)


async def problems_of(store: SessionStore, session_id: str) -> tuple[str, ...]:
    stored = await store.load(session_id)
    assert stored is not None
    return session_problems(stored)


# -- the session an older agentloop stranded ---------------------------------------------


async def test_a_session_saved_idle_with_its_turn_open_is_reported_ready_and_continued(
    store: SessionStore,
) -> None:
    pay = Pay()
    await killed_after_the_round(store, pay, "s1")
    stored = await store.load("s1")
    assert stored is not None
    assert session_problems(stored) == ()  # what this agentloop saves is consistent
    # What an older agentloop then saved: restored IDLE, next() -> AwaitingInput.
    await overwrite(store, "s1", {**copy.deepcopy(stored.checkpoint), "state": "IDLE"})
    assert await problems_of(store, "s1") == (OPEN_TURN,)
    assert [s.session_id for s in await store.sessions_ready()] == ["s1"]
    found = await find_session_problems(store)
    assert [(p.session_id, p.status, p.problems) for p in found] == [
        ("s1", SessionStatus.READY, (OPEN_TURN,))
    ]

    worker = al.host.SessionWorker(store=store, agent=agent(store, pay), owner="w1", ttl=5)
    advanced = await worker.run_once()
    assert advanced is not None
    assert isinstance(advanced.step, al.Finished)
    assert advanced.step.result.items[-1].text_content == "the bill is paid"
    assert advanced.problems == ()
    assert pay.runs == 1  # the call's saved result is kept, never run again
    assert await problems_of(store, "s1") == ()
    assert await find_session_problems(store) == []


# -- each kind of disagreement ------------------------------------------------------------


def _damaged(document: dict[str, Any], damage: str) -> dict[str, Any]:
    document = copy.deepcopy(document)
    transcript = document["transcript"]
    if damage == "results never answered":  # the model's answer is gone
        document["transcript"] = transcript[:-1]
    elif damage == "a call without a result":  # the call's result is gone too
        document["transcript"] = transcript[:-2]
    elif damage == "after tool result without a turn":
        document["state"] = "AFTER_TOOL_RESULT"
    elif damage == "approval without a turn":
        document["state"] = "AWAITING_APPROVAL"
    return document


@pytest.mark.parametrize(
    ("damage", "expected", "status"),
    [
        ("results never answered", (UNANSWERED,), SessionStatus.AWAITING_INPUT),
        (
            "a call without a result",
            ("call call-1 has no result and no open round answers it",),
            SessionStatus.AWAITING_INPUT,
        ),
        (
            "after tool result without a turn",
            ("its state is AFTER_TOOL_RESULT but no turn is open",),
            SessionStatus.READY,
        ),
        (
            "approval without a turn",
            ("its state is AWAITING_APPROVAL but no turn is open",),
            SessionStatus.AWAITING_APPROVAL,
        ),
    ],
)
async def test_each_disagreement_is_named(
    store: SessionStore, damage: str, expected: tuple[str, ...], status: SessionStatus
) -> None:
    document = await finished(store, Pay(), "s1")
    await overwrite(store, "s1", _damaged(document, damage))
    assert await problems_of(store, "s1") == expected
    found = await find_session_problems(store)
    assert [(p.session_id, p.status, p.problems) for p in found] == [("s1", status, expected)]


async def test_an_approval_state_whose_round_asks_nothing_is_named(store: SessionStore) -> None:
    driver = await agent(store, Pay()).start("s1")
    driver.submit_input([al.Item.text(al.ItemKind.USER, "pay the bill")])
    assert isinstance(await driver.next(), al.ApprovalRequest)
    stored = await store.load("s1")
    assert stored is not None
    assert session_problems(stored) == ()
    document = copy.deepcopy(stored.checkpoint)
    for entry in document["turn"]["round"]["calls"]:
        entry["status"] = "unstarted"
    await overwrite(store, "s1", document)
    assert await problems_of(store, "s1") == (
        "its state is AWAITING_APPROVAL but no call of its round waits for approval",
    )


def stored_session(checkpoint: Any, status: SessionStatus) -> StoredSession:
    return StoredSession(
        session_id="s1",
        checkpoint=checkpoint,
        started_calls=frozenset(),
        updated_at=datetime.now(UTC),
        status=status,
    )


@pytest.mark.parametrize(
    ("state", "listed", "reads"),
    [
        ("AFTER_TOOL_RESULT", SessionStatus.AWAITING_INPUT, "ready"),
        ("IDLE", SessionStatus.READY, "awaiting_input"),
        ("IDLE", SessionStatus.AWAITING_APPROVAL, "awaiting_input"),
    ],
)
def test_a_status_the_document_does_not_read_is_named(
    state: str, listed: SessionStatus, reads: str
) -> None:
    document = {"state": state, "turn": {"turn_id": "t", "round": None, "interrupted": True}}
    if state == "IDLE":
        document["turn"] = None
    problems = session_problems(stored_session(document, listed))
    assert problems[0] == (
        f"the store lists it as {listed.value!r} but its document reads {reads!r} (state {state!r})"
    )


@pytest.mark.parametrize("checkpoint", [None, [], "IDLE", 3])
def test_a_checkpoint_that_is_not_a_document_is_a_problem_not_a_crash(checkpoint: Any) -> None:
    problems = session_problems(stored_session(checkpoint, SessionStatus.AWAITING_INPUT))
    assert problems == (f"the checkpoint is a {type(checkpoint).__name__}, not a document",)


@pytest.mark.parametrize(
    "document",
    [
        {},
        {"state": 7, "transcript": "x", "turn": []},
        {"state": "IDLE", "transcript": [None, {"parts": "no"}, {"parts": [None, 1]}]},
        {"state": "AWAITING_APPROVAL", "turn": {"round": {"calls": [None, {"call": 3}]}}},
    ],
)
def test_odd_documents_never_raise(document: dict[str, Any]) -> None:
    problems = session_problems(stored_session(document, SessionStatus.AWAITING_INPUT))
    assert isinstance(problems, tuple)


# -- the inbox shows them -----------------------------------------------------------------


async def test_the_inbox_lists_a_stranded_session_and_its_page_says_why(
    anyio_backend: str,
) -> None:
    store = MemorySessionStore()
    await killed_after_the_round(store, Pay(), "s1")
    stored = await store.load("s1")
    assert stored is not None
    await overwrite(store, "s1", {**copy.deepcopy(stored.checkpoint), "state": "IDLE"})
    app = create_app(store, config=ServeConfig(token=TOKEN, worker=False), audit=MemoryAuditLog())
    bearer = {"authorization": f"Bearer {TOKEN}"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
        inbox = (await c.get("/partials/inbox", headers=bearer)).text
        page = (await c.get("/partials/sessions/s1", headers=bearer)).text
    assert '<span class="count" id="attention-count">1</span>' in inbox
    assert '<li class="problem-line">' + OPEN_TURN.replace("'", "&#39;") + "</li>" in inbox
    assert '<span class="problem-line">' + OPEN_TURN.replace("'", "&#39;") + "</span>" in page
