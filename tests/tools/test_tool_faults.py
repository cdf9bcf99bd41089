"""Whatever a tool raises, and however its thread ends, the call gets one true result."""

from __future__ import annotations

import asyncio
import threading
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
import sniffio
from tools_support import outcome, results_of, run_one, run_round, user

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
import agentloop.transcript
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


class Raises:
    """A tool that raises what its input names (async, or sync in a thread)."""

    def __init__(self, name: str, error: BaseException, *, sync: bool = False) -> None:
        self.spec = al.ToolSpec(name, "Raises.")
        self.error = error
        if sync:
            self.invoke = self._sync_invoke  # type: ignore[method-assign]

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> Any:
        raise self.error

    def _sync_invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> Any:
        raise self.error


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken")


class BadBoth(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken")

    def __repr__(self) -> str:
        raise ValueError("__repr__ too")


class NotText(Exception):
    def __str__(self) -> Any:
        return 42


@pytest.mark.parametrize("sync", [False, True])
@pytest.mark.parametrize(
    ("error", "text"),
    [
        (BadStr("x"), "BadStr: BadStr('x')"),
        (BadBoth(), "BadBoth (its message cannot be shown: str() and repr() fail)"),
        (NotText(), "NotText: NotText()"),
        (SystemExit(3), "SystemExit: 3"),
        (KeyboardInterrupt(), "KeyboardInterrupt"),
        (GeneratorExit("closing"), "GeneratorExit: closing"),
        (
            BaseExceptionGroup("two", [ValueError("a"), SystemExit(1)]),
            "BaseExceptionGroup: two (2 sub-exceptions)",
        ),
        (RuntimeError("x" * 3000), "RuntimeError: " + "x" * 2000 + "... [1000 more]"),
    ],
)
async def test_anything_a_tool_raises_becomes_its_error_result(
    error: BaseException, text: str, sync: bool
) -> None:
    results = await run_round(
        [Raises("bad", error, sync=sync), al.tool(lambda: "ok", name="fine")],
        [call("bad", {}, id="c1"), call("fine", {}, id="c2")],
    )
    assert [(r.call_id, r.output, r.is_error, outcome(r)) for r in results] == [
        ("c1", f"tool 'bad' failed: {text}", True, "failed"),
        ("c2", "ok", False, None),
    ]


async def test_a_stray_cancellation_from_a_tool_is_not_the_hosts_cancel() -> None:
    if sniffio.current_async_library() == "asyncio":
        stray: BaseException = asyncio.CancelledError("from a cancelled future")
        note = " (a cancellation the host did not ask for)"
    else:  # trio's own Cancelled cannot be raised by tool code; asyncio's is just an error
        stray, note = asyncio.CancelledError("from a cancelled future"), ""
    for sync in (False, True):
        results = await run_round([Raises("bad", stray, sync=sync)], [call("bad", {}, id="c1")])
        assert [(r.output, outcome(r)) for r in results] == [
            (f"tool 'bad' failed: CancelledError: from a cancelled future{note}", "failed")
        ]


async def test_a_tool_awaiting_a_cancelled_task_does_not_cancel_the_turn() -> None:
    if sniffio.current_async_library() != "asyncio":
        pytest.skip("asyncio tasks")

    @al.tool
    async def waits_on_a_task() -> str:
        """Awaits a task someone else cancelled."""
        task = asyncio.get_running_loop().create_task(asyncio.sleep(10))
        await asyncio.sleep(0)
        task.cancel()
        return str(await task)

    (result,) = await run_round([waits_on_a_task], [call("waits_on_a_task", {}, id="c1")])
    assert (result.output, outcome(result)) == (
        "tool 'waits_on_a_task' failed: CancelledError (a cancellation the host did not ask for)",
        "failed",
    )


def _slow_writer(target: Path, delay: float) -> al.tools.FunctionTool[..., str]:
    @al.tool(name="slow_write")
    def slow_write() -> str:
        """Sleeps, then writes a file: a side effect a thread finishes on its own."""
        time.sleep(delay)
        target.write_text("written")
        return "wrote the file"

    return slow_write


async def _driver_for(tool: al.Tool, executor_options: dict[str, Any], **limits: Any) -> Any:
    registry = al.ToolRegistry().with_tool(tool)
    executor = al.tools.BasicToolExecutor([registry], **executor_options)
    model = al.testing.ScriptedModel([tool_calls(call("slow_write", {}, id="c1")), "done"])
    return await (
        al.Agent.builder()
        .model(model)
        .tool_executor(executor)
        .input([user("go")])
        .build()
        .start(al.SessionConfig("s1", limits=al.LoopLimits(**limits)))
    )


async def _appears(target: Path) -> bool:
    """Whether the file a worker thread writes appears (polled: no event tells us)."""
    path = anyio.Path(target)
    with anyio.move_on_after(10):
        while not await path.exists():  # noqa: ASYNC110
            await anyio.sleep(0.01)
    return await path.exists()


async def test_a_timed_out_thread_is_answered_in_doubt_and_really_may_complete(
    tmp_path: Path,
) -> None:
    target = tmp_path / "side-effect"
    driver = await _driver_for(_slow_writer(target, 0.3), {"thread_grace": 0}, tool_timeout=0.05)
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    (result,) = results_of(driver)
    assert (result.output, outcome(result)) == (
        "tool 'slow_write' timed out after 0.05 s while its code ran in a worker thread, "
        "which cannot be stopped: the work may still complete, and its result will not be "
        "reported (waited 0 s for it)",
        "in_doubt",
    )
    assert not target.exists()  # not yet ...
    assert await _appears(target)  # ... and then it did complete, as the result warned


async def test_a_timed_out_thread_that_finishes_within_the_grace_reports_its_result(
    tmp_path: Path,
) -> None:
    target = tmp_path / "side-effect"
    driver = await _driver_for(_slow_writer(target, 0.2), {"thread_grace": 10}, tool_timeout=0.05)
    await driver.run_until_blocked()
    (result,) = results_of(driver)
    assert (result.output, result.is_error, outcome(result)) == ("wrote the file", False, None)
    assert target.read_text() == "written"  # the result says what really happened


@pytest.mark.parametrize("manager", ["simple", "async"])
async def test_a_cancelled_turn_does_not_claim_a_running_thread_was_cancelled(
    tmp_path: Path, manager: str
) -> None:
    target = tmp_path / "side-effect"
    started = threading.Event()
    release = threading.Event()

    @al.tool(name="slow_write")
    def slow_write() -> str:
        """Waits to be released, then writes a file."""
        started.set()
        release.wait(10)
        target.write_text("written")
        return "wrote the file"

    controller = al.CancellationController()
    registry = al.ToolRegistry().with_tool(slow_write)
    steps: list[al.Step] = []
    async with AsyncExitStack() as stack:
        tasks: Any = al.tasks.SimpleTaskManager()
        if manager == "async":
            tasks = await stack.enter_async_context(al.tasks.AsyncTaskManager())
        agent = (
            al.Agent.builder()
            .model(al.testing.ScriptedModel([tool_calls(call("slow_write", {}, id="c1")), "done"]))
            .tool_executor(al.tools.BasicToolExecutor([registry], thread_grace=0.05))
            .task_manager(tasks)
            .cancellation(controller.handle())
            .input([user("go")])
            .build()
        )
        driver = await agent.start("s1")

        async def drive() -> None:
            steps.append(await driver.next())

        async with anyio.create_task_group() as group:
            group.start_soon(drive)
            await anyio.to_thread.run_sync(started.wait, 10)
            controller.interrupt()
    release.set()
    (step,) = steps
    assert isinstance(step, al.Finished)
    assert step.result.finish_reason is al.FinishReason.CANCELLED
    (result,) = results_of(driver)
    assert (result.output, outcome(result)) == (
        "tool 'slow_write' was cancelled while its code ran in a worker thread, which cannot "
        "be stopped: the work may still complete, and its result will not be reported "
        "(waited 0.05 s for it)",
        "in_doubt",
    )
    assert await _appears(target)
    al.transcript.validate_transcript(driver.snapshot().transcript)


class ZeroTimeout:
    spec = al.ToolSpec("zero", "Has a zero timeout.")
    timeout: Any = 0

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return "ran"


@pytest.mark.parametrize("value", [0, -1, float("nan"), "5", True])
async def test_a_timeout_of_zero_or_garbage_is_refused_not_unlimited(value: Any) -> None:
    tool = ZeroTimeout()
    tool.timeout = value
    (result,) = await run_round([tool], [call("zero", {}, id="c1")])
    assert (result.output, outcome(result)) == (
        f"tool 'zero' was not run: its timeout attribute is {value!r}; set a positive number "
        "of seconds or None",
        "failed",
    )
    with pytest.raises(ValueError, match="tool_timeout must be") as caught:
        al.tools.BasicToolExecutor(tool_timeout=value)
    assert str(caught.value) == (
        "BasicToolExecutor: tool_timeout must be a positive number of seconds or None (no "
        f"limit), got {value!r}"
    )
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        al.tool(timeout=value, name="x")(lambda: "x")


async def test_thread_grace_must_be_finite_and_not_negative() -> None:
    for value in (-1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="thread_grace must be a finite number of seconds"):
            al.tools.BasicToolExecutor(thread_grace=value)
    assert (await run_one(al.tool(lambda: "ok", name="fine"), {})).output == "ok"
