"""A stdio "MCP server" (2025 handshake, written by hand) that sends the client the
requests a test scripts: task-augmented elicitation and sampling, ``tasks/*`` with any
params, well formed or not.

Tools:
- ``capabilities``: the client's ``initialize`` capabilities, as JSON text.
- ``drive {"steps": [...]}``: each step is ``{"send": method, "params": {...}}`` (a
  string ``"$task"`` anywhere in the params is the id of the last task the client
  made, ``"$cursor"`` the last ``nextCursor`` it gave), ``{"poll": status}``
  (``tasks/get`` on the last task until it has ``status`` or ended; at most 2,000
  polls), ``{"sleep": seconds}``, ``{"mark": path}`` (writes the file, for the test
  to wait on), ``{"wait": path}`` (until the test writes the file), ``{"request":
  method, "params": {...}}`` (sends a request and does not wait for its answer),
  ``{"abandon": reason}`` (``notifications/cancelled`` for that request) or
  ``{"exit": code}`` (the server process ends at once); the answer is the list of
  what each ``send``/``poll`` got: ``{"result": ...}`` or ``{"error": ...}``, as JSON
  text.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

TOOLS = [
    {"name": "capabilities", "description": "The client's capabilities.", "inputSchema": {}},
    {"name": "drive", "description": "Sends scripted requests.", "inputSchema": {}},
]
for tool in TOOLS:
    tool["inputSchema"] = {"type": "object"}

ENDED = ("completed", "failed", "cancelled")
state: dict[str, Any] = {
    "capabilities": None,
    "task": None,
    "cursor": None,
    "next": 1,
    "pending": None,
}


def write(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def read() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    message: dict[str, Any] = json.loads(line)
    return message


def send(method: str, params: Any) -> dict[str, Any]:
    """Send a request to the client; its response (answering the client's own requests
    meanwhile, ignoring its notifications)."""
    number = state["next"]
    state["next"] += 1
    request_id = f"srv-{number}"
    write({"id": request_id, "method": method, "params": params})
    while True:
        message = read()
        if "method" not in message and message.get("id") == request_id:
            return {key: message[key] for key in ("result", "error") if key in message}
        if "method" in message and "id" in message:  # the client asks us (a ping, say)
            write({"id": message["id"], "result": {}})


def substitute(value: Any) -> Any:
    if value == "$task":
        return state["task"]
    if value == "$cursor":
        return state["cursor"]
    if isinstance(value, dict):
        return {key: substitute(item) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item) for item in value]
    return value


def step(spec: dict[str, Any]) -> dict[str, Any] | None:
    if "sleep" in spec:
        time.sleep(spec["sleep"])
        return None
    if "mark" in spec:
        with open(spec["mark"], "w") as mark:
            mark.write("done")
        return None
    if "wait" in spec:
        for _ in range(2000):
            if os.path.exists(spec["wait"]):
                return None
            time.sleep(0.01)
        return {"error": {"message": f"never {spec['wait']}"}}
    if "request" in spec:
        state["pending"] = f"srv-{state['next']}"
        state["next"] += 1
        write({"id": state["pending"], "method": spec["request"], "params": spec["params"]})
        return None
    if "abandon" in spec:
        params = {"requestId": state["pending"], "reason": spec["abandon"]}
        write({"method": "notifications/cancelled", "params": params})
        return None
    if "exit" in spec:
        os._exit(spec["exit"])
    if "poll" in spec:
        for _ in range(2000):
            answer = send("tasks/get", {"taskId": state["task"]})
            status = answer.get("result", {}).get("status")
            if status in (spec["poll"], *ENDED) or "error" in answer:
                return answer
            time.sleep(0.01)
        return {"error": {"message": f"never {spec['poll']}"}}
    answer = send(spec["send"], substitute(spec.get("params")))
    task = answer.get("result", {}).get("task") if isinstance(answer.get("result"), dict) else None
    if isinstance(task, dict):
        state["task"] = task.get("taskId")
    if isinstance(answer.get("result"), dict) and "nextCursor" in answer["result"]:
        state["cursor"] = answer["result"]["nextCursor"]
    return answer


def call_tool(params: dict[str, Any]) -> dict[str, Any]:
    if params["name"] == "capabilities":
        text = json.dumps(state["capabilities"])
    else:
        answers = [step(spec) for spec in params["arguments"]["steps"]]
        text = json.dumps([answer for answer in answers if answer is not None])
    return {"content": [{"type": "text", "text": text}]}


def main() -> None:
    while True:
        message = read()
        method, message_id = message.get("method"), message.get("id")
        if method is None or message_id is None:
            continue  # a notification, or an answer nobody waits for
        if method == "initialize":
            state["capabilities"] = message["params"]["capabilities"]
            result: dict[str, Any] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "requestor", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            result = call_tool(message["params"])
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            write({"id": message_id, "error": error})
            continue
        write({"id": message_id, "result": result})


if __name__ == "__main__":
    main()
