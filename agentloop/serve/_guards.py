"""Defences in depth around every request: security headers, the Host check, size limits.

``SecurityHeaders`` adds the headers to every response, the framework's own
404/405/500 and static files included. ``HostCheck`` answers 421 for a
``Host`` other than the address the server is bound to (a DNS-rebinding
page reaches the server under its own name). ``BodyLimit`` answers 413 for a
declared body past the limit before anything reads it; ``read_json`` reads a
body in chunks up to the limit and refuses JSON nested past a depth, so no
request makes the handler recurse without bound.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._access import server_port
from ._limits import MAX_BODY, depth_problem

__all__ = [
    "BodyLimit",
    "HostCheck",
    "RequestRefused",
    "SecurityHeaders",
    "read_guarded",
    "read_json",
    "refusal",
]

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=()",
    "cache-control": "no-store",
}

_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


class RequestRefused(Exception):
    """Raised when a request body cannot be read as a decision; ``status`` is the answer's."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def refusal(message: str, status: int) -> Response:
    """The JSON answer of a refused API request (``{ok: false, error, status}``)."""
    return JSONResponse({"ok": False, "error": message, "status": status}, status)


async def read_guarded(request: Request, check: Callable[[Request], str | None]) -> Any:
    """The request's JSON body, once ``check`` (token, CSRF, Origin) passes; else
    ``RequestRefused`` (403 for the check, as :func:`read_json` says for the body)."""
    problem = check(request)
    if problem is not None:
        raise RequestRefused(problem, status=403)
    return await read_json(request)


class SecurityHeaders:
    """Adds ``SECURITY_HEADERS`` to every HTTP response the wrapped app starts."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._headers = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {name.lower() for name, _ in headers}
                headers.extend(h for h in self._headers if h[0] not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, send_secured)


def allowed_hosts(scope: Scope, configured: Iterable[str]) -> list[str]:
    """The ``Host`` values the server answers for on the port the request came in on."""
    port = server_port(scope)
    names = list(_LOOPBACK)
    server = scope.get("server")
    if isinstance(server, list | tuple) and server and isinstance(server[0], str):
        names.append(f"[{server[0]}]" if ":" in server[0] else server[0])
    hosts = [f"{name}:{port}" for name in names] if port is not None else []
    if port in (None, 80):
        hosts.extend(names)
    hosts.extend(entry.lower() for entry in configured)
    return list(dict.fromkeys(hosts))


_WITH_PORT = re.compile(r"(\[[^\]]*\]|[^:\[\]]*):(\d+)")


def _host_matches(host: str, allowed: list[str], configured: Iterable[str]) -> bool:
    """Whether ``host`` is allowed; a configured name without a port allows any port."""
    if host in allowed:
        return True
    with_port = _WITH_PORT.fullmatch(host)
    name = with_port.group(1) if with_port else host
    return any(e.lower() == name and not _WITH_PORT.fullmatch(e) for e in configured)


class HostCheck:
    """Answers 421 for a request whose ``Host`` names another server (DNS rebinding)."""

    def __init__(self, app: ASGIApp, configured: tuple[str, ...]) -> None:
        self._app = app
        self._configured = configured

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        host = Request(scope).headers.get("host", "").strip().lower()
        allowed = allowed_hosts(scope, self._configured)
        if host and _host_matches(host, allowed, self._configured):
            await self._app(scope, receive, send)
            return
        listed = ", ".join(allowed)
        response = PlainTextResponse(
            f"421: this agentloop inbox answers for {listed}, not for Host {host!r}; open it "
            "by one of those addresses, or start it with --allowed-host NAME "
            "(ServeConfig(allowed_hosts=...)) when a proxy forwards another name\n",
            status_code=421,
        )
        await response(scope, receive, send)


def _too_large(found: str) -> str:
    return (
        f"refused: the request body is {found}, over the limit of {MAX_BODY} bytes; "
        "send a decision as a small JSON object"
    )


class BodyLimit:
    """Answers 413 for a declared ``Content-Length`` past ``MAX_BODY``, before reading it."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            declared = Request(scope).headers.get("content-length", "0").strip()
            if not declared.isdigit() or int(declared) > MAX_BODY:
                found = f"{declared} bytes" if declared.isdigit() else f"of length {declared!r}"
                status = 413 if declared.isdigit() else 400
                answer = {"ok": False, "error": _too_large(found), "status": status}
                await JSONResponse(answer, status)(scope, receive, send)
                return
        await self._app(scope, receive, send)


async def read_json(request: Request) -> Any:
    """The request's JSON body, read up to ``MAX_BODY`` bytes and ``MAX_DEPTH`` levels."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise RequestRefused(_too_large(f"more than {MAX_BODY} bytes"), status=413)
        chunks.append(chunk)
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        return None
    problem = depth_problem(text, "the request body")
    if problem is not None:
        raise RequestRefused(f"refused: {problem}", status=400)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None
