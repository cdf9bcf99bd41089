"""OpenTelemetry GenAI spans from the driver's events (``pip install 'agentloop-runtime[otel]'``).

Span tree per turn (names and attributes from the GenAI semantic conventions)::

    invoke_agent <agent>            one per turn
    ├── chat <model>                one per model call
    ├── execute_tool <tool>         one per tool call (approvals are its events)
    └── chat <model>

Every span is created with an explicit parent, never from the ambient
context, so the tree is right whichever task emits the events (background
tool tasks included). The turn span's parent is the context current when the
turn starts, so a host span around ``driver.next()`` contains the turn.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import attrs
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from ..core._errors import InvalidStateError
from ..core._items import FinishReason, Item, ItemKind, ToolResultPart, Usage, result_outcome
from ..loop._agent import AgentBuilder
from ..loop._events import (
    AgentEvent,
    ApprovalAnswered,
    ApprovalRequested,
    ContentDelta,
    QuestionAnswered,
    QuestionAsked,
    RunFailed,
    RunStarted,
    ToolCallRequested,
    ToolExecutionStarted,
    ToolResultReceived,
    TurnFinished,
    TurnStarted,
    UsageUpdated,
)
from ..model._protocol import ModelTurnResult, TurnRequest
from ._content import item_message, json_text
from ._watch import AdapterLabels, WatchedModel, adapter_labels

__all__ = ["MODEL_KEY", "OtelObserver", "PROVIDER_KEY", "RESPONSE_ID_KEY"]

PROVIDER_KEY = "agentloop.provider"
"""Assistant item metadata: the provider that answered (stamped by provider adapters)."""
MODEL_KEY = "agentloop.model"
"""Assistant item metadata: the model the request asked for."""
RESPONSE_ID_KEY = "agentloop.response_id"
"""Assistant item metadata: the provider's response id."""

RESPONSE_MODEL_KEY = "agentloop.response_model"
"""Assistant item metadata: the model the response reported (e.g. a dated snapshot)."""

# The attribute names, from the semantic-conventions package itself.
OPERATION = gen_ai.GEN_AI_OPERATION_NAME
PROVIDER = gen_ai.GEN_AI_PROVIDER_NAME
REQUEST_MODEL = gen_ai.GEN_AI_REQUEST_MODEL
RESPONSE_MODEL = gen_ai.GEN_AI_RESPONSE_MODEL
RESPONSE_ID = gen_ai.GEN_AI_RESPONSE_ID
FINISH_REASONS = gen_ai.GEN_AI_RESPONSE_FINISH_REASONS
INPUT_TOKENS = gen_ai.GEN_AI_USAGE_INPUT_TOKENS
OUTPUT_TOKENS = gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
CACHE_READ_TOKENS = gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
CACHE_CREATION_TOKENS = gen_ai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
REASONING_TOKENS = gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
AGENT_NAME = gen_ai.GEN_AI_AGENT_NAME
CONVERSATION_ID = gen_ai.GEN_AI_CONVERSATION_ID
TOOL_NAME = gen_ai.GEN_AI_TOOL_NAME
TOOL_DESCRIPTION = gen_ai.GEN_AI_TOOL_DESCRIPTION
TOOL_CALL_ID = gen_ai.GEN_AI_TOOL_CALL_ID
TOOL_TYPE = gen_ai.GEN_AI_TOOL_TYPE
TOOL_ARGUMENTS = gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS
TOOL_RESULT = gen_ai.GEN_AI_TOOL_CALL_RESULT
INPUT_MESSAGES = gen_ai.GEN_AI_INPUT_MESSAGES
OUTPUT_MESSAGES = gen_ai.GEN_AI_OUTPUT_MESSAGES
SERVER_ADDRESS = server_attributes.SERVER_ADDRESS
SERVER_PORT = server_attributes.SERVER_PORT
ERROR_TYPE = error_attributes.ERROR_TYPE

_FINISH = {
    FinishReason.COMPLETED: "stop",
    FinishReason.TOOL_CALL: "tool_call",
    FinishReason.MAX_TOKENS: "length",
    FinishReason.BLOCKED: "content_filter",
}
"""Our finish reasons in the conventions' words; others keep their own value."""


@attrs.define
class _Session:
    """What the observer tracks for one session."""

    session_id: str
    turn: Span | None = None
    turn_id: str | None = None
    chat: Span | None = None
    model_wait_since: int | None = None  # ns: when the next model call could have begun
    tools: dict[str, Span] = attrs.field(factory=dict)
    seen: list[Item] = attrs.field(factory=list)  # for content capture
    tool_descriptions: dict[str, str] = attrs.field(factory=dict)  # of the tools last offered
    answer: ModelTurnResult | None = None  # the last model call's closing result


class OtelObserver:
    """Emits GenAI semantic-convention spans for turns, model calls and tool calls.

    Register it with ``OtelObserver().attach(builder)`` after ``.model(adapter)``:
    it registers the observer for events and items and wraps the adapter to
    read its labels (``provider_name``, ``model_name``, ``base_url``), the
    tools each call offers and each call's closing ``ModelTurnResult``
    (``model``, ``response_id``). Registered by hand
    (``builder.observer(o).transcript_observer(o)``) it sees only what
    HTTP adapters stamp on assistant items (``agentloop.provider``,
    ``agentloop.model``, ``agentloop.response_model``,
    ``agentloop.response_id``). ``provider`` and ``model`` override the
    adapter's labels. ``capture_content=True`` adds messages, tool arguments
    and tool results (off by default: they may hold personal data).

    Events do not carry their session id, so one observer follows the
    session it last saw start (``RunStarted`` / ``TurnStarted``): give each
    concurrently driven session its own observer.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        agent_name: str = "agentloop",
        provider: str | None = None,
        model: str | None = None,
        capture_content: bool = False,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.tracer: Tracer = trace.get_tracer("agentloop", tracer_provider=tracer_provider)
        self.agent_name = agent_name
        self.provider = provider
        self.model = model
        self.capture_content = capture_content
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._current: _Session | None = None
        self._labels = AdapterLabels()

    def attach(self, builder: AgentBuilder) -> AgentBuilder:
        """Register this observer on ``builder`` for events and items and watch its model.

        Call it after ``builder.model(adapter)`` (``InvalidStateError`` before):
        the adapter is wrapped (it behaves as before) so its labels and answers
        reach the spans. Returns the builder.
        """
        adapter = builder._model
        if adapter is None:
            raise InvalidStateError(
                "cannot attach OtelObserver: the builder has no model adapter yet; call "
                ".model(adapter) first, then attach(builder)"
            )
        if not isinstance(adapter, WatchedModel):
            self._labels = adapter_labels(adapter)
            builder.model(WatchedModel(adapter, self))
        return builder.observer(self).transcript_observer(self)

    @property
    def _provider(self) -> str | None:
        return self.provider or self._labels.provider

    @property
    def _model(self) -> str | None:
        return self.model or self._labels.model

    # -- the model seam (called by the watched adapter) --------------------------

    def model_called(self, request: TurnRequest) -> None:
        """Remember the descriptions of the tools a model call offers."""
        session = self._session_named(request.session_id)
        session.tool_descriptions = {
            spec.name: spec.description for spec in request.available_tools if spec.description
        }
        session.answer = None

    def model_answered(self, session_id: str, result: ModelTurnResult) -> None:
        """Remember the call's result: the answering model and response id label its span."""
        self._session_named(session_id).answer = result

    # -- events ----------------------------------------------------------------

    def handle_event(self, event: AgentEvent) -> None:
        """Open, annotate and end spans as the turn goes."""
        if isinstance(event, RunStarted):
            self._current = self._session(event.session_id)
            return
        if isinstance(event, TurnStarted):
            self._turn_started(self._session(event.session_id), event.turn_id)
            return
        session = self._current
        if session is None or session.turn is None:
            return
        if isinstance(event, ContentDelta | ToolCallRequested | UsageUpdated):
            self._chat(session)
        elif isinstance(event, ApprovalRequested):
            self._tool_event(
                session,
                event.call_id,
                "agentloop.approval.required",
                {
                    "agentloop.approval.kind": event.request_kind,
                    "agentloop.approval.reason": event.reason,
                    "agentloop.approval.summary": event.summary,
                },
            )
        elif isinstance(event, ApprovalAnswered):
            self._tool_event(
                session,
                event.call_id,
                "agentloop.approval.resolved",
                {
                    "agentloop.approval.approved": event.approved,
                    "agentloop.approval.patched": event.patched,
                },
            )
            session.model_wait_since = self._clock()
        elif isinstance(event, QuestionAsked | QuestionAnswered):
            self._question_event(session, event)
        elif isinstance(event, ToolExecutionStarted):
            attributes = {} if event.task_id is None else {"agentloop.task.id": event.task_id}
            self._tool_event(session, event.call_id, "agentloop.tool.started", attributes)
        elif isinstance(event, ToolResultReceived):
            self._tool_finished(session, event.result)
        elif isinstance(event, TurnFinished) and event.result.error is not None:
            # A failed model call ends the turn: the chat span and the turn fail.
            error = event.result.error
            self._run_failed(session, f"{type(error).__name__}: {error}")
        elif isinstance(event, TurnFinished):
            self._turn_finished(session, event.result.finish_reason, event.result.usage)
        elif isinstance(event, RunFailed):
            self._run_failed(session, event.message)

    def on_item_appended(self, item: Item) -> None:
        """An assistant item ends the model call that produced it and opens its tool spans."""
        session = self._current
        if session is None:
            return
        if item.kind is ItemKind.ASSISTANT and session.turn is not None:
            stage = item.metadata.get("agentloop.interrupt_stage")
            if stage is None or stage == "model" or session.chat is not None:
                self._chat_finished(session, item)
            # else: the item closing a turn cancelled outside a model call is no model call
        if self.capture_content:
            session.seen.append(item)

    # -- turns -----------------------------------------------------------------

    def _session(self, session_id: str) -> _Session:
        self._current = session = self._session_named(session_id)
        return session

    def _session_named(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _Session(session_id)
        return session

    def _turn_started(self, session: _Session, turn_id: str) -> None:
        self._end_turn(session, error=None)  # a turn left open by a failed driver
        now = self._clock()
        attributes: dict[str, Any] = {
            OPERATION: "invoke_agent",
            AGENT_NAME: self.agent_name,
            CONVERSATION_ID: session.session_id,
            "agentloop.turn.id": turn_id,
        }
        if self._provider is not None:
            attributes[PROVIDER] = self._provider
        if self._model is not None:
            attributes[REQUEST_MODEL] = self._model
        session.turn = self.tracer.start_span(
            f"invoke_agent {self.agent_name}",
            context=otel_context.get_current(),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=now,
        )
        session.turn_id = turn_id
        session.model_wait_since = now

    def _turn_finished(self, session: _Session, reason: FinishReason, usage: Usage | None) -> None:
        turn = session.turn
        assert turn is not None
        turn.set_attribute("agentloop.finish_reason", reason.value)
        if usage is not None:
            _set_usage(turn, usage)
        error = "cancelled" if reason is FinishReason.CANCELLED else None
        self._end_turn(session, error=error, status_error=reason is FinishReason.ERROR)

    def _run_failed(self, session: _Session, message: str) -> None:
        error_type = message.split(":", 1)[0].strip() or "RunFailed"
        if session.chat is None and session.model_wait_since is not None and not session.tools:
            self._chat(session)  # the failure happened while the model was being called
        if session.chat is not None:
            _fail(session.chat, error_type, message)
            session.chat.end(end_time=self._clock())
            session.chat = None
        if session.turn is not None:
            _fail(session.turn, error_type, message)
        self._end_turn(session, error=error_type)

    def _end_turn(
        self, session: _Session, *, error: str | None, status_error: bool = False
    ) -> None:
        now = self._clock()
        for span in session.tools.values():
            span.set_attribute(ERROR_TYPE, error or "unanswered")
            span.set_status(Status(StatusCode.ERROR, "the turn ended before the call's result"))
            span.end(end_time=now)
        session.tools.clear()
        if session.chat is not None:
            if error is not None:
                session.chat.set_attribute(ERROR_TYPE, error)
            session.chat.end(end_time=now)
            session.chat = None
        if session.turn is not None:
            if status_error:
                session.turn.set_status(Status(StatusCode.ERROR))
            session.turn.end(end_time=now)
        session.turn = None
        session.turn_id = None
        session.model_wait_since = None

    # -- model calls -----------------------------------------------------------

    def _chat(self, session: _Session) -> Span:
        """The open chat span, opened now if needed (starting when the call could begin)."""
        if session.chat is None:
            assert session.turn is not None
            attributes: dict[str, Any] = {OPERATION: "chat", CONVERSATION_ID: session.session_id}
            if self._provider is not None:
                attributes[PROVIDER] = self._provider
            if self._model is not None:
                attributes[REQUEST_MODEL] = self._model
            if self._labels.server_address is not None:
                attributes[SERVER_ADDRESS] = self._labels.server_address
                if self._labels.server_port is not None:
                    attributes[SERVER_PORT] = self._labels.server_port
            if self.capture_content:
                attributes[INPUT_MESSAGES] = json_text([item_message(i) for i in session.seen])
            start = session.model_wait_since or self._clock()
            session.chat = self.tracer.start_span(
                f"chat {self._model}" if self._model else "chat",
                context=trace.set_span_in_context(session.turn),
                kind=SpanKind.CLIENT,
                attributes=attributes,
                start_time=start,
            )
        return session.chat

    def _chat_finished(self, session: _Session, item: Item) -> None:
        chat = self._chat(session)
        self._label_answer(session, chat, item)
        reason: str | None = None
        if item.finish_reason is not None:
            reason = _FINISH.get(item.finish_reason, item.finish_reason.value)
            chat.set_attribute(FINISH_REASONS, [reason])
        elif item.metadata.get("agentloop.interrupted"):
            reason = FinishReason.CANCELLED.value
            chat.set_attribute(FINISH_REASONS, [reason])
            chat.set_attribute(ERROR_TYPE, "cancelled")
        if item.usage is not None:
            _set_usage(chat, item.usage)
        if self.capture_content:
            message = item_message(item)
            if reason is not None:
                message["finish_reason"] = reason
            chat.set_attribute(OUTPUT_MESSAGES, json_text([message]))
        now = self._clock()
        chat.end(end_time=now)
        session.chat = None
        session.model_wait_since = None
        session.answer = None
        assert session.turn is not None
        for call in item.tool_calls():
            attributes: dict[str, Any] = {
                OPERATION: "execute_tool",
                TOOL_NAME: call.name,
                TOOL_CALL_ID: call.id,
                TOOL_TYPE: "function",
            }
            description = session.tool_descriptions.get(call.name)
            if description is not None:
                attributes[TOOL_DESCRIPTION] = description
            if self.capture_content:
                attributes[TOOL_ARGUMENTS] = json_text(call.input)
            session.tools[call.id] = self.tracer.start_span(
                f"execute_tool {call.name}",
                context=trace.set_span_in_context(session.turn),
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                start_time=now,
            )

    def _label_answer(self, session: _Session, chat: Span, item: Item) -> None:
        """Provider, requested and answering model and response id: stamped metadata
        first, then the call's ``ModelTurnResult``, then the adapter's labels."""
        metadata = item.metadata
        answer = session.answer
        provider = _text(metadata.get(PROVIDER_KEY)) or self._provider
        if provider:
            chat.set_attribute(PROVIDER, provider)
            if session.turn is not None:
                session.turn.set_attribute(PROVIDER, provider)
        requested = _text(metadata.get(MODEL_KEY))
        if requested and self.model is None:
            chat.set_attribute(REQUEST_MODEL, requested)
            chat.update_name(f"chat {requested}")
        answered = _text(metadata.get(RESPONSE_MODEL_KEY)) or _text(answer and answer.model)
        if answered:
            chat.set_attribute(RESPONSE_MODEL, answered)
        response_id = _text(metadata.get(RESPONSE_ID_KEY)) or _text(answer and answer.response_id)
        if response_id:
            chat.set_attribute(RESPONSE_ID, response_id)

    # -- tool calls ------------------------------------------------------------

    def _question_event(self, session: _Session, event: QuestionAsked | QuestionAnswered) -> None:
        """A span event on the asking call's span: ``agentloop.question.asked`` (kind,
        message: content, so only with ``capture_content``) or ``.answered`` (action)."""
        attributes: dict[str, Any] = {"agentloop.question.id": event.question_id}
        if isinstance(event, QuestionAsked):
            attributes["agentloop.question.kind"] = event.kind
            if self.capture_content:
                attributes["agentloop.question.message"] = event.message
            self._tool_event(session, event.call_id, "agentloop.question.asked", attributes)
            return
        attributes["agentloop.question.action"] = event.action
        self._tool_event(session, event.call_id, "agentloop.question.answered", attributes)

    def _tool_event(
        self, session: _Session, call_id: str, name: str, attributes: dict[str, Any]
    ) -> None:
        span = session.tools.get(call_id)
        if span is not None:
            span.add_event(name, attributes, timestamp=self._clock())

    def _tool_finished(self, session: _Session, result: ToolResultPart) -> None:
        session.model_wait_since = self._clock()
        span = session.tools.pop(result.call_id, None)
        if span is None:
            return
        outcome = result_outcome(result)
        span.set_attribute("agentloop.tool.outcome", outcome.value if outcome else "completed")
        if result.is_error:
            span.set_attribute(ERROR_TYPE, outcome.value if outcome else "tool_error")
            span.set_status(Status(StatusCode.ERROR, _short(result.output)))
        if self.capture_content:
            span.set_attribute(TOOL_RESULT, json_text(result.output))
        span.end(end_time=session.model_wait_since)


def _set_usage(span: Span, usage: Usage) -> None:
    span.set_attribute(INPUT_TOKENS, usage.input_tokens)
    span.set_attribute(OUTPUT_TOKENS, usage.output_tokens)
    if usage.cache_read_tokens:
        span.set_attribute(CACHE_READ_TOKENS, usage.cache_read_tokens)
    if usage.cache_write_tokens:
        span.set_attribute(CACHE_CREATION_TOKENS, usage.cache_write_tokens)
    if usage.reasoning_tokens:
        span.set_attribute(REASONING_TOKENS, usage.reasoning_tokens)
    if usage.cost is not None:
        span.set_attribute("agentloop.usage.cost", usage.cost)


def _fail(span: Span, error_type: str, message: str) -> None:
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, message))


def _text(value: Any) -> str | None:
    """``value`` if it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def _short(output: Any) -> str:
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    return text if len(text) <= 200 else text[:200] + "..."
