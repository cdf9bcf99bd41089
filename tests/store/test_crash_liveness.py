"""A crash model: kill a session's process before every store write, restore, and finish.

Hypothesis draws plans of sessions (turns of tool rounds: claimed, idempotent,
approved, denied and failing calls, in place or in parallel, model calls that
fail once and are retried, approvals answered in the process or recorded in
the store by another one). Each plan runs once uninterrupted, counting its
store writes; then, for every write k, it runs again and the process "dies"
just before write k (the store refuses that write and every later call, as a
killed process makes none), a new process resumes the session from the store
(dying once more at a drawn write, if the plan says so) and drives it to the
end. Every restored run must reach the same end as the uninterrupted one
(liveness, not only safety): all planned turns answered, the same transcript
but for calls answered in doubt, no claimed call run twice, no denied call
run, and the stored status ``awaiting_input`` with a status that agrees with
the transcript. On the memory store, SQLite, a real PostgreSQL and a real Redis, on both
anyio backends. Every session any of them saves passes the store's consistency
check (``session_problems``).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.model
import agentloop.permissions
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.store import (
    MemorySessionStore,
    SessionStatus,
    SessionStore,
    SqliteSessionStore,
    input_digest,
    session_problems,
)
from agentloop.testing import assert_transcript_valid, call, fail, tool_calls

pytestmark = pytest.mark.anyio

WRITES = frozenset({"save_checkpoint", "record_call_started", "claim", "record_approval"})
SESSIONS = itertools.count()


class Killed(BaseException):
    """The process died (a ``BaseException``: nothing in the library may swallow it)."""


@attrs.define
class Deaths:
    """When processes die: before write ``at`` of the whole run (counting every
    process's writes); after the first death, ``again`` writes after the restart."""

    at: int | None
    again: int | None = None
    writes: int = 0
    problems: list[tuple[str, ...]] = attrs.Factory(list)
    """What the store's consistency check found in any saved session (none expected)."""


class CrashingStore:
    """A store of a process that dies before write ``deaths.at``: that write and every
    later call (reads too) raise :class:`Killed`."""

    def __init__(self, inner: SessionStore, deaths: Deaths) -> None:
        self._inner = inner
        self._deaths = deaths
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target):
            return target

        async def forward(*args: Any, **kwargs: Any) -> Any:
            deaths = self._deaths
            if not self.dead and name in WRITES:
                if deaths.writes == deaths.at:
                    self.dead = True
                    deaths.at = None if deaths.again is None else deaths.writes + deaths.again
                    deaths.again = None
                else:
                    deaths.writes += 1
            if self.dead:
                raise Killed(name)
            value = await target(*args, **kwargs)
            if name == "save_checkpoint":
                stored = await self._inner.load(args[0])
                assert stored is not None
                if problems := session_problems(stored):
                    deaths.problems.append(problems)
            return value

        return forward


# -- the plan -------------------------------------------------------------------------

KINDS = ("pay", "read", "asked", "refused", "broken")
"""pay: claimed; read: idempotent; asked: approved; refused: denied; broken: raises."""


@attrs.frozen
class Round:
    calls: tuple[str, ...]
    model_fails: bool  # the model call that asks for this round fails once first


@attrs.frozen
class Plan:
    turns: tuple[tuple[Round, ...], ...]
    parallel: bool
    approvals_in_store: bool  # approvals recorded in the store by another process


ROUNDS = st.builds(
    Round, st.lists(st.sampled_from(KINDS), min_size=1, max_size=3).map(tuple), st.booleans()
)
PLANS = st.builds(
    Plan,
    st.lists(st.lists(ROUNDS, max_size=2).map(tuple), min_size=1, max_size=2).map(tuple),
    st.booleans(),
    st.booleans(),
)


@attrs.define
class World:
    """What outlives a process: the side effects and the provider's memory."""

    runs: dict[str, int] = attrs.Factory(dict)
    failed_once: set[tuple[int, int]] = attrs.Factory(set)


class PlanTool:
    def __init__(self, name: str, world: World) -> None:
        self.spec = al.ToolSpec(
            name,
            f"The {name} step.",
            {"type": "object"},
            annotations=al.ToolAnnotations(idempotent=name == "read"),
        )
        self.world = world

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        self.world.runs[request.call_id] = self.world.runs.get(request.call_id, 0) + 1
        if self.spec.name == "broken":
            raise RuntimeError(f"{request.call_id} broke")
        return f"{request.call_id} done"


class AskFor:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if isinstance(request, al.permissions.ToolInvocation) and request.tool_name in (
            "asked",
            "refused",
        ):
            return al.permissions.AskApproval("confirm", request.summary)
        return al.permissions.Allow()


def model(plan: Plan, world: World) -> Callable[[al.model.TurnRequest], Any]:
    """Decides from the request: which turn (user items) and round (tool-call items since)."""

    def reply(request: al.model.TurnRequest) -> Any:
        transcript = request.transcript
        turn = sum(item.kind is al.ItemKind.USER for item in transcript) - 1
        last_user = max(i for i, item in enumerate(transcript) if item.kind is al.ItemKind.USER)
        done = sum(any(item.tool_calls()) for item in transcript[last_user:])
        rounds = plan.turns[turn]
        if done == len(rounds):
            return f"turn {turn} answered"
        if rounds[done].model_fails and (turn, done) not in world.failed_once:
            world.failed_once.add((turn, done))
            return fail(al.ProviderError("503: overloaded", status=503, retryable=True))
        return tool_calls(
            *(
                call(name, {}, id=f"{name}-{turn}-{done}-{index}")
                for index, name in enumerate(rounds[done].calls)
            )
        )

    return reply


# -- a process ---------------------------------------------------------------------------


class Restart(Exception):
    """The host recorded the approvals in the store: a worker picks the session up again."""


def build(store: CrashingStore, plan: Plan, world: World, manager: Any) -> al.Agent:
    registry = al.ToolRegistry()
    for name in KINDS:
        registry = registry.with_tool(PlanTool(name, world))
    builder = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(model(plan, world)))
        .add_tool_source(registry)
        .permissions(AskFor())
        .store(store)  # type: ignore[arg-type]
    )
    if manager is not None:
        builder = builder.task_manager(manager)
    return builder.build()


async def run_process(
    store: CrashingStore, plan: Plan, world: World, session_id: str, manager: Any
) -> tuple[al.Item, ...]:
    """One process driving the session to its end (returns the transcript) or its death
    (``Killed``); ``Restart`` once it recorded approvals in the store for another worker."""
    agent = build(store, plan, world, manager)
    if await store.load(session_id) is None:
        config = al.SessionConfig(session_id, limits=al.LoopLimits(max_model_calls_per_turn=10))
        driver = await agent.start(config)
    else:
        driver = await agent.resume(session_id=session_id)
    for _ in range(200):
        if driver.state is al.DriverState.IDLE:
            if driver.retry_point is not None:
                step = await driver.retry()
            else:
                snapshot = driver.snapshot()
                submitted = sum(item.kind is al.ItemKind.USER for item in snapshot.transcript)
                if not snapshot.pending_input:
                    if submitted == len(plan.turns):
                        return snapshot.transcript
                    driver.submit_input([al.Item.text(al.ItemKind.USER, f"turn {submitted}")])
                step = await driver.next()
        else:
            step = await driver.next()
        if isinstance(step, al.ApprovalRequest):
            await answer(store, step, session_id, plan)
    raise AssertionError(f"session {session_id} made no progress in 200 steps: stranded")


async def answer(
    store: CrashingStore, pending: al.ApprovalRequest, session_id: str, plan: Plan
) -> None:
    approved = pending.tool_name == "asked"
    if not plan.approvals_in_store or plan.parallel:
        # A host that walks away from an approval while the round's other calls still
        # run leaves them to be answered in doubt: decided here, the process stays.
        if approved:
            pending.approve()
        else:
            pending.deny("not this one")
        return
    await store.record_approval(
        session_id,
        pending.call_id,
        input_digest=input_digest(pending.tool_name, pending.input),
        approved=approved,
        reason=None if approved else "not this one",
    )
    raise Restart


async def run_to_end(
    inner: SessionStore, plan: Plan, session_id: str, deaths: Deaths
) -> tuple[tuple[al.Item, ...], World]:
    """Processes one after another until one ends the session (each dies as ``deaths``
    says); returns the transcript and the world."""
    world = World()
    for _ in range(50):
        store = CrashingStore(inner, deaths)
        try:
            async with al.tasks.AsyncTaskManager() as manager:
                return await run_process(
                    store, plan, world, session_id, manager if plan.parallel else None
                ), world
        except Restart:
            pass
        except BaseException as error:  # a death may come wrapped in a task group's group
            if not store.dead or not _only_killed(error):
                raise
    raise AssertionError(f"session {session_id} did not end after 50 processes")


def _only_killed(error: BaseException) -> bool:
    if isinstance(error, BaseExceptionGroup):
        return all(_only_killed(inner) for inner in error.exceptions)
    return isinstance(error, Killed) or isinstance(error.__context__, Killed)


# -- the checks ---------------------------------------------------------------------------


def results(transcript: tuple[al.Item, ...]) -> dict[str, al.ToolResultPart]:
    return {
        part.call_id: part
        for item in transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart)
    }


def shape(transcript: tuple[al.Item, ...]) -> list[Any]:
    """The transcript with every tool result reduced to its call id, and each run of
    results as a set: results land in the order calls finish, and a restored round
    shows its unanswered approvals again from the first not yet shown (another
    process showed the others), so its calls may finish in another order."""
    found: list[Any] = []
    for item in transcript:
        if item.kind is al.ItemKind.TOOL:
            ids = {part.call_id for part in item.parts if isinstance(part, al.ToolResultPart)}
            if found and isinstance(found[-1], frozenset):
                ids |= found.pop()
            found.append(frozenset(ids))
        else:
            calls = tuple(part.id for part in item.tool_calls())
            found.append((item.kind, item.text_content, calls))
    return found


def check_same_end(
    expected: tuple[al.Item, ...], found: tuple[al.Item, ...], world: World, where: str
) -> None:
    assert_transcript_valid(list(found))
    assert shape(found) == shape(expected), where
    baseline = results(expected)
    for call_id, result in results(found).items():
        if al.tools.result_outcome(result) is al.tools.ResultOutcome.IN_DOUBT:
            # Only a claimed call can be in doubt, and it ran at most once.
            assert call_id.split("-")[0] in ("pay", "asked", "broken"), where
            continue
        assert result == baseline[call_id], where
    for call_id, runs in world.runs.items():
        kind = call_id.split("-")[0]
        assert kind != "refused", f"{where}: denied {call_id} ran"
        if kind != "read":
            assert runs == 1, f"{where}: {call_id} ran {runs} times"


async def check_stored_end(inner: SessionStore, session_id: str, where: str) -> None:
    stored = await inner.load(session_id)
    assert stored is not None, where
    assert stored.status is SessionStatus.AWAITING_INPUT, where
    assert stored.checkpoint["state"] == "IDLE", where
    assert stored.checkpoint["turn"] is None, where
    assert stored.started_calls == frozenset(), where


# -- the property -------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def inner_store(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[SessionStore]:
    if store_kind == "memory":
        yield MemorySessionStore()
    elif store_kind == "sqlite":
        async with SqliteSessionStore(tmp_path / "crash.db") as store:
            yield store
    elif store_kind == "redis":
        from agentloop.store import RedisSessionStore

        url, prefix = request.getfixturevalue("redis_server"), f"crash-{uuid.uuid4().hex}:"
        async with RedisSessionStore(url, prefix=prefix) as store:
            yield store
    else:
        from agentloop.store import PostgresSessionStore

        uri = request.getfixturevalue("new_postgres_schema")()
        async with PostgresSessionStore(uri) as store:
            yield store


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=PLANS, again=st.one_of(st.none(), st.integers(0, 12)))
async def test_a_session_killed_before_any_store_write_ends_as_an_uninterrupted_one(
    inner_store: SessionStore, plan: Plan, again: int | None
) -> None:
    base = f"crash-{next(SESSIONS)}"
    clean = Deaths(None)
    expected, world = await run_to_end(inner_store, plan, f"{base}-clean", clean)
    assert clean.problems == []
    check_same_end(expected, expected, world, "uninterrupted")
    await check_stored_end(inner_store, f"{base}-clean", "uninterrupted")
    for crash_at in range(clean.writes):
        session_id = f"{base}-{crash_at}"
        where = f"{plan!r}: killed before write {crash_at}, then {again} writes later"
        deaths = Deaths(crash_at, again)
        found, world = await run_to_end(inner_store, plan, session_id, deaths)
        assert deaths.problems == [], where
        check_same_end(expected, found, world, where)
        await check_stored_end(inner_store, session_id, where)
