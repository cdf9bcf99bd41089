"""A session resting on a question, in every store: status ``awaiting_answer``, the inbox
query, ``record_answer`` (final, checked, nothing written on a refusal) and a worker that
answers the question asked again from the store."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentloop as al
import agentloop.host
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.store import (
    ClaimError,
    MemorySessionStore,
    PendingQuestion,
    PostgresSessionStore,
    RedisSessionStore,
    SessionStatus,
    SessionStore,
    SqliteSessionStore,
)
from agentloop.store._records import AnswerRow, decode_record, encode_record
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

SEAT = {
    "type": "object",
    "properties": {"seat": {"type": "string"}, "row": {"type": "integer", "minimum": 1}},
    "required": ["seat"],
}


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        yield MemorySessionStore()
    elif request.param == "sqlite":
        async with SqliteSessionStore(tmp_path / "sessions.db") as sqlite:
            yield sqlite
    elif request.param == "postgres":
        async with PostgresSessionStore(request.getfixturevalue("postgres_uri")) as postgres:
            yield postgres
    else:
        url = request.getfixturevalue("redis_server")
        async with RedisSessionStore(url, prefix=request.getfixturevalue("redis_prefix")) as r:
            yield r


class Book:
    """Asks for a seat (``resume`` data when ``resumable``); run again, goes on from the
    answer it is given."""

    spec = al.ToolSpec("book", "Book a seat.", {"type": "object"})
    asks_host = True

    def __init__(self, resumable: bool = True) -> None:
        self.resumable = resumable
        self.answers: list[al.QuestionAnswer] = []

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        if ctx.resumed is not None:
            answer = ctx.resumed.answer
        else:
            resume = {"hold": 7} if self.resumable else None
            question = al.tools.Question(
                "elicitation", "Which seat?", SEAT, {"mode": "form"}, resume=resume
            )
            answer = await ctx.ask(question)
        self.answers.append(answer)
        if not answer.accepted:
            return f"not booked ({answer.action.value})"
        return f"booked {answer.content['seat']}"


@asynccontextmanager
async def resting_on_question(
    store: SessionStore, tool: Book
) -> AsyncIterator[al.host.SessionWorker]:
    """Start session ``s``, let a worker drive it until it rests on the question, and
    yield the worker (its agent's task manager stays open)."""
    async with al.tasks.AsyncTaskManager() as manager:
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel([tool_calls(call("book", {}, id="a")), "ok"]))
            .add_tool_source(al.ToolRegistry().with_tool(tool))
            .task_manager(manager)
            .store(store)
            .build()
        )
        driver = await agent.start("s")
        driver.submit_input("book me a seat")
        await driver.save()
        worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=30)
        advanced = await worker.run_once()
        assert advanced is not None
        assert isinstance(advanced.step, al.CallQuestion)
        yield worker


async def rest_on_question(store: SessionStore, tool: Book) -> None:
    async with resting_on_question(store, tool):
        pass


def pending(resumable: bool = True) -> PendingQuestion:
    return PendingQuestion(
        question_id="question:a:1",
        call_id="a",
        tool_name="book",
        kind="elicitation",
        message="Which seat?",
        schema=SEAT,
        data={"mode": "form"},
        resumable=resumable,
    )


async def test_a_session_on_a_question_awaits_an_answer_and_the_inbox_finds_it(
    store: SessionStore,
) -> None:
    await rest_on_question(store, Book())
    stored = await store.load("s")
    assert stored is not None
    assert (stored.status, stored.answers) == (SessionStatus.AWAITING_ANSWER, {})
    [row] = await store.sessions_awaiting_answer()
    assert (row.session_id, row.status) == ("s", SessionStatus.AWAITING_ANSWER)
    assert (row.pending_questions, row.unanswered) == (("question:a:1",), ("question:a:1",))
    assert row.unanswered_questions == (pending(),)
    assert (row.pending_approvals, row.undecided) == ((), ())
    assert await store.sessions_awaiting_approval() == []
    assert await store.sessions_ready() == []


@pytest.mark.parametrize(
    ("question_id", "answer", "error", "message"),
    [
        (
            "question:a:1",
            {"action": "accept", "content": {"row": 3}},
            al.InvalidInputError,
            "cannot record an answer to question 'question:a:1' of session 's': the content "
            "does not match the question's schema ((content): 'seat' is a required property); "
            "answer with content that matches question.schema, or decline()",
        ),
        (
            "question:a:1",
            {"action": "accept", "content": {"seat": "4C", "row": 0}},
            al.InvalidInputError,
            "cannot record an answer to question 'question:a:1' of session 's': the content "
            "does not match the question's schema (row: 0 is less than the minimum of 1); "
            "answer with content that matches question.schema, or decline()",
        ),
        (
            "question:a:1",
            {"action": "decline", "content": {"seat": "4C"}},
            al.InvalidInputError,
            "cannot record an answer to question 'question:a:1' of session 's': a decline "
            "answer carries no content, got {'seat': '4C'}",
        ),
        (
            "question:a:1",
            {"action": "maybe"},
            al.InvalidInputError,
            "cannot record an answer to question 'question:a:1' of session 's': action must "
            "be one of accept, decline, cancel; got 'maybe'",
        ),
        (
            "question:a:1",
            {"action": "accept", "content": {"seat": float("nan")}},
            al.InvalidInputError,
            "cannot record an answer to question 'question:a:1' of session 's': the content "
            "is not JSON (Out of range float values are not JSON compliant)",
        ),
        (
            "question:a:2",
            {"action": "decline"},
            ClaimError,
            "cannot record an answer to question 'question:a:2' of session 's': the session "
            "does not wait on that question (its status is awaiting_answer, waiting on "
            "['question:a:1']); answer a question listed by sessions_awaiting_answer()",
        ),
    ],
)
async def test_a_wrong_answer_is_refused_and_nothing_is_written(
    store: SessionStore, question_id: str, answer: dict[str, Any], error: type, message: str
) -> None:
    await rest_on_question(store, Book())
    before = await store.load("s")
    with pytest.raises(error) as raised:
        await store.record_answer("s", question_id, **answer)
    assert str(raised.value) == message
    assert await store.load("s") == before
    assert len(await store.sessions_awaiting_answer()) == 1


async def test_an_answer_is_final_and_the_worker_goes_on_from_it(store: SessionStore) -> None:
    tool = Book()
    async with resting_on_question(store, tool) as worker:
        await answer_then_advance(store, worker)
    assert tool.answers == [al.QuestionAnswer.accept({"seat": "4C"})]
    finished = await store.load("s")
    assert finished is not None
    assert (finished.status, finished.answers) == (SessionStatus.AWAITING_INPUT, {})
    results = [
        part["output"]
        for item in finished.checkpoint["transcript"]
        for part in item["parts"]
        if part["type"] == "tool_result"
    ]
    assert results == ["booked 4C"]


async def answer_then_advance(store: SessionStore, worker: al.host.SessionWorker) -> None:
    recorded = await store.record_answer(
        "s", "question:a:1", action="accept", content={"seat": "4C"}
    )
    assert (recorded.action, recorded.content, recorded.newly_recorded) == (
        "accept",
        {"seat": "4C"},
        True,
    )
    with pytest.raises(ClaimError) as raised:
        await store.record_answer("s", "question:a:1", action="decline")
    assert str(raised.value) == (
        "cannot record an answer to question 'question:a:1' of session 's': it was already "
        f"answered (accept, at {recorded.answered_at.isoformat()}); an answer is final"
    )
    assert raised.value.reason == "answered"
    stored = await store.load("s")
    assert stored is not None
    assert stored.answers == {"question:a:1": recorded}
    assert await store.sessions_awaiting_answer() == []
    assert [row.session_id for row in await store.sessions_ready()] == ["s"]
    advanced = await worker.run_once()
    assert advanced is not None
    assert isinstance(advanced.step, al.Finished)
    assert advanced.problems == ()


async def test_two_answers_racing_one_wins(store: SessionStore) -> None:
    await rest_on_question(store, Book())
    outcomes: list[str] = []

    async def answer(action: str) -> None:
        try:
            await store.record_answer("s", "question:a:1", action=action)
            outcomes.append(f"won:{action}")
        except ClaimError as error:
            outcomes.append(f"refused:{error.reason}")

    async with anyio.create_task_group() as group:
        group.start_soon(answer, "decline")
        group.start_soon(answer, "cancel")
    assert sorted(outcome.split(":")[0] for outcome in outcomes) == ["refused", "won"]
    assert "refused:answered" in outcomes
    stored = await store.load("s")
    assert stored is not None
    [recorded] = stored.answers.values()
    assert f"won:{recorded.action}" in outcomes


async def test_a_question_that_cannot_resume_takes_only_a_decline(store: SessionStore) -> None:
    tool = Book(resumable=False)
    async with resting_on_question(store, tool) as worker:
        [row] = await store.sessions_awaiting_answer()
        assert row.unanswered_questions == (pending(resumable=False),)
        with pytest.raises(al.InvalidInputError) as raised:
            await store.record_answer("s", "question:a:1", action="accept", content={"seat": "1A"})
        assert str(raised.value) == (
            "cannot record an answer to question 'question:a:1' of session 's': call a "
            "(book) cannot go on from an answer recorded now (its question has no resume "
            "data: the process that asked it is gone, so resuming the session answers the "
            "call in doubt); decline or cancel it instead"
        )
        await store.record_answer("s", "question:a:1", action="decline")
        advanced = await worker.run_once()
        assert advanced is not None
        assert isinstance(advanced.step, al.Finished)
    finished = await store.load("s")
    assert finished is not None
    outcomes = [
        part["metadata"].get("agentloop.outcome")
        for item in finished.checkpoint["transcript"]
        for part in item["parts"]
        if part["type"] == "tool_result"
    ]
    assert outcomes == ["in_doubt"]


async def test_a_schema_6_sqlite_file_resting_on_a_question_moves_to_awaiting_answer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    async with SqliteSessionStore(path) as store:
        await rest_on_question(store, Book())
    # As schema 6 wrote it: status awaiting_input, nothing pending.
    connection = sqlite3.connect(path)
    with connection:
        [(meta,)] = connection.execute("SELECT meta FROM heads WHERE session_id = 's'")
        old = {**json.loads(meta), "status": "awaiting_input", "pending": []}
        connection.execute("UPDATE heads SET meta = ?", (json.dumps(old),))
        connection.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    connection.close()
    async with SqliteSessionStore(path) as store:
        [row] = await store.sessions_awaiting_answer()
        assert row.unanswered_questions == (pending(),)
    connection = sqlite3.connect(path)
    assert connection.execute("SELECT value FROM meta").fetchall() == [("8",)]
    connection.close()


async def test_a_migration_4_postgres_head_resting_on_a_question_moves_to_awaiting_answer(
    postgres_uri: str,
) -> None:
    import psycopg

    async with PostgresSessionStore(postgres_uri) as store:
        await rest_on_question(store, Book())
    # As migration 4 wrote it: status awaiting_input, nothing pending, version 4.
    with psycopg.connect(postgres_uri, autocommit=True) as connection:
        [(meta,)] = connection.execute("SELECT meta FROM agentloop_heads").fetchall()
        old = {**json.loads(meta), "status": "awaiting_input", "pending": []}
        connection.execute("UPDATE agentloop_heads SET meta = %s", (json.dumps(old),))
        connection.execute("DELETE FROM agentloop_schema WHERE version >= 5")
    async with PostgresSessionStore(postgres_uri) as store:
        assert await store.schema_version() == 6
        [row] = await store.sessions_awaiting_answer()
        assert row.unanswered_questions == (pending(),)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    row=st.builds(
        AnswerRow,
        action=st.sampled_from(["accept", "decline", "cancel"]),
        content=JSON,
        answered_at=st.floats(min_value=0, max_value=4e9, allow_nan=False),
    )
)
def test_an_answer_row_round_trips_through_its_text(row: AnswerRow) -> None:
    assert decode_record(encode_record(row), AnswerRow, "s", "an answer row") == row
    answer = row.answer("s", "question:a:1")
    assert (answer.action, answer.content, answer.newly_recorded) == (
        row.action,
        row.content,
        False,
    )
