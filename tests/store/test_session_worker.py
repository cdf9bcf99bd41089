"""``SessionWorker`` and ``enqueue_input``: what a fleet's host no longer writes by hand.

On a memory store, SQLite and a real PostgreSQL (the embedded server of
``conftest.py``), under asyncio and trio: queued input picked up by the next
worker, lease loss mid-drive raised as exactly ``LeaseLostError`` (from the
renewal and from the driver's fenced save), a cancelled worker releasing its
lease, the approval inbox feeding an approver, and bad arguments refused with
nothing changed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
import agentloop.host
import agentloop.model
import agentloop.permissions
import agentloop.testing
import agentloop.tools
from agentloop.store import (
    LeaseHeldError,
    LeaseLostError,
    MemorySessionStore,
    PendingCall,
    PostgresSessionStore,
    RedisSessionStore,
    SessionStatus,
    SessionStore,
    SqliteSessionStore,
    enqueue_input,
    input_digest,
)
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        yield MemorySessionStore()
    elif request.param == "sqlite":
        async with SqliteSessionStore(tmp_path / "sessions.db") as sqlite:
            yield sqlite
    elif request.param == "postgres":
        uri = request.getfixturevalue("postgres_uri")
        async with PostgresSessionStore(uri) as postgres:
            yield postgres
    else:
        url, prefix = (
            request.getfixturevalue("redis_server"),
            request.getfixturevalue("redis_prefix"),
        )
        async with RedisSessionStore(url, prefix=prefix) as redis:
            yield redis


class Effect:
    """A side effect (not idempotent); ``gate`` set: signals ``entered`` and waits on it."""

    spec = al.ToolSpec("effect", "Do the job.", {"type": "object"})

    def __init__(self, gate: anyio.Event | None = None) -> None:
        self.ran: list[str] = []
        self.entered = anyio.Event()
        self.gate = gate

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.ran.append(request.call_id)
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        return "done"


class AskFirst:
    def evaluate(self, request: Any) -> al.permissions.AskApproval:
        return al.permissions.AskApproval("sensitive_path", request.summary)


def reply(request: al.model.TurnRequest) -> Any:
    """One effect call per user message (its id from the transcript), then an answer."""
    last = request.transcript[-1]
    if last.kind is al.ItemKind.USER:
        return tool_calls(
            call("effect", {"job": last.text_content}, id=f"call-{len(request.transcript)}")
        )
    return "finished"


def make_agent(store: SessionStore, effect: Effect, *, ask: bool = False) -> al.Agent:
    builder = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(reply))
        .add_tool_source(al.ToolRegistry().with_tool(effect))
        .store(store)
    )
    if ask:
        builder = builder.permissions(AskFirst())
    return builder.build()


def user(text: str) -> al.Item:
    return al.Item.text(al.ItemKind.USER, text)


async def idle_session(store: SessionStore, agent: al.Agent, session_id: str) -> None:
    driver = await agent.start(session_id)
    await driver.save()
    stored = await store.load(session_id)
    assert stored is not None
    assert stored.status is SessionStatus.AWAITING_INPUT


def texts(items: list[al.Item] | None) -> list[str]:
    """Each item as text: its text, ``call <id>`` or ``<id>: <output>``."""
    assert items is not None
    described = []
    for item in items:
        [part] = item.parts
        if isinstance(part, al.ToolCallPart):
            described.append(f"call {part.id}")
        elif isinstance(part, al.ToolResultPart):
            described.append(f"{part.call_id}: {part.output}")
        else:
            described.append(item.text_content)
    return described


async def test_enqueued_input_is_picked_up_by_the_next_worker(store: SessionStore) -> None:
    effect = Effect()
    agent = make_agent(store, effect)
    await idle_session(store, agent, "s1")
    worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=30)
    assert await worker.run_once() is None  # nothing ready yet

    version = await enqueue_input(store, "s1", [user("job one")])
    stored = await store.load("s1")
    assert stored is not None
    assert (stored.version, stored.status) == (version, SessionStatus.READY)
    assert [s.session_id for s in await store.sessions_ready()] == ["s1"]

    advanced = await worker.run_once()
    assert advanced is not None
    assert advanced.session_id == "s1"
    assert isinstance(advanced.step, al.Finished)
    assert texts(await store.transcript("s1")) == [
        "job one",
        "call call-1",
        "call-1: done",
        "finished",
    ]
    assert effect.ran == ["call-1"]
    stored = await store.load("s1")
    assert stored is not None
    assert stored.status is SessionStatus.AWAITING_INPUT
    assert await worker.run_once() is None
    lease = await store.acquire("s1", "someone-else", 5)  # the worker released its lease
    await store.release(lease)


async def test_run_advances_every_queued_session_then_stops(store: SessionStore) -> None:
    effect = Effect()
    agent = make_agent(store, effect)
    for name in ("a", "b", "c"):
        await idle_session(store, agent, name)
        await enqueue_input(store, name, [user(f"job {name}")])

    async def all_rest() -> bool:
        return not await store.sessions_ready()

    worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", poll_interval=0.01)
    with anyio.fail_after(30):
        await worker.run(stop=all_rest)
    assert effect.ran == ["call-1", "call-1", "call-1"]
    for name in ("a", "b", "c"):
        assert texts(await store.transcript(name)) == [
            f"job {name}",
            "call call-1",
            "call-1: done",
            "finished",
        ]


async def test_an_approver_reads_the_inbox_and_the_worker_applies_the_decision(
    store: SessionStore,
) -> None:
    effect = Effect()
    agent = make_agent(store, effect, ask=True)
    await idle_session(store, agent, "s1")
    await enqueue_input(store, "s1", [user("deploy")])
    worker = al.host.SessionWorker(store=store, agent=agent, owner="w1")
    advanced = await worker.run_once()
    assert advanced is not None
    assert isinstance(advanced.step, al.ApprovalRequest)
    assert effect.ran == []

    [row] = await store.sessions_awaiting_approval()
    expected = PendingCall(
        call_id="call-1",
        tool_name="effect",
        input={"job": "deploy"},
        input_digest=input_digest("effect", {"job": "deploy"}),
    )
    assert (row.session_id, row.undecided, row.undecided_calls) == ("s1", ("call-1",), (expected,))
    await enqueue_input(store, "s1", [user("and then this")])  # queued behind the decision
    first = await store.record_approval(
        "s1", "call-1", input_digest=row.undecided_calls[0].input_digest, approved=True
    )
    again = await store.record_approval(
        "s1", "call-1", input_digest=row.undecided_calls[0].input_digest, approved=True
    )
    assert (first.newly_recorded, again.newly_recorded, again == first) == (True, False, True)

    advanced = await worker.run_once()
    assert advanced is not None
    assert isinstance(advanced.step, al.ApprovalRequest)  # the follow-up's own call waits
    assert advanced.step.call_id == "call-5"
    assert effect.ran == ["call-1"]
    assert texts(await store.transcript("s1")) == [
        "deploy",
        "call call-1",
        "call-1: done",
        "finished",
        "and then this",
        "call call-5",
    ]


async def test_a_lease_lost_to_the_renewal_raises_exactly_lease_lost_error(
    store: SessionStore,
) -> None:
    effect = Effect(gate=anyio.Event())  # never set: the tool runs until cancelled
    agent = make_agent(store, effect)
    await idle_session(store, agent, "s1")
    await enqueue_input(store, "s1", [user("job")])
    worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=0.3)
    taken: list[int] = []

    async def take_over() -> None:
        await effect.entered.wait()
        await store.acquire("s1", "w1", 30)  # a newer lease: the worker's is superseded
        stored = await store.load("s1")
        assert stored is not None
        taken.append(stored.version)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(take_over)
            with pytest.raises(LeaseLostError) as caught:
                await worker.run_once()
    assert type(caught.value) is LeaseLostError
    assert "cannot renew the lease of session 's1'" in str(caught.value)
    assert "a newer lease (token" in str(caught.value)
    stored = await store.load("s1")
    assert stored is not None
    assert stored.version == taken[0]  # nothing written after the takeover
    assert stored.started_calls == {"call-1"}  # claimed, never answered: in doubt
    assert effect.ran == ["call-1"]


async def test_a_lease_lost_at_the_save_raises_exactly_lease_lost_error(
    store: SessionStore,
) -> None:
    gate = anyio.Event()
    effect = Effect(gate=gate)
    agent = make_agent(store, effect)
    await idle_session(store, agent, "s1")
    await enqueue_input(store, "s1", [user("job")])
    worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=60)  # renews at 20 s

    async def take_over() -> None:
        await effect.entered.wait()
        await store.acquire("s1", "w1", 60)
        gate.set()  # the tool returns; the driver's save of its result is fenced out

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(take_over)
            with pytest.raises(LeaseLostError) as caught:
                await worker.run_once()
    assert type(caught.value) is LeaseLostError
    assert "is no longer current: a newer lease" in str(caught.value)
    assert texts(await store.transcript("s1")) == [
        "job",
        "call call-1",
    ]  # the result was never saved
    assert effect.ran == ["call-1"]


async def test_a_cancelled_worker_releases_its_lease_and_re_raises(store: SessionStore) -> None:
    effect = Effect(gate=anyio.Event())
    agent = make_agent(store, effect)
    await idle_session(store, agent, "s1")
    await enqueue_input(store, "s1", [user("job")])
    worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=30)
    with anyio.move_on_after(0.5) as scope:
        await worker.run_once()
    assert scope.cancelled_caught
    assert effect.ran == ["call-1"]
    lease = await store.acquire("s1", "another-worker", 5)  # released, not left to expire
    assert lease.owner == "another-worker"
    await store.release(lease)


async def test_advance_takes_a_given_session_and_refuses_a_leased_or_unknown_one(
    store: SessionStore,
) -> None:
    effect = Effect()
    agent = make_agent(store, effect)
    await idle_session(store, agent, "s1")
    await enqueue_input(store, "s1", [user("job")])
    worker = al.host.SessionWorker(store=store, agent=lambda session_id: agent, owner="w1")
    held = await store.acquire("s1", "another-worker", 30)
    before = await store.load("s1")
    with pytest.raises(LeaseHeldError, match="it is leased to 'another-worker'"):
        await worker.advance("s1")
    with pytest.raises(al.InvalidInputError, match="cannot advance session 'nope': the store"):
        await worker.advance("nope")
    assert await store.load("s1") == before
    assert await store.load("nope") is None
    await store.release(held)
    advanced = await worker.advance("s1")
    assert isinstance(advanced.step, al.Finished)
    assert effect.ran == ["call-1"]


async def test_enqueue_input_waits_for_a_worker_to_release(store: SessionStore) -> None:
    agent = make_agent(store, Effect())
    await idle_session(store, agent, "s1")
    lease = await store.acquire("s1", "a-worker", 30)

    async def release_soon() -> None:
        await anyio.sleep(0.2)
        await store.release(lease)

    async with anyio.create_task_group() as group:
        group.start_soon(release_soon)
        await enqueue_input(store, "s1", [user("job")], wait=10)
    stored = await store.load("s1")
    assert stored is not None
    assert stored.status is SessionStatus.READY
    assert stored.checkpoint["pending_input"] == [al.unstructure(user("job"))]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"owner": ""}, "owner must be a non-empty str, got ''"),
        ({"owner": 7}, "owner must be a non-empty str, got 7"),
        ({"ttl": 0}, "ttl must be seconds > 0, got 0"),
        ({"ttl": float("nan")}, "ttl must be seconds > 0, got nan"),
        ({"poll_interval": -1}, "poll_interval must be seconds > 0, got -1"),
        ({"step_timeout": 0}, "step_timeout must be seconds > 0, got 0"),
        ({"agent": 5}, "agent must be an Agent or a function of the session id"),
        ({"store": object()}, "store must be a SessionStore, got object"),
    ],
)
async def test_bad_worker_arguments_are_refused(arguments: dict[str, Any], message: str) -> None:
    store = MemorySessionStore()
    given: dict[str, Any] = {"store": store, "agent": make_agent(store, Effect()), "owner": "w1"}
    with pytest.raises(al.InvalidInputError, match=message.replace("(", r"\(")):
        al.host.SessionWorker(**{**given, **arguments})


async def test_a_decision_recorded_while_the_worker_drives_is_applied_in_the_same_lease(
    store: SessionStore,
) -> None:
    effect = Effect()
    agent = make_agent(store, effect, ask=True)
    await idle_session(store, agent, "s1")
    await enqueue_input(store, "s1", [user("deploy")])
    # Decided before the model even asked (as an approver racing the worker can):
    # the resume finds no pending call to apply it to, the step surfaces the request.
    digest = input_digest("effect", {"job": "deploy"})
    await store.record_approval("s1", "call-1", input_digest=digest, approved=True)
    worker = al.host.SessionWorker(store=store, agent=agent, owner="w1")
    advanced = await worker.run_once()
    assert advanced is not None
    assert isinstance(advanced.step, al.Finished)
    assert effect.ran == ["call-1"]
    assert texts(await store.transcript("s1")) == [
        "deploy",
        "call call-1",
        "call-1: done",
        "finished",
    ]


async def test_a_failed_drive_keeps_its_lease_until_it_expires(store: SessionStore) -> None:
    effect = Effect(gate=anyio.Event())  # never set: the drive outlives step_timeout
    agent = make_agent(store, effect)
    for name in ("slow", "next"):
        await idle_session(store, agent, name)
        await enqueue_input(store, name, [user(f"job {name}")])
    worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=0.6, step_timeout=0.3)
    with pytest.raises(TimeoutError) as caught:
        await worker.run_once()
    assert type(caught.value) is TimeoutError
    with pytest.raises(LeaseHeldError, match="it is leased to 'w1'"):
        await store.acquire("slow", "another-worker", 5)  # kept: not retried at once
    assert [s.session_id for s in await store.sessions_ready()] == ["next"]
    await anyio.sleep(0.7)  # the lease expires: the session is ready again
    # (its drive saved the model's response: it is now the more recently saved one)
    assert [s.session_id for s in await store.sessions_ready()] == ["next", "slow"]


async def test_input_queued_during_a_pause_reaches_the_next_model_call(
    store: SessionStore,
) -> None:
    effect = Effect()
    agent = make_agent(store, effect)
    driver = await agent.start("s1")
    driver.submit_input([user("first")])
    assert isinstance(await driver.next(), al.AfterToolResult)  # saved, paused
    await enqueue_input(store, "s1", [user("second")])
    stored = await store.load("s1")
    assert stored is not None
    assert (stored.checkpoint["state"], stored.status) == ("AFTER_TOOL_RESULT", SessionStatus.READY)
    advanced = await al.host.SessionWorker(store=store, agent=agent, owner="w1").run_once()
    assert advanced is not None
    assert isinstance(advanced.step, al.Finished)
    assert texts(await store.transcript("s1")) == [
        "first",
        "call call-1",
        "call-1: done",
        "second",
        "call call-4",
        "call-4: done",
        "finished",
    ]
    assert effect.ran == ["call-1", "call-4"]


class RenewFails(MemorySessionStore):
    """A memory store whose renewals fail as a storage fault would."""

    async def renew(self, lease: Any, ttl: float) -> Any:
        raise al.CheckpointError("the database went away")


async def test_a_renewal_that_fails_for_any_reason_is_a_lost_lease() -> None:
    store = RenewFails()
    effect = Effect(gate=anyio.Event())
    agent = make_agent(store, effect)
    await idle_session(store, agent, "s1")
    await enqueue_input(store, "s1", [user("job")])
    worker = al.host.SessionWorker(store=store, agent=agent, owner="w1", ttl=0.3)
    with anyio.fail_after(30), pytest.raises(LeaseLostError) as caught:
        await worker.run_once()
    assert type(caught.value) is LeaseLostError
    assert str(caught.value).startswith(
        "cannot renew the lease of session 's1' (token 2): CheckpointError: the database "
        "went away; stopped driving the session"
    )
    assert isinstance(caught.value.__cause__, al.CheckpointError)
    assert effect.ran == ["call-1"]
    lease = await store.acquire("s1", "another-worker", 5)  # released on the way out
    assert lease.owner == "another-worker"
