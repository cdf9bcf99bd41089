"""The soak's sessions, agent and worker process (see ``soak_fleet.py``).

Everything a worker decides is a function of the seed and what it is asked:
the plan of a session's turn (which tool rounds, which calls), the model's
latency, a tool's latency, an approver's decision. The model decides from
the request (the turn is the number of user items, the round the number of
tool-call items since the last one), so any worker, restarted or not, gives
the same answer to the same transcript.

A worker process is ``SessionWorker(...).run(stop=...)`` on a
:class:`RecordingStore`: the store it was given, with every lease it takes,
releases or loses written to ``LEASES/<owner>.jsonl`` (one JSON line each,
flushed at once), from which the soak counts takeovers. Its tools append
``<call id> <tool> <owner>`` to ``EFFECTS/<session id>.log`` before they
answer: the effects log, where a call that ran twice would show twice.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import structlog

import agentloop as al
import agentloop.host
import agentloop.model
import agentloop.permissions
import agentloop.testing
import agentloop.tools
from agentloop.store import (
    Claim,
    Lease,
    LeaseLostError,
    RecordedApproval,
    SessionInfo,
    SessionStore,
    SessionSummary,
    SqliteSessionStore,
    StaleSessionError,
    StoredSession,
)
from agentloop.testing import call, tool_calls

EFFECT, READ, TRANSFER = "effect", "read", "transfer"
"""A side effect (claimed); an idempotent read; a side effect that needs approval."""

ROUND_SHAPES: tuple[tuple[str, ...], ...] = (
    (EFFECT,),
    (READ, EFFECT),
    (TRANSFER,),
    (EFFECT, TRANSFER),
    (READ,),
    (TRANSFER, READ),
    (READ, EFFECT, TRANSFER),
)


def _random(*parts: object) -> random.Random:
    return random.Random(":".join(str(part) for part in parts))


def turn_plan(seed: int, session_id: str, turn: int) -> tuple[tuple[str, ...], ...]:
    """The tool rounds of a session's turn (1-based): one to three, each of 1-3 calls."""
    rng = _random(seed, "plan", session_id, turn)
    return tuple(rng.choice(ROUND_SHAPES) for _ in range(rng.randint(1, 3)))


def call_id(session_id: str, turn: int, round_index: int, index: int, tool: str) -> str:
    return f"{session_id}.t{turn}.r{round_index}.{index}.{tool}"


def answer_text(turn: int) -> str:
    return f"answered turn {turn}"


def user_text(turn: int) -> str:
    return f"turn {turn}"


def uniform(seconds: tuple[float, float], *parts: object) -> float:
    low, high = seconds
    return _random(*parts).uniform(low, high)


def decision(seed: int, call: str, approver: int) -> bool:
    """What approver 0 or 1 decides for a call: both approve, both deny, or they conflict."""
    draw = _random(seed, "approve", call).random()
    if draw < 0.45:
        return True
    if draw < 0.7:
        return False
    return (approver == 0) == (draw < 0.85)


def deny_reason(approver: int) -> str:
    return f"denied by approver-{approver}"


def conflicting(seed: int, call: str) -> bool:
    return decision(seed, call, 0) != decision(seed, call, 1)


def _mark(marker: Path, present: bool) -> None:
    if present:
        marker.touch()
    else:
        marker.unlink(missing_ok=True)


def model_script(seed: int, latency: tuple[float, float], marker: Path | None) -> Any:
    """The model: the planned rounds of the request's turn, then the turn's answer.

    While it answers a request that ends with tool results (the model call after a
    tool round), the file ``marker`` exists: the chaos loop aims some kills there.
    """

    async def reply(request: al.model.TurnRequest) -> Any:
        transcript = request.transcript
        users = [n for n, item in enumerate(transcript) if item.kind is al.ItemKind.USER]
        turn = len(users)
        done = sum(1 for item in transcript[users[-1] :] if any(item.tool_calls()))
        seconds = uniform(latency, seed, "model", request.session_id, len(transcript))
        if marker is not None and transcript[-1].kind is al.ItemKind.TOOL:
            _mark(marker, True)
            try:
                await anyio.sleep(seconds)
            finally:
                _mark(marker, False)
        else:
            await anyio.sleep(seconds)
        rounds = turn_plan(seed, str(request.session_id), turn)
        if done >= len(rounds):
            return answer_text(turn)
        return tool_calls(
            *(
                call(
                    tool,
                    {"session": str(request.session_id), "index": index},
                    id=call_id(str(request.session_id), turn, done, index, tool),
                )
                for index, tool in enumerate(rounds[done])
            )
        )

    return reply


class SoakTool:
    """One of the three tools; the side effects append their call id to the effects log."""

    def __init__(
        self, name: str, effects: Path, owner: str, seed: int, latency: tuple[float, float]
    ) -> None:
        self.spec = al.ToolSpec(
            name,
            f"The soak's {name} tool.",
            {"type": "object"},
            annotations=al.ToolAnnotations(idempotent=name == READ, read_only=name == READ),
        )
        self.effects, self.owner, self.seed = effects, owner, seed
        self.half = (latency[0] / 2, latency[1] / 2)  # before the effect, and after it

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        await anyio.sleep(uniform(self.half, self.seed, "before", request.call_id))
        if self.spec.name != READ:
            session = str(request.input["session"])
            line = f"{request.call_id} {self.spec.name} {self.owner}\n".encode()
            descriptor = os.open(
                self.effects / f"{session}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
            )
            try:
                os.write(descriptor, line)  # one write per line: lines never interleave
            finally:
                os.close(descriptor)
        await anyio.sleep(uniform(self.half, self.seed, "after", request.call_id))
        return f"{request.call_id} done by {self.owner}"


class TransfersNeedApproval:
    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        if isinstance(request, al.permissions.ToolInvocation) and request.tool_name == TRANSFER:
            return al.permissions.AskApproval("transfers_need_approval", request.summary)
        return al.permissions.Allow()


def build_agent(
    store: SessionStore,
    effects: Path,
    owner: str,
    seed: int,
    latency: tuple[float, float],
    tool_latency: tuple[float, float],
    marker: Path | None = None,
) -> al.Agent:
    registry = al.ToolRegistry()
    for name in (EFFECT, READ, TRANSFER):
        registry = registry.with_tool(SoakTool(name, effects, owner, seed, tool_latency))
    return (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(model_script(seed, latency, marker)))
        .add_tool_source(registry)
        .permissions(TransfersNeedApproval())
        .store(store)
        .build()
    )


def open_store(target: str, *, pool_size: int = 2) -> Any:
    """A store on ``target``: a ``postgresql://`` URI, a ``redis://`` URL with ``#PREFIX``,
    or a SQLite path (``async with`` it)."""
    if target.startswith("redis://"):
        from agentloop.store import RedisSessionStore

        url, _, prefix = target.partition("#")
        return RedisSessionStore(url, prefix=prefix or "agentloop:", max_connections=pool_size)
    if target.startswith(("postgresql://", "postgres://")):
        from agentloop.store import PostgresSessionStore

        return PostgresSessionStore(target, pool_size=pool_size)
    return SqliteSessionStore(target)


# -- the lease log -------------------------------------------------------------------------


class LeaseLog:
    """``LEASES/<name>.jsonl``: one line per lease event, written with one ``os.write``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, event: str, session_id: str, token: int, owner: str, **extra: Any) -> None:
        record = {"event": event, "session": session_id, "token": token, "owner": owner}
        line = json.dumps({**record, **extra, "t": time.time()}) + "\n"
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, line.encode())
        finally:
            os.close(descriptor)


class RecordingStore:
    """``inner``, with every lease taken, released or lost written to ``log``, and every
    fenced write that committed (with the time it started)."""

    def __init__(self, inner: SessionStore, log: LeaseLog) -> None:
        self._inner, self._log = inner, log

    def _lost(self, operation: str, session_id: str, token: int | None, error: Exception) -> None:
        kind = "lost" if isinstance(error, LeaseLostError) else "stale"
        self._log.write(kind, session_id, token or 0, "", operation=operation)

    def _wrote(self, operation: str, session_id: str, token: int | None, start: float) -> None:
        if token is not None:  # a fenced write that committed; it started at ``start``
            self._log.write("write", session_id, token, "", operation=operation, start=start)

    async def save_checkpoint(
        self,
        session_id: str,
        checkpoint: Mapping[str, Any],
        *,
        expected_version: int | None = None,
        fencing_token: int | None = None,
    ) -> int:
        start = time.time()
        try:
            version = await self._inner.save_checkpoint(
                session_id,
                checkpoint,
                expected_version=expected_version,
                fencing_token=fencing_token,
            )
        except (LeaseLostError, StaleSessionError) as error:
            self._lost("save_checkpoint", session_id, fencing_token, error)
            raise
        self._wrote("save_checkpoint", session_id, fencing_token, start)
        return version

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        await self._inner.record_call_started(session_id, call_id, tool_name)

    async def claim(
        self,
        session_id: str,
        call_id: str,
        *,
        tool_name: str,
        input_digest: str,
        fencing_token: int | None = None,
    ) -> Claim:
        start = time.time()
        try:
            claim = await self._inner.claim(
                session_id,
                call_id,
                tool_name=tool_name,
                input_digest=input_digest,
                fencing_token=fencing_token,
            )
        except LeaseLostError as error:
            self._lost("claim", session_id, fencing_token, error)
            raise
        self._wrote("claim", session_id, fencing_token, start)
        return claim

    async def record_approval(
        self,
        session_id: str,
        call_id: str,
        *,
        input_digest: str,
        approved: bool,
        reason: str | None = None,
        edited_input: Any = None,
    ) -> RecordedApproval:
        return await self._inner.record_approval(
            session_id,
            call_id,
            input_digest=input_digest,
            approved=approved,
            reason=reason,
            edited_input=edited_input,
        )

    async def acquire(self, session_id: str, owner: str, ttl: float) -> Lease:
        lease = await self._inner.acquire(session_id, owner, ttl)
        self._log.write("acquire", session_id, lease.token, owner)
        return lease

    async def acquire_ready(self, owner: str, ttl: float) -> Lease | None:
        lease = await self._inner.acquire_ready(owner, ttl)
        if lease is not None:
            self._log.write("acquire", lease.session_id, lease.token, owner)
        return lease

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        try:
            return await self._inner.renew(lease, ttl)
        except LeaseLostError as error:
            self._lost("renew", lease.session_id, lease.token, error)
            raise

    async def release(self, lease: Lease) -> None:
        await self._inner.release(lease)
        self._log.write("release", lease.session_id, lease.token, lease.owner)

    async def sessions_awaiting_approval(self) -> list[SessionSummary]:
        return await self._inner.sessions_awaiting_approval()

    async def sessions_ready(self) -> list[SessionSummary]:
        return await self._inner.sessions_ready()

    async def load(self, session_id: str) -> StoredSession | None:
        return await self._inner.load(session_id)

    async def list_sessions(self) -> list[SessionInfo]:
        return await self._inner.list_sessions()

    async def delete(self, session_id: str) -> bool:
        return await self._inner.delete(session_id)

    async def transcript(self, session_id: str) -> list[al.Item] | None:
        return await self._inner.transcript(session_id)


# -- a worker process ----------------------------------------------------------------------


def configure_logging(path: Path) -> None:
    """The library's log lines as JSON, one per line, flushed as written (a host's choice)."""
    file = path.open("a", encoding="utf-8", buffering=1)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(file=file),
    )


async def run_worker(
    target: str,
    workdir: Path,
    owner: str,
    *,
    seed: int,
    latency: tuple[float, float],
    tool_latency: tuple[float, float],
    ttl: float,
) -> None:
    """One worker: ``SessionWorker.run`` until ``WORKDIR/stop`` exists or the soak is gone."""
    configure_logging(workdir / "logs" / f"{owner}.log")
    parent = os.getppid()

    async def stop() -> bool:
        return (workdir / "stop").exists() or os.getppid() != parent

    async with open_store(target) as inner:
        store = RecordingStore(inner, LeaseLog(workdir / "leases" / f"{owner}.jsonl"))
        marker = workdir / "in_model" / owner
        agent = build_agent(store, workdir / "effects", owner, seed, latency, tool_latency, marker)
        worker = al.host.SessionWorker(
            store=store, agent=agent, owner=owner, ttl=ttl, poll_interval=0.05
        )
        await worker.run(stop=stop)
