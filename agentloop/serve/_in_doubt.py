"""Calls in doubt in the inbox: the cards, and settling, failing or running one again.

A session resting on a call in doubt (status ``awaiting_resolution``: a
restore found a call that started and left no result, its tool could not
reconcile it, and the agent opted in with ``ask_in_doubt()``) shows as a
card: the call, its input, its idempotency key and how often it was run
again. ``POST /api/resolve`` checks the request as ``/api/decide`` does
(CSRF, Origin, content type, body limits), then, under the session's lease
and this process's lock, resumes the session with the inbox's agent,
resolves that call (``CallInDoubt.settle`` / ``fail`` / ``run_again``) and
takes one step, which records the resolution (a rerun runs the call now,
under a claim of its own) and saves. The resolution is in the audit log (a
``ResolutionEntry``: written first, removed when it is refused). A resolution
is single use: the page names the call and how many reruns it showed, and a
session that moved on (resolved already, or run again since) is refused with
409, nothing changed.
The worker then resumes the session.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import anyio
import attrs
import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core._errors import InvalidInputError, InvalidStateError
from ..loop._agent import Agent
from ..loop._in_doubt import RESOLUTIONS
from ..loop._release import release_dropped
from ..loop._session_store import InDoubtStore, LeaseHeldError, SessionStore
from ..loop._steps import CallInDoubt, CallQuestion
from ._audit import AuditLog, ResolutionEntry, answer_entry_content
from ._decide import MAX_REASON
from ._guards import RequestRefused, read_guarded, refusal
from ._inbox import pretty
from ._redact import Redactor
from ._views import CallRefs
from ._worker import Worker

__all__ = ["ResolveEndpoint", "calls_in_doubt", "doubt_cards"]

log = structlog.get_logger("agentloop")

_VERBS = {"settle": "Settled", "fail": "Marked failed", "run_again": "Ran again"}
RESOLVE_SECONDS = 300.0
"""How long resolving may take (a rerun runs the call within the request)."""


def calls_in_doubt(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The calls in doubt a saved document's round holds (its ``doubt`` entries), in order;
    none for odd documents."""
    turn = document.get("turn")
    tool_round = turn.get("round") if isinstance(turn, Mapping) else None
    calls = tool_round.get("calls") if isinstance(tool_round, Mapping) else None
    found = []
    for call in calls if isinstance(calls, list) else []:
        doubt = call.get("doubt") if isinstance(call, Mapping) else None
        if isinstance(doubt, Mapping) and isinstance(doubt.get("call_id"), str):
            found.append(doubt)
    return found


async def doubt_cards(
    store: SessionStore, refs: CallRefs, redactor: Redactor
) -> list[dict[str, Any]]:
    """The inbox's in-doubt cards, oldest session first (none when the store lists none)."""
    if not isinstance(store, InDoubtStore):
        return []
    cards = []
    for summary in await store.sessions_awaiting_resolution():
        stored = await store.load(summary.session_id)
        if stored is None:
            continue
        for doubt in calls_in_doubt(stored.checkpoint):
            call_id = str(doubt["call_id"])
            cards.append(
                {
                    "session_id": summary.session_id,
                    "call_ref": refs.ref(summary.session_id, call_id),
                    "call_id": redactor.text(call_id),
                    "tool_name": redactor.text(str(doubt.get("tool_name", ""))),
                    "input": pretty(redactor.json(doubt.get("input"))),
                    "idempotency_key": str(doubt.get("idempotency_key", "")),
                    "reason": redactor.text(str(doubt.get("reason", ""))),
                    "reruns": int(doubt.get("reruns") or 0),
                }
            )
    return cards


class ResolutionRefused(Exception):
    """Raised when a resolution cannot be applied; ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def resolution_value(body: Mapping[str, Any]) -> tuple[str, Any]:
    """The resolution and its value (``settle``: the result text; ``fail``: the reason) a
    request asks for; ``ResolutionRefused`` says what is wrong."""
    how = body["resolution"]
    if how not in RESOLUTIONS:
        raise ResolutionRefused(
            f"unknown resolution {how!r}; expected settle, fail or run_again", 400
        )
    if how == "run_again":
        return how, None
    field = "result" if how == "settle" else "reason"
    value = body.get(field)
    if not isinstance(value, str) or not value.strip():
        what = "the call's result (what the tool returned)" if how == "settle" else "a reason"
        raise ResolutionRefused(f"{how} needs {what}: send {field} as non-empty text", 422)
    if how == "fail" and len(value) > MAX_REASON:
        raise ResolutionRefused(f"the reason is longer than {MAX_REASON} characters", 422)
    if not _unicode(value):
        raise ResolutionRefused(f"the {field} is not valid Unicode text", 422)
    return how, value


class ResolveEndpoint:
    """``POST /api/resolve``: checks the request, resolves the call in doubt, wakes the
    worker."""

    def __init__(
        self,
        store: SessionStore,
        *,
        agent: Agent | None,
        refs: CallRefs,
        check: Callable[[Request], str | None],
        who: Callable[[Request], str],
        changed: Callable[[], None],
        worker: Worker | None,
        audit: AuditLog,
        redactor: Redactor,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._audit = audit
        self._redactor = redactor
        self._clock = clock
        self._store = store
        self._agent = agent
        self._refs = refs
        self._check = check
        self._who = who
        self._changed = changed
        self._worker = worker
        self._lock = anyio.Lock()

    async def handle(self, request: Request) -> Response:
        """Resolve one call (JSON ``{session_id, call_ref, reruns, resolution: settle |
        fail | run_again, result?, reason?}``)."""
        try:
            body = await read_guarded(request, self._check)
        except RequestRefused as refused:
            return refusal(refused.message, refused.status)
        fields = ("session_id", "call_ref", "resolution")
        if (
            not isinstance(body, dict)
            or not all(isinstance(body.get(k), str) for k in fields)
            or type(body.get("reruns")) is not int
        ):
            return refusal(
                "expected a JSON object with session_id, call_ref and resolution strings and "
                "reruns, an integer (and result, to settle; reason, to fail)",
                400,
            )
        who = self._who(request)
        try:
            how, value = resolution_value(body)
            agent = self._resolving_agent()
            async with self._lock:  # one at a time here; the lease keeps other processes out
                call_id, step = await self._resolve(agent, body, how, value, who)
        except ResolutionRefused as refused:
            return refusal(refused.message, refused.status)
        self._changed()
        if isinstance(step, CallInDoubt):
            then = (
                f"call {step.call_id} is in doubt again"
                if step.call_id == call_id
                else f"call {step.call_id} of the same round is in doubt too"
            )
        elif isinstance(step, CallQuestion):
            then = "the call now asks a question (see Questions)"
        elif self._worker is not None:
            self._worker.take(body["session_id"])
            then = "a worker resumes the session"
        else:
            then = "waiting for an external worker to resume the session"
        return JSONResponse({"ok": True, "message": f"{_VERBS[how]} by {who}; {then}."})

    def _resolving_agent(self) -> Agent:
        if self._agent is None:
            raise ResolutionRefused(
                "this inbox has no agent to resume the session with; start agentloop serve "
                "with --agent (an agent built with .ask_in_doubt())",
                501,
            )
        if not self._agent.ask_in_doubt:
            raise ResolutionRefused(
                "the inbox's agent does not ask about calls in doubt, so resuming would answer "
                "the call in doubt without you; build it with .ask_in_doubt(); nothing was "
                "changed",
                501,
            )
        agent = self._agent
        return agent if agent.store is self._store else attrs.evolve(agent, store=self._store)

    async def _resolve(
        self, agent: Agent, body: Mapping[str, Any], how: str, value: Any, who: str
    ) -> tuple[str, Any]:
        """The call resolved and the step the session went on to."""
        session_id = body["session_id"]
        call_id, tool_name = await self._waiting_call(session_id, body["call_ref"], body["reruns"])
        try:
            lease = await self._store.acquire(session_id, f"agentloop-serve:{who}", 60)
        except LeaseHeldError as held:
            raise ResolutionRefused(
                f"session {session_id!r} is being advanced by {held.holder}; nothing was "
                "changed; reload and decide again",
                409,
            ) from None
        entry = self._entry(session_id, (call_id, tool_name), how, value, who)
        await self._audit.add(entry)  # first: no resolution is saved without its entry
        try:
            step = await self._apply(agent, session_id, call_id, how, value, lease)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._audit.remove(entry)
            raise
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await self._store.release(lease)
        log.info(
            "call in doubt resolved in the inbox",
            session_id=session_id,
            call_id=call_id,
            resolution=how,
            resolved_by=who,
        )
        return call_id, step

    def _entry(
        self, session_id: str, call: tuple[str, str], how: str, value: Any, who: str
    ) -> ResolutionEntry:
        """The audit entry of the resolution of ``call`` (id, tool): the value redacted,
        bounded."""
        call_id, stored_tool = call
        digest, size, shown, kept = answer_entry_content(value, self._redactor.json(value))
        return ResolutionEntry(
            session_id=session_id,
            call_id=call_id,
            tool_name=stored_tool,
            resolution=how,
            value_digest=digest,
            value_size=size,
            decided_by=who,
            decided_at=self._clock(),
            value=shown,
            value_kept=kept,
        )

    async def _apply(
        self, agent: Agent, session_id: str, call_id: str, how: str, value: Any, lease: Any
    ) -> Any:
        driver = await agent.resume(session_id=session_id, lease=lease)
        try:
            try:
                driver.resolve_in_doubt_for(call_id, how, value)
            except InvalidInputError as error:
                raise ResolutionRefused(f"refused: {error}; nothing was changed", 422) from None
            except InvalidStateError as error:
                raise ResolutionRefused(f"refused: {error}; nothing was changed", 409) from None
            with anyio.fail_after(RESOLVE_SECONDS):
                return await driver.next()  # records the resolution (a rerun runs) and saves
        finally:
            await release_dropped(driver)

    async def _waiting_call(self, session_id: str, call_ref: str, reruns: int) -> tuple[str, str]:
        """The call in doubt ``call_ref`` names, as the page showed it, and its tool; else
        refused."""
        stored = await self._store.load(session_id)
        if stored is None:
            raise ResolutionRefused(f"session {session_id!r} no longer exists", 404)
        for doubt in calls_in_doubt(stored.checkpoint):
            call_id = str(doubt["call_id"])
            if hmac.compare_digest(self._refs.ref(session_id, call_id), call_ref):
                if int(doubt.get("reruns") or 0) != reruns:
                    raise ResolutionRefused(
                        f"call {call_id!r} was run again since this page was loaded; reload "
                        "and decide again; nothing was changed",
                        409,
                    )
                return call_id, str(doubt.get("tool_name", ""))
        raise ResolutionRefused(
            f"session {session_id!r} moved on: the call this page showed is no longer in "
            f"doubt (the session is {stored.status.value}); nothing was changed",
            409,
        )
