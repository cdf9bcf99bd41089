"""Recoverable turns: a failed model call ends the turn; retry(), continue_turn(), restore."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from loop_support import ApproveFsReads, EchoTool, Recorder, user

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.store
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import Reply, call, fail, text, tool_calls

pytestmark = pytest.mark.anyio

Kind = al.ProviderErrorKind

ERRORS = {
    Kind.RETRYABLE: lambda: al.ProviderError("503: overloaded", status=503, kind=Kind.RETRYABLE),
    Kind.CONTEXT_OVERFLOW: lambda: al.ProviderError(
        "prompt is too long", status=400, kind=Kind.CONTEXT_OVERFLOW
    ),
    Kind.AUTH: lambda: al.ProviderError("invalid x-api-key", status=401, kind=Kind.AUTH),
    Kind.CONTENT_FILTER: lambda: al.ProviderError("blocked", kind=Kind.CONTENT_FILTER),
}


def failing_at(
    point: str, error: al.ProviderError
) -> Callable[[al.model.TurnRequest], Reply | str]:
    """A model that fails once at ``point`` and otherwise answers from the request."""
    state = {"failed": False}

    def answer(request: al.model.TurnRequest) -> Reply | str:
        last = request.transcript[-1]
        fresh_turn = last.kind is al.ItemKind.USER
        should_fail = not state["failed"] and (
            (point in ("first_call", "mid_stream") and fresh_turn)
            or (point in ("after_tool_round", "after_approval") and not fresh_turn)
        )
        if should_fail:
            state["failed"] = True
            if point == "mid_stream":
                return fail(
                    error,
                    al.BeginPart("text-0", al.PartKind.TEXT),
                    al.AppendText("text-0", "Half an ans"),
                )
            return fail(error)
        if fresh_turn and point in ("after_tool_round", "after_approval"):
            return tool_calls(call("echo", {"value": "v"}, id="call-1"))
        return "done"

    return answer


def make_agent(
    model: al.ModelAdapter,
    *,
    approvals: bool = False,
    observer: Recorder | None = None,
    mutators: tuple[al.transcript.LoopMutator, ...] = (),
    limits: al.LoopLimits | None = None,
) -> al.Agent:
    builder = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .transcript([al.Item.text(al.ItemKind.SYSTEM, "sys")])
        .input([user("go")])
    )
    if approvals:
        builder = builder.permissions(ApproveFsReads())
    if observer is not None:
        builder = builder.observer(observer)
    for mutator in mutators:
        builder = builder.mutator(mutator)
    return builder.build()


async def until_finished(driver: al.LoopDriver, step: al.Step | None = None) -> al.Finished:
    """Drive to the end of the turn: continue pauses, approve every request."""
    step = step or await driver.next()
    while not isinstance(step, al.Finished):
        if isinstance(step, al.ApprovalRequest):
            step.approve()
        assert not isinstance(step, al.AwaitingInput), step
        step = await driver.next()
    return step


POINTS = ["first_call", "after_tool_round", "mid_stream", "after_approval"]


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("kind", list(ERRORS))
async def test_a_failure_at_each_point_ends_the_turn_and_retry_completes_it(
    point: str, kind: al.ProviderErrorKind
) -> None:
    error = ERRORS[kind]()
    model = al.testing.ScriptedModel(failing_at(point, error))
    recorder = Recorder()
    driver = await make_agent(model, approvals=point == "after_approval", observer=recorder).start(
        "s"
    )

    failed = await until_finished(driver)

    result = failed.result
    assert result.finish_reason is al.FinishReason.ERROR
    assert result.error is error
    assert result.error.kind is kind
    assert result.metadata == {"agentloop.error_kind": kind.value}
    assert driver.state is al.DriverState.IDLE
    assert driver.retry_point is not None
    assert driver.retry_point.error is error
    transcript = driver.snapshot().transcript
    al.transcript.validate_transcript(transcript)
    assert transcript[-1].kind in (al.ItemKind.USER, al.ItemKind.TOOL)
    failed_request = list(model.requests[-1].transcript)
    assert failed_request == list(transcript)
    assert [e.error_kind for e in recorder.of(al.observe.ModelCallFailed)] == [kind.value]
    assert [e.result.finish_reason for e in recorder.of(al.observe.TurnFinished)] == [
        al.FinishReason.ERROR
    ]
    assert recorder.of(al.observe.RunFailed) == []
    calls_before = len(model.requests)

    done = await until_finished(driver, await driver.retry())

    assert done.result.finish_reason is al.FinishReason.COMPLETED
    assert done.result.turn_id == "turn-2"
    assert [item.text_content for item in done.result.items] == ["done"]
    assert len(model.requests) == calls_before + 1
    assert list(model.requests[-1].transcript) == failed_request
    assert driver.retry_point is None
    al.transcript.validate_transcript(driver.snapshot().transcript)
    model.assert_requests_valid()


async def test_the_failed_turn_holds_everything_it_added() -> None:
    error = ERRORS[Kind.RETRYABLE]()
    model = al.testing.ScriptedModel(failing_at("after_tool_round", error))
    driver = await make_agent(model).start("s")
    failed = await until_finished(driver)
    assert [item.kind for item in failed.result.items] == [
        al.ItemKind.USER,
        al.ItemKind.ASSISTANT,
        al.ItemKind.TOOL,
    ]
    assert [(c.call_id, c.output, c.is_error) for c in failed.result.tool_calls] == [
        ("call-1", "v", False)
    ]
    assert [(r.index, r.finish_reason, r.error_kind) for r in failed.result.model_calls] == [
        (1, al.FinishReason.TOOL_CALL, None),
        (2, al.FinishReason.ERROR, "retryable"),
    ]


async def test_a_checkpoint_after_a_failure_restores_into_the_same_retryable_position() -> None:
    error = al.ProviderError(
        "overloaded", status=529, error_type="overloaded_error", retryable=True
    )
    model = al.testing.ScriptedModel(failing_at("after_tool_round", error))
    agent = make_agent(model)
    driver = await agent.start("s")
    await until_finished(driver)
    document = json.loads(json.dumps(driver.checkpoint()))
    assert document["version"] == 2
    assert document["retry_point"] == {
        "turn_id": "turn-1",
        "point": "after_tool_result",
        "error": {
            "class": "ProviderError",
            "message": "overloaded",
            "kind": "retryable",
            "status": 529,
            "error_type": "overloaded_error",
        },
    }
    failed_request = list(model.requests[-1].transcript)

    fresh = al.testing.ScriptedModel(["done"])
    restored = await make_agent(fresh).resume(document)
    assert restored.state is al.DriverState.IDLE
    point = restored.retry_point
    assert point is not None
    assert (point.turn_id, point.point, point.error.kind, point.error.status) == (
        "turn-1",
        "after_tool_result",
        Kind.RETRYABLE,
        529,
    )
    step = await restored.retry()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.COMPLETED
    assert [list(r.transcript) for r in fresh.requests] == [failed_request]
    fresh.assert_complete()


async def test_a_protocol_error_survives_a_checkpoint_as_its_class() -> None:
    model = al.testing.ScriptedModel([Reply.raw([al.BeginPart("p", al.PartKind.TEXT)])])
    driver = await make_agent(model).start("s")
    await driver.next()
    restored = await make_agent(al.testing.ScriptedModel(["ok"])).resume(driver.checkpoint())
    assert restored.retry_point is not None
    assert isinstance(restored.retry_point.error, al.ModelProtocolError)
    assert restored.retry_point.error.kind is Kind.INVALID_RESPONSE


async def test_pending_input_stays_pending_through_a_retry() -> None:
    error = ERRORS[Kind.RETRYABLE]()
    model = al.testing.ScriptedModel([fail(error), "retried", "later answered"])
    driver = await make_agent(model).start("s")
    await driver.next()
    driver.submit_input([user("later")])
    driver.follow_up([user("follow")])
    retried = await driver.retry()
    assert isinstance(retried, al.Finished)
    assert [i.text_content for i in model.requests[1].transcript] == ["sys", "go"]
    assert [i.text_content for i in driver.snapshot().pending_input] == ["later", "follow"]
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert [i.text_content for i in model.requests[2].transcript] == [
        "sys",
        "go",
        "retried",
        "later",
        "follow",
    ]


async def test_a_failed_turn_keeps_follow_ups_queued() -> None:
    model = al.testing.ScriptedModel([fail(ERRORS[Kind.RETRYABLE]())])
    driver = await make_agent(model).start("s")
    driver.follow_up([user("then this")])
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert driver.snapshot().pending_input == ()
    assert [m.items[0].text_content for m in driver.queued_follow_ups] == ["then this"]


async def test_next_after_a_failure_says_to_retry() -> None:
    model = al.testing.ScriptedModel([fail(al.ProviderError("down", retryable=True))])
    driver = await make_agent(model).start("s")
    await driver.next()
    waiting = await driver.next()
    assert isinstance(waiting, al.AwaitingInput)
    assert waiting.reason == (
        "turn-1 ended because a model call failed (retryable: down); call retry() or submit input"
    )
    assert driver.retry_point is not None


async def test_retry_is_refused_without_a_failure_and_changes_nothing() -> None:
    model = al.testing.ScriptedModel(["fine"])
    driver = await make_agent(model).start("s")
    await driver.next()
    before = driver.snapshot()
    with pytest.raises(al.InvalidStateError) as raised:
        await driver.retry()
    assert str(raised.value) == (
        "cannot retry(): no model call failed since the last turn started; use "
        "continue_turn() to call the model on the transcript as it is, or submit input and "
        "call next()"
    )
    assert driver.snapshot() == before
    assert driver.state is al.DriverState.IDLE


async def test_a_new_turn_clears_the_retry_point() -> None:
    model = al.testing.ScriptedModel([fail(ERRORS[Kind.RETRYABLE]()), "answer"])
    driver = await make_agent(model).start("s")
    await driver.next()
    driver.submit_input([user("never mind")])
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert driver.retry_point is None
    with pytest.raises(al.InvalidStateError, match=r"^cannot retry\(\): no model call failed"):
        await driver.retry()


async def test_retry_refuses_something_that_is_not_a_mutator() -> None:
    model = al.testing.ScriptedModel([fail(ERRORS[Kind.RETRYABLE]())])
    driver = await make_agent(model).start("s")
    await driver.next()
    with pytest.raises(al.InvalidInputError) as raised:
        await driver.retry(mutators=[object()])  # type: ignore[list-item]
    assert str(raised.value) == (
        "retry(): mutators[0] is a object, not a LoopMutator (it needs an async "
        "mutate(cursor, ctx) method)"
    )
    assert driver.retry_point is not None


class KeepSystemAndLastUser:
    """A crude compactor: keeps system items and the last user item."""

    name = "compact"

    def __init__(self) -> None:
        self.runs: list[al.transcript.MutationPoint] = []

    async def mutate(
        self, cursor: al.transcript.TranscriptCursor, ctx: al.transcript.MutationContext
    ) -> None:
        self.runs.append(ctx.point)
        items = list(cursor)
        last_user = max(i for i, item in enumerate(items) if item.kind is al.ItemKind.USER)
        kept = [item for item in items[:last_user] if item.kind is al.ItemKind.SYSTEM]
        cursor[:] = [*kept, items[last_user]]


async def test_context_overflow_is_compacted_by_a_mutator_before_retry() -> None:
    limit = 4

    def answer(request: al.model.TurnRequest) -> Reply | str:
        if len(request.transcript) > limit:
            return fail(ERRORS[Kind.CONTEXT_OVERFLOW]())
        return f"answer with {len(request.transcript)} items"

    history = [user(f"old {n}") for n in range(3)] + [
        al.Item.text(al.ItemKind.ASSISTANT, "old reply")
    ]
    model = al.testing.ScriptedModel(answer)
    agent = (
        al.Agent.builder()
        .model(model)
        .transcript([al.Item.text(al.ItemKind.SYSTEM, "sys"), *history])
        .input([user("now")])
        .build()
    )
    driver = await agent.start("s")
    failed = await driver.next()
    assert isinstance(failed, al.Finished)
    assert failed.result.error is not None
    assert failed.result.error.kind is Kind.CONTEXT_OVERFLOW

    compactor = KeepSystemAndLastUser()
    done = await driver.retry(mutators=[compactor])
    assert isinstance(done, al.Finished)
    assert done.result.finish_reason is al.FinishReason.COMPLETED
    assert done.result.final_items[0].text_content == "answer with 2 items"
    assert compactor.runs == [al.transcript.MutationPoint.AFTER_TURN_ENDED]
    assert [i.text_content for i in model.requests[-1].transcript] == ["sys", "now"]
    # The one-shot mutator does not run again.
    driver.submit_input([user("more")])
    again = await driver.next()
    assert isinstance(again, al.Finished)
    assert compactor.runs == [al.transcript.MutationPoint.AFTER_TURN_ENDED]


async def test_a_mutator_error_still_fails_the_driver() -> None:
    class Broken:
        async def mutate(
            self, cursor: al.transcript.TranscriptCursor, ctx: al.transcript.MutationContext
        ) -> None:
            raise RuntimeError("bug")

    driver = await make_agent(al.testing.ScriptedModel([]), mutators=(Broken(),)).start("s")
    with pytest.raises(al.MutatorError, match="mutator 'Broken' failed at after_turn_ended"):
        await driver.next()
    assert driver.state is al.DriverState.FAILED
    with pytest.raises(al.InvalidStateError, match=r"^cannot retry\(\) in state FAILED"):
        await driver.retry()


async def test_a_bug_in_the_adapter_fails_the_driver() -> None:
    model = al.testing.ScriptedModel([fail(RuntimeError("adapter bug"))])
    driver = await make_agent(model).start("s")
    with pytest.raises(RuntimeError, match="adapter bug"):
        await driver.next()
    assert driver.state is al.DriverState.FAILED


# -- continue_turn ----------------------------------------------------------------


async def test_continue_turn_calls_the_model_on_a_user_tail() -> None:
    model = al.testing.ScriptedModel(["continued"])
    history = [al.Item.text(al.ItemKind.SYSTEM, "sys"), user("unanswered")]
    driver = await al.Agent.builder().model(model).transcript(history).build().start("s")
    step = await driver.continue_turn()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.COMPLETED
    assert [i.text_content for i in step.result.items] == ["continued"]
    assert list(model.requests[0].transcript) == history


async def test_continue_turn_calls_the_model_on_a_tool_tail() -> None:
    call_item = al.Item(al.ItemKind.ASSISTANT, (al.ToolCallPart("c1", "echo", {}),))
    result_item = al.Item(al.ItemKind.TOOL, (al.ToolResultPart("c1", "pong"),))
    history = [user("q"), call_item, result_item]
    points: list[al.transcript.MutationPoint] = []

    class Points:
        async def mutate(
            self, cursor: al.transcript.TranscriptCursor, ctx: al.transcript.MutationContext
        ) -> None:
            points.append(ctx.point)

    model = al.testing.ScriptedModel(["after the tool"])
    agent = al.Agent.builder().model(model).transcript(history).mutator(Points()).build()
    driver = await agent.start("s")
    step = await driver.continue_turn()
    assert isinstance(step, al.Finished)
    assert points == [al.transcript.MutationPoint.AFTER_TOOL_RESULT]
    assert list(model.requests[0].transcript) == history


@pytest.mark.parametrize(
    ("history", "found"),
    [
        (
            [user("q"), al.Item.text(al.ItemKind.ASSISTANT, "a")],
            "the transcript ends with an item of kind 'assistant'",
        ),
        ([], "the transcript is empty"),
        (
            [
                user("q"),
                al.Item.text(al.ItemKind.ASSISTANT, "a"),
                al.Item.text(al.ItemKind.CONTEXT, "c"),
            ],
            "the transcript ends with an item of kind 'context'",
        ),
    ],
)
async def test_continue_turn_refuses_a_tail_the_model_cannot_answer(
    history: list[al.Item], found: str
) -> None:
    model = al.testing.ScriptedModel([])
    driver = await al.Agent.builder().model(model).transcript(history).build().start("s")
    with pytest.raises(al.InvalidStateError) as raised:
        await driver.continue_turn()
    assert str(raised.value) == (
        f"cannot continue_turn(): {found}, so there is nothing for the model to answer "
        "(an assistant tail would be an assistant-prefill request); submit input and call "
        "next()"
    )
    assert driver.state is al.DriverState.IDLE
    assert list(driver.snapshot().transcript) == history
    assert model.requests == []


async def test_continue_turn_is_refused_inside_an_open_turn() -> None:
    model = al.testing.ScriptedModel([tool_calls(call("echo", id="c1"))])
    driver = await make_agent(model, approvals=True).start("s")
    approval = await driver.next()
    assert isinstance(approval, al.ApprovalRequest)
    with pytest.raises(al.InvalidStateError) as raised:
        await driver.continue_turn()
    assert str(raised.value) == (
        "cannot continue_turn() in state AWAITING_APPROVAL: c1 is unresolved; approve() or "
        "deny() it first, then call next()"
    )
    assert driver.state is al.DriverState.AWAITING_APPROVAL


async def test_continue_turn_keeps_pending_input_pending() -> None:
    model = al.testing.ScriptedModel(["first", "second"])
    driver = await al.Agent.builder().model(model).transcript([user("q")]).build().start("s")
    driver.submit_input([user("queued")])
    step = await driver.continue_turn()
    assert isinstance(step, al.Finished)
    assert [i.text_content for i in model.requests[0].transcript] == ["q"]
    assert [i.text_content for i in driver.snapshot().pending_input] == ["queued"]


# -- empty responses ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "no text and no tool calls; finish reason completed"),
        (
            Reply.raw([al.model.ModelTurnResult(al.FinishReason.MAX_TOKENS, ())]),
            "no output items; finish reason max_tokens",
        ),
        (
            Reply.raw(
                [
                    al.model.ModelTurnResult(
                        al.FinishReason.MAX_TOKENS,
                        (al.Item(al.ItemKind.ASSISTANT, (al.ReasoningPart("thinking..."),)),),
                    )
                ]
            ),
            "no text and no tool calls; finish reason max_tokens",
        ),
    ],
)
async def test_an_empty_response_ends_the_turn_with_a_stated_reason(
    reply: Reply | str, reason: str
) -> None:
    model = al.testing.ScriptedModel([reply, "real answer"])
    driver = await make_agent(model).start("s")
    step = await driver.next()
    assert isinstance(step, al.Finished)
    result = step.result
    assert result.finish_reason is al.FinishReason.ERROR
    assert result.error is not None
    assert result.error.kind is Kind.INVALID_RESPONSE
    assert result.error.error_type == "empty_response"
    assert str(result.error) == f"the model returned an empty response ({reason})"
    assert result.metadata == {
        "agentloop.empty_response": reason,
        "agentloop.error_kind": "invalid_response",
    }
    # Nothing empty entered the transcript: the next request is not "user, user".
    assert [i.kind for i in driver.snapshot().transcript] == [al.ItemKind.SYSTEM, al.ItemKind.USER]
    again = await driver.retry()
    assert isinstance(again, al.Finished)
    assert again.result.final_items[0].text_content == "real answer"


async def test_the_usage_of_an_empty_response_is_counted() -> None:
    usage = al.Usage(input_tokens=12, output_tokens=3)
    model = al.testing.ScriptedModel([text("", usage=usage)])
    driver = await make_agent(model).start("s")
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.usage == usage
    (record,) = step.result.model_calls
    assert (record.finish_reason, record.usage, record.error_kind) == (
        al.FinishReason.ERROR,
        usage,
        "invalid_response",
    )
    assert driver.usage == usage


async def failed_document() -> dict[str, Any]:
    model = al.testing.ScriptedModel([fail(al.ProviderError("503", status=503, retryable=True))])
    driver = await make_agent(model).start("s")
    await driver.next()
    return json.loads(json.dumps(driver.checkpoint()))


def _set_kind(document: dict[str, Any]) -> None:
    document["retry_point"]["error"]["kind"] = "weather"


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (_set_kind, "the document is malformed"),
        (lambda d: d["retry_point"].update(point="somewhere"), "retry point 'somewhere' is not"),
        (lambda d: d["retry_point"]["error"].update(status="503"), "the document is malformed"),
        (lambda d: d["retry_point"]["error"].update({"class": "KeyError"}), "malformed"),
        (lambda d: d["retry_point"].pop("error"), "missing field 'error'"),
        (lambda d: d.pop("retry_point"), "missing field 'retry_point'"),
        (lambda d: d.update(session_tool_calls=-1), "session_tool_calls must be a non-negative"),
        (
            lambda d: d["transcript"].append(
                {**d["transcript"][-1], "kind": "assistant", "parts": []}
            ),
            "holds a retry point but its transcript does not end",
        ),
        (
            lambda d: d.update(
                turn={
                    "turn_id": "turn-9",
                    "model_calls": 0,
                    "usage": None,
                    "paused": False,
                    "interrupted": False,
                    "items": [],
                    "tool_calls": [],
                    "model_calls_made": [],
                    "final_answer": False,
                    "round": None,
                }
            ),
            "holds a retry point but also an open turn",
        ),
    ],
)
async def test_a_corrupted_retry_point_is_rejected(corrupt: Any, message: str) -> None:
    document = await failed_document()
    corrupt(document)
    model = al.testing.ScriptedModel([])
    with pytest.raises(al.CheckpointError, match=message):
        await make_agent(model).resume(document)
    assert model.requests == []


@given(
    message=st.text(max_size=20),
    kind=st.sampled_from(list(Kind)),
    status=st.none() | st.integers(100, 599),
    error_type=st.none() | st.text(max_size=10),
    protocol=st.booleans(),
)
def test_provider_errors_round_trip_through_the_converter(
    message: str,
    kind: al.ProviderErrorKind,
    status: int | None,
    error_type: str | None,
    protocol: bool,
) -> None:
    error = (
        al.ModelProtocolError(message, error_type=error_type)
        if protocol
        else al.ProviderError(message, status=status, error_type=error_type, kind=kind)
    )
    result = al.TurnResult("t", al.FinishReason.ERROR, (), error=error)
    back = al.structure(json.loads(json.dumps(al.unstructure(result))), al.TurnResult)
    assert back.error is not None
    assert type(back.error) is type(error)
    assert (str(back.error), back.error.kind, back.error.status, back.error.error_type) == (
        str(error),
        error.kind,
        error.status,
        error.error_type,
    )


@given(
    records=st.lists(
        st.builds(
            al.ModelCallRecord,
            index=st.integers(1, 30),
            finish_reason=st.sampled_from(list(al.FinishReason)),
            usage=st.none() | st.builds(al.Usage, st.integers(0, 10**6), st.integers(0, 10**6)),
            duration=st.floats(0, 100),
            model=st.none() | st.text(max_size=8),
            error_kind=st.none() | st.sampled_from([k.value for k in Kind]),
        ),
        max_size=3,
    ),
    calls=st.lists(
        st.builds(
            al.ExecutedToolCall,
            call_id=st.text(min_size=1, max_size=6),
            tool_name=st.text(min_size=1, max_size=6),
            input=st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
            result=st.builds(al.ToolResultPart, st.text(max_size=6), st.text(max_size=10)),
            started_at=st.none() | st.floats(0, 2e9),
            finished_at=st.none() | st.floats(0, 2e9),
            duration=st.none() | st.floats(0, 100),
        ),
        max_size=3,
    ),
)
def test_turn_records_round_trip_through_json(
    records: list[al.ModelCallRecord], calls: list[al.ExecutedToolCall]
) -> None:
    result = al.TurnResult(
        "t", al.FinishReason.COMPLETED, (), tool_calls=calls, model_calls=records
    )
    data = json.loads(json.dumps(al.unstructure(result)))
    assert al.structure(data, al.TurnResult) == result


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
async def test_a_store_keeps_the_failed_turn_and_a_restart_retries_it(
    store_kind: str, tmp_path: Any
) -> None:
    store: al.store.SessionStore = (
        al.store.MemorySessionStore()
        if store_kind == "memory"
        else al.store.SqliteSessionStore(tmp_path / "sessions.db")
    )
    error = al.ProviderError("overloaded", status=529, retryable=True)
    model = al.testing.ScriptedModel(failing_at("after_tool_round", error))
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(al.ToolRegistry().with_tool(EchoTool()))
        .input([user("go")])
        .store(store)
        .build()
    )
    driver = await agent.start("stored")
    failed = await until_finished(driver)
    assert failed.result.finish_reason is al.FinishReason.ERROR
    failed_request = list(model.requests[-1].transcript)

    # A new process: the same store, a fresh model.
    fresh = al.testing.ScriptedModel(["done"])
    restarted = await attrs.evolve(agent, model=fresh).resume(session_id="stored")
    assert restarted.retry_point is not None
    assert restarted.retry_point.error.status == 529
    step = await restarted.retry()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.COMPLETED
    assert [list(r.transcript) for r in fresh.requests] == [failed_request]


async def test_a_provider_error_caused_by_an_interrupt_is_a_cancelled_turn() -> None:
    controller = al.CancellationController()

    class InterruptThenFail:
        """An adapter that reports the interrupt as a ProviderError (a closed connection)."""

        model_name = "m"

        async def start_session(self, config: al.SessionConfig) -> InterruptThenFail:
            return self

        async def begin_turn(self, request: al.model.TurnRequest, cancellation: Any) -> Any:
            async def events() -> Any:
                controller.interrupt()
                raise al.ProviderError("connection closed", retryable=True)
                yield  # pragma: no cover

            return events()

    agent = (
        al.Agent.builder()
        .model(InterruptThenFail())
        .cancellation(controller.handle())
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s")
    step = await driver.next()
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.CANCELLED
    assert step.result.metadata["agentloop.interrupt_stage"] == "model"
    assert driver.retry_point is None
