"""Sessions as DBOS workflows in this process: runs, continuation, model failures, approvals.

DBOS runs for real here, on a SQLite file and on the embedded PostgreSQL
(``databases``), with a claims store on the same database; every test
launches DBOS and destroys it afterwards. The database matters to DBOS, not
to agentloop's logic: the runs and the approval round trip use both, the
variations of a run SQLite only (the crash tests use both again).
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from dbos import DBOS, DBOSClient
from durable_kit import build_agent, final_text, lines, user

import agentloop as al
from agentloop.durable.dbos import (
    ApprovalOutcome,
    ApprovalStatus,
    DurableAgent,
    DurableError,
    PendingApproval,
    approval_topic,
    approve,
    dbos_config,
    enqueue_input,
    latest_run,
    pending_approval,
    send_input,
    wait_result,
)
from agentloop.durable.dbos import _host as durable_host
from agentloop.store import PostgresSessionStore, SessionStore, SqliteSessionStore
from agentloop.tasks import AsyncTaskManager

pytestmark = pytest.mark.anyio

WAIT = 60.0  # every wait is bounded; a healthy run takes well under a second


class Launched:
    def __init__(self, workdir: Path, client: DBOSClient, agent: DurableAgent) -> None:
        self.workdir = workdir
        self.client = client
        self.agent = agent

    def charges(self) -> list[str]:
        return lines(self.workdir / "charges.log")

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in lines(self.workdir / "requests.log")]


def _claims(target: str) -> SessionStore:
    if target.startswith("postgresql"):
        return PostgresSessionStore(target)
    return SqliteSessionStore(target)


@pytest.fixture
def launched(workdir: Path, databases: tuple[str, str]) -> Iterator[Launched]:
    url, claims_target = databases
    claims = _claims(claims_target)
    agent = DurableAgent(build_agent(workdir), name="charges", claims=claims, approval_timeout=30.0)
    DBOS(config=dbos_config("agentloop-tests", url, executor_id="test", application_version="t1"))
    DBOS.launch()
    client = DBOSClient(system_database_url=url)
    try:
        yield Launched(workdir, client, agent)
    finally:
        client.destroy()
        DBOS.destroy()
        anyio.run(claims.aclose)  # type: ignore[attr-defined]


async def test_a_run_calls_the_model_and_the_tool_once_each(launched: Launched) -> None:
    workflow_id = await send_input("charges", "s-small", user("charge 5"))
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    assert (result.workflow_id, result.session_id, result.run) == ("s-small#1", "s-small", 1)
    assert (result.finish_reason, result.error, result.retries) == (
        al.FinishReason.COMPLETED,
        None,
        0,
    )
    assert result.executor_id == "test"
    assert final_text(result.transcript) == "done: charged 5"
    assert result.approvals == ()
    al.validate_transcript(result.transcript)
    assert launched.charges() == ["turn-1-charge 5"]
    assert launched.requests() == [
        {"turn": "turn-1", "items": 1, "users": ["charge 5"]},
        {"turn": "turn-1", "items": 3, "users": ["charge 5"]},
    ]


async def test_a_later_input_continues_the_session(launched: Launched) -> None:
    assert await latest_run(launched.client, "s-chat") is None
    first = await send_input("charges", "s-chat", user("charge 5"))
    one = await wait_result(launched.client, first, within=WAIT)
    second = await send_input("charges", "s-chat", user("charge 6"))
    two = await wait_result(launched.client, second, within=WAIT)

    assert (first, second) == ("s-chat#1", "s-chat#2")
    assert await latest_run(launched.client, "s-chat") == "s-chat#2"
    assert (two.session_id, two.run, two.finish_reason) == ("s-chat", 2, al.FinishReason.COMPLETED)
    assert two.transcript[: len(one.transcript)] == one.transcript
    assert [final_text(one.transcript), final_text(two.transcript)] == [
        "done: charged 5",
        "done: charged 6",
    ]
    assert len(two.transcript) == 8
    al.validate_transcript(two.transcript)
    # The second run's first request carries the whole first turn.
    assert launched.requests()[2:] == [
        {"turn": "turn-2", "items": 5, "users": ["charge 5", "charge 6"]},
        {"turn": "turn-2", "items": 7, "users": ["charge 5", "charge 6"]},
    ]
    assert launched.charges() == ["turn-1-charge 5", "turn-2-charge 6"]


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_an_input_sent_while_the_previous_run_waits_runs_after_it(
    launched: Launched,
) -> None:
    first = await send_input("charges", "s-queue", user("charge 500"))
    pending = await pending_approval(launched.client, first, within=WAIT)
    assert pending is not None
    second = await send_input("charges", "s-queue", user("charge 6"))
    with pytest.raises(DurableError, match=r"workflow s-queue#2 is still PENDING after 0.5 s"):
        await wait_result(launched.client, second, within=0.5)
    assert [line["users"] for line in launched.requests()] == [["charge 500"]]

    await approve(launched.client, first, pending.call_id, al.ApprovalDecision.approve())
    one = await wait_result(launched.client, first, within=WAIT)
    two = await wait_result(launched.client, second, within=WAIT)

    assert two.transcript[: len(one.transcript)] == one.transcript
    assert final_text(two.transcript) == "done: charged 6"
    assert two.approvals == ()
    assert launched.charges() == ["turn-1-charge 500", "turn-2-charge 6"]
    al.validate_transcript(two.transcript)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_concurrent_senders_get_consecutive_runs(launched: Launched) -> None:
    started: list[str] = []

    async def send(text: str) -> None:
        started.append(await send_input("charges", "s-race", user(text)))

    async with anyio.create_task_group() as group:
        for text in ("charge 1", "charge 2"):
            group.start_soon(send, text)
    last = await wait_result(launched.client, "s-race#2", within=WAIT)

    assert sorted(started) == ["s-race#1", "s-race#2"]
    users = [item for item in last.transcript if item.kind is al.ItemKind.USER]
    assert sorted(final_text([item]) for item in users) == ["charge 1", "charge 2"]
    assert sorted(launched.charges()) in (
        ["turn-1-charge 1", "turn-2-charge 2"],
        ["turn-1-charge 2", "turn-2-charge 1"],
    )
    al.validate_transcript(last.transcript)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_a_sender_that_saw_no_runs_takes_the_next_free_number(
    launched: Launched, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race of two senders, made certain: each listing misses the runs already there."""
    await anyio.to_thread.run_sync(lambda: DBOS.register_queue("inputs", worker_concurrency=2))
    monkeypatch.setattr(durable_host, "_newest", lambda session_id, workflow_ids: 0)
    first = await send_input("charges", "s-stale", user("charge 1"))
    second = await enqueue_input(
        launched.client,
        queue_name="inputs",
        agent_name="charges",
        session_id="s-stale",
        input=user("charge 2"),
        application_version="t1",
    )
    third = await send_input("charges", "s-stale", user("charge 3"))
    last = await wait_result(launched.client, third, within=WAIT)

    assert (first, second, third) == ("s-stale#1", "s-stale#2", "s-stale#3")
    assert [final_text([item]) for item in last.transcript if item.kind is al.ItemKind.USER] == [
        "charge 1",
        "charge 2",
        "charge 3",
    ]
    assert launched.charges() == ["turn-1-charge 1", "turn-2-charge 2", "turn-3-charge 3"]


async def test_a_failed_model_call_ends_the_turn_and_the_session_goes_on(
    launched: Launched,
) -> None:
    failed = await wait_result(
        launched.client, await send_input("charges", "s-auth", user("fail auth")), within=WAIT
    )

    assert (failed.finish_reason, failed.retries) == (al.FinishReason.ERROR, 0)
    assert isinstance(failed.error, al.ProviderError)
    assert (failed.error.kind, failed.error.status, str(failed.error)) == (
        al.ProviderErrorKind.AUTH,
        401,
        "401: invalid api key",
    )
    assert [item.kind for item in failed.transcript] == [al.ItemKind.USER]

    later = await send_input("charges", "s-auth", user("charge 5"))
    done = await wait_result(launched.client, later, within=WAIT)

    assert (done.run, done.finish_reason, done.error) == (2, al.FinishReason.COMPLETED, None)
    assert final_text(done.transcript) == "done: charged 5"
    assert launched.requests() == [
        {"turn": "turn-1", "items": 1, "users": ["fail auth"]},
        {"turn": "turn-2", "items": 2, "users": ["fail auth", "charge 5"]},
        {"turn": "turn-2", "items": 4, "users": ["fail auth", "charge 5"]},
    ]
    assert launched.charges() == ["turn-2-charge 5"]
    al.validate_transcript(done.transcript)


RETRY = al.TurnRetryPolicy(max_retries=2, initial_delay=0.01)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("text", "policy", "finish_reason", "kind", "turns"),
    [
        ("fail busy", RETRY, al.FinishReason.ERROR, al.ProviderErrorKind.RETRYABLE, 3),
        ("fail busy", None, al.FinishReason.ERROR, al.ProviderErrorKind.RETRYABLE, 1),
        ("fail auth", RETRY, al.FinishReason.ERROR, al.ProviderErrorKind.AUTH, 1),
        ("fail busy until turn-2", RETRY, al.FinishReason.COMPLETED, None, 2),
    ],
)
async def test_a_retry_policy_retries_a_failed_turn_durably(
    workdir: Path,
    launched: Launched,
    text: str,
    policy: al.TurnRetryPolicy | None,
    finish_reason: al.FinishReason,
    kind: al.ProviderErrorKind | None,
    turns: int,
) -> None:
    DurableAgent(build_agent(workdir), name="retrying", retry=policy)
    result = await wait_result(
        launched.client, await send_input("retrying", "s-retry", user(text)), within=WAIT
    )

    assert (result.finish_reason, result.retries) == (finish_reason, turns - 1)
    assert (None if result.error is None else result.error.kind) is kind
    expected = [{"turn": f"turn-{n + 1}", "items": 1, "users": [text]} for n in range(turns)]
    assert launched.requests() == expected
    if kind is None:
        assert final_text(result.transcript) == f"back online in turn-{turns}"

    later = await send_input("retrying", "s-retry", user("charge 5"))
    done = await wait_result(launched.client, later, within=WAIT)

    assert (done.finish_reason, final_text(done.transcript)) == (
        al.FinishReason.COMPLETED,
        "done: charged 5",
    )
    assert launched.charges() == [f"turn-{turns + 1}-charge 5"]
    assert launched.requests()[turns]["users"] == [text, "charge 5"]
    al.validate_transcript(done.transcript)


class _Silent:
    """A broken adapter: its stream ends without a ModelTurnResult."""

    async def start_session(self, config: al.SessionConfig) -> _Silent:
        return self

    async def begin_turn(
        self, request: al.TurnRequest, cancellation: Any
    ) -> AsyncIterator[al.ModelEvent]:
        async def nothing() -> AsyncIterator[al.ModelEvent]:
            for event in ():
                yield event

        return nothing()


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_a_broken_model_stream_ends_the_turn_as_a_protocol_error(
    launched: Launched,
) -> None:
    DurableAgent(al.Agent.builder().model(_Silent()).build(), name="silent")
    result = await wait_result(
        launched.client, await send_input("silent", "s-silent", user("hello")), within=WAIT
    )

    assert result.finish_reason is al.FinishReason.ERROR
    assert isinstance(result.error, al.ModelProtocolError)
    assert (result.error.kind, str(result.error)) == (
        al.ProviderErrorKind.INVALID_RESPONSE,
        "model stream ended without a ModelTurnResult",
    )
    assert [item.kind for item in result.transcript] == [al.ItemKind.USER]


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_a_session_whose_run_failed_refuses_to_continue(launched: Launched) -> None:
    broken = await send_input("nobody", "s-broken", user("charge 1"))
    with pytest.raises(DurableError, match=r"ended ERROR: .*no DurableAgent named 'nobody'"):
        await wait_result(launched.client, broken, within=WAIT)
    later = await send_input("charges", "s-broken", user("charge 2"))

    with pytest.raises(
        DurableError,
        match=r"s-broken#2 ended ERROR: .*the session's previous run s-broken#1 failed "
        r"\(DurableError: cannot run workflow s-broken#1: no DurableAgent named 'nobody'",
    ):
        await wait_result(launched.client, later, within=WAIT)
    assert launched.charges() == []
    assert launched.requests() == []


async def test_an_approval_waits_for_a_client_and_runs_the_call(launched: Launched) -> None:
    workflow_id = await send_input("charges", "s-big", user("charge 500"))
    pending = await pending_approval(launched.client, workflow_id, within=WAIT)

    assert isinstance(pending, PendingApproval)
    assert (pending.call_id, pending.tool_name, pending.input, pending.summary) == (
        "turn-1-charge",
        "charge",
        {"amount": 500},
        "charge 500",
    )
    assert launched.charges() == []
    await approve(launched.client, workflow_id, pending.call_id, al.ApprovalDecision.approve())
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    assert final_text(result.transcript) == "done: charged 500"
    assert result.approvals == (
        ApprovalOutcome(
            call_id="turn-1-charge",
            tool_name="charge",
            status=ApprovalStatus.APPROVED,
            deadline=pending.deadline,
        ),
    )
    assert launched.charges() == ["turn-1-charge 500"]
    assert await pending_approval(launched.client, workflow_id) is None
    al.validate_transcript(result.transcript)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_approve_with_runs_the_edited_input(launched: Launched) -> None:
    workflow_id = await send_input("charges", "s-edit", user("charge 900"))
    pending = await pending_approval(launched.client, workflow_id, within=WAIT)
    assert pending is not None
    decision = al.ApprovalDecision.approve_with({"amount": 90})
    await approve(launched.client, workflow_id, pending.call_id, decision)
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    assert final_text(result.transcript) == "done: charged 90"
    assert [outcome.status for outcome in result.approvals] == [ApprovalStatus.APPROVED_WITH]
    assert launched.charges() == ["turn-1-charge 90"]


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("message", "reason", "status"),
    [
        (None, "too expensive", ApprovalStatus.DENIED),
        (
            "not json",
            "approval denied: unreadable decision (JSONDecodeError)",
            ApprovalStatus.DENIED,
        ),
        ('{"kind": "maybe"}', "approval denied: unreadable decision", ApprovalStatus.DENIED),
        ("[1, 2]", "approval denied: unreadable decision", ApprovalStatus.DENIED),
    ],
)
async def test_a_denial_or_an_unreadable_answer_never_runs_the_call(
    launched: Launched, message: str | None, reason: str, status: ApprovalStatus
) -> None:
    workflow_id = await send_input("charges", "s-deny", user("charge 700"))
    pending = await pending_approval(launched.client, workflow_id, within=WAIT)
    assert pending is not None
    if message is None:
        denial = al.ApprovalDecision.deny("too expensive")
        await approve(launched.client, workflow_id, pending.call_id, denial)
    else:
        await anyio.to_thread.run_sync(
            lambda: launched.client.send(workflow_id, message, approval_topic(pending.call_id))
        )
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    [outcome] = result.approvals
    assert outcome.status is status
    assert outcome.reason is not None
    assert outcome.reason.startswith(reason)
    assert final_text(result.transcript) == f"done: {outcome.reason}"
    assert launched.charges() == []
    al.validate_transcript(result.transcript)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_an_unanswered_approval_expires_denied(workdir: Path, launched: Launched) -> None:
    DurableAgent(build_agent(workdir), name="impatient", approval_timeout=0.5)
    workflow_id = await send_input("impatient", "s-expire", user("charge 800"))
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    [outcome] = result.approvals
    assert outcome.status is ApprovalStatus.EXPIRED
    assert outcome.reason is not None
    assert outcome.reason.startswith("approval expired: no decision before 20")
    assert final_text(result.transcript) == f"done: {outcome.reason}"
    [tool_result] = [part for part in result.transcript[-2].parts]
    assert isinstance(tool_result, al.ToolResultPart)
    assert tool_result.is_error
    assert launched.charges() == []
    # A late answer changes nothing: the run is over.
    await approve(launched.client, workflow_id, "turn-1-charge", al.ApprovalDecision.approve())
    assert await wait_result(launched.client, workflow_id, within=WAIT) == result
    assert launched.charges() == []


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_a_raising_tool_is_an_error_result_recorded_like_any(launched: Launched) -> None:
    workflow_id = await send_input("charges", "s-raise", user("charge -3"))
    result = await wait_result(launched.client, workflow_id, within=WAIT)

    assert final_text(result.transcript) == (
        "done: tool 'charge' failed: RecordedToolFailure: "
        "ValueError: cannot charge a negative amount (-3)"
    )
    assert launched.charges() == []


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_an_unknown_agent_fails_the_workflow_with_its_name(launched: Launched) -> None:
    workflow_id = await send_input("nobody", "s-nobody", user("charge 1"))
    with pytest.raises(DurableError, match=r"ended ERROR: .*no DurableAgent named 'nobody'"):
        await wait_result(launched.client, workflow_id, within=WAIT)


@pytest.mark.parametrize("databases", ["sqlite"], indirect=True)
async def test_a_wait_that_runs_out_says_so(launched: Launched) -> None:
    workflow_id = await send_input("charges", "s-slow", user("charge 501"))
    with pytest.raises(DurableError, match=r"workflow s-slow#1 is still PENDING after 0.2 s"):
        await wait_result(launched.client, workflow_id, within=0.2)
    pending = await pending_approval(launched.client, workflow_id, within=WAIT)
    assert pending is not None
    await approve(launched.client, workflow_id, pending.call_id, al.ApprovalDecision.deny())
    await wait_result(launched.client, workflow_id, within=WAIT)


# -- bad input (no DBOS needed) -------------------------------------------------------


@pytest.mark.parametrize("timeout", [0, -1.0, "10", None, math.nan])
def test_durable_agent_refuses_a_bad_approval_timeout(workdir: Path, timeout: Any) -> None:
    with pytest.raises(al.InvalidInputError, match="approval_timeout must be positive seconds"):
        DurableAgent(build_agent(workdir), name="bad", approval_timeout=timeout)


@pytest.mark.parametrize("name", ["", None, 3])
def test_durable_agent_refuses_a_bad_name(workdir: Path, name: Any) -> None:
    with pytest.raises(al.InvalidInputError, match="name must be a non-empty str"):
        DurableAgent(build_agent(workdir), name=name)


def test_durable_agent_refuses_what_it_cannot_wrap(workdir: Path) -> None:
    with pytest.raises(al.InvalidInputError, match="expects an Agent, got str"):
        DurableAgent("agent", name="bad")  # type: ignore[arg-type]
    agent = build_agent(workdir)
    custom = al.Agent.builder().model(agent.model).tool_executor(al.BasicToolExecutor(())).build()
    with pytest.raises(al.InvalidInputError, match="custom tool_executor"):
        DurableAgent(custom, name="bad")
    concurrent = al.Agent.builder().model(agent.model).task_manager(AsyncTaskManager()).build()
    with pytest.raises(al.InvalidInputError, match=r"custom task_manager \(AsyncTaskManager\)"):
        DurableAgent(concurrent, name="bad")


@pytest.mark.parametrize(
    ("executor_id", "version", "label"),
    [("", "v1", "executor_id"), (None, "v1", "executor_id"), ("w", "", "application_version")],
)
def test_dbos_config_requires_an_executor_id_and_a_version(
    executor_id: Any, version: Any, label: str
) -> None:
    with pytest.raises(al.InvalidInputError, match=f"{label} must be a non-empty str"):
        dbos_config("app", "sqlite:///x", executor_id=executor_id, application_version=version)


async def test_approve_refuses_what_is_not_a_decision() -> None:
    client: Any = None
    for wrong in ("yes", True, {"kind": "approve"}):
        with pytest.raises(al.InvalidInputError, match="expects an ApprovalDecision"):
            await approve(client, "s", "call-1", wrong)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (al.Item.text(al.ItemKind.USER, "hi"), "expects a list of Items, got one Item"),
        ("hi", "expects a list of Items, got str"),
        (None, "expects a list of Items, got NoneType"),
        (["hi"], "element 0 is str"),
        ([None], "element 0 is NoneType"),
        ([], "is empty: a run answers at least one item"),
    ],
)
async def test_sending_refuses_what_is_not_a_list_of_items(items: Any, message: str) -> None:
    with pytest.raises(
        al.InvalidInputError, match=f"send_input input {message}|send_input input: {message}"
    ):
        await send_input("charges", "s", items)
    client: Any = None
    with pytest.raises(al.InvalidInputError, match=f"enqueue_input input:? {message}"):
        await enqueue_input(
            client,
            queue_name="q",
            agent_name="charges",
            session_id="s",
            input=items,
            application_version="v",
        )


@pytest.mark.parametrize("name", ["", "  ", None, 3])
async def test_sending_refuses_a_bad_session_or_agent_name(name: Any) -> None:
    with pytest.raises(al.InvalidInputError, match="send_input session_id must be a non-empty str"):
        await send_input("charges", name, user("charge 1"))
    with pytest.raises(al.InvalidInputError, match="send_input agent_name must be a non-empty str"):
        await send_input(name, "s", user("charge 1"))
    client: Any = None
    for label in ("queue_name", "agent_name", "session_id", "application_version"):
        arguments = {
            "queue_name": "q",
            "agent_name": "charges",
            "session_id": "s",
            "application_version": "v",
            label: name,
        }
        with pytest.raises(al.InvalidInputError, match=f"enqueue_input {label} must be"):
            await enqueue_input(client, input=user("charge 1"), **arguments)
    with pytest.raises(al.InvalidInputError, match="latest_run session_id must be"):
        await latest_run(client, name)


@pytest.mark.parametrize("retry", ["twice", 2, al.TurnRetryPolicy])
def test_durable_agent_refuses_a_retry_that_is_no_policy(workdir: Path, retry: Any) -> None:
    with pytest.raises(al.InvalidInputError, match="retry expects a TurnRetryPolicy or None"):
        DurableAgent(build_agent(workdir), name="bad", retry=retry)
