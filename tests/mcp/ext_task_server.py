"""A JSON-RPC MCP server (2026-07-28) that speaks the tasks extension, well and badly.

``io.modelcontextprotocol/tasks`` (SEP-2663): a ``tools/call`` whose request
declares the extension in its per-request capabilities may be answered with a
task (``resultType: "task"``), followed by ``tasks/get`` / ``tasks/update`` /
``tasks/cancel``. Neither SDK serves it, so this server speaks the wire itself.
Each tool shows one behaviour (see TOOLS).

Run: python ext_task_server.py stdio
     python ext_task_server.py http PORT

Environment: ``MCP_TEST_MARKS`` names a directory where ``tasks/cancel`` leaves
``cancelled-<taskId>``, ``tasks/update`` leaves ``update-<taskId>-<n>`` (the
responses as JSON) and every ``tasks/*`` request over HTTP appends its
``Mcp-Name`` header to ``names``.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from pathlib import Path
from typing import Any

from raw_serving import serve

MARKS = Path(os.environ.get("MCP_TEST_MARKS", "."))
EXTENSION = "io.modelcontextprotocol/tasks"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}
ANY = {"type": "object"}
NAME_FORM = {
    "mode": "form",
    "message": "Please enter your name.",
    "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
}
SAMPLE = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
    "maxTokens": 20,
}

TOOLS = {
    "work": "a task that completes after two polls",
    "plain": "answered at once, even with the extension",
    "fails": "a task that fails with a JSON-RPC error",
    "tool_error": "a task that completes with an isError result",
    "server_cancels": "a task the server cancels",
    "never": "a task that works forever",
    "asks": "input_required: an elicitation (key 'name'), then 'Hello, <name>'",
    "asks_twice": "two elicitation rounds (keys 'first', 'second')",
    "samples": "input_required: a sampling request (key 'hi')",
    "vanish": "tasks/get: no such task",
    "shaped": "answers tools/call with arguments['create'] and tasks/get with "
    "arguments['polls'] in turn (then the last one again)",
    "requires_task": "refuses a request without the extension (-32021)",
    "confirm_first": "an input-required result (multi round-trip, key 'ok') first, then "
    "a task whose result says the answer",
    "pushed": "a task polled once an hour, completed once `push` names it",
    "push": "(stdio) sends notifications/tasks: the task arguments['task'] completed",
}
outbox: list[dict[str, Any]] = []  # notifications written before the next answer (stdio)

lock = threading.Lock()
tasks: dict[str, dict[str, Any]] = {}
numbers = itertools.count(1)
updates = itertools.count(1)


def view(task_id: str, status: str, message: str | None = None, **extra: Any) -> dict[str, Any]:
    task = {
        "taskId": task_id,
        "status": status,
        "createdAt": "2026-12-07T00:00:00Z",
        "lastUpdatedAt": "2026-12-07T00:00:00Z",
        "ttlMs": 60000,
        "pollIntervalMs": 10,
        **extra,
    }
    if message is not None:
        task["statusMessage"] = message
    return task


def text(value: str, error: bool = False) -> dict[str, Any]:
    content = [{"type": "text", "text": value}]
    return {"content": content, "isError": error, "resultType": "complete"}


class Refused(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.data = code, data


def declares_extension(params: dict[str, Any]) -> bool:
    meta = params.get("_meta") or {}
    capabilities = meta.get("io.modelcontextprotocol/clientCapabilities") or {}
    return EXTENSION in (capabilities.get("extensions") or {})


def call(params: dict[str, Any]) -> dict[str, Any]:
    name, arguments = params["name"], params.get("arguments") or {}
    if name == "push":
        task_id = arguments["task"]
        tasks[task_id]["pushed"] = True
        result = text("pushed done")
        params = view(task_id, "completed", "pushed", result=result)
        outbox.append({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params})
        return text("pushed")
    if name == "plain" or not declares_extension(params):
        if name == "requires_task":
            raise Refused(
                -32021,
                "Missing required client capability",
                {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            )
        return text(f"ran plainly: {name} {json.dumps(arguments, sort_keys=True)}")
    if name == "confirm_first" and not params.get("inputResponses"):
        ask = {"method": "elicitation/create", "params": {**NAME_FORM, "message": "go ahead?"}}
        return {"resultType": "input_required", "inputRequests": {"ok": ask}, "requestState": "s1"}
    task_id = f"task-{next(numbers)}"
    created = arguments.get("create")
    if name == "shaped" and isinstance(created, dict) and isinstance(created.get("taskId"), str):
        task_id = created["taskId"]  # the drawn task id is the one tasks/get knows
    tasks[task_id] = {"tool": name, "polls": 0, "arguments": arguments, "answers": {}}
    if name == "shaped":
        return created
    if name == "pushed":
        return {"resultType": "task", **view(task_id, "working", pollIntervalMs=3_600_000)}
    return {"resultType": "task", **view(task_id, "working", "started")}


def get(task_id: str) -> dict[str, Any]:
    task = tasks.get(task_id)
    if task is None:
        raise Refused(-32602, f"Failed to retrieve task: no task {task_id}")
    task["polls"] += 1
    tool, polls, answers = task["tool"], task["polls"], task["answers"]
    done = {"resultType": "complete"}
    if task.get("cancelled"):
        return {**done, **view(task_id, "cancelled", "cancelled by the client")}
    if tool == "shaped":
        shapes = task["arguments"]["polls"]
        return shapes[min(polls, len(shapes)) - 1]
    if tool == "vanish":
        del tasks[task_id]
        raise Refused(-32602, f"Failed to retrieve task: no task {task_id}")
    if tool == "pushed" and not task.get("pushed"):
        return {**done, **view(task_id, "working", pollIntervalMs=3_600_000)}
    if tool == "never" or (tool == "work" and polls < 2):
        return {**done, **view(task_id, "working", f"poll {polls}")}
    if tool == "fails":
        error = {"code": -32603, "message": "API rate limit exceeded"}
        return {**done, **view(task_id, "failed", "the job broke", error=error)}
    if tool == "server_cancels":
        return {**done, **view(task_id, "cancelled", "the operator stopped it")}
    if tool == "tool_error":
        return {**done, **view(task_id, "completed", result=text("it broke", error=True))}
    if tool == "confirm_first":
        said = json.dumps(task["arguments"], sort_keys=True)
        return {**done, **view(task_id, "completed", result=text(f"confirmed: {said}"))}
    if tool in ("asks", "asks_twice", "samples"):
        return {**done, **interactive(task_id, tool, answers)}
    result = text(f"{tool} done: {json.dumps(task['arguments'], sort_keys=True)}")
    return {**done, **view(task_id, "completed", result=result)}


def interactive(task_id: str, tool: str, answers: dict[str, Any]) -> dict[str, Any]:
    wanted = {"asks": ["name"], "asks_twice": ["first", "second"], "samples": ["hi"]}[tool]
    for key in wanted:
        if key not in answers:
            request = (
                {"method": "sampling/createMessage", "params": SAMPLE}
                if tool == "samples"
                else {"method": "elicitation/create", "params": {**NAME_FORM, "message": key}}
            )
            return view(task_id, "input_required", "waiting", inputRequests={key: request})
    if tool == "samples":
        said = answers["hi"]["content"]["text"]
        return view(task_id, "completed", result=text(f"the model said: {said}"))
    parts = []
    for key in wanted:
        given = answers[key]
        parts.append(given["content"]["name"] if given["action"] == "accept" else given["action"])
    return view(task_id, "completed", result=text("Hello, " + " and ".join(parts)))


def update(params: dict[str, Any]) -> dict[str, Any]:
    task_id = params["taskId"]
    task = tasks.get(task_id)
    if task is None:
        raise Refused(-32602, f"no task {task_id}")
    responses = params["inputResponses"]
    (MARKS / f"update-{task_id}-{next(updates)}").write_text(json.dumps(responses, sort_keys=True))
    task["answers"].update(responses)
    return {"resultType": "complete"}


def cancel(params: dict[str, Any]) -> dict[str, Any]:
    task_id = params["taskId"]
    (MARKS / f"cancelled-{task_id}").write_text("")
    if task_id in tasks:
        tasks[task_id]["cancelled"] = True
    return {"resultType": "complete"}


def tool_list() -> list[dict[str, Any]]:
    return [
        {"name": name, "description": about, "inputSchema": ANY if name == "shaped" else SCHEMA}
        for name, about in TOOLS.items()
    ]


def discover() -> dict[str, Any]:
    return {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}, "extensions": {EXTENSION: {}}},
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "ext-tasks", "version": "1"}},
    }


METHODS = {
    "tools/call": call,
    "tasks/update": update,
    "tasks/cancel": cancel,
}


def answer(message: dict[str, Any], name_header: str | None = None) -> dict[str, Any] | None:
    method, message_id = message.get("method"), message.get("id")
    if message_id is None:
        return None  # a notification
    params = message.get("params") or {}
    if name_header is not None and str(method).startswith("tasks/"):
        with (MARKS / "names").open("a") as names:
            names.write(f"{method} {name_header}\n")
    try:
        with lock:
            if method == "server/discover":
                value: Any = discover()
            elif method == "tools/list":
                value = {"tools": tool_list(), "resultType": "complete", "ttlMs": 0,
                         "cacheScope": "private"}  # fmt: skip
            elif method == "tasks/get":
                value = get(params["taskId"])
            elif method in METHODS:
                value = METHODS[method](params)
            else:
                raise Refused(-32601, f"no method {method}")
    except Refused as error:
        body: dict[str, Any] = {"code": error.code, "message": str(error)}
        if error.data is not None:
            body["data"] = error.data
        return {"jsonrpc": "2.0", "id": message_id, "error": body}
    return {"jsonrpc": "2.0", "id": message_id, "result": value}


if __name__ == "__main__":
    serve(answer, outbox)
