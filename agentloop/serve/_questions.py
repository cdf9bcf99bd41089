"""Questions of running calls in the inbox: the cards, the form a schema makes, the answers.

A session resting on a question (``awaiting_answer``) shows as a question
card: the message; for a form-mode elicitation, a form made from the
requested schema (string, number, integer, boolean and enum fields: the
MCP spec's restricted schema); for a URL-mode one, the URL and "I've done
it"; for sampling, the request's messages and a reply box; anything else as
JSON. ``POST /api/answer`` checks the request as ``/api/decide`` does (CSRF,
Origin, content type, body limits) and records the answer through the
store's ``record_answer``: checked against the question's schema (422,
nothing recorded) and final (a second answer: 409). Each answer recorded is
in the audit log (an ``AnswerEntry``, written first and removed when the
store refuses, as a decision's is).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core._errors import InvalidInputError
from ..loop._session_store import AnswerStore, ClaimError, SessionStore
from ..loop._stored_answers import PendingQuestion, pending_questions, question_ids
from ..tools._questions import QuestionAction
from ._audit import AnswerEntry, AuditLog, answer_entry_content
from ._child import ChildApproval, child_approval, inbox_answer
from ._guards import RequestRefused, read_guarded, refusal
from ._redact import Redactor
from ._views import CallRefs
from ._worker import Worker

__all__ = ["AnswerEndpoint", "form_fields", "question_cards"]

log = structlog.get_logger("agentloop")

_FIELD_TYPES = ("string", "number", "integer", "boolean")
_VERBS = {"accept": "Answered", "decline": "Declined", "cancel": "Cancelled"}


def _field(name: str, schema: Any, required: bool) -> dict[str, Any] | None:
    if not isinstance(schema, dict):
        return None
    options = schema.get("enum")
    kind = "enum" if isinstance(options, list) and options else schema.get("type")
    if kind not in (*_FIELD_TYPES, "enum"):
        return None
    names = schema.get("enumNames")
    labels = names if isinstance(names, list) and len(names) == len(options or ()) else options
    return {
        "name": name,
        "kind": kind,
        "title": str(schema.get("title") or name),
        "description": str(schema.get("description") or ""),
        "required": required,
        "default": schema.get("default"),
        "options": [
            {"value": json.dumps(value), "label": str(label)}
            for value, label in zip(options or (), labels or (), strict=False)
        ],
    }


def form_fields(schema: Any) -> list[dict[str, Any]] | None:
    """The form fields of an object schema whose properties are all primitive or enums (the
    MCP spec's restricted elicitation schema); ``None`` when it is not such a schema."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    fields = [_field(name, value, name in required) for name, value in properties.items()]
    return None if any(field is None for field in fields) else fields  # type: ignore[return-value]


def _card(session_id: str, pending: PendingQuestion, refs: CallRefs, redactor: Redactor) -> Any:
    data = pending.data if isinstance(pending.data, dict) else {}
    if pending.kind == "mcp.sampling":
        mode = "sampling"
    elif pending.schema is None:
        mode = "url" if isinstance(data.get("url"), str) else "confirm"
    else:
        mode = "form" if form_fields(pending.schema) is not None else "json"
    messages = data.get("messages") if mode == "sampling" else None
    child = child_approval(pending)
    if child is not None:
        mode = "approval"
    return {
        "session_id": session_id,
        "question_ref": refs.ref(session_id, pending.question_id),
        "question_id": redactor.text(pending.question_id),
        "tool_name": pending.tool_name,
        "kind": pending.kind,
        "message": redactor.text(pending.message),
        "mode": mode,
        "resumable": pending.resumable,
        "fields": form_fields(pending.schema) or [],
        "schema_json": json.dumps(pending.schema) if pending.schema is not None else "",
        "url": redactor.text(str(data.get("url", ""))) if mode == "url" else "",
        "messages": [
            {"role": str(m.get("role", "")), "text": redactor.text(_text(m.get("content")))}
            for m in messages if isinstance(m, dict)
        ] if isinstance(messages, list) else [],
        **_child_fields(child, redactor),
    }  # fmt: skip


def _child_fields(child: ChildApproval | None, redactor: Redactor) -> dict[str, Any]:
    """A child agent's approval on its card: the child's call, tool, input and path."""
    if child is None:
        return {"child": None}
    shown = json.dumps(child.input, indent=2, ensure_ascii=False, default=str)
    return {
        "child": {
            "call_id": child.call_id,
            "tool_name": child.tool_name,
            "input_json": redactor.text(shown),
            "reason": redactor.text(child.reason or child.summary),
            "path": " > ".join(child.path),
        }
    }


def _text(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    return "\n".join(
        str(block.get("text", "")) for block in blocks if isinstance(block, dict)
    ) or json.dumps(content)


async def question_cards(
    store: SessionStore, refs: CallRefs, redactor: Redactor
) -> list[dict[str, Any]]:
    """The inbox's question cards, oldest session first (none when the store keeps no
    answers)."""
    if not isinstance(store, AnswerStore):
        return []
    return [
        _card(summary.session_id, pending, refs, redactor)
        for summary in await store.sessions_awaiting_answer()
        for pending in summary.unanswered_questions
    ]


class AnswerEndpoint:
    """``POST /api/answer``: checks the request, records the answer, wakes the worker."""

    def __init__(
        self,
        store: SessionStore,
        *,
        refs: CallRefs,
        check: Callable[[Request], str | None],
        who: Callable[[Request], str],
        changed: Callable[[], None],
        worker: Worker | None,
        audit: AuditLog,
        redactor: Redactor,
        agent: Any = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._agent = agent
        self._audit = audit
        self._redactor = redactor
        self._clock = clock
        self._store = store
        self._refs = refs
        self._check = check
        self._who = who
        self._changed = changed
        self._worker = worker

    async def handle(self, request: Request) -> Response:
        """Answer one request (JSON ``{session_id, question_ref, action, content?}``; for a
        child agent's approval ``{session_id, question_ref, action: approve | approve_with
        | deny, reason?, input?}``, as ``/api/decide`` takes it)."""
        try:
            body = await read_guarded(request, self._check)
        except RequestRefused as refused:
            return refusal(refused.message, refused.status)
        fields = ("session_id", "question_ref", "action")
        if not isinstance(body, dict) or not all(isinstance(body.get(k), str) for k in fields):
            return refusal(
                "expected a JSON object with session_id, question_ref and action strings "
                "(and content, for an accept)",
                400,
            )
        if not isinstance(self._store, AnswerStore):
            return refusal("this store keeps no answers to questions", 501)
        session_id = body["session_id"]
        stored = await self._store.load(session_id)
        if stored is None:
            return refusal(f"session {session_id!r} no longer exists", 404)
        candidates = [*question_ids(stored.checkpoint), *stored.answers]
        question_id = next(
            (q for q in candidates if hmac.compare_digest(self._refs.ref(session_id, q),
                                                          body["question_ref"])),
            None,
        )  # fmt: skip
        if question_id is None:
            return refusal(
                f"session {session_id!r} moved on: the question this page showed is no longer "
                "asked; nothing was recorded",
                409,
            )
        return await self._record(request, session_id, question_id, body)

    async def _record(
        self, request: Request, session_id: str, question_id: str, body: dict[str, Any]
    ) -> Response:
        action, content = body["action"], body.get("content")
        stored = await self._store.load(session_id)
        [*found] = pending_questions(stored.checkpoint, (question_id,)) if stored else ()
        if not found:
            answered = stored is not None and question_id in stored.answers
            return refusal(_NOT_ASKED[answered].format(session_id=session_id), 409)
        child = child_approval(found[0], self._agent)
        if child is not None:
            try:
                answer = inbox_answer(child, body)
            except ValueError as error:
                return refusal(f"refused: {error}; nothing was recorded", 422)
            action, content = answer.action.value, answer.content
        who = self._who(request)
        try:
            entry = self._entry(session_id, found[0], action, content, who)
        except ValueError as error:
            return refusal(f"refused: cannot record an answer to question {question_id!r} of "
                            f"session {session_id!r}: {error}", 422)  # fmt: skip
        refused_by_store = await self._audited(entry, content)
        if refused_by_store is not None:
            return refused_by_store
        log.info("question answered", session_id=session_id, action=action, answered_by=who)
        self._changed()
        if self._worker is not None:
            self._worker.wake()
        then = (
            "a worker resumes the session"
            if self._worker is not None
            else "waiting for an external worker to resume the session"
        )
        return JSONResponse({"ok": True, "message": f"{_VERBS[action]} by {who}; {then}."})

    def _entry(
        self, session_id: str, pending: PendingQuestion, action: str, content: Any, who: str
    ) -> AnswerEntry:
        """The audit entry of the answer; ``ValueError`` says why the answer cannot be one."""
        try:
            kind = QuestionAction(action)
        except ValueError:
            raise ValueError(
                f"action must be one of accept, decline, cancel; got {action!r}"
            ) from None
        try:
            digest, size, shown, kept = answer_entry_content(content, self._redactor.json(content))
        except UnicodeEncodeError as error:
            lone = error.object[error.start : error.end]
            raise ValueError(
                f"the content holds {lone!r}, a lone surrogate, which is not Unicode text; "
                "send valid text"
            ) from None
        except (TypeError, ValueError) as error:
            raise ValueError(f"the content is not JSON text ({error}); send JSON values") from None
        return AnswerEntry(
            session_id=session_id,
            question_id=pending.question_id,
            call_id=pending.call_id,
            tool_name=pending.tool_name,
            kind=pending.kind,
            action=kind,
            content_digest=digest,
            content_size=size,
            decided_by=who,
            decided_at=self._clock(),
            content=shown,
            content_kept=kept,
        )

    async def _audited(self, entry: AnswerEntry, content: Any) -> Response | None:
        """The audit entry, then the store's record; the entry is removed if the store refuses
        (then the refusal to answer with)."""
        await self._audit.add(entry)
        try:
            await self._store.record_answer(  # type: ignore[attr-defined]
                entry.session_id, entry.question_id, action=entry.action.value, content=content
            )
        except BaseException as error:
            with anyio.CancelScope(shield=True):
                await self._audit.remove(entry)
            if isinstance(error, ClaimError):
                answered = error.reason == "answered"
                return refusal(_NOT_ASKED[answered].format(session_id=entry.session_id), 409)
            if isinstance(error, InvalidInputError):
                return refusal(f"refused: {error}", 422)
            raise
        return None


_NOT_ASKED = {
    True: "this question was already answered; nothing was changed",
    False: "session {session_id!r} moved on: the question is no longer asked; nothing was recorded",
}
