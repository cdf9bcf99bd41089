"""The in-process worker: advances a session once its approvals are decided.

For each session it leases the session in the store, resumes it with the
configured agent through a store view that fences every save and claim with
that lease, applies the decision recorded for each pending call (with the
edited input or the deny reason from the audit log), drives it until it
blocks or finishes, and releases the lease. A session leased by another
worker is left alone. ``run`` also polls ``sessions_ready()`` so decisions
recorded by other processes, and sessions left decided by a restart, advance;
it only takes sessions whose approvals were all decided (a session ready for
another reason, such as queued input, belongs to its own host).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import attrs
import structlog

from ..loop._agent import Agent
from ..loop._session_store import (
    Claim,
    LeaseError,
    LeaseHeldError,
    SessionStatus,
    SessionStore,
    StoredSession,
    input_digest,
)
from ..loop._state import DriverState
from ..loop._steps import ApprovalAnswer, ApprovalRequest
from ._audit import AuditLog, DecisionAction
from ._inbox import find_call

__all__ = ["Worker", "load_agent"]

log = structlog.get_logger("agentloop")


def load_agent(factory: Callable[..., Any], store: SessionStore) -> Agent:
    """Call ``factory`` (with the store if it takes an argument) and check it made an Agent."""
    parameters = inspect.signature(factory).parameters
    agent = factory(store) if parameters else factory()
    if not isinstance(agent, Agent):
        raise TypeError(f"the agent factory returned {type(agent).__name__}, expected an Agent")
    return agent


class _FencedStore:
    """The store as one lease holder sees it: saves and claims carry the lease's token."""

    def __init__(self, store: SessionStore, token: int, document: Mapping[str, Any]) -> None:
        self._store = store
        self._token = token
        self._document: Mapping[str, Any] = document

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def save_checkpoint(
        self,
        session_id: str,
        checkpoint: Mapping[str, Any],
        *,
        expected_version: int | None = None,
        fencing_token: int | None = None,
    ) -> int:
        version = await self._store.save_checkpoint(
            session_id, checkpoint, expected_version=expected_version, fencing_token=self._token
        )
        self._document = checkpoint
        return version

    async def load(self, session_id: str) -> StoredSession | None:
        # The worker applies recorded decisions itself, with the reason or the edited
        # input from the audit log: the driver is not shown them (it would deny with a
        # generic text).
        stored = await self._store.load(session_id)
        return None if stored is None else attrs.evolve(stored, approvals={})

    async def claim(
        self,
        session_id: str,
        call_id: str,
        *,
        tool_name: str,
        input_digest: str,
        fencing_token: int | None = None,
    ) -> Claim:
        return await self._store.claim(
            session_id,
            call_id,
            tool_name=tool_name,
            input_digest=input_digest,
            fencing_token=self._token,
        )

    async def record_call_started(self, session_id: str, call_id: str, tool_name: str) -> None:
        # The single-use, fenced form: a call claimed by any worker never runs again.
        stored = await self._store.load(session_id)
        approval = stored.approvals.get(call_id) if stored is not None else None
        if approval is not None:
            digest = approval.input_digest
        else:
            call = find_call(self._document, call_id)
            inner = call.get("call") if call is not None else None
            tool_input = inner.get("input") if isinstance(inner, Mapping) else None
            digest = input_digest(tool_name, tool_input)
        claim: Claim = await self._store.claim(
            session_id, call_id, tool_name=tool_name, input_digest=digest, fencing_token=self._token
        )
        log.debug("call claimed", session_id=session_id, call_id=claim.call_id)


@attrs.define
class Worker:
    """Advances sessions of ``store`` with ``agent`` once their approvals are decided."""

    store: SessionStore
    audit: AuditLog
    agent: Agent
    owner: str = "agentloop-serve"
    lease_ttl: float = 60.0
    poll_interval: float = 1.0
    step_timeout: float = 300.0
    on_change: Callable[[], Awaitable[None]] | None = None
    _wake: anyio.Event = attrs.field(factory=anyio.Event, init=False)
    _failed: dict[str, int] = attrs.field(factory=dict, init=False)
    """Sessions whose last advance failed, with the version it failed at."""

    def wake(self) -> None:
        """Look for ready sessions now (a decision was made), retrying failed ones too."""
        self._failed.clear()
        self._wake.set()

    async def run(self) -> None:
        """Advance ready sessions until cancelled."""
        while True:
            self._wake = anyio.Event()
            try:
                ready = await self.store.sessions_ready()
            except Exception:
                log.exception("listing ready sessions failed")
                ready = []
            for summary in ready:
                # Only sessions a decision unblocked: a session ready for another
                # reason (queued input, a paused round) is its own host's to run.
                if summary.status is not SessionStatus.AWAITING_APPROVAL:
                    continue
                if self._failed.get(summary.session_id) == summary.version:
                    continue  # it failed at this version: retry once it changes, or on wake()
                await self.advance(summary.session_id)
            with anyio.move_on_after(self.poll_interval):
                await self._wake.wait()

    async def advance(self, session_id: str) -> bool:
        """Lease, resume, apply recorded decisions, drive, release; ``True`` if it ran."""
        try:
            lease = await self.store.acquire(session_id, self.owner, self.lease_ttl)
        except LeaseHeldError as held:
            log.info("session leased by another worker", session_id=session_id, holder=held.holder)
            return False
        stored = None
        try:
            stored = await self.store.load(session_id)
            if stored is None:
                return False
            fenced = _FencedStore(self.store, lease.token, stored.checkpoint)
            agent = attrs.evolve(self.agent, store=fenced)
            async with anyio.create_task_group() as group:
                group.start_soon(self._renew, lease, group.cancel_scope)
                with anyio.fail_after(self.step_timeout):
                    await self._drive(agent, session_id)
                group.cancel_scope.cancel()
            return True
        except Exception:
            log.exception("advancing the session failed", session_id=session_id)
            if stored is not None:
                self._failed[session_id] = stored.version
            return False
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await self.store.release(lease)
                except Exception:
                    log.exception("releasing the lease failed", session_id=session_id)
                if self.on_change is not None:
                    await self.on_change()

    async def _renew(self, lease: Any, scope: anyio.CancelScope) -> None:
        interval = max(self.lease_ttl / 3, 0.05)
        while True:
            await anyio.sleep(interval)
            try:
                lease = await self.store.renew(lease, self.lease_ttl)
            except LeaseError:
                log.warning("lease lost; stopping", session_id=lease.session_id)
                scope.cancel()
                return

    async def _drive(self, agent: Agent, session_id: str) -> None:
        driver = await agent.resume(session_id=session_id)
        if driver.state is DriverState.AWAITING_APPROVAL:
            step: Any = await driver.next()
        else:
            step = await driver.run_until_blocked()
        while isinstance(step, ApprovalRequest):
            decision = await self._decision_for(session_id, step)
            if decision is None:
                return  # still waiting for a person; the driver saved the session
            driver.answer_approval_for(step.call_id, decision)
            step = await driver.run_until_blocked()
        log.info("session advanced", session_id=session_id, state=str(driver.state))

    async def _decision_for(self, session_id: str, step: ApprovalRequest) -> ApprovalAnswer | None:
        stored = await self.store.load(session_id)
        approval = stored.approvals.get(step.call_id) if stored is not None else None
        if approval is None:
            return None
        entry = await self.audit.find(
            session_id,
            step.call_id,
            approved=approval.approved,
            input_digest=approval.input_digest,
        )
        if not approval.approved:
            return ApprovalAnswer.deny(entry.reason if entry is not None else None)
        if entry is not None and entry.action is DecisionAction.APPROVE_WITH:
            if input_digest(step.tool_name, entry.input) == approval.input_digest:
                return ApprovalAnswer.approve_with(entry.input)
        elif input_digest(step.tool_name, step.input) == approval.input_digest:
            return ApprovalAnswer.approve()
        return ApprovalAnswer.deny(
            "the recorded approval was for other arguments than the call's; not run"
        )
