"""A JSON-RPC MCP server (2025-11-25) that runs tools as tasks, well and badly.

The ``mcp`` package defines the task types but serves no ``tasks/*`` methods, so
this server speaks the wire itself. Each tool shows one behaviour (see TOOLS).

Run: python task_server.py stdio [notasks]
     python task_server.py http PORT

``push`` (stdio only) sends the ``notifications/tasks/status`` its arguments say
(``{"params": ...}``; ``{"task": id, "status": ...}`` for a well-formed one, which
also lets a ``pushed`` task complete) before it answers.

``notasks``: the server advertises no ``tasks`` capability. Environment:
``MCP_TEST_MARKS`` names a directory where ``tasks/cancel`` leaves
``cancelled-<taskId>``.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from raw_serving import serve

MARKS = Path(os.environ.get("MCP_TEST_MARKS", "."))
NO_TASKS = "notasks" in sys.argv[2:]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}

TOOLS = {
    "work": "required",  # ends after two polls
    "long": "required",  # ends after forty polls
    "asks": "required",  # input_required: tasks/result answers
    "maybe": "optional",  # a task when asked, else a plain answer
    "never": "required",  # works forever
    "vanish": "required",  # tasks/get: no such task
    "wrong_id": "required",  # tasks/get answers another task
    "bad_status": "required",  # tasks/get: a status the spec has not
    "bad_result": "required",  # tasks/result: not a CallToolResult
    "fails": "required",  # status failed, an isError result
    "server_cancels": "required",  # status cancelled
    "bad_create": "required",  # tools/call answers a malformed task
    "pushed": "required",  # works (a poll interval of an hour) until `push` says it completed
    "push": None,  # sends a task status notification, then answers
    "plain": None,  # no task support
}
outbox: list[dict[str, Any]] = []  # notifications written before the next answer (stdio)
pushed: set[str] = set()

lock = threading.Lock()
tasks: dict[str, dict[str, Any]] = {}  # taskId -> {"tool", "polls", "arguments"}
numbers = itertools.count(1)


def task_view(task_id: str, status: str, message: str | None = None) -> dict[str, Any]:
    view = {
        "taskId": task_id,
        "status": status,
        "createdAt": "2026-12-07T00:00:00Z",
        "lastUpdatedAt": "2026-12-07T00:00:00Z",
        "ttl": 60000,
        "pollInterval": 10,
    }
    if message is not None:
        view["statusMessage"] = message
    return view


def text(value: str, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": error}


def push(arguments: dict[str, Any]) -> dict[str, Any]:
    if "params" in arguments:
        params = arguments["params"]
    else:
        task_id = arguments["task"]
        params = task_view(task_id, arguments["status"], "pushed")
        if arguments["status"] == "completed":
            pushed.add(task_id)
    outbox.append({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": params})
    return text("pushed")


def call(params: dict[str, Any]) -> dict[str, Any]:
    name, arguments = params["name"], params.get("arguments") or {}
    if name == "push":
        return push(arguments)
    if "task" not in params:
        if TOOLS.get(name) == "required":
            raise LookupError(f"tool {name} requires task augmentation")
        return text(f"ran plainly: {name} {json.dumps(arguments, sort_keys=True)}")
    if name == "bad_create":
        return {"task": {"taskId": 5, "status": "sometimes"}}
    task_id = f"task-{next(numbers)}"
    tasks[task_id] = {"tool": name, "polls": 0, "arguments": arguments}
    if name == "pushed":
        return {"task": {**task_view(task_id, "working"), "pollInterval": 3_600_000}}
    return {"task": task_view(task_id, "working")}


def get(task_id: str) -> dict[str, Any]:
    task = tasks.get(task_id)
    if task is None:
        raise KeyError(f"no task {task_id}")
    task["polls"] += 1
    tool = task["tool"]
    if tool == "vanish":
        del tasks[task_id]
        raise KeyError(f"no task {task_id}")
    if tool == "wrong_id":
        return task_view("task-999", "working")
    if tool == "bad_status":
        return task_view(task_id, "exploded")
    if tool == "long" and task["polls"] < 40:
        return task_view(task_id, "working", f"poll {task['polls']}")
    if tool == "never" or (tool == "work" and task["polls"] < 2):
        return task_view(task_id, "working", f"poll {task['polls']}")
    if tool == "pushed" and task_id not in pushed:
        return {**task_view(task_id, "working"), "pollInterval": 3_600_000}
    if tool == "fails":
        return task_view(task_id, "failed", "the job broke")
    if tool == "asks":
        return task_view(task_id, "input_required", "waiting for a reviewer")
    if tool == "server_cancels":
        return task_view(task_id, "cancelled", "the operator stopped it")
    return task_view(task_id, "completed")


def result(task_id: str) -> dict[str, Any]:
    task = tasks[task_id]
    if task["tool"] == "bad_result":
        return {"content": "not a list"}
    if task["tool"] == "fails":
        return text("it broke", error=True)
    return text(f"{task['tool']} done: {json.dumps(task['arguments'], sort_keys=True)}")


def capabilities() -> dict[str, Any]:
    found: dict[str, Any] = {"tools": {}}
    if not NO_TASKS:
        found["tasks"] = {"cancel": {}, "requests": {"tools": {"call": {}}}}
    return found


def tool_list() -> list[dict[str, Any]]:
    listed = []
    for name, support in TOOLS.items():
        tool: dict[str, Any] = {"name": name, "description": f"{name}.", "inputSchema": SCHEMA}
        if support is not None:
            tool["execution"] = {"taskSupport": support}
        listed.append(tool)
    return listed


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    method, message_id = message.get("method"), message.get("id")
    if message_id is None:
        return None  # a notification
    params = message.get("params") or {}
    try:
        with lock:
            if method == "initialize":
                value: Any = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": capabilities(),
                    "serverInfo": {"name": "tasks", "version": "1"},
                }
            elif method == "tools/list":
                value = {"tools": tool_list()}
            elif method == "tools/call":
                value = call(params)
            elif method == "tasks/get":
                value = get(params["taskId"])
            elif method == "tasks/result":
                value = result(params["taskId"])
            elif method == "tasks/cancel":
                (MARKS / f"cancelled-{params['taskId']}").write_text("")
                tasks.get(params["taskId"], {})["cancelled"] = True
                value = task_view(params["taskId"], "cancelled")
            else:
                raise NotImplementedError(f"no method {method}")
    except (KeyError, LookupError, NotImplementedError) as error:
        code = -32601 if isinstance(error, NotImplementedError) else -32602
        return {"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": str(error)}}
    return {"jsonrpc": "2.0", "id": message_id, "result": value}


if __name__ == "__main__":
    serve(lambda message, _name: answer(message), outbox)
