"""A stdio JSON-RPC MCP server (2025 handshake) whose tools/call always answers with a
URL elicitation required error (-32042): tool ``always`` names a well-formed URL each
time, tool ``malformed`` sends ``elicitations`` that are not a list."""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [{"name": name, "inputSchema": {"type": "object"}} for name in ("always", "malformed")]
URL = {"mode": "url", "message": "Sign in", "url": "https://example.com/gate", "elicitationId": "g"}


def error_data(tool: str) -> dict[str, Any]:
    return {"elicitations": "not a list" if tool == "malformed" else [URL]}


for line in sys.stdin:
    message = json.loads(line)
    method, message_id = message.get("method"), message.get("id")
    if message_id is None:
        continue  # a notification
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message_id}
    if method == "initialize":
        reply["result"] = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "gate", "version": "1"},
        }
    elif method == "tools/list":
        reply["result"] = {"tools": TOOLS}
    elif method == "tools/call":
        tool = message["params"]["name"]
        reply["error"] = {"code": -32042, "message": "sign in first", "data": error_data(tool)}
    else:
        reply["error"] = {"code": -32601, "message": f"no method {method}"}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
