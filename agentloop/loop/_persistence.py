"""Every interaction between a driver and its ``SessionStore``, in one place.

What is written when (see ``docs/store.md``, "Running many workers"):

- :meth:`Persistence.save_input` — before a step that will call the model
  with input the host queued (the input is durable before the model sees it);
- :meth:`Persistence.record_decisions` — the host's approval decisions, bound
  to the digest of the exact input they approved, before they are acted on;
- :meth:`Persistence.save_response` — after a model response with tool calls,
  before any call starts (a restore then runs the calls that never started
  instead of asking the model again);
- :meth:`Persistence.claim` — just before a non-idempotent call starts: the
  call is claimed once, for the input that will run (a refused claim answers
  the call instead of running it);
- :meth:`Persistence.note_finished_calls` / :meth:`Persistence.save_results` —
  once a claimed call has its result, that result is saved before anything
  else is waited for (another call, the model, the calls still running) or,
  when nothing is, by the step's own save right after (one commit instead of
  two per round; a restore keeps that result instead of answering "in doubt");
- :meth:`Persistence.save_step` — after every step ``next()`` returns;
- :func:`load` — ``Agent.resume(session_id=...)`` reads the latest session.

Every save passes the version of the session this driver last loaded or
saved (``expected_version``) and, with a lease, its fencing token.
``StaleSessionError`` and ``LeaseLostError`` propagate unchanged (another
writer owns the session: reload it); any other storage fault of a save the
host must know about becomes a ``SaveError``. A journal save inside a step
(response, finished calls) that fails is logged and retried by the step's
own save, which raises if it fails too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from .._log import get_logger
from ..core._errors import CheckpointError, InvalidInputError, InvalidStateError, SaveError
from ..core._items import ResultOutcome, ToolResultPart
from ..core._synthesized_results import synthesized_result
from ..model._session_config import SessionConfig
from ..tools._tool import ToolRequest
from ._checkpoint import capture, parse
from ._checkpoint_memo import CaptureMemo
from ._core import LoopCore
from ._observer import Nobody
from ._session_store import (
    ClaimError,
    Lease,
    LeaseLostError,
    RecordedApproval,
    SessionStore,
    StaleSessionError,
    StoredSession,
    input_digest,
)
from ._state import CallStatus, DriverState, RoundCall, ToolRound
from ._steps import AnswerKind, ApprovalAnswer

__all__ = ["Persistence", "Unsaved", "load"]

log = get_logger()

_NONE: set[str] = frozenset()  # type: ignore[assignment]
"""The claimed and recorded calls of a driver without a store: none, ever (immutable)."""

_OWNED_ELSEWHERE = (StaleSessionError, LeaseLostError)
"""Faults that mean another writer owns the session: never retried, never wrapped."""


class Unsaved:
    """The journal of a driver without a store: it saves nothing, and ``driver.save()``
    and a lease are refused naming the missing store (one small object per driver)."""

    __slots__ = ("_session_id",)

    def __init__(self, session_id: str) -> None:
        self._session_id = session_id

    def attach(
        self,
        *,
        version: int | None,
        lease: Lease | None,
        recorded: Iterable[str] = (),
    ) -> None:
        """Refuse ``lease`` (nothing to fence); ``version`` and ``recorded`` mean nothing."""
        if lease is not None:
            _refuse_lease(self._session_id, lease)

    async def save_now(self, core: LoopCore) -> None:
        """Refuse: there is no store to save to."""
        _refuse_save(self._session_id)

    def note_answer(self) -> None:
        """Nothing to save: an answered question matters only to a stored session."""

    def note_resolved(self) -> None:
        """Nothing to save: a call in doubt exists only in a restored, stored session."""


def _refuse_lease(session_id: str, lease: object) -> NoReturn:
    if not isinstance(lease, Lease):
        raise InvalidInputError(f"lease must be a Lease from store.acquire, got {lease!r}")
    raise InvalidStateError(
        f"cannot drive session {session_id!r} under a lease: this agent has no "
        "store; build it with .store(store)"
    )


def _refuse_save(session_id: str) -> NoReturn:
    raise InvalidStateError(
        f"cannot save session {session_id!r}: this agent has no store; build it with .store(store)"
    )


class Persistence:
    """Saves one driver's state to its store.

    The step loop of a driver with a store (``_durable_steps.py``) calls the
    saves, claims and records; a driver without one has an :class:`Unsaved`
    instead, which refuses a lease and ``driver.save()`` naming the missing
    store."""

    __slots__ = (
        "_config",
        "_item_documents",
        "_journaled",
        "_observer",
        "_recorded",
        "_results_unsaved",
        "_saved_queues",
        "_saving_input",
        "_session_id",
        "_store",
        "lease",
        "version",
    )

    def __init__(self, store: SessionStore | None, config: SessionConfig, observer: Nobody) -> None:
        self._store = store
        self._config = config
        self._session_id = config.session_id
        self._observer = observer
        self._item_documents: CaptureMemo | None = None
        """The documents of the last save's items and other values: unchanged ones keep
        theirs (and the store its texts for them). Made at the first save."""
        # Without a store nothing is claimed or recorded (every method returns
        # first): no sets are made for that (a session holds less).
        self._journaled: set[str] = set() if store is not None else _NONE
        """Calls claimed whose result is not saved yet."""
        self._recorded: set[str] = set() if store is not None else _NONE
        """Calls whose approval decision the store holds already."""
        self._saved_queues: tuple[object, ...] | None = None
        self._results_unsaved = False
        """A claimed call has its result and no save since holds it (``save_results``)."""
        self._saving_input = False
        self.version: int | None = None
        """The store version this driver's state is based on (``None``: not tracked)."""
        self.lease: Lease | None = None

    def attach(
        self,
        *,
        version: int | None,
        lease: Lease | None,
        recorded: Iterable[str] = (),
    ) -> None:
        """Base the saves on ``version``, fence them with ``lease`` (``Agent.start``/``resume``).

        ``recorded``: calls whose decision the store holds and the driver applied.
        """
        session_id = self._session_id
        if lease is not None:
            if self._store is None:
                _refuse_lease(session_id, lease)
            if not isinstance(lease, Lease):
                raise InvalidInputError(f"lease must be a Lease from store.acquire, got {lease!r}")
            if lease.session_id != session_id:
                raise InvalidInputError(
                    f"cannot drive session {session_id!r} under the lease of session "
                    f"{lease.session_id!r}; acquire a lease for {session_id!r}"
                )
        self.version = version
        self.lease = lease
        if recorded:
            self._recorded = {*self._recorded, *recorded}

    @property
    def _token(self) -> int | None:
        return self.lease.token if self.lease is not None else None

    # -- saves ------------------------------------------------------------------

    async def save_input(self, core: LoopCore) -> None:
        """Save queued input before a step that may call the model with it.

        Raises ``SaveError`` (the driver is unchanged; call ``next()`` again
        to retry). Saves only when the queues changed since the last save.
        """
        if self._store is None or self._saving_input:
            return
        if core.state not in (DriverState.IDLE, DriverState.AFTER_TOOL_RESULT):
            return
        if not (core.pending_input or core.steering or core.follow_ups):
            return
        if self._queues_saved(core):
            return
        self._saving_input = True
        try:
            await self._save(core, core.state, step=None)
        finally:
            self._saving_input = False

    async def save_step(self, core: LoopCore, step: object = None) -> None:
        """Save after a step; ``SaveError`` carries ``step`` when the save fails."""
        if self._store is not None:
            await self._save(core, core.state, step=step)

    async def save_now(self, core: LoopCore) -> None:
        """Save the driver's state now (``driver.save()``: retry after a ``SaveError``)."""
        session_id = self._session_id
        if self._store is None:
            _refuse_save(session_id)
        if core.state in (DriverState.STEPPING, DriverState.FAILED):
            raise InvalidStateError(
                f"cannot save session {session_id!r} in state {core.state}: "
                + (
                    "a step is running; save between steps"
                    if core.state is DriverState.STEPPING
                    else f"an earlier step raised {type(core.failure).__name__}: {core.failure}"
                )
            )
        await self._save(core, core.state, step=None)

    async def save_response(self, core: LoopCore) -> None:
        """Journal a model response before any of its calls starts."""
        if self._store is not None:
            await self._journal(core)

    def note_finished_calls(self, tool_round: ToolRound) -> None:
        """Note the claimed calls of ``tool_round`` that have their result now.

        Their results are saved by the next save: :meth:`save_results` before
        the step waits for anything, or the step's own save when it ends
        first (nothing suspends in between, so a crash loses no more than
        with a save of its own, and the round commits once instead of twice).
        A restore then keeps those results instead of answering the calls as
        in doubt; calls still running are saved as not started (and answered
        in doubt if they were claimed).
        """
        if not self._journaled:
            return
        finished = [c for c in tool_round.calls if c.call.id in self._journaled and c.answered]
        for call in finished:
            self._journaled.discard(call.call.id)
            self._results_unsaved = True

    def note_answer(self) -> None:
        """A running call was handed the host's answer to its question: the next save
        before a wait holds that it no longer waits (a restore then answers the call in
        doubt instead of asking again and running it a second time)."""
        if self._store is not None:
            self._results_unsaved = True

    def note_resolved(self) -> None:
        """A call in doubt got the host's result (``CallInDoubt.settle``/``fail``): saved
        by the next save, before anything else of the round runs."""
        if self._store is not None:
            self._results_unsaved = True

    @property
    def results_unsaved(self) -> bool:
        """Whether a claimed call has a result that no save holds yet."""
        return self._results_unsaved

    async def save_results_after_fault(self, core: LoopCore) -> None:
        """After a step raised: journal the results no save holds yet, if a restore
        accepts the state the fault left (one raised while a result was being
        appended leaves one it refuses: then nothing is saved, and a restore
        answers those calls as in doubt, never running them again)."""
        if not self._results_unsaved:
            return
        try:
            parse(capture(core, DriverState.AFTER_TOOL_RESULT, self._config))
        except CheckpointError as refused:
            log.warning(
                "a step failed while a call's result was being appended; its result is "
                "not saved (a restore answers the call as in doubt)",
                session_id=self._session_id,
                error=str(refused),
            )
            return
        await self._journal(core)

    async def save_results(self, core: LoopCore) -> None:
        """Journal the results :meth:`note_finished_calls` noted, if no save holds them yet.

        Called before the step waits for anything: another call, the calls
        still running, the model, or an interrupted turn's other calls.
        """
        if self._results_unsaved:
            await self._journal(core)

    async def _journal(self, core: LoopCore) -> None:
        """A save inside a step: a storage fault is logged; the step's own save retries."""
        try:
            await self._save(core, DriverState.AFTER_TOOL_RESULT, step=None)
        except SaveError as error:
            log.warning(
                "journaling the step failed; the step's own save retries",
                session_id=self._session_id,
                error=str(error.__cause__),
            )
            self._observer.warning(f"{error}; the save at the end of the step retries")

    async def _save(self, core: LoopCore, state: DriverState, *, step: object) -> None:
        assert self._store is not None
        session_id = self._session_id
        try:
            if self._item_documents is None:
                self._item_documents = CaptureMemo()
            document = capture(core, state, self._config, self._item_documents)
            version = await self._store.save_checkpoint(
                session_id, document, expected_version=self.version, fencing_token=self._token
            )
        except _OWNED_ELSEWHERE:
            raise
        except Exception as error:
            self._item_documents = None  # the next save converts (and the store encodes) anew
            log.exception("saving the checkpoint failed", session_id=session_id)
            raise SaveError(
                f"cannot save session {session_id!r} in state {state}: "
                f"{type(error).__name__}: {error}; the driver keeps the unsaved state: "
                "call driver.save() to retry, or stop",
                session_id=session_id,
                step=step,
            ) from error
        if isinstance(version, int) and not isinstance(version, bool):
            self.version = version
        self._saved_queues = self._queues(core)
        self._results_unsaved = False  # every save holds every result the driver has

    @staticmethod
    def _queues(core: LoopCore) -> tuple[object, ...]:
        """The queued input, as the objects themselves (kept alive, compared by identity)."""
        return (*core.pending_input, None, *core.steering, None, *core.follow_ups)

    def _queues_saved(self, core: LoopCore) -> bool:
        saved, current = self._saved_queues, self._queues(core)
        return (
            saved is not None
            and len(saved) == len(current)
            and all(a is b for a, b in zip(saved, current, strict=True))
        )

    # -- claims and approvals -------------------------------------------------------

    async def claim(
        self, call: RoundCall, request: ToolRequest, *, idempotent: bool, key: str | None = None
    ) -> tuple[ToolResultPart, CallStatus] | None:
        """Claim a non-idempotent call before it runs, for the exact ``request.input``
        (under ``key`` instead of the call id: a call running again from an answer).

        Returns ``None`` when the call may run, else the result that answers
        it instead: in doubt when it was claimed before (another driver or a
        dead worker may have run it), denied when the store holds a denial or
        an approval of other input. Raises ``LeaseLostError`` when the lease
        is no longer current and ``SaveError`` for a storage fault (the call
        was not run either way).
        """
        if self._store is None or idempotent:
            return None
        session_id, call_id, name = self._session_id, call.call.id, call.call.name
        try:
            digest = input_digest(name, request.input)
            await self._store.claim(
                session_id,
                key or call_id,
                tool_name=name,
                input_digest=digest,
                fencing_token=self._token,
            )
        except ClaimError as error:
            log.warning(
                "claim refused", session_id=session_id, call_id=call_id, reason=error.reason
            )
            self._observer.warning(f"call {call_id} ({name}) not run: {error}")
            return _refusal(call, error.reason)
        except _OWNED_ELSEWHERE:
            raise
        except Exception as error:
            raise SaveError(
                f"cannot claim call {call_id} ({name}) of session {session_id!r} before "
                f"running it: {type(error).__name__}: {error}; the call was not run",
                session_id=session_id,
            ) from error
        self._journaled.add(call_id)
        return None

    async def record_decisions(self, tool_round: ToolRound) -> None:
        """Record the host's decisions on the round's calls, bound to the input approved.

        ``approve_with`` binds the edited input. A decision that conflicts
        with one recorded elsewhere (another process, an approval UI) raises
        ``ClaimError`` naming both; nothing runs.
        """
        if self._store is None:
            return
        session_id = self._session_id
        for call in tool_round.calls:
            call_id = call.call.id
            if call.status is not CallStatus.DECIDED or call_id in self._recorded:
                continue
            decision = call.decision
            assert decision is not None
            edited = decision.kind is AnswerKind.APPROVE_WITH
            approved_input = decision.input if edited else call.request.input
            # The reason and the edited input travel with the decision, so any process
            # resuming the session applies it exactly; passed only when set, so a store
            # written before they existed keeps working for plain decisions.
            details: dict[str, Any] = {}
            if decision.reason is not None:
                details["reason"] = decision.reason
            if edited and decision.input is not None:
                details["edited_input"] = decision.input
            try:
                digest = input_digest(call.call.name, approved_input)
                await self._store.record_approval(
                    session_id, call_id, input_digest=digest, approved=decision.approved, **details
                )
            except ClaimError as error:
                raise ClaimError(
                    f"cannot apply the decision {decision.kind} on call {call_id} of session "
                    f"{session_id!r}: {error}; another process decided this call already: "
                    "resume the session from the store (Agent.resume(session_id=...)) to "
                    "continue with the recorded decision",
                    session_id=session_id,
                    call_id=call_id,
                    reason=error.reason,
                ) from error
            except _OWNED_ELSEWHERE:
                raise
            except Exception as error:
                raise SaveError(
                    f"cannot record the decision on call {call_id} of session {session_id!r}: "
                    f"{type(error).__name__}: {error}; the call was not run",
                    session_id=session_id,
                ) from error
            self._recorded.add(call_id)


def _refusal(call: RoundCall, reason: str) -> tuple[ToolResultPart, CallStatus]:
    """The result answering a call whose claim was refused for ``reason``."""
    name = call.call.name
    if reason == "claimed":
        text = (
            f"in doubt: {name} was claimed by another driver or worker of this session, "
            "which may have run it; it was not run again. Check its effects before retrying."
        )
        return synthesized_result(call.call.id, text, ResultOutcome.IN_DOUBT), CallStatus.IN_DOUBT
    if reason == "denied":
        text = "approval denied: a decision recorded for this call in the session store denies it"
    else:
        text = (
            "approval denied: the approval recorded for this call in the session store was "
            "for other input than the input it would run with"
        )
    return synthesized_result(call.call.id, text, ResultOutcome.DENIED), CallStatus.ANSWERED


def recorded_decisions(
    tool_round: ToolRound | None, approvals: Mapping[str, RecordedApproval]
) -> list[tuple[str, ApprovalAnswer]]:
    """Decisions recorded in the store (by another process) for calls still undecided.

    A denial denies, with its recorded reason; an approval counts for the
    digest of the call's own input, or of the edited input recorded with it
    (then the call runs with that input). Any other approval (recorded for
    other input, with no edit kept) leaves the call pending, and the host's
    own decision is checked against the recorded one.
    """
    if tool_round is None:
        return []
    decisions: list[tuple[str, ApprovalAnswer]] = []
    for call in tool_round.calls:
        recorded = approvals.get(call.call.id)
        if recorded is None or not call.undecided:
            continue
        name = call.call.name
        if not recorded.approved:
            reason = recorded.reason or "approval denied by a decision recorded in the store"
            decisions.append((call.call.id, ApprovalAnswer.deny(reason)))
        elif recorded.input_digest == input_digest(name, call.request.input):
            decisions.append((call.call.id, ApprovalAnswer.approve()))
        elif recorded.edited_input is not None and recorded.input_digest == input_digest(
            name, recorded.edited_input
        ):
            decisions.append((call.call.id, ApprovalAnswer.approve_with(recorded.edited_input)))
    return decisions


async def load(store: SessionStore | None, session_id: str) -> StoredSession:
    """The latest stored state of ``session_id`` (document, version, calls in doubt, decisions)."""
    if store is None:
        raise InvalidStateError(
            f"cannot resume session {session_id!r} by id: this agent has no store; "
            "build it with .store(store) or pass the checkpoint document"
        )
    stored = await store.load(session_id)
    if stored is None:
        raise CheckpointError(
            f"cannot resume session {session_id!r}: the store has no checkpoint for it"
        )
    return stored
