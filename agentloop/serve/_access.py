"""Who may use the inbox: the access token, and the session cookies it is exchanged for.

The printed URL carries the token once (``?token=``); the server answers with
a redirect that drops it and sets a *session cookie*. The cookie is never the
token: its value is ``EXPIRES.MAC``, an HMAC (keyed by a key derived from the
token) over the port and the expiry, and its name carries the port
(``agentloop_session_8765``), because browsers send cookies for a host to
every port of it. The server checks the MAC and the expiry on every request.
API clients send ``Authorization: Bearer TOKEN``; a cookie's value is no
token there.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode

import attrs
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["SessionCookies", "TokenGate", "cookie_name", "server_port"]

_PRINTED_URL = "open the URL printed by `agentloop serve` (it ends in ?token=...)"


def server_port(scope: Scope) -> int | None:
    """The port the request arrived on (the ASGI ``server``), or ``None`` when unknown."""
    server = scope.get("server")
    if isinstance(server, list | tuple) and len(server) == 2 and isinstance(server[1], int):
        return server[1]
    return None


def cookie_name(port: int | None) -> str:
    """The session cookie's name for a server on ``port``: one name per port."""
    return "agentloop_session" if port is None else f"agentloop_session_{port}"


@attrs.frozen
class CookieVerdict:
    """Whether a session cookie is valid; ``problem`` says why not (for the 401 page)."""

    valid: bool
    problem: str = ""


class SessionCookies:
    """Issues and checks session cookies derived from ``token``, valid ``ttl`` seconds."""

    def __init__(self, token: str, ttl: float, clock: Callable[[], float] = time.time) -> None:
        self._key = hmac.new(token.encode(), b"agentloop-serve-session-key", "sha256").digest()
        self._ttl = ttl
        self._clock = clock

    def _mac(self, port: int | None, expires: int) -> str:
        message = f"agentloop-session\x00{port}\x00{expires}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def issue(self, port: int | None) -> tuple[str, int]:
        """A new cookie value for ``port`` and its lifetime in whole seconds."""
        lifetime = max(1, int(self._ttl))
        expires = math.ceil(self._clock() + self._ttl)  # valid at least ``ttl`` seconds
        return f"{expires}.{self._mac(port, expires)}", lifetime

    def check(self, port: int | None, value: str) -> CookieVerdict:
        """Whether ``value`` is a cookie this server issued for ``port`` and not yet expired."""
        name = cookie_name(port)
        stamp, dot, mac = value.partition(".")
        if not dot or not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
            return CookieVerdict(False, f"the cookie {name} is not a session cookie")
        expires = int(stamp)
        expected = self._mac(port, expires)
        if not hmac.compare_digest(mac.encode("utf-8", "replace"), expected.encode()):
            return CookieVerdict(
                False, f"the cookie {name} was not issued by this server for port {port}"
            )
        now = self._clock()
        if now >= expires or expires - now > self._ttl + 1:
            when = datetime.fromtimestamp(expires, UTC)
            return CookieVerdict(False, f"the session expired at {when:%Y-%m-%d %H:%M:%S} UTC")
        return CookieVerdict(True)


class TokenGate:
    """Every request needs the token (``?token=`` once, then the session cookie) or a bearer."""

    def __init__(self, app: ASGIApp, token: str, cookies: SessionCookies) -> None:
        self._app = app
        self._token = token.encode()
        self._cookies = cookies

    def _is_token(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode("utf-8", "replace"), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request = Request(scope)
        port = server_port(scope)
        query = request.query_params.get("token")
        if query is not None and request.method == "GET" and self._is_token(query):
            await self._start_session(request, port)(scope, receive, send)
            return
        problem = self._refusal(request, port)
        if problem is None:
            await self._app(scope, receive, send)
            return
        response = PlainTextResponse(
            f"401: this agentloop inbox needs its access token: {problem}; {_PRINTED_URL}, "
            "or send the header Authorization: Bearer TOKEN\n",
            status_code=401,
        )
        if cookie_name(port) in request.cookies:
            response.delete_cookie(cookie_name(port), path="/")
        await response(scope, receive, send)

    def _start_session(self, request: Request, port: int | None) -> Response:
        """The redirect that drops ``?token=`` from the URL and sets the session cookie."""
        query = request.scope.get("query_string", b"").decode("latin-1")
        rest = [(k, v) for k, v in parse_qsl(query) if k != "token"]
        target = request.url.path + ("?" + urlencode(rest) if rest else "")
        response = Response(status_code=303, headers={"location": target})
        value, lifetime = self._cookies.issue(port)
        response.set_cookie(
            cookie_name(port),
            value,
            max_age=lifetime,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",  # behind a TLS proxy that says so
            path="/",
        )
        return response

    def _refusal(self, request: Request, port: int | None) -> str | None:
        """Why the request is not let in, or ``None`` when it is."""
        authorization = request.headers.get("authorization")
        if authorization is not None:
            scheme, _, credential = authorization.partition(" ")
            if scheme.lower() == "bearer" and self._is_token(credential.strip()):
                return None
            return "the Authorization header does not carry it (a session cookie is no token)"
        if request.query_params.get("token") is not None:
            return "the ?token= in the URL is not this inbox's token"
        cookie = request.cookies.get(cookie_name(port))
        if cookie is None:
            return f"no session cookie {cookie_name(port)} was sent"
        verdict = self._cookies.check(port, cookie)
        return None if verdict.valid else verdict.problem
