"""Fork and rewind, as a hypothesis model over sessions with side effects, on memory and SQLite.

A session pays (a non-idempotent tool: a side effect in ``World.effects``, by
session, call and idempotency key; odd amounts need an approval) and looks (an
idempotent tool). Hypothesis draws the original session's inputs and approval
answers, the step to fork at or rewind to, how the fork continues and where a
process dies in it. Then:

- fork-then-continue equals restore-then-continue: the same transcript (times
  aside) and the same request bytes for every model call;
- nothing of the fork's past runs again in it (a result at the step, or a call
  claimed before the step's save), and no call ever runs twice in one session,
  also when a process dies while a call runs and another resumes;
- the original's later claims are not in doubt in the fork; a rewound session
  keeps those of the calls its step holds (in doubt there, never run again)
  and sets the others aside (its next calls are new ones);
- a fork of a session resting on an approval rests on it too, and the
  original's answer does not answer the fork's.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.tools
from agentloop.providers import OpenAIChatModel
from agentloop.store import BackendSessionStore, MemorySessionStore, SqliteSessionStore
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio

WIRE = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="k")
"""Renders each request as the bytes an HTTP adapter would send (never connects)."""


@attrs.define
class World:
    """What happened outside the sessions: each payment, and where a process dies."""

    effects: list[tuple[str, str, str]] = attrs.field(factory=list)
    die_at: int | None = None
    """The number of payments after which the next one dies while it runs (``None``: never)."""
    dying: anyio.Event = attrs.field(factory=anyio.Event)
    reconciles: bool = False
    """Whether ``pay``'s reconcile settles a call in doubt from the payments (by its key)."""


class Pay:
    spec = al.ToolSpec(
        "pay",
        "Pay an amount.",
        {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
    )

    def __init__(self, world: World) -> None:
        self.world = world

    def proposed_requests(self, request: al.ToolRequest) -> list[al.permissions.PermissionRequest]:
        return [al.permissions.FileSystemWrite(f"/bills/{request.input['amount']}")]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        world = self.world
        world.effects.append((request.session_id, request.call_id, ctx.idempotency_key))
        if world.die_at is not None and len(world.effects) > world.die_at:
            world.die_at = None
            world.dying.set()
            await anyio.sleep_forever()  # the process dies while the call runs
        return f"paid {request.input['amount']}"

    async def reconcile(self, request: al.ToolRequest, ctx: al.ToolContext) -> str | None:
        keys = {key for _session, _call, key in self.world.effects}
        if self.world.reconciles and ctx.idempotency_key in keys:
            return f"paid {request.input['amount']} (settled)"
        return None


@al.tool(idempotent=True)
async def look() -> str:
    """Look at the balance."""
    return "balance ok"


class OddAmountsAsk:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if isinstance(request, al.permissions.FileSystemWrite) and int(request.path[-1]) % 2:
            return al.permissions.AskApproval("sensitive_path", request.summary)
        return al.permissions.Allow()


def reply(request: al.TurnRequest) -> Any:
    """The model: decided from the request alone, so every run gets the same replies."""
    last = request.transcript[-1]
    text = last.text_content or ""
    position = len(request.transcript)
    if last.kind is al.ItemKind.USER and text.startswith("pay "):
        return tool_calls(call("pay", {"amount": int(text[4:])}, id=f"call-{position}"))
    if last.kind is al.ItemKind.USER and text == "look":
        return tool_calls(call("look", {}, id=f"call-{position}"))
    return f"done at {position}"


@attrs.define
class Host:
    """One process's agent over a store, recording every request's wire bytes."""

    store: al.store.SessionStore | None
    world: World
    requests: list[bytes] = attrs.field(factory=list)

    def agent(self) -> al.Agent:
        def model(request: al.TurnRequest) -> Any:
            self.requests.append(json.dumps(WIRE.request_body(request)).encode())
            return reply(request)

        builder = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(model))
            .add_tool_source(al.ToolRegistry().with_tool(Pay(self.world)).with_tool(look))
            .permissions(OddAmountsAsk())
        )
        if self.store is not None:
            builder = builder.store(self.store)
        return builder.build()


async def drive(driver: al.LoopDriver, inputs: list[str], answers: list[bool]) -> None:
    """Run the driver to rest, then submit each input (taken from ``inputs`` as it goes) and
    run it to rest, answering approvals from ``answers`` (then yes)."""
    step: al.Step | None = None
    if driver.state is not al.DriverState.IDLE:
        step = await driver.run_until_blocked()
    while True:
        while isinstance(step, al.ApprovalRequest):
            approve = answers.pop(0) if answers else True
            step.approve() if approve else step.deny("no")
            step = await driver.run_until_blocked()
        if not inputs:
            return
        driver.submit_input(inputs.pop(0))
        step = await driver.run_until_blocked()


@asynccontextmanager
async def opened(kind: str) -> AsyncIterator[BackendSessionStore]:
    if kind == "memory":
        yield MemorySessionStore()
        return
    with tempfile.TemporaryDirectory(prefix="wt-fork-") as directory:
        async with SqliteSessionStore(Path(directory) / "sessions.db") as store:
            yield store


def plain(transcript: list[al.Item]) -> list[Any]:
    """A transcript without its times (a continuation stamps its own)."""
    return [attrs.evolve(item, created_at=None) for item in transcript]


async def run_dying(
    host: Host, session_id: str, inputs: list[str], answers: list[bool] | None = None
) -> al.LoopDriver:
    """Resume ``session_id`` and drive it through ``inputs``; each time its process dies
    while a call runs, resume it in a new process (a new agent) and go on."""
    remaining, answers = list(inputs), list(answers or [])
    while True:
        driver = await host.agent().resume(session_id=session_id)
        host.world.dying = dying = anyio.Event()
        done = False
        async with anyio.create_task_group() as group:

            async def run(driver: al.LoopDriver = driver) -> None:
                nonlocal done
                await drive(driver, remaining, answers)
                done = True
                group.cancel_scope.cancel()

            group.start_soon(run)
            await dying.wait()
            group.cancel_scope.cancel()  # the process dies
        if done:
            return driver


def _answered(transcript: list[Any]) -> set[str]:
    return {
        part["call_id"]
        for item in transcript
        for part in item["parts"]
        if part.get("type") == "tool_result"
    }


def _in_doubt(transcript: list[al.Item]) -> set[str]:
    return {
        part.call_id
        for item in transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
        and al.tools.result_outcome(part) is al.tools.ResultOutcome.IN_DOUBT
    }


def _settled(transcript: list[al.Item]) -> set[str]:
    return {
        part.call_id
        for item in transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart) and str(part.output).endswith("(settled)")
    }


def _runs(world: World, session_id: str) -> list[str]:
    return [call_id for session, call_id, _key in world.effects if session == session_id]


WORDS = st.sampled_from(["pay 2", "pay 3", "look", "hi"])
STORES = ["memory", "sqlite"]


async def started(store: BackendSessionStore, world: World) -> Host:
    """A host whose session ``s`` is started and saved (so every process resumes it)."""
    host = Host(store, world)
    driver = await host.agent().start("s")
    await driver.save()
    return host


def history_steps(steps: list[al.store.SavedStep]) -> st.SearchStrategy[int]:
    return st.sampled_from([saved.step for saved in steps])


@pytest.mark.parametrize("kind", STORES)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    inputs=st.lists(WORDS, min_size=1, max_size=4),
    answers=st.lists(st.booleans(), max_size=4),
    die_at=st.none() | st.integers(0, 2),
    reconciles=st.booleans(),
    later=st.lists(WORDS, max_size=3),
    choice=st.data(),
)
async def test_fork_then_continue_is_restore_then_continue(
    kind: str,
    inputs: list[str],
    answers: list[bool],
    die_at: int | None,
    reconciles: bool,
    later: list[str],
    choice: st.DataObject,
) -> None:
    async with opened(kind) as store:
        world = World(die_at=die_at, reconciles=reconciles)
        original = await started(store, world)
        await run_dying(original, "s", inputs, answers)
        world.die_at = None  # no process dies from here on
        steps = await store.history("s")
        at = choice.draw(history_steps(steps), label="fork at")
        at_step = await store.load_step("s", at)
        claimed_by_original = set(_runs(world, "s"))

        forked = Host(store, world)
        fork_id = await forked.agent().fork("s", at=at, new_session_id="f")
        assert fork_id == "f"
        fork_loaded = await store.load("f")
        assert fork_loaded is not None
        assert fork_loaded.started_calls == at_step.started_calls  # only the step's past
        fork_driver = await forked.agent().resume(session_id="f")
        await drive(fork_driver, list(later), [])

        restored = Host(MemorySessionStore(), world)  # the same world: its payments too
        restore_driver = await restored.agent().resume(
            at_step.checkpoint, started_calls=at_step.started_calls
        )
        await drive(restore_driver, list(later), [])

        assert forked.requests == restored.requests
        assert plain(fork_driver.snapshot().transcript) == plain(
            restore_driver.snapshot().transcript
        )
        # Nothing of the fork's past ran again in it; what it ran, it ran once.
        fork_runs = _runs(world, "f")
        assert len(fork_runs) == len(set(fork_runs))
        past = _answered(at_step.checkpoint["transcript"]) | at_step.started_calls
        assert not set(fork_runs) & past
        # The original's later claims are not in doubt in the fork.
        answered_at_step = _answered(at_step.checkpoint["transcript"])
        doubted = _in_doubt(fork_driver.snapshot().transcript) - answered_at_step
        assert doubted <= set(at_step.started_calls)
        assert not doubted & (claimed_by_original - at_step.started_calls)
        # The original is unchanged.
        assert (await store.history("s")) == steps


@pytest.mark.parametrize("kind", STORES)
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    inputs=st.lists(WORDS, min_size=1, max_size=3),
    later=st.lists(WORDS, min_size=1, max_size=3),
    die_at=st.integers(0, 3),
    reconciles=st.booleans(),
    choice=st.data(),
)
async def test_kills_in_a_fork_never_run_a_claimed_call_twice(
    kind: str,
    inputs: list[str],
    later: list[str],
    die_at: int,
    reconciles: bool,
    choice: st.DataObject,
) -> None:
    async with opened(kind) as store:
        world = World(reconciles=reconciles)
        await run_dying(await started(store, world), "s", inputs)
        at = choice.draw(history_steps(await store.history("s")), label="fork at")
        at_step = await store.load_step("s", at)
        host = Host(store, world)
        await host.agent().fork("s", at=at, new_session_id="f")
        world.die_at = len(world.effects) + die_at
        driver = await run_dying(host, "f", later)
        runs = _runs(world, "f")
        assert len(runs) == len(set(runs))  # never twice, whoever resumed
        assert not set(runs) & (_answered(at_step.checkpoint["transcript"]) | at_step.started_calls)
        if world.die_at is None:  # it died: that call is settled or in doubt, not run again
            died = _runs(world, "f")[die_at] if len(runs) > die_at else None
            transcript = driver.snapshot().transcript
            settled = _settled(transcript)
            assert died is None or died in (settled if reconciles else _in_doubt(transcript))


@pytest.mark.parametrize("kind", STORES)
async def test_a_fork_of_a_session_resting_on_an_approval_keeps_it_pending(kind: str) -> None:
    async with opened(kind) as store:
        world = World()
        host = await started(store, world)
        original = await host.agent().resume(session_id="s")
        original.submit_input("pay 3")
        approval = await original.run_until_blocked()
        assert isinstance(approval, al.ApprovalRequest)
        [resting] = [step for step in await store.history("s") if step.state == "AWAITING_APPROVAL"]
        fork_id = await host.agent().fork("s", at=resting.step)

        approval.approve()  # answered in the original: it pays there
        await original.run_until_blocked()
        assert _runs(world, "s") == [approval.call_id]

        pending = {
            row.session_id: row.undecided for row in await store.sessions_awaiting_approval()
        }
        assert pending == {fork_id: (approval.call_id,)}
        fork = await host.agent().resume(session_id=fork_id)
        assert fork.state is al.DriverState.AWAITING_APPROVAL
        again = await fork.next()
        assert isinstance(again, al.ApprovalRequest)
        assert again.call_id == approval.call_id
        assert _runs(world, fork_id) == []  # the original's answer did not answer the fork's

        digest = al.store.input_digest("pay", {"amount": 3})
        await store.record_approval(fork_id, again.call_id, input_digest=digest, approved=False)
        with pytest.raises(al.store.ClaimError, match="already denied") as refused:
            await store.record_approval(fork_id, again.call_id, input_digest=digest, approved=True)
        assert refused.value.reason == "decided"
        resumed = await host.agent().resume(session_id=fork_id)
        await resumed.run_until_blocked()
        assert _runs(world, fork_id) == []  # denied in the fork, once and for good
        assert _runs(world, "s") == [approval.call_id]


@pytest.mark.parametrize("kind", STORES)
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    inputs=st.lists(WORDS, min_size=1, max_size=3),
    die_at=st.none() | st.integers(0, 2),
    reconciles=st.booleans(),
    later=st.lists(WORDS, max_size=3),
    choice=st.data(),
)
async def test_a_rewound_session_goes_on_from_the_step_and_never_runs_a_call_twice(
    kind: str,
    inputs: list[str],
    die_at: int | None,
    reconciles: bool,
    later: list[str],
    choice: st.DataObject,
) -> None:
    async with opened(kind) as store:
        world = World(die_at=die_at, reconciles=reconciles)
        host = await started(store, world)
        await run_dying(host, "s", inputs)
        world.die_at = None
        before = await store.history("s")
        to = choice.draw(history_steps(before), label="rewind to")
        at_step = await store.load_step("s", to)
        ran_before = set(_runs(world, "s"))

        version = await host.agent().rewind("s", to=to)
        after = await store.history("s")
        assert after[: len(before)] == before  # the history is kept
        assert (after[-1].step, after[-1].version, after[-1].origin) == (
            before[-1].step + 1,
            version,
            f"rewound to step {to}",
        )
        driver = await host.agent().resume(session_id="s")
        assert plain(driver.snapshot().transcript) == plain(
            (await host.agent().resume(at_step.checkpoint)).snapshot().transcript
        )
        ran = len(world.effects)
        await run_dying(host, "s", later)
        runs_after = [call_id for session, call_id, _key in world.effects[ran:] if session == "s"]
        assert len(runs_after) == len(set(runs_after))
        # A call the step holds never runs again; one that ran after the step and has no
        # result in it comes back in doubt.
        called = {
            part["id"]
            for item in at_step.checkpoint["transcript"]
            for part in item["parts"]
            if part.get("type") == "tool_call"
        }
        assert not set(runs_after) & called & ran_before
        unanswered = called - _answered(at_step.checkpoint["transcript"])
        final = await store.transcript("s")
        assert final is not None
        assert unanswered & ran_before <= (_settled(final) if reconciles else _in_doubt(final))

        # Forward again: the latest step before the rewind, as it was.
        await host.agent().rewind("s", to=before[-1].step)
        latest = await store.load("s")
        assert latest is not None
        forward = await store.load_step("s", before[-1].step)
        assert latest.checkpoint == forward.checkpoint


async def test_history_limits_keep_the_latest_steps_each_loadable() -> None:
    backend = al.store.MemoryBackend()
    store = BackendSessionStore(backend, history_limit=3)
    host = Host(store, World())
    await drive(await host.agent().start("s"), ["hi", "look", "hi", "look", "pay 2"], [])
    steps = await store.history("s")
    latest = steps[-1].step
    assert 4 <= len(steps) <= 6
    assert [saved.step for saved in steps] == list(range(latest - len(steps) + 1, latest + 1))
    for saved in steps:
        loaded = await store.load_step("s", saved.step)
        assert loaded.version == saved.version
        assert len(loaded.checkpoint["transcript"]) == saved.item_count
    with pytest.raises(al.InvalidInputError) as raised:
        await store.load_step("s", 1)
    assert str(raised.value) == (
        f"cannot load step 1 of session 's': the store keeps steps {steps[0].step} to "
        f"{latest} of it; pick one that history() lists (a store keeps the last "
        "history_limit steps)"
    )

    # Opened with history off, the next save drops what was kept; back on, it starts over.
    off = BackendSessionStore(backend, history_limit=0)
    stored = await off.load("s")
    assert stored is not None
    await off.save_checkpoint("s", stored.checkpoint)
    assert await store.history("s") == []
    assert await backend.read_rows("s", "history") == {}
    await store.save_checkpoint("s", stored.checkpoint)
    [first] = await store.history("s")
    assert (await store.load_step("s", first.step)).checkpoint == stored.checkpoint


@pytest.mark.parametrize("limit", [-1, 1.5, True, "3"])
def test_a_bad_history_limit_is_refused(limit: Any) -> None:
    with pytest.raises(al.InvalidInputError) as raised:
        MemorySessionStore(history_limit=limit)
    assert str(raised.value) == (
        f"history_limit must be an int >= 0 (0 keeps no step history), got {limit!r}"
    )


async def test_bad_forks_and_rewinds_are_refused_and_change_nothing() -> None:
    store = MemorySessionStore()
    host = Host(store, World())
    await drive(await host.agent().start("s"), ["hi"], [])
    await drive(await host.agent().start("other"), ["look"], [])
    before = {name: await store.history(name) for name in ("s", "other")}
    agent = host.agent()

    with pytest.raises(al.store.StaleSessionError):
        await agent.fork("s", at=1, new_session_id="other")
    with pytest.raises(al.InvalidInputError, match="other than the original's id"):
        await agent.fork("s", at=1, new_session_id="s")
    with pytest.raises(al.InvalidInputError, match="cannot load step 99 of session 's'"):
        await agent.fork("s", at=99, new_session_id="new")
    with pytest.raises(al.InvalidInputError, match="cannot load step 0 of session 's'"):
        await agent.rewind("s", to=0)
    with pytest.raises(al.store.StaleSessionError):
        await agent.rewind("s", to=1, expected_version=1)
    lease = await store.acquire("s", "worker-1", 60)
    with pytest.raises(al.store.LeaseLostError):
        await agent.rewind("s", to=1)
    await store.release(lease)
    assert {name: await store.history(name) for name in ("s", "other")} == before
    assert await store.load("new") is None

    storeless = Host(None, World()).agent()
    with pytest.raises(al.InvalidStateError) as raised:
        await storeless.fork("s")
    assert str(raised.value) == (
        "cannot fork session 's': this agent has no store; build it with .store(store)"
    )


async def test_a_fork_without_at_continues_from_the_latest_save_under_a_new_id() -> None:
    store = MemorySessionStore()
    host = Host(store, World())
    await drive(await host.agent().start("s"), ["pay 2"], [])
    fork_id = await host.agent().fork("s")
    assert fork_id.startswith("s-fork-")
    [first] = await store.history(fork_id)
    assert (first.step, first.origin) == (1, f"forked from 's' at its version {first.version - 1}")
    original = await store.load("s")
    fork = await store.load(fork_id)
    assert original is not None
    assert fork is not None
    assert fork.checkpoint == {
        **original.checkpoint,
        "session_id": fork_id,
        "config": {**original.checkpoint["config"], "session_id": fork_id},
    }
