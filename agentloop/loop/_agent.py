"""``Agent`` (an immutable recipe) and ``AgentBuilder`` (how to write one)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, cast, overload

import attrs
from typing_extensions import TypeVar

from ..core._cancellation import CancellationHandle
from ..core._errors import InvalidInputError, InvalidStateError
from ..core._items import Item
from ..core._transcript import find_violation
from ..model._protocol import ModelAdapter
from ..model._session_config import LoopLimits, SessionConfig
from ..output._spec import DEFAULT_OUTPUT_RETRIES, OutputMode, OutputSpec, output_spec
from ..permissions._checker import CheckerLike, as_checker
from ..permissions._requests import ALLOW_ALL, PermissionChecker
from ..tasks._protocol import TaskManager
from ..tasks._simple import SimpleTaskManager
from ..tools._executor import BasicToolExecutor, ToolExecutor
from ..tools._registry import ToolSource
from ._agent_tool import AgentTool, ChildRun
from ._checkpoint import parse
from ._driver import LoopDriver, restore_driver
from ._driver_parts import DriverParts
from ._events import LoopObserver, RunStarted, TranscriptObserver
from ._mutators import LoopMutator
from ._output import session_config
from ._persistence import load, recorded_decisions
from ._session_history import SavedStep, SessionHistory
from ._session_store import Lease, SessionStore, StoredSession
from ._state import DriverState

__all__ = ["Agent", "AgentBuilder"]

DepsT = TypeVar("DepsT", default=Any)
OutT = TypeVar("OutT", default=Any)
NewDepsT = TypeVar("NewDepsT")
NewOutT = TypeVar("NewOutT")


@attrs.frozen
class Agent(Generic[DepsT, OutT]):
    """What a session is made of: model, tools, policies, observers, starting transcript.

    Build one with :meth:`builder`; start sessions with :meth:`start`. The type
    parameters are the dependencies tools receive (``resources``, read by tools as
    ``ToolContext[DepsT].resources``) and the structured output every turn answers
    with (``output``; ``None`` without one).
    """

    model: ModelAdapter
    tool_sources: tuple[ToolSource, ...] = ()
    tool_executor: ToolExecutor | None = None
    task_manager: TaskManager | None = None
    permissions: PermissionChecker = ALLOW_ALL
    resources: DepsT = None  # type: ignore[assignment]
    cancellation: CancellationHandle | None = None
    mutators: tuple[LoopMutator, ...] = ()
    observers: tuple[LoopObserver, ...] = ()
    transcript_observers: tuple[TranscriptObserver, ...] = ()
    transcript: tuple[Item, ...] = ()
    input: tuple[Item, ...] = ()
    store: SessionStore | None = None
    output: OutputSpec[OutT] | None = None
    ask_in_doubt: bool = False
    """A call a restore leaves in doubt that its tool cannot reconcile surfaces as a
    ``CallInDoubt`` step (else it is answered ``in_doubt``)."""

    @staticmethod
    def builder() -> AgentBuilder[Any, None]:
        """A fresh builder."""
        return AgentBuilder()

    async def start(self, config: SessionConfig | str, *, lease: Lease | None = None) -> LoopDriver:
        """Open a model session and return a driver for it.

        ``config`` may be a session id string for the defaults. With a store,
        the first save replaces whatever the store holds for the session (use
        :meth:`resume` to continue one); every later save is based on the
        version the previous one returned. ``lease`` (from ``store.acquire``)
        fences every save and claim with its token.
        """
        if isinstance(config, str):
            config = SessionConfig(config)
        if not isinstance(config, SessionConfig):
            raise InvalidInputError(f"Agent.start expects a SessionConfig or a str, got {config!r}")
        driver = LoopDriver(await self._parts(config), self.transcript, self.input)
        driver._runner.journal.attach(version=None, lease=lease)
        for observer in self.observers:
            observer.handle_event(RunStarted(config.session_id))
        return driver

    async def resume(
        self,
        checkpoint: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        started_calls: Iterable[str] = (),
        lease: Lease | None = None,
    ) -> LoopDriver:
        """A driver continuing a checkpointed session with this agent's parts.

        Pass a ``checkpoint`` document (from ``driver.checkpoint()``), or a
        ``session_id`` to load the latest one from the agent's store. Calls
        recorded as started without a result (``started_calls``, or the
        store's record) are answered as in doubt, never run again. Raises
        ``CheckpointError`` for a document that cannot be restored exactly.

        Resumed by ``session_id``, every save is based on the loaded version
        (a save after another writer's raises ``StaleSessionError``), and
        approval decisions recorded in the store by another process are
        applied (a denial, or an approval of the call's own input). ``lease``
        (from ``store.acquire``/``acquire_ready``, for this session) fences
        every save and claim with its token: ``LeaseLostError`` once a newer
        lease was granted.
        """
        if (checkpoint is None) == (session_id is None):
            raise InvalidInputError(
                "Agent.resume expects either a checkpoint document or session_id=..., "
                f"got {'both' if checkpoint is not None else 'neither'}"
            )
        started = frozenset(started_calls)
        stored: StoredSession | None = None
        if checkpoint is None:
            assert session_id is not None
            stored = await load(self.store, session_id)
            checkpoint = stored.checkpoint
            started |= stored.started_calls
        restored = parse(checkpoint)
        driver = await restore_driver(await self._parts(restored.config), restored, started)
        _attach_stored(driver, stored, lease)
        for observer in self.observers:
            observer.handle_event(RunStarted(restored.config.session_id))
        return driver

    async def history(self, session_id: str) -> list[SavedStep]:
        """The steps the agent's store keeps of ``session_id``, oldest first: each save
        (step number, version, time, state, status, summary) that :meth:`fork` and
        :meth:`rewind` can go back to."""
        return await self._history_store("list the history of", session_id).history(session_id)

    async def fork(
        self, session_id: str, *, at: int | None = None, new_session_id: str | None = None
    ) -> str:
        """A new session continuing from step ``at`` of ``session_id`` (``None``: its latest
        save); returns the new session's id (``new_session_id``, or a fresh one).

        Resume it with :meth:`resume`: it continues exactly as a restore of that
        step would. Its past is the step's: a call claimed before that save with
        no result is in doubt in the fork; nothing the original did afterwards
        is (its later calls are not in doubt, its recorded approvals do not
        answer the fork's). A call it inherits without a result keeps the
        idempotency key it had in the original. The original is unchanged.
        """
        store = self._history_store("fork", session_id)
        new_id = new_session_id or f"{session_id}-fork-{uuid.uuid4().hex[:12]}"
        await store.fork(session_id, at=at, new_session_id=new_id)
        return new_id

    async def rewind(self, session_id: str, *, to: int, expected_version: int | None = None) -> int:
        """Move ``session_id`` back to step ``to``: that step's document becomes its
        latest save, a new step, so the history is kept and a later step can be
        rewound to again. Returns the new version; resume the session to continue.

        A call the step holds that ran after it (no result there) is in doubt
        again (its tool's ``reconcile`` may settle it), never run twice; the
        claims and decisions of the calls the step does not hold are set aside,
        so the session's next calls are new ones (a rewind forward to a step
        that holds them brings them back). ``expected_version`` refuses the rewind
        (``StaleSessionError``) if the session moved on; a live lease refuses it
        (``LeaseLostError``).
        """
        store = self._history_store("rewind", session_id)
        return await store.rewind(session_id, to=to, expected_version=expected_version)

    def _history_store(self, operation: str, session_id: str) -> SessionHistory:
        store = self.store
        if store is None:
            raise InvalidStateError(
                f"cannot {operation} session {session_id!r}: this agent has no store; "
                "build it with .store(store)"
            )
        if not isinstance(store, SessionHistory):
            raise InvalidStateError(
                f"cannot {operation} session {session_id!r}: the agent's store "
                f"({type(store).__name__}) keeps no step history; use a BackendSessionStore "
                "(every agentloop.store store is one)"
            )
        return store

    def as_tool(
        self,
        name: str,
        description: str,
        *,
        input_description: str = "What to ask the agent, in plain words.",
        limits: LoopLimits | None = None,
        on_run: Callable[[ChildRun], None] | None = None,
    ) -> AgentTool:
        """This agent as a tool of another: each call runs it in a driver of its own
        (session ``<parent session>/<call id>``), nested in the parent's tool round,
        on the call's ``input``; its final answer is the result and its usage counts
        in the parent's. Its approvals and its calls' questions surface at the top
        driver as its own steps (``ChildApprovalRequest``, ``CallQuestion``) with a
        ``path`` naming the calls above it (the parent needs an entered
        ``AsyncTaskManager``; without one, the child's approvals are denied, saying
        why). ``limits`` bound the child's turn; ``on_run`` is told how each run
        ended (``ChildRun``: its transcript, usage and last turn)."""
        return AgentTool(
            self,
            name=name,
            description=description,
            input_description=input_description,
            limits=limits,
            on_run=on_run,
        )

    async def _parts(self, config: SessionConfig) -> DriverParts:
        session = await self.model.start_session(config)
        config = session_config(config, self.output, session)
        return DriverParts(
            config=config,
            session=session,
            executor=self.tool_executor or BasicToolExecutor(self.tool_sources),
            task_manager=_for_session(self.task_manager, config.session_id),
            permissions=self.permissions,
            resources=self.resources,
            cancellation=self.cancellation,
            mutators=self.mutators,
            observers=self.observers,
            transcript_observers=self.transcript_observers,
            store=self.store,
            model_name=_model_name(self.model, session),
            ask_in_doubt=self.ask_in_doubt,
        )


def _model_name(adapter: Any, session: Any) -> str | None:
    for source in (session, adapter):
        name = getattr(source, "model_name", None)
        if isinstance(name, str) and name:
            return name
    return None


def _check_items(method: str, items: Sequence[Item]) -> tuple[Item, ...]:
    if isinstance(items, Item):
        raise InvalidInputError(f"AgentBuilder.{method} expects a list of Items, got one Item")
    checked = tuple(items)
    for position, item in enumerate(checked):
        if not isinstance(item, Item):
            raise InvalidInputError(
                f"AgentBuilder.{method}: element {position} is {type(item).__name__}, not an Item"
            )
    return checked


class AgentBuilder(Generic[DepsT, OutT]):
    """Fluent construction of an :class:`Agent`; ``build()`` checks it is complete."""

    def __init__(self) -> None:
        self._model: ModelAdapter | None = None
        self._sources: list[ToolSource] = []
        self._executor: ToolExecutor | None = None
        self._task_manager: TaskManager | None = None
        self._permissions: PermissionChecker = ALLOW_ALL
        self._resources: Any = None
        self._cancellation: CancellationHandle | None = None
        self._mutators: list[LoopMutator] = []
        self._observers: list[LoopObserver] = []
        self._transcript_observers: list[TranscriptObserver] = []
        self._transcript: tuple[Item, ...] = ()
        self._input: tuple[Item, ...] = ()
        self._store: SessionStore | None = None
        self._output: OutputSpec[Any] | None = None
        self._ask_in_doubt = False

    def model(self, adapter: ModelAdapter) -> AgentBuilder[DepsT, OutT]:
        """The model adapter (required)."""
        self._model = adapter
        return self

    def add_tool_source(self, source: ToolSource) -> AgentBuilder[DepsT, OutT]:
        """Add a tool source; call again to federate (the first source wins a name)."""
        self._sources.append(source)
        return self

    def tool_executor(self, executor: ToolExecutor) -> AgentBuilder[DepsT, OutT]:
        """Replace the default executor (tool sources are then ignored)."""
        self._executor = executor
        return self

    def task_manager(self, manager: TaskManager) -> AgentBuilder[DepsT, OutT]:
        """How tool calls run (default: a fresh ``SimpleTaskManager`` per driver)."""
        self._task_manager = manager
        return self

    def permissions(self, checker: CheckerLike) -> AgentBuilder[DepsT, OutT]:
        """The permission checker (default: allow all); a built-in policy alone is used as
        ``PolicyChain(policy)`` (what it abstains on is allowed)."""
        self._permissions = as_checker(checker, operation="AgentBuilder.permissions")
        return self

    def resources(self, resources: NewDepsT) -> AgentBuilder[NewDepsT, OutT]:
        """A host object tools receive as ``ctx.resources`` (type them
        ``ToolContext[type of resources]``)."""
        self._resources = resources
        return cast("AgentBuilder[NewDepsT, OutT]", self)

    @overload
    def output(
        self,
        target: OutputSpec[NewOutT],
        *,
        mode: OutputMode | str | None = None,
        max_retries: int | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> AgentBuilder[DepsT, NewOutT]: ...
    @overload
    def output(
        self,
        target: type[NewOutT],
        *,
        mode: OutputMode | str | None = None,
        max_retries: int | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> AgentBuilder[DepsT, NewOutT]: ...
    @overload
    def output(
        self,
        target: Any,
        *,
        mode: OutputMode | str | None = None,
        max_retries: int | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> AgentBuilder[DepsT, Any]: ...
    def output(
        self,
        target: Any,
        *,
        mode: OutputMode | str | None = None,
        max_retries: int | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> AgentBuilder[DepsT, Any]:
        """Every turn answers with a validated value of ``target``: an attrs class, a
        dataclass, a ``TypedDict``, a plain type, a JSON schema (a ``dict``) or an
        :class:`~agentloop.OutputSpec`. ``mode`` (``"auto"``, ``"native"``, ``"tool"``)
        forces how the model is asked; ``max_retries`` is how many answers that do not
        validate the model may follow with another (default 2). Raises
        ``InvalidInputError`` for a target that cannot describe an output."""
        if isinstance(target, OutputSpec):
            spec: OutputSpec[Any] = target
            if mode is not None:
                spec = spec.with_mode(OutputMode(mode))
            if max_retries is not None or name is not None or description is not None:
                spec = attrs.evolve(
                    spec,
                    max_retries=spec.max_retries if max_retries is None else max_retries,
                    name=name or spec.name,
                    description=description or spec.description,
                )
        else:
            spec = output_spec(
                target,
                name=name,
                mode=mode if mode is not None else OutputMode.AUTO,
                max_retries=DEFAULT_OUTPUT_RETRIES if max_retries is None else max_retries,
                description=description,
            )
        self._output = spec
        return cast("AgentBuilder[DepsT, Any]", self)

    def cancellation(self, handle: CancellationHandle) -> AgentBuilder[DepsT, OutT]:
        """The handle whose controller's ``interrupt()`` cancels the current turn."""
        self._cancellation = handle
        return self

    def mutator(self, mutator: LoopMutator) -> AgentBuilder[DepsT, OutT]:
        """Add a transcript mutator (they run in the order added)."""
        self._mutators.append(mutator)
        return self

    def observer(self, observer: LoopObserver) -> AgentBuilder[DepsT, OutT]:
        """Add an event observer."""
        self._observers.append(observer)
        return self

    def transcript_observer(self, observer: TranscriptObserver) -> AgentBuilder[DepsT, OutT]:
        """Add an observer of appended transcript items."""
        self._transcript_observers.append(observer)
        return self

    def transcript(self, items: Sequence[Item]) -> AgentBuilder[DepsT, OutT]:
        """Passive prior history (system prompt, an earlier conversation)."""
        self._transcript = _check_items("transcript", items)
        return self

    def input(self, items: Sequence[Item]) -> AgentBuilder[DepsT, OutT]:
        """Input for the first turn, so the first ``next()`` calls the model."""
        self._input = _check_items("input", items)
        return self

    def ask_in_doubt(self, enabled: bool = True) -> AgentBuilder[DepsT, OutT]:
        """Ask the host about a call a restore leaves in doubt (it started and left no
        result) that its tool's ``reconcile`` cannot settle: ``next()`` returns a
        ``CallInDoubt`` to settle, fail or run again. Default: answered ``in_doubt``."""
        if not isinstance(enabled, bool):
            raise InvalidInputError(
                f"AgentBuilder.ask_in_doubt expects a bool, got {type(enabled).__name__}"
            )
        self._ask_in_doubt = enabled
        return self

    def store(self, store: SessionStore) -> AgentBuilder[DepsT, OutT]:
        """Persist sessions: a checkpoint after every step, started calls before they run."""
        if not isinstance(store, SessionStore):
            raise InvalidInputError(
                f"AgentBuilder.store expects a SessionStore, got {type(store).__name__}"
            )
        self._store = store
        return self

    def build(self) -> Agent[DepsT, OutT]:
        """The agent; raises ``InvalidStateError`` if no model was given."""
        if self._model is None:
            raise InvalidStateError(
                "cannot build an Agent: no model adapter was given; call .model(adapter) first"
            )
        violation = find_violation(self._transcript)
        if violation is not None:
            raise InvalidInputError(
                f"cannot build an Agent: the prior transcript is invalid: {violation.message}"
            )
        return Agent(
            model=self._model,
            tool_sources=tuple(self._sources),
            tool_executor=self._executor,
            task_manager=self._task_manager,
            permissions=self._permissions,
            resources=self._resources,
            cancellation=self._cancellation,
            mutators=tuple(self._mutators),
            observers=tuple(self._observers),
            transcript_observers=tuple(self._transcript_observers),
            transcript=self._transcript,
            input=self._input,
            store=self._store,
            output=self._output,
            ask_in_doubt=self._ask_in_doubt,
        )


def _for_session(manager: TaskManager | None, session_id: str) -> TaskManager:
    """The task manager one driver uses: a manager shared by sessions (one with
    ``for_session``, like ``AsyncTaskManager``) gives each driver its own view."""
    if manager is None:
        return SimpleTaskManager()
    view = getattr(manager, "for_session", None)
    return view(session_id) if callable(view) else manager


def _attach_stored(driver: LoopDriver, stored: StoredSession | None, lease: Lease | None) -> None:
    """Base ``driver``'s saves on the stored version and apply the decisions the store
    holds for its pending approvals (recorded by another process)."""
    decisions = []
    if stored is not None and stored.approvals and driver.state is DriverState.AWAITING_APPROVAL:
        turn = driver._core.turn
        decisions = recorded_decisions(turn.round if turn else None, stored.approvals)
    driver._runner.journal.attach(
        version=stored.version if stored is not None else None,
        lease=lease,
        recorded=[call_id for call_id, _ in decisions],
    )
    for call_id, decision in decisions:
        driver.answer_approval_for(call_id, decision)
