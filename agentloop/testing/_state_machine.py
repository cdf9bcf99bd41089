"""``AgentStateMachine``: a hypothesis rule-based state machine over a ``LoopDriver``.

The machine owns the model (a ``ScriptedModel`` fed with random replies),
the cancellation controller and two observers; a subclass supplies the rest
of the agent in :meth:`AgentStateMachine.configure_agent`. Rules call
``next()`` and take random host actions; invariants check after every step
that each model request was valid, every call has exactly one result, and
the transcript observer saw every item, in order.

The driver runs in a long-lived event loop behind an anyio blocking portal
(``backend`` picks asyncio or trio), so background tasks survive between
steps; async resources such as an ``AsyncTaskManager`` are entered in that
loop for the machine's lifetime (:meth:`AgentStateMachine.enter_async_context`).
Hypothesis draws happen on the test thread only.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, ExitStack
from functools import partial
from typing import Any, ClassVar, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import hypothesis
from hypothesis import HealthCheck
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ..core._cancellation import CancellationController
from ..core._delta import AppendText, BeginPart
from ..core._errors import IdleLoopWarning, InvalidStateError
from ..core._items import FinishReason, Item, ItemKind, PartKind, ToolResultPart
from ..core._tool_spec import ToolSpec
from ..core._transcript import find_violation, has_pending_input
from ..loop._agent import Agent, AgentBuilder
from ..loop._driver import LoopDriver
from ..loop._state import DriverState
from ..loop._steps import AfterToolResult, ApprovalRequest, AwaitingInput, Finished, Step
from ..model._protocol import TurnRequest
from ..model._session_config import SessionConfig
from ..tools._executor import BasicToolExecutor
from ..tools._registry import ToolRegistry
from ._actions import (
    Approve,
    ApproveWith,
    Cancel,
    CancelPoint,
    Continue,
    DenyCall,
    HostAction,
    Interject,
    Submit,
)
from ._assertions import format_transcript, violation_report
from ._mutator_checks import bounded_shrinking
from ._probes import (
    PROBE_TOOL_NAME,
    _is_interrupted,
    _ProbeMutator,
    _Probes,
    _ProbeTool,
    _Recorder,
    _with_probe_call,
)
from ._replay import ReplayScript
from ._replies import Reply, call, hang, text
from ._scripted import ScriptedModel
from ._tool_strategies import (
    _call_replies,
    _choices,
    _inputs,
    host_actions,
    model_replies,
    tool_inputs,
)

__all__ = ["PROBE_TOOL_NAME", "AgentStateMachine"]

_T = TypeVar("_T")

_SETTLE_CHECKPOINTS = 5
"""Checkpoints after each step, so tasks the step just started run their first slice."""


_STRATEGIES: dict[tuple[str, str], st.SearchStrategy[Any]] = {}
"""Strategies built from tool specs, reused across examples (building them is slow)."""


class AgentStateMachine(RuleBasedStateMachine):
    """Drives your agent with random model replies, host actions and cancellations.

    Subclass it, override :meth:`configure_agent` to add your tools,
    permission checker, mutators or task manager (enter an ``AsyncTaskManager``
    with :meth:`enter_async_context`), and collect ``MyMachine.TestCase`` (or
    call ``MyMachine.run(backend="trio")``). Do not replace the model or the
    cancellation handle: the machine owns them. Set ``probes = False`` to keep
    the probe tool and mutator out of your agent (``CancelPoint.TOOL`` and
    ``MUTATOR`` then never fire).
    """

    backend: ClassVar[str] = "asyncio"
    probes: ClassVar[bool] = True
    step_timeout: ClassVar[float] = 10.0
    shrink_seconds: ClassVar[float] = 20.0
    """How long hypothesis may shrink a failing run (``run()`` and ``TestCase``) before it
    reports the smallest failing run found so far."""
    replay: ClassVar[ReplayScript | None] = None
    """A recorded session (:meth:`ReplayScript.from_session`): a model request the
    recording has gets the recorded reply, any other the random one drawn for the step."""

    def configure_agent(self, builder: AgentBuilder) -> AgentBuilder:
        """Add your components to ``builder`` (model and cancellation are already set)."""
        return builder

    def enter_async_context(self, manager: AbstractAsyncContextManager[_T]) -> _T:
        """Enter ``manager`` in the machine's event loop until :meth:`teardown`; return its value.

        For resources that must stay entered while the agent runs, such as an
        ``AsyncTaskManager`` (call it from :meth:`configure_agent`). They are
        left in reverse order, before the event loop stops.
        """
        return self._resources.enter_context(self.portal.wrap_async_context_manager(manager))

    async def settle(self) -> None:
        """Awaited in the event loop before each ``next()``; the default does nothing.

        Wait here for work the driver does not wait for, such as background
        tool calls, so that what a step returns depends only on what hypothesis
        drew: steps that differ between replays of the same draws make
        hypothesis fail with ``FlakyStrategyDefinition``.
        """

    def session_config(self) -> SessionConfig:
        """The session to start (override for limits or cache settings)."""
        return SessionConfig("agent-state-machine")

    def approve_inputs(self, request: ApprovalRequest) -> st.SearchStrategy[Any]:
        """Edited inputs for approve-with: valid for the tool's schema, or arbitrary objects."""
        spec = next((s for s in self.tool_specs() if s.name == request.tool_name), None)
        anything = st.dictionaries(st.sampled_from(["path", "value"]), st.text(max_size=8))
        return anything if spec is None else tool_inputs(spec) | anything

    @classmethod
    def run(
        cls,
        *,
        backend: str | None = None,
        settings: hypothesis.settings | None = None,
        max_examples: int | None = None,
        seed: int | None = None,
    ) -> None:
        """Run the machine as a test now (on ``backend`` if given).

        ``settings`` (default :data:`DEFAULT_SETTINGS`; ``stateful_step_count``,
        phases, deadline, ...) and ``max_examples`` tune hypothesis; ``seed``
        makes the run repeatable. Shrinking a failure stops after
        ``shrink_seconds``.
        """
        machine = cls if backend is None else type(cls.__name__, (cls,), {"backend": backend})
        chosen = settings or DEFAULT_SETTINGS
        if max_examples is not None:
            chosen = hypothesis.settings(chosen, max_examples=max_examples)

        with bounded_shrinking(cls.shrink_seconds):
            if seed is None:
                run_state_machine_as_test(machine, settings=chosen)
            else:
                # @seed must sit on the @given test the machine runs as.
                hypothesis.seed(seed)(get_state_machine_test(machine, settings=chosen))()

    @classmethod
    @functools.cache
    def _to_test_case(cls) -> Any:
        # hypothesis's TestCase, with shrinking bounded like run()'s.
        base: Any = super()._to_test_case()

        def run_test(self: Any) -> None:
            with bounded_shrinking(cls.shrink_seconds):
                base.runTest(self)

        for name in ("is_hypothesis_test", "_hypothesis_state_machine_class"):
            if hasattr(base.runTest, name):
                setattr(run_test, name, getattr(base.runTest, name))
        bounded = type(base.__name__, (base,), {"runTest": run_test})
        bounded.__qualname__ = base.__qualname__
        return bounded

    def __init__(self) -> None:
        super().__init__()
        self.controller = CancellationController()
        self.model = ScriptedModel(self._answer, call_id_prefix="sm-call-")
        self.recorder = _Recorder()
        self._probes = _Probes(self.controller)
        self._reply: Reply | None = None
        self._bad_requests: list[str] = []
        self._pending: Step | None = None
        self._last_approval: ApprovalRequest | None = None
        self._expect_cancelled = False
        self._portal_cm = anyio.from_thread.start_blocking_portal(self.backend)
        self.portal = self._portal_cm.__enter__()
        self._resources = ExitStack()
        try:
            builder = Agent.builder().model(self.model).cancellation(self.controller.handle())
            builder = self.configure_agent(builder)
            if self.probes:
                builder.add_tool_source(
                    ToolRegistry("agentloop-probes").with_tool(_ProbeTool(self._probes))
                ).mutator(_ProbeMutator(self._probes))
            builder.transcript_observer(self.recorder).observer(self.recorder)
            self.agent = builder.build()
            self.driver: LoopDriver = self.portal.call(self.agent.start, self.session_config())
        except BaseException:
            self.teardown()
            raise
        self.initial_transcript = list(self.agent.transcript)
        self._pending = AwaitingInput(self.driver.session_id, driver=self.driver)

    def teardown(self) -> None:
        """Leave the entered async resources, then stop the event loop thread."""
        try:
            self._resources.close()
        finally:
            self._portal_cm.__exit__(None, None, None)

    # -- the machine's model ---------------------------------------------------------------

    def tool_specs(self) -> list[ToolSpec]:
        """The specs the agent advertises now (the model's replies call these)."""
        executor = self.agent.tool_executor or BasicToolExecutor(self.agent.tool_sources)
        return executor.specs()

    def _answer(self, request: TurnRequest) -> Reply:
        transcript = list(request.transcript)
        violation = find_violation(transcript)
        if violation is not None:
            self._bad_requests.append(
                f"model request {len(self.model.requests)} ({request.turn_id}) broke the "
                "transcript invariant: " + violation_report(transcript, violation)
            )
        elif not has_pending_input(transcript):
            self._bad_requests.append(
                f"model request {len(self.model.requests)} ({request.turn_id}) ends with "
                f"nothing to answer (tail rule: the last item must be user, tool or "
                f"notification input):\n{format_transcript(transcript[-3:])}"
            )
        partial = (BeginPart("text-0", PartKind.TEXT), AppendText("text-0", "partial"))
        if self._probes.take(CancelPoint.MODEL):
            self.controller.interrupt()
            return hang(*partial)
        if self._probes.take(CancelPoint.HOST):
            assert self._probes.host_scope is not None
            self._probes.host_scope.cancel()
            return hang(*partial)
        reply, self._reply = self._reply, None
        if self.replay is not None and (recorded := self.replay.reply_for(request)) is not None:
            return recorded
        return reply or text("done")

    # -- rules -----------------------------------------------------------------------------

    @precondition(lambda self: self._pending is None)
    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        """Call ``next()``; a model call it makes gets a reply drawn now."""
        self._reply = data.draw(self._reply_strategy(), label="reply")
        self._advance()

    @precondition(lambda self: self._pending is not None)
    @rule(data=st.data())
    def act(self, data: st.DataObject) -> None:
        """Take a random host action fitting the last step (``Continue`` does nothing)."""
        assert self._pending is not None
        self.apply(data.draw(self._action_strategy(self._pending), label="action"))

    @precondition(lambda self: isinstance(self._pending, ApprovalRequest))
    @rule()
    def submit_during_approval_is_refused(self) -> None:
        """Submitting input while an approval is pending raises and changes nothing."""
        before, state = self.driver.snapshot(), self.driver.state
        message = ""
        try:
            self.driver.submit_input([Item.text(ItemKind.USER, "too early")])
        except InvalidStateError as error:
            message = str(error)
        assert "in state AWAITING_APPROVAL" in message, f"expected a refusal, got {message!r}"
        assert self.driver.snapshot() == before
        assert self.driver.state is state

    def apply(self, action: HostAction) -> None:
        """Apply one host action to the driver and the pending step."""
        step = self._pending
        self._pending = None
        if isinstance(action, Submit | Interject):
            self.driver.submit_input(list(action.items))
        elif isinstance(action, Approve | ApproveWith | DenyCall):
            assert isinstance(step, ApprovalRequest)
            if isinstance(action, Approve):
                step.approve()
            elif isinstance(action, ApproveWith):
                step.approve_with(action.input)
            else:
                step.deny(action.reason)
        elif isinstance(action, Cancel):
            if action.point.is_immediate:
                self.portal.call(self.controller.interrupt)
                self._expect_cancelled = True
            else:
                self._probes.armed = action.point
        else:
            assert isinstance(action, Continue)

    def _reply_strategy(self) -> st.SearchStrategy[Reply]:
        specs = self.tool_specs()
        armed = self._probes.armed is CancelPoint.TOOL and self.probes
        key = ("reply-probe" if armed else "reply", repr(specs))
        if key not in _STRATEGIES:
            # Three kinds of answer and, twice weighted, tool-call rounds (2 in 5);
            # while a tool cancellation is armed, also rounds that call the probe.
            choices = _choices(specs)
            rounds = _call_replies(choices, max_parallel=3, invalid_calls=True)
            strategies = [model_replies(specs, calls=False), rounds, rounds]
            if armed:
                one = st.sampled_from(choices).flatmap(
                    lambda choice: choice[1].map(partial(call, choice[0]))
                )
                strategies.append(
                    st.builds(_with_probe_call, st.lists(one, max_size=2), st.integers(0, 2))
                )
            _STRATEGIES[key] = st.one_of(strategies)
        return _STRATEGIES[key]

    def _action_strategy(self, pending: Step) -> st.SearchStrategy[HostAction]:
        if not isinstance(pending, ApprovalRequest):
            key: tuple[str, str] = ("action", type(pending).__name__)
            if key not in _STRATEGIES:
                actions = host_actions(type(pending))
                if isinstance(pending, AwaitingInput | Finished):  # mostly start a turn
                    submit = st.builds(Submit, _inputs())
                    actions = st.one_of(actions, submit, submit)
                _STRATEGIES[key] = actions
            return _STRATEGIES[key]
        if type(self).approve_inputs is not AgentStateMachine.approve_inputs:
            return host_actions(pending, approve_inputs=self.approve_inputs(pending))
        spec = next((s for s in self.tool_specs() if s.name == pending.tool_name), None)
        key = ("approval", repr(spec))
        if key not in _STRATEGIES:
            _STRATEGIES[key] = host_actions(pending, approve_inputs=self.approve_inputs(pending))
        return _STRATEGIES[key]

    async def _next_in_host_scope(self) -> Step | None:
        with anyio.fail_after(self.step_timeout):
            await self.settle()
        self._probes.stepping = True
        try:
            with (
                anyio.fail_after(self.step_timeout),
                anyio.CancelScope() as scope,
                warnings.catch_warnings(),
            ):
                # Stepping an idle driver is one of the host's drawn actions, not a bug.
                warnings.simplefilter("ignore", IdleLoopWarning)
                self._probes.host_scope = scope
                return await self.driver.next()
            return None
        finally:
            self._probes.stepping = False
            for _ in range(_SETTLE_CHECKPOINTS):
                await anyio.lowlevel.checkpoint()

    def _advance(self) -> None:
        expect_cancelled, self._expect_cancelled = self._expect_cancelled, False
        self._probes.fired = self._probes.fired_late = None
        try:
            step = self.portal.call(self._next_in_host_scope)
        except TimeoutError:
            raise AssertionError(
                f"settle() or driver.next() did not return within {self.step_timeout} s (state "
                f"{self.driver.state}); transcript:\n{format_transcript(self._transcript())}"
            ) from None
        fired = self._probes.fired
        if step is None:
            assert fired is CancelPoint.HOST, "next() was cancelled but no host probe fired"
            assert self.driver.state is DriverState.IDLE, self.driver.state
            self._assert_ends_interrupted("host cancellation")
            self._pending = AwaitingInput(self.driver.session_id, driver=self.driver)
            return
        if expect_cancelled or fired is not None:
            reason = f"an interrupt at {fired or 'the pending interrupt'}"
            assert isinstance(step, Finished), f"after {reason}, next() returned {step!r}"
            assert step.result.finish_reason is FinishReason.CANCELLED, (
                f"after {reason}, the turn finished {step.result.finish_reason}"
            )
            self._assert_ends_interrupted(reason)
        if isinstance(step, ApprovalRequest):
            self._last_approval = step
        if self._probes.fired_late is not None and isinstance(
            step, ApprovalRequest | AfterToolResult
        ):
            # A probe call still running beside the approval (or detached) interrupted
            # the open turn after next() returned: the next next() must finish it.
            self._expect_cancelled = True
            self._pending = None
            return
        self._pending = step

    def _transcript(self) -> list[Item]:
        return list(self.driver.snapshot().transcript)

    def _assert_ends_interrupted(self, reason: str) -> None:
        transcript = self._transcript()
        assert transcript, f"after {reason} the transcript is empty"
        assert _is_interrupted(transcript[-1]), (
            f"after {reason} the transcript does not end with an interrupted assistant item:\n"
            + format_transcript(transcript)
        )

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def model_requests_were_valid(self) -> None:
        """Every transcript the model received passed ``validate_transcript``."""
        if self._bad_requests:
            raise AssertionError(self._bad_requests[0])

    @invariant()
    def every_call_has_one_result(self) -> None:
        """Calls are answered exactly once; at an approval, valid once the round ends.

        While an approval is pending, the round's calls are all unanswered (their
        results are appended together when the round ends): the transcript must
        become valid by answering the calls of its last round, the approval's
        call among them.
        """
        transcript = self._transcript()
        state = self.driver.state
        if state is not DriverState.AWAITING_APPROVAL:
            violation = find_violation(transcript)
            if violation is not None:
                raise AssertionError(
                    f"in state {state}: " + violation_report(transcript, violation)
                )
            return
        last_round = next((item for item in reversed(transcript) if any(item.tool_calls())), None)
        round_calls = [call.id for call in last_round.tool_calls()] if last_round else []
        answered = {result.call_id for item in transcript for result in item.tool_results()}
        open_calls = [call_id for call_id in round_calls if call_id not in answered]
        approval_call = self._last_approval.call_id if self._last_approval else None
        if approval_call not in open_calls:
            raise AssertionError(
                f"in state {state}: the pending approval's call {approval_call} is not an open "
                f"call of the last round ({', '.join(open_calls) or 'none open'}):\n"
                + format_transcript(transcript)
            )
        round_end = Item(ItemKind.TOOL, tuple(ToolResultPart(c, "round end") for c in open_calls))
        ended = [*transcript, round_end]
        violation = find_violation(ended)
        if violation is not None:
            raise AssertionError(
                f"in state {state}, once the round ends: " + violation_report(ended, violation)
            )

    @invariant()
    def observer_saw_every_item(self) -> None:
        """The transcript observer's items are the transcript's, in order, none lost."""
        transcript = self._transcript()
        if self.recorder.rewrites == 0:
            expected: Sequence[Item] = self.initial_transcript + self.recorder.appended
            actual: Sequence[Item] = transcript
        else:  # a mutator rewrote history: what was appended since must be the tail
            expected = self.recorder.since_rewrite
            actual = transcript[len(transcript) - len(expected) :] if expected else []
        if list(actual) != list(expected):
            raise AssertionError(
                "the transcript observer and driver.snapshot() disagree; observed:\n"
                f"{format_transcript(expected)}\ntranscript:\n{format_transcript(transcript)}"
            )


DEFAULT_SETTINGS = hypothesis.settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Settings :meth:`AgentStateMachine.run` uses when given none."""
