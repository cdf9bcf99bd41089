"""Answers to questions in the audit log: over real HTTP (uvicorn on 127.0.0.1, the client on
asyncio and trio) against a real SQLite store, and on a real PostgreSQL; hostile answers
audited exactly or refused with nothing recorded; tables made before answers were audited
still read and gain the columns."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from question_support import park_on, park_question
from serve_support import TOKEN, ServerThread

import agentloop as al
from agentloop.serve import (
    AnswerEntry,
    AuditEntry,
    DecisionAction,
    MemoryAuditLog,
    PostgresAuditLog,
    ResolutionEntry,
    ServeConfig,
    SqliteAuditLog,
    create_app,
)
from agentloop.serve._audit import MAX_AUDITED_CONTENT
from agentloop.store import SessionStatus, SqliteSessionStore
from agentloop.tools import QuestionAction

pytestmark = pytest.mark.anyio

SECRET = "sk-ant-api03-abcdefghijklmnop"
OPEN = al.tools.Question(
    "custom.paste", "Paste the report", {"type": "object"}, None, resume={"n": 1}
)


def digest(content: Any) -> str:
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def server(database: Path) -> Iterator[ServerThread]:
    with ServerThread(database, worker=False) as running:
        yield running


class Inbox:
    """A signed-in client of the real server."""

    def __init__(self, client: httpx.AsyncClient, base: str) -> None:
        self.client = client
        self.base = base
        self.csrf = ""
        self.refs: dict[str, str] = {}

    async def sign_in(self) -> str:
        assert (await self.client.get(f"/?token={TOKEN}")).status_code == 303
        page = (await self.client.get("/")).text
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page)
        assert csrf is not None
        self.csrf = csrf.group(1)
        found = re.findall(r'data-session="([^"]+)" data-question-ref="(ref-[0-9a-f]+)"', page)
        self.refs = dict(found)
        return page

    async def answer(self, session_id: str, **body: Any) -> httpx.Response:
        body = {"session_id": session_id, "question_ref": self.refs[session_id], **body}
        return await self.client.post(
            "/api/answer", json=body, headers={"x-csrf-token": self.csrf, "origin": self.base}
        )

    async def post_raw(self, content: bytes) -> httpx.Response:
        headers = {
            "x-csrf-token": self.csrf,
            "origin": self.base,
            "content-type": "application/json",
        }
        return await self.client.post("/api/answer", content=content, headers=headers)


@pytest.fixture
async def inbox(server: ServerThread) -> AsyncIterator[Inbox]:
    async with httpx.AsyncClient(base_url=server.base) as client:
        yield Inbox(client, server.base)


def without_time(entry: Any) -> Any:
    return attrs.evolve(entry, decided_at=datetime(2000, 1, 1, tzinfo=UTC))


async def test_an_answer_is_in_the_audit_log_and_on_its_page(
    database: Path, inbox: Inbox, anyio_backend: str
) -> None:
    async with SqliteSessionStore(database) as store:
        await park_question(store, "trip-1")
    await inbox.sign_in()
    before = datetime.now(UTC)
    content = {"seat": "4C", "row": 12, "window": True, "meal": "veg"}
    response = await inbox.answer("trip-1", action="accept", content=content)
    assert (response.status_code, response.json()["message"]) == (
        200,
        "Answered by alice; waiting for an external worker to resume the session.",
    )
    [entry] = await SqliteAuditLog(database).entries()
    assert isinstance(entry, AnswerEntry)
    assert before <= entry.decided_at <= datetime.now(UTC)
    assert without_time(entry) == AnswerEntry(
        session_id="trip-1",
        question_id="question:call-1:1",
        call_id="call-1",
        tool_name="book",
        kind="mcp.elicitation",
        action=QuestionAction.ACCEPT,
        content_digest=digest(content),
        content_size=len(json.dumps(content, separators=(",", ":"), sort_keys=True)),
        decided_by="alice",
        decided_at=datetime(2000, 1, 1, tzinfo=UTC),
        content=content,
        content_kept=True,
    )
    page = (await inbox.client.get("/audit")).text
    row = re.search(r"<tbody>\s*<tr>(.*?)</tr>", page, re.DOTALL)
    assert row is not None
    cells = [c.strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.DOTALL)]
    assert cells[1:] == [
        "alice",
        '<a href="/sessions/trip-1">trip-1</a>',
        'book <code>call-1</code><br><span class="question">question '
        "<code>question:call-1:1</code> (mcp.elicitation)</span>",
        "answer: accept",
        "<pre>{\n  &#34;meal&#34;: &#34;veg&#34;,\n  &#34;row&#34;: 12,\n  &#34;seat&#34;: "
        "&#34;4C&#34;,\n  &#34;window&#34;: true\n}</pre>",
        f'<code class="digest">{digest(content)}</code>',
    ]
    inbox_page = (await inbox.client.get("/partials/inbox")).text
    assert re.search(
        r'<td class="action">answer: accept</td>\s*<td>alice</td>\s*<td class="status">'
        r"waiting for a worker to resume the session</td>",
        inbox_page,
    ), inbox_page


async def test_decline_and_cancel_are_audited_without_content(
    database: Path, inbox: Inbox, anyio_backend: str
) -> None:
    async with SqliteSessionStore(database) as store:
        await park_question(store, "a")
        await park_on(store, "b", OPEN)
    await inbox.sign_in()
    assert (await inbox.answer("a", action="decline")).status_code == 200
    assert (await inbox.answer("b", action="cancel")).status_code == 200
    entries = await SqliteAuditLog(database).entries()
    assert [
        (e.session_id, e.kind, e.action, e.content, e.content_kept, e.content_digest)
        for e in entries
        if isinstance(e, AnswerEntry)
    ] == [
        ("b", "custom.paste", QuestionAction.CANCEL, None, True, digest(None)),
        ("a", "mcp.elicitation", QuestionAction.DECLINE, None, True, digest(None)),
    ]
    page = (await inbox.client.get("/audit")).text
    assert page.count('<td class="action">answer: cancel</td>') == 1
    assert page.count('<td class="action">answer: decline</td>') == 1
    assert "<pre>" not in page


async def test_secrets_are_redacted_and_large_content_is_kept_as_size_and_digest(
    database: Path, inbox: Inbox, anyio_backend: str
) -> None:
    async with SqliteSessionStore(database) as store:
        await park_on(store, "secret", OPEN)
        await park_on(store, "large", OPEN)
    await inbox.sign_in()
    secret = {"note": f"the key is {SECRET}", SECRET: "as a key"}
    large = {"text": "x" * (MAX_AUDITED_CONTENT + 1), "ok": "ü"}
    assert (await inbox.answer("secret", action="accept", content=secret)).status_code == 200
    assert (await inbox.answer("large", action="accept", content=large)).status_code == 200
    by_session = {e.session_id: e for e in await SqliteAuditLog(database).entries()}
    kept = by_session["secret"]
    assert isinstance(kept, AnswerEntry)
    assert (kept.content, kept.content_kept, kept.content_digest) == (
        {"note": "the key is [redacted]", "[redacted]": "as a key"},
        True,
        digest(secret),  # of the exact content the store recorded
    )
    big = by_session["large"]
    assert isinstance(big, AnswerEntry)
    size = len(
        json.dumps(large, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    )
    assert (big.content, big.content_kept, big.content_size, big.content_digest) == (
        None,
        False,
        size,
        digest(large),
    )
    page = (await inbox.client.get("/audit")).text
    assert SECRET not in page
    assert f"<pre>(content of {size} bytes, not kept; the store has it)</pre>" in page
    async with SqliteSessionStore(database) as store:
        stored = await store.load("secret")
        assert stored is not None
        assert [a.content for a in stored.answers.values()] == [secret]


async def test_hostile_answers_are_refused_clearly_and_leave_no_audit_entry(
    database: Path, inbox: Inbox, anyio_backend: str
) -> None:
    async with SqliteSessionStore(database) as store:
        await park_question(store, "s1")
        before = await store.load("s1")
    await inbox.sign_in()
    where = "cannot record an answer to question 'question:call-1:1' of session 's1'"
    ref = inbox.refs["s1"]
    nested = "[" * 40 + "]" * 40
    raw_cases: list[tuple[bytes, int, str]] = [
        (
            b'{"session_id": "s1", "question_ref": "' + ref.encode() + b'", "action": "accept", '
            b'"content": {"seat": "\\ud800", "row": 1}}',
            422,
            f"refused: {where}: the content holds '\\ud800', a lone surrogate, which is not "
            "Unicode text; send valid text",
        ),
        (
            b'{"session_id": "s1", "question_ref": "' + ref.encode() + b'", "action": "accept", '
            b'"content": {"seat": "4C", "row": NaN}}',
            422,
            f"refused: {where}: the content is not JSON text (Out of range float values are "
            "not JSON compliant); send JSON values",
        ),
        (
            b'{"session_id": "s1", "question_ref": "' + ref.encode() + b'", "action": "accept", '
            b'"content": ' + nested.encode() + b"}",
            400,
            "refused: JSON nested more than 32 levels deep in the request body; send at most "
            "32 levels of arrays and objects",
        ),
        (b"\xff\xfe not utf-8", 400, "expected a JSON object with session_id, question_ref "
         "and action strings (and content, for an accept)"),
    ]  # fmt: skip
    for raw, status, message in raw_cases:
        response = await inbox.post_raw(raw)
        assert (response.status_code, response.json()["error"]) == (status, message), raw[:80]
    body_cases: list[tuple[dict[str, Any], int, str]] = [
        (
            {"action": "accept", "content": {"seat": "4C"}},
            422,
            f"refused: {where}: the content does not match the question's schema ((content): "
            "'row' is a required property); answer with content that matches "
            "question.schema, or decline()",
        ),
        (
            {"action": "approve"},
            422,
            f"refused: {where}: action must be one of accept, decline, cancel; got 'approve'",
        ),
        (
            {"action": "accept", "content": {"seat": "x" * 900_000, "row": "1"}},
            422,
            f"refused: {where}: the content does not match the question's schema (row: '1' "
            "is not of type 'integer'); answer with content that matches question.schema, or "
            "decline()",
        ),
    ]
    for body, status, message in body_cases:
        response = await inbox.answer("s1", **body)
        assert (response.status_code, response.json()["error"]) == (status, message), body
    huge = await inbox.post_raw(b'{"content": "' + b"a" * (1024 * 1024) + b'"}')
    assert huge.status_code == 413
    assert await SqliteAuditLog(database).entries() == []
    async with SqliteSessionStore(database) as store:
        assert await store.load("s1") == before
    # After every refusal, a good answer is still taken and audited once.
    assert (await inbox.answer("s1", action="decline")).status_code == 200
    again = await inbox.answer("s1", action="decline")
    assert (again.status_code, again.json()["error"]) == (
        409,
        "this question was already answered; nothing was changed",
    )
    entries = await SqliteAuditLog(database).entries()
    assert [(e.session_id, e.action) for e in entries] == [("s1", QuestionAction.DECLINE)]


LEGACY_TABLE = (
    "CREATE TABLE agentloop_serve_audit (id {id} PRIMARY KEY, session_id TEXT NOT NULL, "
    "call_id TEXT NOT NULL, tool_name TEXT NOT NULL, action TEXT NOT NULL, "
    "input_digest TEXT NOT NULL, decided_by TEXT NOT NULL, decided_at {real} NOT NULL, "
    "reason TEXT, input TEXT)"
)
LEGACY_ROWS = [
    ("s0", "call-1", "publish_report", "approve_with", "sha256:ab", "bob", 1.7e9, None,
     '{"path": "/r.txt"}'),
    ("s0", "call-2", "publish_report", "deny", "sha256:cd", "bob", 1.7e9 + 1, "no", None),
]  # fmt: skip
LEGACY_ENTRIES = [
    AuditEntry(
        session_id="s0",
        call_id="call-2",
        tool_name="publish_report",
        action=DecisionAction.DENY,
        input_digest="sha256:cd",
        decided_by="bob",
        decided_at=datetime.fromtimestamp(1.7e9 + 1, UTC),
        reason="no",
    ),
    AuditEntry(
        session_id="s0",
        call_id="call-1",
        tool_name="publish_report",
        action=DecisionAction.APPROVE_WITH,
        input_digest="sha256:ab",
        decided_by="bob",
        decided_at=datetime.fromtimestamp(1.7e9, UTC),
        input={"path": "/r.txt"},
    ),
]
ANSWER = AnswerEntry(
    session_id="s9",
    question_id="question:call-9:1",
    call_id="call-9",
    tool_name="ask",
    kind="mcp.sampling",
    action=QuestionAction.ACCEPT,
    content_digest=digest({"text": "hi"}),
    content_size=13,
    decided_by="carol",
    decided_at=datetime.fromtimestamp(1.8e9, UTC),
    content={"text": "hi"},
)


RESOLUTION = ResolutionEntry(
    session_id="s9",
    call_id="call-8",
    tool_name="pay",
    resolution="settle",
    value_digest=digest("paid"),
    value_size=6,
    decided_by="carol",
    decided_at=datetime.fromtimestamp(1.9e9, UTC),
    value="paid",
)


async def check_legacy_log(log: Any) -> None:
    """A log over a table made before answers: old rows read, answers (and resolutions of
    calls in doubt) go in beside them."""
    assert await log.entries() == LEGACY_ENTRIES
    await log.add(ANSWER)
    unkept = attrs.evolve(ANSWER, question_id="q2", content=None, content_kept=False)
    await log.add(unkept)
    rerun = attrs.evolve(RESOLUTION, resolution="run_again", value=None, value_digest=digest(None))
    unkept_value = attrs.evolve(RESOLUTION, resolution="fail", value=None, value_kept=False)
    for entry in (RESOLUTION, rerun, unkept_value):
        await log.add(entry)
    assert await log.entries() == [unkept_value, rerun, RESOLUTION, unkept, ANSWER, *LEGACY_ENTRIES]
    for entry in (RESOLUTION, rerun, unkept_value):
        await log.remove(entry)
    assert await log.entries() == [unkept, ANSWER, *LEGACY_ENTRIES]
    found = await log.find("s0", "call-2", approved=False, input_digest="sha256:cd")
    assert found == LEGACY_ENTRIES[0]
    await log.remove(unkept)
    assert await log.entries() == [ANSWER, *LEGACY_ENTRIES]


async def test_a_sqlite_audit_table_from_before_answers_still_reads(
    tmp_path: Path, anyio_backend: str
) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as connection:
        connection.execute(LEGACY_TABLE.format(id="INTEGER", real="REAL"))
        connection.executemany(
            "INSERT INTO agentloop_serve_audit (session_id, call_id, tool_name, action, "
            "input_digest, decided_by, decided_at, reason, input) VALUES (?,?,?,?,?,?,?,?,?)",
            LEGACY_ROWS,
        )
    connection.close()
    await check_legacy_log(SqliteAuditLog(path))
    await check_legacy_log_again(SqliteAuditLog(path))


async def check_legacy_log_again(log: Any) -> None:
    """A second opening (columns already added) reads the same."""
    assert await log.entries() == [ANSWER, *LEGACY_ENTRIES]


async def test_a_postgres_audit_table_from_before_answers_still_reads(
    postgres_uri: str, anyio_backend: str
) -> None:
    import psycopg

    with psycopg.connect(postgres_uri) as connection:
        connection.execute("DROP TABLE IF EXISTS agentloop_serve_audit")
        connection.execute(LEGACY_TABLE.format(id="BIGSERIAL", real="DOUBLE PRECISION"))
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO agentloop_serve_audit (session_id, call_id, tool_name, action, "
                "input_digest, decided_by, decided_at, reason, input) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                LEGACY_ROWS,
            )
    await check_legacy_log(PostgresAuditLog(postgres_uri))
    await check_legacy_log_again(PostgresAuditLog(postgres_uri))


async def test_an_answer_over_postgres_is_audited(postgres_uri: str, anyio_backend: str) -> None:
    from agentloop.serve import open_store

    session_id = f"pg-answer-{anyio_backend}"
    async with open_store(postgres_uri) as (store, audit):
        await park_question(store, session_id)
        app = create_app(store, config=ServeConfig(token=TOKEN, identity="dana"), audit=audit)
        base = "http://127.0.0.1"
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=base) as client:
            inbox = Inbox(client, base)
            await inbox.sign_in()
            response = await inbox.answer(session_id, action="decline")
            assert response.status_code == 200, response.json()
        entries = [e for e in await audit.entries() if e.session_id == session_id]
        assert [(e.decided_by, e.action, e.question_id) for e in entries] == [  # type: ignore[union-attr]
            ("dana", QuestionAction.DECLINE, "question:call-1:1")
        ]
        stored = await store.load(session_id)
        assert stored is not None
        assert stored.status is SessionStatus.AWAITING_ANSWER


async def test_the_memory_log_keeps_answers_beside_decisions(anyio_backend: str) -> None:
    log = MemoryAuditLog()
    await log.add(LEGACY_ENTRIES[1])
    await log.add(ANSWER)
    assert await log.entries() == [ANSWER, LEGACY_ENTRIES[1]]
    assert await log.find("s9", "call-9", approved=True, input_digest=ANSWER.content_digest) is None
    await log.remove(ANSWER)
    assert await log.entries() == [LEGACY_ENTRIES[1]]


LONE = ("\ud800", "\udfff")
JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from([SECRET, f"key={SECRET};", *LONE])
    | st.integers(0, 70_000).map(lambda n: "x" * n)
)
CONTENTS = st.dictionaries(
    st.text(max_size=6) | st.sampled_from([SECRET, *LONE]),
    st.recursive(
        JSON_LEAVES,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=6,
    ),
    max_size=4,
)


def _is_json_text(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except ValueError:
        return False
    return True


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=CONTENTS)
def test_any_answer_is_audited_exactly_or_refused_with_nothing_written(
    anyio_backend: str, content: dict[str, Any]
) -> None:
    """Whatever JSON a client sends as an answer to an open question: recorded with an
    exact audit entry (digest and size of the exact content, the content redacted, kept
    only up to 64 KiB), or refused (422) with neither an answer nor an entry."""
    from agentloop.serve._redact import Redactor
    from agentloop.serve._views import CallRefs
    from agentloop.store import MemorySessionStore

    async def check() -> None:
        store, audit = MemorySessionStore(), MemoryAuditLog()
        await park_on(store, "s", OPEN)
        before = await store.load("s")
        config = ServeConfig(token=TOKEN, identity="alice", worker=False)
        app = create_app(store, config=config, audit=audit)
        base = "http://127.0.0.1"
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=base
        ) as client:
            inbox = Inbox(client, base)
            await inbox.sign_in()
            body = {
                "session_id": "s",
                "question_ref": CallRefs(TOKEN).ref("s", "question:call-1:1"),
                "action": "accept",
                "content": content,
            }
            raw = json.dumps(body, allow_nan=True).encode()  # ASCII: surrogates as escapes
            response = await inbox.post_raw(raw)
        entries = await audit.entries()
        if not _is_json_text(content):
            assert response.status_code == 422, response.json()
            assert response.json()["error"].startswith(
                "refused: cannot record an answer to question 'question:call-1:1' of session "
                "'s': the content "
            )
            assert (entries, await store.load("s")) == ([], before)
            return
        assert response.status_code == 200, response.json()
        exact = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        redacted = Redactor((TOKEN,)).json(content)
        shown = json.dumps(redacted, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        kept = len(shown.encode()) <= MAX_AUDITED_CONTENT
        [entry] = entries
        assert isinstance(entry, AnswerEntry)
        assert (
            entry.content_digest,
            entry.content_size,
            entry.content_kept,
            entry.content,
        ) == (
            "sha256:" + hashlib.sha256(exact.encode()).hexdigest(),
            len(exact.encode()),
            kept,
            redacted if kept else None,
        )
        stored = await store.load("s")
        assert stored is not None
        assert [a.content for a in stored.answers.values()] == [content]

    anyio.run(check, backend=anyio_backend)
