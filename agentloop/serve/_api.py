"""The decision endpoint (``POST /api/decide``) and what tells live pages about changes."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..loop._session_store import SessionStore
from ._decide import Decider, DecisionRefused
from ._guards import RequestRefused, read_guarded, refusal
from ._views import CallRefs
from ._worker import Worker

__all__ = ["Changes", "DecisionEndpoint", "check_csrf"]

EXPECTED_BODY = (
    "expected a JSON object with session_id, call_id (or the page's call_ref), action and "
    "digest strings"
)

_VERBS = {
    "approve": "Approved",
    "approve_with": "Approved with edited arguments",
    "deny": "Denied",
}


class Changes:
    """Tells live pages that something changed: after a decision, a worker run, or a poll."""

    def __init__(self) -> None:
        self.serial = 0
        self._event = anyio.Event()

    def notify(self) -> None:
        self.serial += 1
        self._event.set()
        self._event = anyio.Event()

    async def wait(self, serial: int, seconds: float) -> int:
        if self.serial == serial:
            with anyio.move_on_after(seconds):
                await self._event.wait()
        return self.serial


def check_csrf(request: Request, csrf: str) -> str | None:
    """Why a state-changing request is refused as cross-site, or ``None``."""
    supplied = request.headers.get("x-csrf-token", "")
    if not hmac.compare_digest(supplied.encode("utf-8", "replace"), csrf.encode()):
        return "refused: missing or wrong CSRF token; reload the page"
    origin = request.headers.get("origin")
    if origin is not None:
        expected = f"{request.url.scheme}://{request.url.netloc}"
        if origin != expected:
            return f"refused: cross-origin request from {origin}"
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return "refused: decisions are sent as application/json"
    return None


def _fields(body: Any) -> dict[str, Any] | None:
    """The decision's fields, or ``None`` when the body is not a decision."""
    if not isinstance(body, dict) or not all(
        isinstance(body.get(k), str) for k in ("session_id", "action", "digest")
    ):
        return None
    has_id, has_ref = isinstance(body.get("call_id"), str), isinstance(body.get("call_ref"), str)
    return body if has_id != has_ref else None


class DecisionEndpoint:
    """``POST /api/decide``: checks the request, records the decision, wakes the worker."""

    def __init__(
        self,
        store: SessionStore,
        decider: Decider,
        *,
        refs: CallRefs,
        csrf: str,
        who: Callable[[Request], str],
        changes: Changes,
        worker: Worker | None,
    ) -> None:
        self._store = store
        self._decider = decider
        self._refs = refs
        self._csrf = csrf
        self._who = who
        self._changes = changes
        self._worker = worker

    async def handle(self, request: Request) -> Response:
        """Answer one decision request (JSON: ``ok`` and ``message``, or ``error``)."""
        try:
            body = _fields(await read_guarded(request, lambda r: check_csrf(r, self._csrf)))
        except RequestRefused as refused:
            return refusal(refused.message, refused.status)
        if body is None:
            return refusal(EXPECTED_BODY, 400)
        reason, edited = body.get("reason"), body.get("input")
        try:
            call_id = await self._call_id(body)
            entry = await self._decider.decide(
                body["session_id"],
                call_id,
                action=body["action"],
                shown_digest=body["digest"],
                who=self._who(request),
                reason=reason if isinstance(reason, str) else None,
                edited_input=edited if isinstance(edited, str) else None,
            )
        except DecisionRefused as refused:
            return refusal(refused.message, refused.status)
        self._changes.notify()
        if self._worker is not None:
            self._worker.wake()
        then = (
            "a worker resumes the session"
            if self._worker is not None
            else "waiting for an external worker to resume the session"
        )
        message = f"{_VERBS[entry.action.value]} by {entry.decided_by}; {then}."
        return JSONResponse({"ok": True, "message": message, "digest": entry.input_digest})

    async def _call_id(self, body: dict[str, Any]) -> str:
        """The call the decision is for: ``call_id``, or the call the page's ``call_ref`` names."""
        if "call_id" in body and isinstance(body["call_id"], str):
            return str(body["call_id"])
        session_id = body["session_id"]
        stored = await self._store.load(session_id)
        if stored is None:
            raise DecisionRefused(f"session {session_id!r} no longer exists", status=404)
        call_id = self._refs.resolve(stored, body["call_ref"])
        if call_id is None:
            raise DecisionRefused(
                f"session {session_id!r} moved on: the call this page showed no longer waits "
                f"for an approval (the session is {stored.status.value}); nothing was recorded",
                status=409,
            )
        return call_id
