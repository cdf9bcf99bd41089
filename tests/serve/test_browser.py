"""The inbox in a real browser against a real SQLite store with real sessions."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

from playwright.sync_api import expect
from serve_support import TOKEN, ServerThread, load, park, run_in_thread, transcript_text

from agentloop.store import input_digest

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
UPDATE_SCREENSHOTS = "AGENTLOOP_UPDATE_SCREENSHOTS"
"""Set to 1 to copy the screenshots the tests take into docs/img (see docs/serve.md)."""


def screenshot(page: Any, directory: Path, name: str) -> Path:
    """A full-page PNG of ``page`` in ``directory``, checked; copied to docs/img on request.

    The tests always take and check the screenshot; docs/img changes only with
    ``AGENTLOOP_UPDATE_SCREENSHOTS=1``, so a test run leaves the tree clean.
    """
    path = directory / name
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{name} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    viewport = page.viewport_size
    assert width == viewport["width"], (width, viewport)
    assert height >= viewport["height"], (height, viewport)
    assert len(data) > 10_000, f"{name} is {len(data)} bytes: a blank page?"
    if os.environ.get(UPDATE_SCREENSHOTS) == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMG / name)
    return path


def open_inbox(context: Any, server: ServerThread) -> Any:
    page = context.new_page()
    page.goto(f"{server.base}/?token={TOKEN}")
    expect(page.locator("#live")).to_have_text("● live")
    page.evaluate("window.__notReloaded = true")
    return page


def card(page: Any, session_id: str) -> Any:
    return page.locator(f'.card[data-session="{session_id}"]')


def test_a_click_approves_and_the_session_finishes_without_reload(
    context: Any, server: ServerThread, database: Path, tmp_path: Path
) -> None:
    park(database, "report-q3", "/reports/q3.txt")
    park(database, "report-q4", "/reports/q4.txt")
    page = open_inbox(context, server)
    expect(page.locator(".card")).to_have_count(2)
    # Newest first: q4 was parked last.
    expect(page.locator(".card").first).to_have_attribute("data-session", "report-q4")
    first = card(page, "report-q3")
    expect(first.locator(".tool")).to_contain_text("publish_report")
    expect(first.locator(".arguments")).to_have_text('{\n  "path": "/reports/q3.txt"\n}')
    expect(first.locator(".requests")).to_contain_text("filesystem.write Write /reports/q3.txt")
    expect(first.locator(".requests")).to_contain_text("(sensitive_path)")
    expect(first.locator(".waited")).to_contain_text("waiting")
    screenshot(page, tmp_path, "inbox.png")

    first.locator("button.approve").click()
    expect(page.locator("#notice")).to_have_text(
        "report-q3 · publish_report: Approved by alice; a worker resumes the session."
    )
    expect(first).to_have_count(0)  # decided: it left the list
    expect(page.locator(".card")).to_have_count(1)
    row = page.locator('#recent tr[data-session="report-q3"]')
    expect(row.locator(".status")).to_have_text("awaiting input")  # finished: the turn ended
    expect(page.locator("#pending-count")).to_have_text("1")
    assert page.evaluate("window.__notReloaded") is True
    assert transcript_text(database, "report-q3")[-1] == "Done: published /reports/q3.txt"

    page.locator('a.session-link[href="/sessions/report-q4"]').wait_for()
    page.goto(f"{server.base}/sessions/report-q3")
    expect(page.locator("#session-state")).to_have_text("IDLE")
    expect(page.locator(".tool-call .outcome")).to_have_text("ok")
    expect(page.locator(".tool-call .result-text")).to_have_text("published /reports/q3.txt")
    expect(page.locator(".item.assistant .text")).to_have_text("Done: published /reports/q3.txt")
    # Both model calls: the first in the parked process, the second in the server's worker.
    expect(page.locator("#usage")).to_have_text("300 in · 42 out")
    expect(page.locator("#cost")).to_have_text("$0.003500")
    screenshot(page, tmp_path, "session.png")

    page.goto(f"{server.base}/audit")
    audit_row = page.locator("#audit tbody tr")
    expect(audit_row).to_have_count(1)
    expect(audit_row.locator(".who")).to_have_text("alice")
    expect(audit_row.locator(".action")).to_have_text("approve")
    expect(audit_row.locator(".digest")).to_have_text(
        input_digest("publish_report", {"path": "/reports/q3.txt"})
    )


def test_deny_with_a_reason(context: Any, server: ServerThread, database: Path) -> None:
    park(database, "s1", "/etc/passwd")
    page = open_inbox(context, server)
    decision = card(page, "s1")
    decision.locator("input.reason").fill("not outside /reports")
    decision.locator("button.edit").click()
    # A live refresh while the person types keeps what they typed and opened.
    park(database, "s2")
    expect(card(page, "s2")).to_be_visible()
    expect(decision.locator("input.reason")).to_have_value("not outside /reports")
    expect(decision.locator(".editor")).to_be_visible()
    decision.locator("button.deny").click()
    expect(page.locator("#notice")).to_have_text(
        "s1 · publish_report: Denied by alice; a worker resumes the session."
    )
    expect(decision).to_have_count(0)
    expect(page.locator('#recent tr[data-session="s1"] .status')).to_have_text("awaiting input")
    assert transcript_text(database, "s1")[-1] == "Done: not outside /reports"
    page.goto(f"{server.base}/sessions/s1")
    expect(page.locator(".tool-call .outcome")).to_have_text("denied")
    expect(page.locator(".tool-call .result-text")).to_have_text("not outside /reports")
    page.goto(f"{server.base}/audit")
    expect(page.locator("#audit tbody tr")).to_contain_text("not outside /reports")


def test_edited_arguments_are_validated_inline_then_approved(
    context: Any, server: ServerThread, database: Path
) -> None:
    park(database, "s1", "/reports/draft.txt")
    page = open_inbox(context, server)
    decision = card(page, "s1")
    decision.locator("button.edit").click()
    editor = decision.locator("textarea.edited")
    editor.fill('{"path": 5}')
    decision.locator("button.approve-edited").click()
    expect(decision.locator(".error")).to_have_text(
        'The edited arguments do not match the tool\'s schema: at path: 5 is not of type "string"'
    )
    editor.fill('{"path": "/reports/final.txt", "force": true}')
    decision.locator("button.approve-edited").click()
    expect(decision.locator(".error")).to_have_text(
        "The edited arguments do not match the tool's schema: "
        "additional property 'force' is not allowed"
    )
    editor.fill("{not json")
    decision.locator("button.approve-edited").click()
    expect(decision.locator(".error")).to_contain_text("The edited arguments are not JSON")
    assert load(database, "s1").approvals == {}  # nothing was recorded

    editor.fill('{"path": "/reports/final.txt"}')
    decision.locator("button.approve-edited").click()
    expect(page.locator("#notice")).to_have_text(
        "s1 · publish_report: Approved with edited arguments by alice; "
        "a worker resumes the session."
    )
    expect(page.locator('#recent tr[data-session="s1"] .status')).to_have_text("awaiting input")
    assert transcript_text(database, "s1")[-1] == "Done: published /reports/final.txt"
    approval = load(database, "s1").approvals["call-1"]
    assert approval.input_digest == input_digest("publish_report", {"path": "/reports/final.txt"})
    page.goto(f"{server.base}/audit")
    row = page.locator("#audit tbody tr")
    expect(row.locator(".action")).to_have_text("approve with")
    expect(row.locator("pre")).to_have_text(json.dumps({"path": "/reports/final.txt"}, indent=2))


def test_two_tabs_decide_the_same_approval_one_wins(
    context: Any, server: ServerThread, database: Path
) -> None:
    park(database, "s1")
    first = open_inbox(context, server)
    second = context.new_page()
    # The second tab lost its live connection: it still shows the approval.
    second.route("**/events", lambda route: route.abort())
    second.goto(f"{server.base}/")
    expect(card(second, "s1")).to_be_visible()
    card(first, "s1").locator("button.approve").click()
    expect(first.locator("#notice")).to_contain_text("Approved by alice")
    card(second, "s1").locator("input.reason").fill("no")
    card(second, "s1").locator("button.deny").click()
    notice = second.locator("#notice")
    expect(notice).to_contain_text("s1 · publish_report: this approval was already answered")
    expect(notice).to_contain_text("nothing was changed")
    # Not decidable any more: it left the second tab's list too, and the count agrees.
    expect(card(second, "s1")).to_have_count(0)
    expect(second.locator("#pending-count")).to_have_text("0")
    expect(first.locator('#recent tr[data-session="s1"] .status')).to_have_text("awaiting input")
    assert transcript_text(database, "s1")[-1] == "Done: published /reports/q3.txt"
    assert load(database, "s1").approvals["call-1"].approved is True


def test_a_hostile_tool_argument_is_rendered_inert(
    context: Any, server: ServerThread, database: Path
) -> None:
    hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    park(database, "s1", hostile)
    page = open_inbox(context, server)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    decision = card(page, "s1")
    expect(decision.locator(".arguments")).to_have_text(json.dumps({"path": hostile}, indent=2))
    assert page.locator("img").count() == 0
    assert page.evaluate("window.__pwned") is None
    decision.locator("button.approve").click()
    expect(page.locator('#recent tr[data-session="s1"] .status')).to_have_text("awaiting input")
    page.goto(f"{server.base}/sessions/s1")
    expect(page.locator(".item.user .text")).to_have_text(hostile)
    expect(page.locator(".item.assistant .text")).to_have_text(f"Done: published {hostile}")
    assert page.locator("img").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []


def test_approvals_arriving_or_answered_elsewhere_show_up_live(
    context: Any, server: ServerThread, database: Path
) -> None:
    page = open_inbox(context, server)
    expect(page.locator("#inbox-empty")).to_be_visible()
    park(database, "late")
    expect(card(page, "late")).to_be_visible()
    expect(page.locator("#pending-count")).to_have_text("1")
    # Answered by another process: the store records it, the worker finishes the session.
    from agentloop.store import SqliteSessionStore

    async def approve_elsewhere() -> None:
        async with SqliteSessionStore(database) as store:
            await store.record_approval(
                "late",
                "call-1",
                input_digest=input_digest("publish_report", {"path": "/reports/q3.txt"}),
                approved=True,
            )

    run_in_thread(approve_elsewhere)
    expect(card(page, "late")).to_have_count(0)
    expect(page.locator("#pending-count")).to_have_text("0")
    assert page.evaluate("window.__notReloaded") is True


def test_the_page_needs_the_token(context: Any, server: ServerThread) -> None:
    page = context.new_page()
    response = page.goto(f"{server.base}/")
    assert response is not None
    assert response.status == 401
    expect(page.locator("body")).to_contain_text("needs its access token")
    response = page.goto(f"{server.base}/?token=wrong-token-0123456789")
    assert response is not None
    assert response.status == 401
