"""Property-test an agent on AsyncTaskManager with agentloop.testing (docs/testing.md)."""

from typing import Any

import anyio
from hypothesis.stateful import invariant

import agentloop as al
import agentloop.tasks
import agentloop.tools
from agentloop.testing import AgentStateMachine


class Fetch:
    """A slow tool: the model picks how slow (up to 5 ms), so calls overlap."""

    def __init__(self, name: str) -> None:
        ms = {"type": "integer", "minimum": 0, "maximum": 5}
        self.spec = al.ToolSpec(name, "Fetch", {"properties": {"ms": ms}})

    async def invoke(self, request: al.ToolRequest, ctx: Any) -> str:
        await anyio.sleep(request.input.get("ms", 0) / 1000)
        return "fetched"


class TaskManagerMachine(AgentStateMachine):
    """Concurrent rounds, a background tool, and interrupts while calls run."""

    def configure_agent(self, builder: al.AgentBuilder) -> al.AgentBuilder:
        routing = al.tasks.RouteByName({"fetch_later": al.tasks.TaskKind.BACKGROUND})
        self.manager = self.enter_async_context(al.tasks.AsyncTaskManager(routing=routing))
        tools = al.ToolRegistry().with_tool(Fetch("fetch")).with_tool(Fetch("fetch_later"))
        return builder.add_tool_source(tools).task_manager(self.manager)

    async def settle(self) -> None:
        # Background calls end before each next(): replays then see the same steps.
        handle = self.manager.handle()
        while any(
            task.kind is al.tasks.TaskKind.BACKGROUND for task in await handle.list_running()
        ):
            await handle.next_event()

    @invariant()
    def no_foreground_call_outlives_its_step(self) -> None:
        if self.driver.state is not al.DriverState.AWAITING_APPROVAL:
            running = self.portal.call(self.manager.handle().list_running)
            assert all(task.kind is al.tasks.TaskKind.BACKGROUND for task in running), running


TestTaskManager = TaskManagerMachine.TestCase  # pytest collects this

if __name__ == "__main__":
    TaskManagerMachine.run(backend="asyncio")
    TaskManagerMachine.run(backend="trio")
    print("task manager: every call answered once, nothing left running")
