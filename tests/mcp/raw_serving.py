"""How the raw MCP test servers (``task_server.py``, ``ext_task_server.py``) are served:
JSON-RPC over HTTP (one POST, one JSON reply) or over stdio (a line each way, with the
notifications queued in ``outbox`` written before the next reply)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[Any, "str | None"], "dict[str, Any] | None"]
"""A server's answer to a message, given the HTTP request's ``Mcp-Name`` header
(``"(none)"`` when absent; ``None`` over stdio)."""


def serve(answer: Answer, outbox: list[dict[str, Any]]) -> None:
    """Serve ``answer`` as the command line says: ``http PORT`` or stdio."""
    if sys.argv[1] == "http":
        handler = type("Handler", (_Handler,), {"answer": staticmethod(answer)})
        ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), handler).serve_forever()
    for line in sys.stdin:
        reply = answer(json.loads(line), None)
        for notification in outbox:
            sys.stdout.write(json.dumps(notification) + "\n")
        outbox.clear()
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


class _Handler(BaseHTTPRequestHandler):
    answer: Answer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        reply = self.answer(body, self.headers.get("Mcp-Name", "(none)"))
        if reply is None:
            self.send_response(202)
            self.end_headers()
            return
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send_response(405)
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass
