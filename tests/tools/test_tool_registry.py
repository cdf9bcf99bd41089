"""ToolRegistry, federation of sources with a collision policy, and catalog changes."""

from __future__ import annotations

import pytest
from tools_support import results_of, run_round, user

import agentloop as al
from agentloop.testing import call, tool_calls

pytestmark = pytest.mark.anyio


def named(name: str, answer: str) -> al.FunctionTool[[], str]:
    async def answer_fn() -> str:
        return answer

    return al.tool(name=name, description=f"Answers {answer}.")(answer_fn)


def test_registry_add_remove_lookup_and_sorted_specs() -> None:
    registry = al.ToolRegistry("main")
    beta, alpha = named("beta", "b"), named("alpha", "a")
    registry.add(beta)
    registry.add(alpha)
    assert [spec.name for spec in registry.specs()] == ["alpha", "beta"]
    assert registry.get("alpha") is alpha
    assert registry.get("gamma") is None
    assert "beta" in registry
    assert len(registry) == 2
    assert registry.remove("beta") is True
    assert registry.remove("beta") is False
    assert registry.names() == ["alpha"]
    assert registry.drain_catalog_events() == [
        al.ToolCatalogEvent("main", added=("beta",)),
        al.ToolCatalogEvent("main", added=("alpha",)),
        al.ToolCatalogEvent("main", removed=("beta",)),
    ]
    assert registry.drain_catalog_events() == []


async def test_federated_sources_first_source_wins_a_name() -> None:
    first = al.ToolRegistry("first").with_tool(named("same", "from first"))
    second = al.ToolRegistry("second").with_tool(named("same", "from second"))
    second.with_tool(named("other", "other"))
    executor = al.BasicToolExecutor([first, second])
    assert [spec.description for spec in executor.specs()] == [
        "Answers other.",
        "Answers from first.",
    ]
    results = await run_round(
        [], [call("same", id="call-1"), call("other", id="call-2")], sources=[first, second]
    )
    assert [r.output for r in results] == ["from first", "other"]


async def test_collision_policy_error_refuses_duplicate_names() -> None:
    first = al.ToolRegistry("first").with_tool(named("same", "1"))
    second = al.ToolRegistry("second").with_tool(named("same", "2"))
    executor = al.BasicToolExecutor([first, second], collision="error")
    with pytest.raises(al.ToolError) as caught:
        executor.specs()
    assert str(caught.value) == (
        "tool name collision: 'same' is offered by more than one source; rename one or use "
        "collision='first_wins'"
    )
    with pytest.raises(ValueError, match="collision must be 'first_wins' or 'error'"):
        al.BasicToolExecutor([first], collision="last_wins")  # type: ignore[arg-type]


class Events:
    def __init__(self) -> None:
        self.events: list[al.AgentEvent] = []

    def handle_event(self, event: al.AgentEvent) -> None:
        self.events.append(event)


async def test_catalog_changes_are_reported_before_the_next_model_call() -> None:
    registry = al.ToolRegistry("live")

    @al.tool
    async def install(name: str) -> str:
        """Install a tool called name."""
        registry.add(named(name, f"I am {name}"))
        registry.remove("install")
        return f"installed {name}"

    registry.with_tool(install)
    model = al.ScriptedModel(
        [tool_calls(call("install", {"name": "fresh"})), tool_calls(call("fresh")), "done"]
    )
    events = Events()
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(registry)
        .observer(events)
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s1")
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    changes = [e for e in events.events if isinstance(e, al.ToolCatalogChanged)]
    assert changes == [
        al.ToolCatalogChanged("live", ("fresh",), (), ()),
        al.ToolCatalogChanged("live", (), ("install",), ()),
    ]
    names = [
        e for e in events.events if isinstance(e, al.ToolCatalogChanged | al.ToolResultReceived)
    ]
    assert isinstance(names[0], al.ToolResultReceived)  # the changes came after the first round
    assert [[s.name for s in r.available_tools] for r in model.requests] == [
        ["install"],
        ["fresh"],
        ["fresh"],
    ]
    assert [r.output for r in results_of(driver)] == ["installed fresh", "I am fresh"]
