"""`agentloop replay` of stored sessions with approval decisions: parked, decided, edited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from cli_support import console, lines

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.store
import agentloop.testing
import agentloop.tools
from agentloop.cli import main
from agentloop.serve import Worker
from agentloop.store import SqliteSessionStore, export_jsonl, input_digest

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
ORIGINAL = {"path": "/reports/q3.txt"}
EDITED = {"path": "/reports/final.txt"}


class Publish:
    spec = al.ToolSpec("publish_report", "Publish a report.", SCHEMA)

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return f"published {request.input['path']}"


class AskFirst:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        return al.permissions.AskApproval("publishing needs a person", request.summary)


def answer(request: al.model.TurnRequest) -> Any:
    last = request.transcript[-1]
    if last.kind is al.ItemKind.USER:
        return al.testing.tool_calls(al.testing.call("publish_report", ORIGINAL, id="call-1"))
    result = last.parts[0]
    assert isinstance(result, al.ToolResultPart)
    return f"Done: {result.output}"


def agent(store: al.store.SessionStore) -> al.Agent:
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(answer))
        .add_tool_source(al.ToolRegistry().with_tool(Publish()))
        .permissions(AskFirst())
        .store(store)
        .build()
    )


def park(database: Path, *, decide: dict[str, Any] | None = None, resume: bool = False) -> None:
    """Park session ``s1`` on its approval; optionally record a decision and resume it."""

    async def run() -> None:
        async with SqliteSessionStore(database) as store:
            driver = await agent(store).start("s1")
            driver.submit_input([al.Item.text(al.ItemKind.USER, "publish the report")])
            assert isinstance(await driver.next(), al.ApprovalRequest)
            if decide is not None:
                await store.record_approval("s1", "call-1", **decide)
            if resume:
                assert await Worker(store, agent(store)).advance("s1") is True

    anyio.run(run)


def replay(database: Path) -> tuple[int, list[str]]:
    target, buffer = console()
    status = main(["replay", str(database)], console=target)
    return status, lines(buffer)


START = [
    "[user] publish the report",
    '[assistant] -> publish_report({"path": "/reports/q3.txt"}) [call-1]',
]
EDIT_LINE = (
    '[approval] call-1 approved with edited arguments: publish_report({"path": '
    '"/reports/final.txt"}) (the model\'s: {"path": "/reports/q3.txt"})'
)
APPROVED_WITH_EDIT = {
    "input_digest": input_digest("publish_report", EDITED),
    "approved": True,
    "edited_input": EDITED,
}


def test_a_parked_session_reads_waiting_for_approval(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    park(database)
    status, out = replay(database)
    assert status == 0
    assert out == [
        f"replaying session 's1' from {database} (2 items)",
        *START,
        "waiting for approval of call call-1 (publish_report)",
    ]


def test_a_decided_session_not_yet_resumed_says_what_it_waits_for(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    park(database, decide=APPROVED_WITH_EDIT)
    status, out = replay(database)
    assert status == 0
    assert out[1:] == [
        *START,
        EDIT_LINE,
        "call call-1 (publish_report) approved with edited arguments; waiting for a worker "
        "to resume the session",
    ]


def test_a_denied_session_not_yet_resumed(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    decision = {"input_digest": input_digest("publish_report", ORIGINAL), "approved": False}
    park(database, decide={**decision, "reason": "not today"})
    assert replay(database)[1][-1] == (
        "call call-1 (publish_report) denied; waiting for a worker to resume the session"
    )


def test_edited_arguments_show_next_to_the_models(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    park(database, decide=APPROVED_WITH_EDIT, resume=True)
    status, out = replay(database)
    assert status == 0
    assert out == [
        f"replaying session 's1' from {database} (4 items)",
        *START,
        EDIT_LINE,
        "[tool] <- call-1: published /reports/final.txt",
        "[assistant] Done: published /reports/final.txt",
    ]


def test_an_approval_without_an_edit_adds_no_line(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    decision = {"input_digest": input_digest("publish_report", ORIGINAL), "approved": True}
    park(database, decide=decision, resume=True)
    assert replay(database)[1][1:] == [
        *START,
        "[tool] <- call-1: published /reports/q3.txt",
        "[assistant] Done: published /reports/q3.txt",
    ]


def test_an_unanswered_call_outside_a_store_is_still_not_provider_valid(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    export_jsonl(
        [
            al.Item.text(al.ItemKind.USER, "publish the report"),
            al.Item(
                al.ItemKind.ASSISTANT, (al.ToolCallPart("call-1", "publish_report", ORIGINAL),)
            ),
        ],
        path,
    )
    target, buffer = console()
    assert main(["replay", str(path)], console=target) == 0
    assert lines(buffer)[-1] == (
        "note: the transcript is not provider-valid: tool_call(s) without matching "
        "tool_result: call-1"
    )
