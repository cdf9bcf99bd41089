"""A call in doubt settled in the inbox, in a real browser (Chromium), against a real SQLite
store: the card, the page's own check, the resolution recorded once under the session's
lease, and an external worker going on from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from in_doubt_agents import park_in_doubt, pay_agent
from playwright.sync_api import expect
from serve_support import TOKEN, ServerThread, run_in_thread

import agentloop as al
import agentloop.host
from agentloop.store import SessionStatus, SqliteSessionStore


@pytest.fixture
def server(database: Path) -> Iterator[ServerThread]:
    with ServerThread(database, worker=False, agent=pay_agent) as running:
        yield running


def on_store(database: Path, work: Any) -> Any:
    async def run() -> Any:
        async with SqliteSessionStore(database) as store:
            return await work(store)

    return run_in_thread(run)


def test_a_call_in_doubt_is_settled_in_the_browser(
    database: Path, server: ServerThread, context: Any
) -> None:
    on_store(database, lambda store: park_in_doubt(store, "bill-1"))
    page = context.new_page()
    page.goto(f"{server.base}/?token={TOKEN}")
    expect(page.locator("#live")).to_have_text("● live")
    expect(page.locator("#doubt-count")).to_have_text("1")
    card = page.locator('.doubt-card[data-session="bill-1"]')
    expect(card.locator(".tool-name")).to_have_text("pay")
    expect(card.locator(".arguments")).to_have_text('{\n  "amount": 42\n}')
    # The page checks first: nothing is sent.
    card.locator(".fail").click()
    expect(card.locator(".error")).to_have_text("Enter why the call failed.")
    card.locator(".settle").click()
    expect(card.locator(".error")).to_have_text("Enter the call's result to settle it.")
    card.locator(".settle-result").fill("paid 42 (bank receipt 7)")
    card.locator(".settle").click()
    expect(page.locator("#notice")).to_have_text(
        "bill-1 · pay: Settled by alice; waiting for an external worker to resume the session."
    )
    expect(page.locator(".doubt-card")).to_have_count(0)  # the live list no longer has it

    async def stored(store: SqliteSessionStore) -> Any:
        return (await store.load("bill-1")).status  # type: ignore[union-attr]

    assert on_store(database, stored) is SessionStatus.READY

    async def finish(store: SqliteSessionStore) -> Any:
        worker = al.host.SessionWorker(store=store, agent=pay_agent(store), owner="w1", ttl=30)
        advanced = await worker.advance("bill-1")
        assert isinstance(advanced.step, al.Finished)
        return [item.text_content for item in await store.transcript("bill-1") or []]

    assert on_store(database, finish)[-1] == "done: paid 42 (bank receipt 7)"
