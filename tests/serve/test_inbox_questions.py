"""The inbox answers a running call's question over HTTP (no browser): the card, the form
its schema makes, the answer checked server-side, single use, the guards, the worker."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from question_support import park_question, resume
from serve_support import TOKEN

import agentloop as al
from agentloop.serve import MemoryAuditLog, ServeConfig, create_app
from agentloop.serve._questions import form_fields
from agentloop.store import SessionStatus, SqliteSessionStore

pytestmark = pytest.mark.anyio

ORIGIN = "http://127.0.0.1:8765"


class QuestionInbox:
    def __init__(self, store: SqliteSessionStore, client: httpx.AsyncClient) -> None:
        self.store = store
        self.client = client
        self.csrf = ""
        self.ref = ""

    async def sign_in(self) -> str:
        assert (await self.client.get(f"/?token={TOKEN}")).status_code == 303
        page = await self.client.get("/")
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text)
        assert csrf is not None
        self.csrf = csrf.group(1)
        ref = re.search(r'data-question-ref="(ref-[0-9a-f]+)"', page.text)
        self.ref = ref.group(1) if ref else ""
        return page.text

    async def answer(self, headers: dict[str, str] | None = None, **body: Any) -> httpx.Response:
        body = {"session_id": "s1", "question_ref": self.ref, **body}
        return await self.client.post(
            "/api/answer",
            json=body,
            headers=headers or {"x-csrf-token": self.csrf, "origin": ORIGIN},
        )


@pytest.fixture
async def inbox(tmp_path: Path) -> AsyncIterator[QuestionInbox]:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await park_question(store, "s1")
        config = ServeConfig(token=TOKEN, identity="alice", worker=False)
        app = create_app(store, config=config, audit=MemoryAuditLog())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
            yield QuestionInbox(store, client)


async def test_the_card_shows_the_question_and_a_form_made_from_its_schema(
    inbox: QuestionInbox,
) -> None:
    page = await inbox.sign_in()
    assert inbox.ref.startswith("ref-")
    assert 'id="question-count">1<' in page
    assert '<p class="question-message">Which seat?</p>' in page
    for field in (
        '<input type="text" name="seat" data-kind="string" data-required="1">',
        '<input type="number" name="row" data-kind="integer" step="1" data-required="1">',
        '<input type="checkbox" name="window" data-kind="boolean">',
        '<select name="meal" data-kind="enum"><option value="">—</option>'
        '<option value="&#34;veg&#34;">veg</option><option value="&#34;fish&#34;">fish</option>'
        "</select>",
    ):
        assert field in page, field


async def test_a_wrong_answer_is_refused_with_the_reason_and_nothing_changes(
    inbox: QuestionInbox,
) -> None:
    await inbox.sign_in()
    before = await inbox.store.load("s1")
    cases = [
        (
            {"action": "accept", "content": {"seat": "4C"}},
            422,
            "refused: cannot record an answer to question 'question:call-1:1' of session "
            "'s1': the content does not match the question's schema ((content): 'row' is a "
            "required property); answer with content that matches question.schema, or "
            "decline()",
        ),
        (
            {"action": "accept", "content": {"seat": "4C", "row": 0, "meal": "beef"}},
            422,
            "refused: cannot record an answer to question 'question:call-1:1' of session "
            "'s1': the content does not match the question's schema (meal: 'beef' is not one "
            "of ['veg', 'fish']; row: 0 is less than the minimum of 1); answer with content "
            "that matches question.schema, or decline()",
        ),
        (
            {"action": "shrug"},
            422,
            "refused: cannot record an answer to question 'question:call-1:1' of session "
            "'s1': action must be one of accept, decline, cancel; got 'shrug'",
        ),
        (
            {"action": "decline", "question_ref": "ref-" + "0" * 32},
            409,
            "session 's1' moved on: the question this page showed is no longer asked; "
            "nothing was recorded",
        ),
        (
            {"action": "decline", "session_id": "gone"},
            404,
            "session 'gone' no longer exists",
        ),
        (
            {"action": 3},
            400,
            "expected a JSON object with session_id, question_ref and action strings (and "
            "content, for an accept)",
        ),
    ]
    for body, status, message in cases:
        response = await inbox.answer(**body)
        assert (response.status_code, response.json()) == (
            status,
            {"ok": False, "error": message, "status": status},
        ), body
    assert await inbox.store.load("s1") == before


async def test_the_guards_of_decisions_hold_for_answers(inbox: QuestionInbox) -> None:
    await inbox.sign_in()
    refusals = [
        ({"origin": ORIGIN}, 403, "refused: missing or wrong CSRF token; reload the page"),
        (
            {"x-csrf-token": inbox.csrf, "origin": "http://evil.example"},
            403,
            "refused: cross-origin request from http://evil.example",
        ),
    ]
    for headers, status, message in refusals:
        response = await inbox.answer(headers, action="decline")
        assert (response.status_code, response.json()["error"]) == (status, message)
    huge = await inbox.client.post(
        "/api/answer",
        content=b'{"x": "' + b"a" * (1024 * 1024) + b'"}',
        headers={
            "x-csrf-token": inbox.csrf,
            "origin": ORIGIN,
            "content-type": "application/json",
        },
    )
    assert huge.status_code == 413
    anonymous = httpx.AsyncClient(transport=inbox.client._transport, base_url=ORIGIN)
    async with anonymous:
        assert (await anonymous.post("/api/answer", json={})).status_code == 401
    stored = await inbox.store.load("s1")
    assert stored is not None
    assert (stored.status, stored.answers) == (SessionStatus.AWAITING_ANSWER, {})


async def test_an_answer_is_recorded_once_and_the_worker_goes_on_from_it(
    inbox: QuestionInbox,
) -> None:
    await inbox.sign_in()
    content = {"seat": "4C", "row": 12, "window": True, "meal": "veg"}
    first = await inbox.answer(action="accept", content=content)
    assert (first.status_code, first.json()) == (
        200,
        {
            "ok": True,
            "message": "Answered by alice; waiting for an external worker to resume the session.",
        },
    )
    second = await inbox.answer(action="decline")
    assert (second.status_code, second.json()["error"]) == (
        409,
        "this question was already answered; nothing was changed",
    )
    page = (await inbox.client.get("/")).text
    assert "question-card" not in page
    advanced = await resume(inbox.store, "s1")
    assert isinstance(advanced.step, al.Finished)
    items = await inbox.store.transcript("s1")
    assert items is not None
    assert items[-1].text_content == "done: booked meal=veg, row=12, seat=4C, window=True"


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (None, None),
        ({"type": "string"}, None),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, None),
        ({"type": "object", "properties": {"a": {"type": "object"}}}, None),
        ({"type": "object"}, []),
        (
            {
                "type": "object",
                "properties": {
                    "n": {"type": "number", "default": 1.5},
                    "c": {"type": "string", "enum": ["x", "y"], "enumNames": ["Ex", "Why"]},
                },
                "required": ["c"],
            },
            [
                {
                    "name": "n",
                    "kind": "number",
                    "title": "n",
                    "description": "",
                    "required": False,
                    "default": 1.5,
                    "options": [],
                },
                {
                    "name": "c",
                    "kind": "enum",
                    "title": "c",
                    "description": "",
                    "required": True,
                    "default": None,
                    "options": [
                        {"value": '"x"', "label": "Ex"},
                        {"value": '"y"', "label": "Why"},
                    ],
                },
            ],
        ),
    ],
)
def test_the_form_a_schema_makes(schema: Any, expected: Any) -> None:
    assert form_fields(schema) == expected


async def test_url_and_sampling_questions_have_cards_of_their_own(tmp_path: Path) -> None:
    from question_support import park_on

    from agentloop.mcp._asking import SAMPLING_ANSWER_SCHEMA

    async with SqliteSessionStore(tmp_path / "s.db") as store:
        url = al.tools.Question(
            "mcp.elicitation_url",
            "Sign in to the bank",
            None,
            {"mode": "url", "url": "https://bank.example/login?x=1&y=2"},
            resume={"n": 1},
        )
        messages = [{"role": "user", "content": {"type": "text", "text": "Summarize <b>it</b>"}}]
        sampling = al.tools.Question(
            "mcp.sampling",
            "MCP server 'docs' asks for a model answer to: Summarize <b>it</b>",
            SAMPLING_ANSWER_SCHEMA,
            {"server": "docs", "messages": messages},
            resume={"n": 2},
        )
        await park_on(store, "url-1", url)
        await park_on(store, "sampling-1", sampling)
        config = ServeConfig(token=TOKEN, identity="alice", worker=False)
        app = create_app(store, config=config, audit=MemoryAuditLog())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
            inbox = QuestionInbox(store, client)
            page = await inbox.sign_in()
            assert 'id="question-count">2<' in page
            assert (
                '<a class="question-url" href="https://bank.example/login?x=1&amp;y=2" '
                'target="_blank" rel="noopener noreferrer">https://bank.example/login?x=1&amp;y=2'
                "</a>"
            ) in page
            assert "I've done it</button>" in page
            assert (
                '<li><strong>user</strong>: <span class="sampling-text">Summarize '
                "&lt;b&gt;it&lt;/b&gt;</span></li>"
            ) in page
            assert '<textarea name="text" class="reply"' in page
            refs = re.findall(r'data-session="([^"]+)" data-question-ref="(ref-[0-9a-f]+)"', page)
            by_session = dict(refs)
            inbox.ref = by_session["url-1"]
            done = await inbox.answer(session_id="url-1", action="accept")
            assert done.status_code == 200, done.json()
            inbox.ref = by_session["sampling-1"]
            wrong = await inbox.answer(
                session_id="sampling-1", action="accept", content={"reply": "x"}
            )
            assert wrong.status_code == 422
            sent = await inbox.answer(
                session_id="sampling-1", action="accept", content={"text": "A summary."}
            )
            assert sent.status_code == 200, sent.json()
        answers = {}
        for session_id in ("url-1", "sampling-1"):
            stored = await store.load(session_id)
            assert stored is not None
            [recorded] = stored.answers.values()
            answers[session_id] = (recorded.action, recorded.content)
        assert answers == {
            "url-1": ("accept", None),
            "sampling-1": ("accept", {"text": "A summary."}),
        }


async def test_the_in_process_worker_goes_on_from_an_answer(inbox: QuestionInbox) -> None:
    import anyio
    from question_support import asking

    from agentloop.serve import Worker

    await inbox.sign_in()
    assert (await inbox.answer(action="decline")).status_code == 200
    advanced = anyio.Event()

    async def changed() -> None:
        advanced.set()

    async with asking(inbox.store) as agent:
        worker = Worker(inbox.store, agent, poll_interval=0.05, on_change=changed)
        async with anyio.create_task_group() as group:
            group.start_soon(worker.run)  # it finds the answered session by polling
            with anyio.fail_after(30):
                await advanced.wait()
            group.cancel_scope.cancel()
    items = await inbox.store.transcript("s1")
    assert items is not None
    assert items[-1].text_content == "done: not booked (decline)"
