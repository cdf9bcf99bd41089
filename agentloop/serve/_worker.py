"""The in-process worker: advances a session once its approvals are decided.

For each session it leases the session in the store, resumes it with the
configured agent under that lease (``Agent.resume(session_id=..., lease=...)``:
every save and claim is fenced with the lease's token, and the decisions the
store holds are applied exactly, with their deny reasons and edited
arguments), drives it until it blocks or finishes, and releases the lease. A
session leased by another worker is left alone. ``run`` also polls
``sessions_ready()`` so decisions recorded by other processes, and sessions
left decided by a restart, advance; it only takes sessions whose approvals
were all decided (a session ready for another reason, such as queued input,
belongs to its own host).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import attrs
import structlog

from ..core._errors import InvalidStateError
from ..loop._agent import Agent
from ..loop._session_store import (
    Approval,
    Lease,
    LeaseError,
    LeaseHeldError,
    SessionStatus,
    SessionStore,
    input_digest,
)
from ..loop._steps import ApprovalRequest

__all__ = ["Worker", "load_agent"]

log = structlog.get_logger("agentloop")


def load_agent(factory: Callable[..., Any], store: SessionStore) -> Agent:
    """Call ``factory`` (with the store if it takes an argument) and check it made an Agent."""
    parameters = inspect.signature(factory).parameters
    agent = factory(store) if parameters else factory()
    if not isinstance(agent, Agent):
        raise TypeError(f"the agent factory returned {type(agent).__name__}, expected an Agent")
    return agent


@attrs.define
class Worker:
    """Advances sessions of ``store`` with ``agent`` once their approvals are decided."""

    store: SessionStore
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
        """Lease, resume (applying the recorded decisions), drive, release; ``True`` if it ran."""
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
            agent = attrs.evolve(self.agent, store=self.store)
            async with anyio.create_task_group() as group:
                group.start_soon(self._renew, lease, group.cancel_scope)
                with anyio.fail_after(self.step_timeout):
                    await self._drive(agent, lease)
                group.cancel_scope.cancel()
            return True
        except Exception:
            log.exception("advancing the session failed", session_id=session_id)
            if stored is not None:
                # The version it failed at: the drive may have saved before failing.
                try:
                    now = await self.store.load(session_id)
                except Exception:
                    now = None
                self._failed[session_id] = (now or stored).version
            return False
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await self.store.release(lease)
                except Exception:
                    log.exception("releasing the lease failed", session_id=session_id)
                if self.on_change is not None:
                    await self.on_change()

    async def _renew(self, lease: Lease, scope: anyio.CancelScope) -> None:
        interval = max(self.lease_ttl / 3, 0.05)
        while True:
            await anyio.sleep(interval)
            try:
                lease = await self.store.renew(lease, self.lease_ttl)
            except LeaseError:
                log.warning("lease lost; stopping", session_id=lease.session_id)
                scope.cancel()
                return

    async def _drive(self, agent: Agent, lease: Lease) -> None:
        session_id = lease.session_id
        # Resuming applies every decision the store holds (deny reasons, edited input).
        driver = await agent.resume(session_id=session_id, lease=lease)
        step = await driver.run_until_blocked()
        if isinstance(step, ApprovalRequest):
            stored = await self.store.load(session_id)
            recorded = stored.approvals.get(step.call_id) if stored is not None else None
            if recorded is not None and not _applicable(recorded, step):
                raise InvalidStateError(
                    f"cannot apply the decision recorded for call {step.call_id} "
                    f"({step.tool_name}) of session {session_id!r}: it approves input "
                    f"{recorded.input_digest}, not the call's, and no edited input was "
                    "recorded with it; decide the call in a host (Agent.resume) instead"
                )
            # A call waits for a person (or was decided since the resume: the next poll
            # applies it); the driver saved the session.
        log.info("session advanced", session_id=session_id, state=str(driver.state))


def _applicable(recorded: Approval, step: ApprovalRequest) -> bool:
    """Whether resuming applies ``recorded`` to the call (as ``Agent.resume`` decides)."""
    if not recorded.approved or recorded.input_digest == input_digest(step.tool_name, step.input):
        return True
    edited = recorded.edited_input
    return edited is not None and recorded.input_digest == input_digest(step.tool_name, edited)
