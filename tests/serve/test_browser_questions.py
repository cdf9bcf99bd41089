"""A form-mode question answered in the inbox, in a real browser (Chromium), against a real
SQLite store: the form made from the schema, a wrong answer refused in the page and by the
server, the answer recorded once, and an external worker going on from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from question_support import park_question, resume
from serve_support import TOKEN, ServerThread, run_in_thread

import agentloop as al
from agentloop.store import SqliteSessionStore


@pytest.fixture
def server(database: Path) -> Iterator[ServerThread]:
    with ServerThread(database, worker=False) as running:
        yield running


def on_store(database: Path, work: Any) -> Any:
    async def run() -> Any:
        async with SqliteSessionStore(database) as store:
            return await work(store)

    return run_in_thread(run)


def test_a_form_question_is_answered_in_the_browser(
    database: Path, server: ServerThread, context: Any
) -> None:
    on_store(database, lambda store: park_question(store, "trip-1"))
    page = context.new_page()
    page.goto(f"{server.base}/?token={TOKEN}")
    expect(page.locator("#live")).to_have_text("● live")
    card = page.locator('.question-card[data-session="trip-1"]')
    expect(card.locator(".question-message")).to_have_text("Which seat?")
    expect(page.locator("#question-count")).to_have_text("1")
    card.locator('input[name="seat"]').fill("4C")
    card.locator('input[name="row"]').fill("0")
    card.locator(".accept").click()
    # The page checks first: nothing is sent.
    expect(card.locator(".error")).to_have_text(
        "The answer does not match the question's schema: at row: 0 is less than the minimum of 1"
    )
    card.locator('input[name="row"]').fill("12")
    card.locator('input[name="window"]').check()
    card.locator('select[name="meal"]').select_option("fish")
    card.locator(".accept").click()
    # The card leaves the live list at once; the outcome shows above it.
    expect(page.locator("#notice")).to_have_text(
        "trip-1 · book: Answered by alice; waiting for an external worker to resume the session."
    )
    expect(page.locator(".question-card")).to_have_count(0)  # the live list no longer has it

    def stored(store: SqliteSessionStore) -> Any:
        return store.load("trip-1")

    answers = on_store(database, stored).answers
    assert [(a.action, a.content) for a in answers.values()] == [
        ("accept", {"seat": "4C", "row": 12, "window": True, "meal": "fish"})
    ]
    advanced = on_store(database, lambda store: resume(store, "trip-1"))
    assert isinstance(advanced.step, al.Finished)

    def transcript(store: SqliteSessionStore) -> Any:
        return store.transcript("trip-1")

    assert on_store(database, transcript)[-1].text_content == (
        "done: booked meal=fish, row=12, seat=4C, window=True"
    )


def test_a_question_asked_after_the_page_loaded_appears_live(
    database: Path, server: ServerThread, context: Any
) -> None:
    page = context.new_page()
    page.goto(f"{server.base}/?token={TOKEN}")
    expect(page.locator("#live")).to_have_text("● live")
    expect(page.locator(".question-card")).to_have_count(0)
    on_store(database, lambda store: park_question(store, "trip-2"))
    # The server's poll notices the new question and the page reloads its list (SSE).
    card = page.locator('.question-card[data-session="trip-2"]')
    expect(card.locator(".question-message")).to_have_text("Which seat?")
    expect(page.locator("#question-count")).to_have_text("1")
