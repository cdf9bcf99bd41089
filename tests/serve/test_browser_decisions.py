"""Decided cards, the count, and the session view, in a real browser, with external workers.

The server here only records decisions (``worker=False``): the test resumes
sessions itself, as an external worker would, and the open pages follow live.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from serve_support import TOKEN, ServerThread, build_agent, park, run_in_thread

from agentloop.serve import Worker
from agentloop.store import SqliteSessionStore

EXTERNAL = "waiting for an external worker to resume the session."


@pytest.fixture
def server(database: Path) -> Iterator[ServerThread]:
    with ServerThread(database, worker=False) as running:
        yield running


def resume_elsewhere(database: Path, session_id: str) -> None:
    """What an external worker does: lease the session, apply the decision, run it."""

    async def run() -> None:
        async with SqliteSessionStore(database) as store:
            assert await Worker(store, build_agent(store)).advance(session_id) is True

    run_in_thread(run)


def open_page(context: Any, server: ServerThread, path: str = "/") -> Any:
    page = context.new_page()
    page.goto(f"{server.base}{path}?token={TOKEN}")
    expect(page.locator("#live")).to_have_text("● live")
    page.evaluate("window.__notReloaded = true")
    return page


def card(page: Any, session_id: str) -> Any:
    return page.locator(f'.card[data-session="{session_id}"]')


def count_agrees(page: Any, waiting: int) -> None:
    """The badge, the cards and the empty-inbox line all say ``waiting``."""
    expect(page.locator("#inbox .card")).to_have_count(waiting)
    expect(page.locator("#pending-count")).to_have_text(str(waiting))
    if waiting:
        expect(page.locator("#inbox-empty")).to_have_count(0)
        expect(page.locator("#pending-count")).not_to_have_class("count zero")
    else:
        expect(page.locator("#inbox-empty")).to_have_text("Nothing waits for an approval.")
        expect(page.locator("#pending-count")).to_have_class("count zero")


def test_a_decided_card_leaves_the_list_and_its_status_follows_live(
    context: Any, server: ServerThread, database: Path
) -> None:
    park(database, "s1", "/reports/q3.txt")
    park(database, "s2", "/reports/q4.txt")
    page = open_page(context, server)
    count_agrees(page, 2)

    card(page, "s1").locator("button.approve").click()
    expect(page.locator("#notice")).to_have_text(
        f"s1 · publish_report: Approved by alice; {EXTERNAL}"
    )
    count_agrees(page, 1)
    expect(card(page, "s2")).to_be_visible()
    recent = page.locator('#recent tr[data-session="s1"]')
    expect(recent.locator(".status")).to_have_text("waiting for a worker to resume the session")

    card(page, "s2").locator("input.reason").fill("not this quarter")
    card(page, "s2").locator("button.deny").click()
    expect(page.locator("#notice")).to_have_text(
        f"s2 · publish_report: Denied by alice; {EXTERNAL}"
    )
    count_agrees(page, 0)
    expect(page.locator('#recent tr[data-session="s2"] .action')).to_have_text("deny")

    # An external worker resumes s1: the row's status changes in the open page.
    resume_elsewhere(database, "s1")
    expect(recent.locator(".status")).to_have_text("awaiting input")
    expect(page.locator('#recent tr[data-session="s2"] .status')).to_have_text(
        "waiting for a worker to resume the session"
    )
    count_agrees(page, 0)
    assert page.evaluate("window.__notReloaded") is True


def test_a_card_refused_as_already_decided_leaves_the_list_too(
    context: Any, server: ServerThread, database: Path
) -> None:
    park(database, "s1")
    first = open_page(context, server)
    second = context.new_page()
    second.route("**/events", lambda route: route.abort())  # no live updates in this tab
    second.goto(f"{server.base}/")
    count_agrees(second, 1)
    card(first, "s1").locator("button.approve").click()
    count_agrees(first, 0)
    card(second, "s1").locator("button.approve").click()
    expect(second.locator("#notice")).to_contain_text(
        "s1 · publish_report: this approval was already answered: approved at "
    )
    count_agrees(second, 0)


def test_the_session_view_follows_a_parked_session_to_its_end(
    context: Any, server: ServerThread, database: Path, tmp_path: Path
) -> None:
    park(database, "s1", "/reports/draft.txt")
    session = open_page(context, server, "/sessions/s1")
    expect(session.locator("#session-waiting")).to_have_text(
        "waiting for approval of call call-1 (publish_report)"
    )
    expect(session.locator(".tool-call .outcome")).to_have_text("waiting for approval")
    expect(session.locator(".edited-arguments")).to_have_count(0)

    inbox = open_page(context, server)
    decision = card(inbox, "s1")
    decision.locator("button.edit").click()
    decision.locator("textarea.edited").fill('{"path": "/reports/final.txt"}')
    decision.locator("button.approve-edited").click()
    expect(inbox.locator("#notice")).to_contain_text("Approved with edited arguments by alice")

    # The open session page follows: decided, both argument sets side by side.
    model = json.dumps({"path": "/reports/draft.txt"}, indent=2)
    edited = json.dumps({"path": "/reports/final.txt"}, indent=2)
    expect(session.locator("#session-waiting")).to_have_text(
        "call call-1 (publish_report) approved with edited arguments; "
        "waiting for a worker to resume the session"
    )
    expect(session.locator(".tool-call .outcome")).to_have_text("waiting for a worker")
    expect(session.locator(".argument-pair .original figcaption")).to_have_text(
        "the model's arguments"
    )
    expect(session.locator(".argument-pair .original .arguments")).to_have_text(model)
    expect(session.locator(".argument-pair .edited figcaption")).to_have_text(
        "approved with edited arguments"
    )
    expect(session.locator(".edited-arguments")).to_have_text(edited)

    resume_elsewhere(database, "s1")
    expect(session.locator(".tool-call .outcome")).to_have_text("ok")
    expect(session.locator("#session-waiting")).to_have_count(0)
    expect(session.locator(".tool-call .result-text")).to_have_text("published /reports/final.txt")
    expect(session.locator(".argument-pair .original .arguments")).to_have_text(model)
    expect(session.locator(".edited-arguments")).to_have_text(edited)
    expect(session.locator("#session-state")).to_have_text("IDLE")
    assert session.evaluate("window.__notReloaded") is True
    session.screenshot(path=str(tmp_path / "session-edited.png"), full_page=True)
