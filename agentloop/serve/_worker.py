"""The in-process worker: advances a session once its approvals are decided (or its
question answered).

For each session it runs ``agentloop.SessionWorker.advance``: lease the
session in the store, resume it with the configured agent under that lease
(``Agent.resume(session_id=..., lease=...)``: every save and claim is fenced
with the lease's token, and the decisions the store holds are applied
exactly, with their deny reasons and edited arguments), drive it until it
rests while the lease is renewed, and release the lease. A session leased by
another worker is left alone. ``run`` also polls
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

from ..host._worker import SessionWorker
from ..loop._agent import Agent
from ..loop._session_store import LeaseHeldError, SessionStatus, SessionStore

__all__ = ["Worker", "load_agent"]

log = structlog.get_logger("agentloop")

_DECIDED = (SessionStatus.AWAITING_APPROVAL, SessionStatus.AWAITING_ANSWER)
"""The statuses of sessions a decision (or an answer) made ready: this worker's to run."""


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
    _taken: set[str] = attrs.field(factory=set, init=False)
    """Sessions the inbox made ready otherwise (a call in doubt resolved): this worker's."""

    def take(self, session_id: str) -> None:
        """Advance ``session_id`` once it is ready (the inbox resolved its call in doubt)."""
        self._taken.add(session_id)
        self.wake()

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
                taken = summary.session_id in self._taken
                if summary.status not in _DECIDED and not taken:
                    continue
                if self._failed.get(summary.session_id) == summary.version:
                    continue  # it failed at this version: retry once it changes, or on wake()
                self._taken.discard(summary.session_id)
                await self.advance(summary.session_id)
            with anyio.move_on_after(self.poll_interval):
                await self._wake.wait()

    async def advance(self, session_id: str) -> bool:
        """Lease, resume (applying the recorded decisions), drive, release; ``True`` if it ran.

        One use of :class:`agentloop.SessionWorker` (``advance``): the lease is
        renewed while the session is driven and released afterwards.
        """
        worker = SessionWorker(
            store=self.store,
            agent=self.agent,
            owner=self.owner,
            ttl=self.lease_ttl,
            step_timeout=self.step_timeout,
        )
        stored = None
        leased = True
        try:
            stored = await self.store.load(session_id)
            if stored is None:
                return False
            await worker.advance(session_id)
            return True
        except LeaseHeldError as held:
            leased = False
            log.info("session leased by another worker", session_id=session_id, holder=held.holder)
            return False
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
            if leased and self.on_change is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await self.on_change()
