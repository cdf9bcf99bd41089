"""The scripted tour: a host loop over a ScriptedModel that calls two tools,
hits an approval (auto-answered here), and finishes.

The model is scripted (no network, no API key): it answers from the list
below. Every step and every event is printed as it happens.
"""

from __future__ import annotations

from typing import ClassVar

import anyio

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.permissions
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import call, chunked, tool_calls


class Add:
    spec = al.ToolSpec(
        "add",
        "Add two integers.",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        annotations=al.ToolAnnotations(read_only=True, idempotent=True),
    )

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return str(request.input["a"] + request.input["b"])


class ReadNote:
    spec = al.ToolSpec(
        "read_note",
        "Read a note by name.",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
    notes: ClassVar[dict[str, str]] = {"groceries": "eggs, flour, milk"}

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemRead(f"/notes/{request.input['name']}")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return self.notes.get(request.input["name"], "no such note")


class AskBeforeReading:
    """Reads need a human's yes."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if request.kind == "filesystem.read":
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Allow()


class PrintEvents:
    def handle_event(self, event: al.observe.AgentEvent) -> None:
        if isinstance(event, al.observe.ContentDelta):
            if isinstance(event.delta, al.AppendText):
                print(f"    [token] {event.delta.text!r}")
            return
        print(f"    [event] {type(event).__name__}: {_brief(event)}")


def _brief(event: al.observe.AgentEvent) -> str:
    if isinstance(event, al.observe.ToolCallRequested):
        return f"{event.call.name}({event.call.input}) id={event.call.id}"
    if isinstance(event, al.observe.ToolResultReceived):
        return f"{event.result.call_id} -> {event.result.output!r}"
    if isinstance(event, al.observe.TurnFinished):
        return f"{event.result.turn_id} {event.result.finish_reason.value}"
    if isinstance(event, al.observe.ApprovalRequested):
        return f"{event.call_id}: {event.summary}"
    return ""


SCRIPT = [
    tool_calls(call("add", {"a": 2, "b": 40})),
    tool_calls(call("read_note", {"name": "groceries"})),
    chunked("2 + 40 = 42, ", "and the groceries note says: ", "eggs, flour, milk."),
]


async def main() -> None:
    print("agentloop scripted demo (the model is a ScriptedModel, not a real LLM)\n")
    model = al.testing.ScriptedModel(SCRIPT)
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(Add()).with_tool(ReadNote()))
        .permissions(AskBeforeReading())
        .observer(PrintEvents())
        .transcript([al.Item.text(al.ItemKind.SYSTEM, "You are helpful.")])
        .input([al.Item.text(al.ItemKind.USER, "What is 2 + 40, and what's on my grocery note?")])
        .build()
    )
    driver = await agent.start(
        al.SessionConfig("demo", cache=al.model.PromptCacheRequest.automatic())
    )
    while True:
        step = await driver.next()
        match step:
            case al.Finished(result):
                print(f"step: Finished ({result.finish_reason.value})")
                print(f"\nanswer: {result.items[-1].text_content}")
                break
            case al.ApprovalRequest() as pending:
                print(f"step: ApprovalRequest {pending.tool_name} {pending.summary!r}")
                print("    (auto-answered in the demo: approve)")
                pending.approve()
            case al.AfterToolResult() as pause:
                print(f"step: AfterToolResult (transcript has {pause.transcript_len} items)")
            case al.AwaitingInput():
                print("step: AwaitingInput")
                break
    model.assert_complete()
    al.transcript.validate_transcript(driver.snapshot().transcript)
    print(f"transcript: {len(driver.snapshot().transcript)} items, every tool call answered")


if __name__ == "__main__":
    anyio.run(main)
