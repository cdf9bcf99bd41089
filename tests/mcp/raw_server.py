"""A stdio "MCP server" that speaks the 2025 handshake correctly and then answers
``tools/call`` with a malformed result (``content`` is not a list)."""

from __future__ import annotations

import json
import sys

TOOL = {"name": "broken", "description": "Answers garbage.", "inputSchema": {"type": "object"}}


def answer(message_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, message_id = message.get("method"), message.get("id")
    if message_id is None:
        continue  # a notification
    if method == "initialize":
        answer(
            message_id,
            {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            },
        )
    elif method == "tools/list":
        answer(message_id, {"tools": [TOOL]})
    elif method == "tools/call":
        answer(message_id, {"content": "this is not a list of blocks", "isError": "maybe"})
    else:
        error = {"code": -32601, "message": f"no method {method}"}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "error": error}) + "\n")
        sys.stdout.flush()
