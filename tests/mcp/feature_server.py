"""A stdio JSON-RPC MCP server whose resources and prompts answers are hostile.

Run: python feature_server.py [noresources]

Each resource URI / prompt name shows one bad answer (see ANSWERS); the
``good`` ones answer well, so a test can check the connection still serves.
``noresources``: the server advertises tools only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

BARE = "noresources" in sys.argv[1:]

READS: dict[str, Any] = {
    "good://text": {"contents": [{"uri": "good://text", "text": "fine"}]},
    "bad://not-a-list": {"contents": "garbage"},
    "bad://no-text": {"contents": [{"uri": "bad://no-text"}]},
    "bad://blob": {"contents": [{"uri": "bad://blob", "blob": "%%% not base64 %%%"}]},
    "bad://null": None,
}
PROMPTS: dict[str, Any] = {
    "good": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]},
    "bad_role": {"messages": [{"role": "narrator", "content": {"type": "text", "text": "x"}}]},
    "no_messages": {"description": "none"},
}


def resources_page(cursor: str | None) -> dict[str, Any]:
    if cursor is not None and cursor.startswith("loop"):
        return {"resources": [], "nextCursor": cursor + "+"}  # pages without end
    listed = [{"uri": uri, "name": uri.split("://")[1]} for uri in READS]
    return {"resources": listed, "nextCursor": "loop" if "endless" in sys.argv else None}


def answer(method: str, params: dict[str, Any]) -> Any:
    if method == "initialize":
        capabilities: dict[str, Any] = {"tools": {}}
        if not BARE:
            capabilities |= {"resources": {}, "prompts": {}}
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": capabilities,
            "serverInfo": {"name": "features", "version": "1"},
        }
    if method == "tools/list":
        tool = {"name": "read_resource", "inputSchema": {"type": "object"}}
        return {"tools": [tool] if "clash" in sys.argv else []}
    if method == "resources/list":
        return resources_page(params.get("cursor"))
    if method == "resources/templates/list":
        return {"resourceTemplates": "not a list" if "badtemplates" in sys.argv else []}
    if method == "resources/read":
        if params["uri"] not in READS:
            raise LookupError(f"no resource {params['uri']}")
        return READS[params["uri"]]
    if method == "prompts/list":
        return {"prompts": [{"name": name} for name in PROMPTS]}
    if method == "prompts/get":
        return PROMPTS[params["name"]]
    raise NotImplementedError(f"no method {method}")


for line in sys.stdin:
    message = json.loads(line)
    if message.get("id") is None:
        continue  # a notification
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
    try:
        reply["result"] = answer(message["method"], message.get("params") or {})
    except (LookupError, NotImplementedError) as error:
        reply["error"] = {"code": -32602, "message": str(error)}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
