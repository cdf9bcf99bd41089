"""Durable sessions across runs: later inputs continue, model failures end turns, not sessions.

DBOS runs for real in this process (the ``launched`` fixture), on a SQLite
file and on the embedded PostgreSQL. Each input is a run (``<session>#<n>``)
that resumes from the previous run's checkpoint; the model's requests are
logged by the test agent, so a test sees the history each request carried.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from dbos import DBOS
from durable_kit import Launched, build_agent, final_text, user

import agentloop as al
import agentloop.model
import agentloop.transcript
from agentloop.durable.dbos import (
    DurableAgent,
    DurableError,
    approve,
    enqueue_input,
    latest_run,
    pending_approval,
    send_input,
    wait_result,
)
from agentloop.durable.dbos import _host as durable_host

pytestmark = pytest.mark.anyio

WAIT = 60.0  # every wait is bounded; a healthy run takes well under a second


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
    al.transcript.validate_transcript(two.transcript)
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

    await approve(launched.client, first, pending.call_id, al.ApprovalAnswer.approve())
    one = await wait_result(launched.client, first, within=WAIT)
    two = await wait_result(launched.client, second, within=WAIT)

    assert two.transcript[: len(one.transcript)] == one.transcript
    assert final_text(two.transcript) == "done: charged 6"
    assert two.approvals == ()
    assert launched.charges() == ["turn-1-charge 500", "turn-2-charge 6"]
    al.transcript.validate_transcript(two.transcript)


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
    al.transcript.validate_transcript(last.transcript)


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
    al.transcript.validate_transcript(done.transcript)


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
    al.transcript.validate_transcript(done.transcript)


class _Silent:
    """A broken adapter: its stream ends without a ModelTurnResult."""

    async def start_session(self, config: al.SessionConfig) -> _Silent:
        return self

    async def begin_turn(
        self, request: al.model.TurnRequest, cancellation: Any
    ) -> AsyncIterator[al.model.ModelEvent]:
        async def nothing() -> AsyncIterator[al.model.ModelEvent]:
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
