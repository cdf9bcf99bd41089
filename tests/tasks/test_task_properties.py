"""A hypothesis-driven host over AsyncTaskManager.

Each example plays a random sequence of host actions (submit rounds mixing
foreground, background, detaching and approval-gated calls; release calls in
any order; interrupt; cancel tasks through the handle; answer approvals) and
checks after every action that the driver's transcript is valid whenever the
driver is at rest and that no task ended twice; at the end every started task
ended exactly once.
"""

from __future__ import annotations

from collections import Counter

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tasks_support import ApproveFsReads, GateTool, StepRunner, user

import agentloop as al
import agentloop.model
import agentloop.tasks
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import Reply, call, tool_calls

pytestmark = pytest.mark.anyio

KINDS = ("fg", "bg", "detach", "read")
ROUTING = al.tasks.RouteByName(
    {"bg": al.tasks.TaskKind.BACKGROUND, "detach": al.tasks.DetachAfter(0)}
)
REST = (al.DriverState.IDLE, al.DriverState.AFTER_TOOL_RESULT, al.DriverState.AWAITING_APPROVAL)

plans = st.lists(st.tuples(st.sampled_from(KINDS), st.booleans()), min_size=1, max_size=4)


def planner(request: al.model.TurnRequest) -> Reply | str:
    """Calls the tools a ``plan:`` user message lists; otherwise answers "ok"."""
    last = request.transcript[-1]
    if last.kind is al.ItemKind.USER and last.text_content.startswith("plan:"):
        steps = [entry.split("!") for entry in last.text_content[5:].split(",")]
        return tool_calls(*(call(kind, {"fail": len(parts) > 1}) for kind, *parts in steps))
    return "ok"


class Host:
    """The system under test plus what the test saw of it."""

    def __init__(self, group: anyio.abc.TaskGroup, manager: al.tasks.AsyncTaskManager) -> None:
        self.group = group
        self.manager = manager
        self.handle = manager.handle()
        self.controller = al.CancellationController()
        self.tools = {kind: GateTool(kind, guarded=kind == "read") for kind in KINDS}
        self.runner: StepRunner | None = None
        self.last_step: al.Step | None = None
        self.started: list[str] = []
        self.ended: Counter[str] = Counter()
        self.driver: al.LoopDriver

    async def start(self) -> None:
        registry = al.ToolRegistry()
        for tool in self.tools.values():
            registry.add(tool)
        builder = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel(planner))
            .add_tool_source(registry)
            .task_manager(self.manager)
            .permissions(ApproveFsReads())
            .cancellation(self.controller.handle())
        )
        self.driver = await builder.build().start("prop")

    # -- actions ---------------------------------------------------------------------

    def step(self) -> None:
        assert self.runner is None
        self.runner = StepRunner(self.group, self.driver)

    def submit(self, plan: list[tuple[str, bool]]) -> None:
        text = ",".join(kind + ("!" if fail else "") for kind, fail in plan)
        self.driver.submit_input([user("plan:" + text)])
        self.step()

    def answer(self, approve: bool) -> None:
        step = self.last_step
        assert isinstance(step, al.ApprovalRequest)
        decision = al.ApprovalAnswer.approve() if approve else al.ApprovalAnswer.deny("no")
        refused: str | None = None
        try:
            self.driver.answer_approval_for(step.call_id, decision)
        except al.InvalidStateError as error:  # an interrupt came first
            refused = str(error)
        assert refused is None or refused.endswith("was cancelled; call next() to finish it")
        self.step()

    def blocked_calls(self) -> list[tuple[str, str]]:
        return sorted(
            (kind, call_id)
            for kind, tool in self.tools.items()
            for call_id in tool.invoked
            if not tool.released(call_id) and call_id not in tool.cancelled and not tool.opened
        )

    # -- observation -------------------------------------------------------------------

    async def settle(self) -> None:
        for _ in range(10):  # usually enough; spares asyncio's 0.1 s polling below
            await anyio.lowlevel.checkpoint()
        await anyio.wait_all_tasks_blocked()
        if self.runner is not None and self.runner.done.is_set():
            self.last_step = await self.runner.result()
            self.runner = None
        await self.read_events()
        if self.runner is None:
            self.check_transcript()

    def check_transcript(self) -> None:
        """Valid at rest; while approvals wait, an approval-gated call is unanswered,
        and so may be the other calls of its round (results land when it ends)."""
        transcript = self.driver.snapshot().transcript
        state = self.driver.state
        assert state in REST
        if state is not al.DriverState.AWAITING_APPROVAL:
            al.transcript.validate_transcript(transcript)
            return
        violation = al.transcript.find_violation(transcript)
        assert violation is not None
        assert violation.kind == "unanswered"
        names = {c.id: c.name for item in transcript for c in item.tool_calls()}
        unanswered = {names[call_id] for call_id in violation.call_ids}
        assert "read" in unanswered
        assert unanswered <= set(self.tools)  # the others' results land when the round ends
        assert isinstance(self.last_step, al.ApprovalRequest)
        assert self.last_step.call_id in violation.call_ids

    async def read_events(self) -> None:
        while True:
            event: al.tasks.TaskEvent | None = None
            # A buffered event is returned without waiting; the zero timeout
            # only ends the wait once the buffer is empty.
            with anyio.move_on_after(0):
                event = await self.handle.next_event()
            if event is None:
                return
            task_id = event.task.task_id
            if isinstance(event, al.tasks.TaskStarted):
                assert task_id not in self.started
                self.started.append(task_id)
            elif not isinstance(event, al.tasks.TaskDetached):
                assert task_id in self.started
                self.ended[task_id] += 1
                assert self.ended[task_id] == 1, f"{task_id} ended twice: {event}"

    # -- ending --------------------------------------------------------------------------

    async def finish(self) -> None:
        """Release everything, answer every approval, drain background results."""
        for tool in self.tools.values():
            tool.open_all()
        for _ in range(50):
            await self.settle()
            if self.runner is not None:
                continue
            state = self.driver.state
            if state is al.DriverState.AWAITING_APPROVAL:
                self.answer(approve=True)
            elif state is al.DriverState.AFTER_TOOL_RESULT:
                self.step()
            elif await self.handle.list_running():
                continue
            else:
                self.step()
                await self.settle()
                assert self.runner is None
                if isinstance(self.last_step, al.Finished | al.AwaitingInput):
                    return
        raise AssertionError("the host did not come to rest")


# One host action: (which action, which target, the plan if it submits, approve?).
# Indices are taken modulo the choices valid at that moment, so every script is
# playable and shrinks towards "the first valid choice".
actions = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 15), plans, st.booleans()),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.filterwarnings("ignore::agentloop.IdleLoopWarning")  # idle steps are drawn
@given(script=actions)
async def test_random_hosts_keep_the_transcript_valid_and_end_every_task_once(
    script: list[tuple[int, int, list[tuple[str, bool]], bool]],
) -> None:
    async with (
        al.tasks.AsyncTaskManager(routing=ROUTING) as manager,
        anyio.create_task_group() as group,
    ):
        host = Host(group, manager)
        await host.start()
        for which, target, plan, approve in script:
            choices = ["interrupt"]
            if host.runner is None:
                if host.driver.state is al.DriverState.AWAITING_APPROVAL:
                    choices.append("answer")
                else:
                    choices += ["submit", "next"]
            blocked = host.blocked_calls()
            if blocked:
                choices.append("release")
            running = await host.handle.list_running()
            if running:
                choices.append("cancel")
            action = choices[which % len(choices)]
            if action == "interrupt":
                host.controller.interrupt()
            elif action == "answer":
                host.answer(approve)
            elif action == "submit":
                host.submit(plan)
            elif action == "next":
                host.step()
            elif action == "release":
                kind, call_id = blocked[target % len(blocked)]
                host.tools[kind].release(call_id)
            else:
                await host.handle.cancel(running[target % len(running)].task_id)
            await host.settle()
        await host.finish()
    await host.read_events()
    assert sorted(host.ended) == sorted(host.started)
    assert set(host.ended.values()) <= {1}
    al.transcript.validate_transcript(host.driver.snapshot().transcript)
