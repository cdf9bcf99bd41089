"""Answer an approval after a restart: the session waits in a SQLite file, not in memory.

    python examples/approval_after_restart.py start DB_PATH    # run until the approval, exit
    python examples/approval_after_restart.py approve DB_PATH  # a new process: approve, finish
    python examples/approval_after_restart.py                  # both, with a temporary file

The model is a ScriptedModel that decides from the transcript it receives, so the
second process gets the same replies the first would have.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.testing
import agentloop.tools
from agentloop.store import SqliteSessionStore
from agentloop.testing import Reply, call, format_transcript, tool_calls

SESSION_ID = "report-q3"


class PublishReport:
    """A side effect (not idempotent): a call that started is never run twice."""

    spec = al.ToolSpec(
        "publish_report",
        "Publish a report.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemWrite(request.input["path"])]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return f"published {request.input['path']}"


class AskBeforeWriting:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.write":
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Allow()


def answer(request: al.model.TurnRequest) -> Reply | str:
    """Call the tool after the user's message; report its result after the tool's."""
    last = request.transcript[-1]
    if last.kind is al.ItemKind.USER:
        return tool_calls(call("publish_report", {"path": "/reports/q3.txt"}, id="call-1"))
    result = last.parts[0]
    assert isinstance(result, al.ToolResultPart)
    return f"Done: {result.output}."


def build_agent(store: SqliteSessionStore) -> al.Agent:
    """The same agent in both processes: model, tools, permissions, store."""
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(answer))
        .add_tool_source(al.ToolRegistry().with_tool(PublishReport()))
        .permissions(AskBeforeWriting())
        .store(store)  # a checkpoint is saved after every step
        .build()
    )


def show(step: al.ApprovalRequest) -> None:
    print(f"approval needed: {step.tool_name} {step.input} ({step.summary})")


async def start(path: Path) -> None:
    async with SqliteSessionStore(path) as store:
        driver = await build_agent(store).start(SESSION_ID)
        driver.submit_input([al.Item.text(al.ItemKind.USER, "Publish the Q3 report.")])
        step = await driver.next()
        assert isinstance(step, al.ApprovalRequest)
        show(step)
        print(f"session {SESSION_ID} saved; exiting without answering")


async def approve(path: Path) -> None:
    async with SqliteSessionStore(path) as store:
        driver = await build_agent(store).resume(session_id=SESSION_ID)
        print(f"resumed session {SESSION_ID} in state {driver.state}")
        if driver.state is not al.DriverState.AWAITING_APPROVAL:
            sys.exit("nothing to approve: run `start DB_PATH` first")
        step = await driver.next()  # the pending approval surfaces again
        assert isinstance(step, al.ApprovalRequest)
        show(step)
        step.approve()
        finished = await driver.run_until_blocked()
        assert isinstance(finished, al.Finished)
        print(f"answer: {finished.result.items[-1].text_content}")
        print("transcript:")
        print(format_transcript(driver.snapshot().transcript))


def main(arguments: list[str]) -> None:
    if not arguments:
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "sessions.db"
            anyio.run(start, path)
            anyio.run(approve, path)  # another store opening, as a new process would do
        return
    command, database = arguments
    anyio.run({"start": start, "approve": approve}[command], Path(database))


if __name__ == "__main__":
    main(sys.argv[1:])
