"""Routing policies: by name, by annotation, callables, and contract errors."""

from __future__ import annotations

import pytest
from tasks_support import GateTool, build, user

import agentloop as al
import agentloop.tasks
import agentloop.testing
import agentloop.tools
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


def request(name: str) -> al.ToolRequest:
    return al.ToolRequest("call-1", name, {}, "s", "turn-1")


def test_route_by_name_uses_the_listed_decision_else_the_default() -> None:
    routing = al.tasks.RouteByName(
        {"bg": al.tasks.TaskKind.BACKGROUND, "slow": al.tasks.DetachAfter(2.5)},
        default=al.tasks.DetachAfter(60),
    )
    assert routing.route(request("bg")) is al.tasks.TaskKind.BACKGROUND
    assert routing.route(request("slow")) == al.tasks.DetachAfter(2.5)
    assert routing.route(request("other")) == al.tasks.DetachAfter(60)
    assert al.tasks.RouteByName({}).route(request("x")) is al.tasks.TaskKind.FOREGROUND
    assert isinstance(routing, al.tasks.RoutingPolicy)


def test_route_by_annotation_reads_the_catalog_at_routing_time() -> None:
    registry = al.ToolRegistry().with_tool(GateTool("local"))
    routing = al.tasks.RouteByAnnotation(
        registry,
        lambda a: al.tasks.TaskKind.BACKGROUND if a.open_world else al.tasks.TaskKind.FOREGROUND,
    )
    assert routing.route(request("web")) is al.tasks.TaskKind.FOREGROUND  # unknown: default
    registry.add(GateTool("web", annotations=al.ToolAnnotations(open_world=True)))
    assert routing.route(request("web")) is al.tasks.TaskKind.BACKGROUND
    assert routing.route(request("local")) is al.tasks.TaskKind.FOREGROUND


def test_bad_decisions_and_durations_are_refused() -> None:
    with pytest.raises(al.ToolError) as raised:
        al.tasks.RouteByName({"bg": "background"})  # type: ignore[dict-item]
    assert str(raised.value) == (
        "RouteByName route for 'bg' returned 'background'; expected TaskKind.FOREGROUND, "
        "TaskKind.BACKGROUND or DetachAfter(seconds)"
    )
    with pytest.raises(al.InvalidInputError, match=r"seconds >= 0, got -1"):
        al.tasks.DetachAfter(-1)
    with pytest.raises(al.InvalidInputError, match=r"seconds >= 0, got nan"):
        al.tasks.AsyncTaskManager(detach_after=float("nan"))


async def test_a_callable_routes_calls_end_to_end() -> None:
    web = GateTool("web", annotations=al.ToolAnnotations(open_world=True))
    local = GateTool("local", blocking=False)
    registry = al.ToolRegistry().with_tool(web).with_tool(local)
    routing = al.tasks.RouteByAnnotation(
        registry,
        lambda a: al.tasks.TaskKind.BACKGROUND if a.open_world else al.tasks.TaskKind.FOREGROUND,
    )
    model = al.testing.ScriptedModel([tool_calls(call("web"), call("local")), "done"])
    async with al.tasks.AsyncTaskManager(routing=routing.route) as manager:
        driver = await build(model, manager, web, local).build().start("s")
        driver.submit_input([user("go")])
        step = await driver.run_until_blocked()
        assert isinstance(step, al.Finished)
        running = await manager.handle().list_running()
        assert [(t.tool_name, t.kind) for t in running] == [("web", al.tasks.TaskKind.BACKGROUND)]


async def test_a_routing_policy_that_raises_fails_the_step_with_a_tool_error() -> None:
    def broken(request: al.ToolRequest) -> al.tasks.TaskRoute:
        raise KeyError(request.tool_name)

    model = al.testing.ScriptedModel([tool_calls(call("local"))])
    async with al.tasks.AsyncTaskManager(routing=broken) as manager:
        driver = await build(model, manager, GateTool("local")).build().start("s")
        driver.submit_input([user("go")])
        with pytest.raises(al.ToolError) as raised:
            await driver.next()
        assert str(raised.value) == (
            "routing policy test_a_routing_policy_that_raises_fails_the_step_with_a_tool_error"
            ".<locals>.broken raised for call call-1 (local): KeyError: 'local'"
        )
        assert driver.state is al.DriverState.FAILED
        assert await manager.handle().list_running() == []
