"""ToolRegistry, federation of sources with a collision policy, and the dynamic catalog."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import pytest
from tools_support import results_of, run_round, user

import agentloop as al
import agentloop.observe
import agentloop.testing
import agentloop.tools
from agentloop.testing import call, tool_calls
from agentloop.tools import compare_catalogs

pytestmark = pytest.mark.anyio


def named(
    name: str, answer: str, description: str | None = None
) -> al.tools.FunctionTool[[], Coroutine[Any, Any, str]]:
    async def answer_fn() -> str:
        return answer

    text = description if description is not None else f"Answers {answer}."
    return al.tool(name=name, description=text)(answer_fn)


class Versioned:
    """A tool whose advertised spec follows ``version`` (``0`` hides it)."""

    def __init__(self, name: str) -> None:
        self.version = 1
        self.spec = al.ToolSpec(name, "version 1")

    def current_spec(self) -> al.ToolSpec | None:
        if self.version == 0:
            return None
        return al.ToolSpec(self.spec.name, f"version {self.version}")

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return f"{self.spec.name} v{self.version}"


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
    assert repr(registry) == "<ToolRegistry 'main': alpha>"
    # the net change since the last drain: beta came and went unseen
    assert registry.drain_catalog_events() == [al.tools.ToolCatalogEvent("main", added=("alpha",))]
    assert registry.drain_catalog_events() == []


def test_with_tool_is_construction_and_never_reported() -> None:
    registry = al.ToolRegistry("main").with_tool(named("a", "1")).with_tool(named("b", "2"))
    assert registry.drain_catalog_events() == []
    assert registry.names() == ["a", "b"]


def test_replacing_a_tool_is_reported_as_changed_only_if_its_spec_differs() -> None:
    registry = al.ToolRegistry("main").with_tool(named("a", "1"))
    registry.add(named("a", "other answer", description="Answers 1."))
    assert registry.drain_catalog_events() == []  # the model sees the same spec
    registry.add(named("a", "2"))
    registry.add(named("b", "3"))
    assert registry.drain_catalog_events() == [
        al.tools.ToolCatalogEvent("main", added=("b",), changed=("a",))
    ]


def test_a_tool_whose_current_spec_changes_or_hides_is_reported() -> None:
    tool = Versioned("live")
    registry = al.ToolRegistry("main").with_tool(tool)
    tool.version = 2
    assert registry.drain_catalog_events() == [al.tools.ToolCatalogEvent("main", changed=("live",))]
    tool.version = 0
    assert registry.specs() == []
    assert registry.get("live") is tool  # hidden, still callable by name
    assert registry.drain_catalog_events() == [al.tools.ToolCatalogEvent("main", removed=("live",))]
    tool.version = 3
    assert registry.drain_catalog_events() == [al.tools.ToolCatalogEvent("main", added=("live",))]


def test_catalog_change_diffs_two_catalogs_for_custom_sources() -> None:
    one, two = al.ToolSpec("x", "one"), al.ToolSpec("x", "two")
    keep = al.ToolSpec("k", "same")
    before = {"x": one, "gone": keep, "k": keep}
    after = {"x": two, "new": keep, "k": keep, "also": keep}
    assert compare_catalogs("mcp:docs", before, after) == al.tools.ToolCatalogEvent(
        "mcp:docs", added=("also", "new"), removed=("gone",), changed=("x",)
    )
    assert compare_catalogs("mcp:docs", after, dict(after)) is None


async def test_federated_sources_first_source_wins_a_name() -> None:
    first = al.ToolRegistry("first").with_tool(named("same", "from first"))
    second = al.ToolRegistry("second").with_tool(named("same", "from second"))
    second.with_tool(named("other", "other"))
    executor = al.tools.BasicToolExecutor([first, second])
    assert [spec.description for spec in executor.specs()] == [
        "Answers other.",
        "Answers from first.",
    ]
    results = await run_round(
        [], [call("same", id="call-1"), call("other", id="call-2")], sources=[first, second]
    )
    assert [r.output for r in results] == ["from first", "other"]


COLLISION = (
    "tool name collision: 'same' is offered by more than one source; rename one or use "
    "collision='first_wins'"
)


async def test_collision_policy_error_refuses_duplicate_names() -> None:
    first = al.ToolRegistry("first").with_tool(named("same", "1"))
    second = al.ToolRegistry("second").with_tool(named("same", "2"))
    executor = al.tools.BasicToolExecutor([first, second], collision="error")
    with pytest.raises(al.ToolError) as caught:
        executor.specs()
    assert str(caught.value) == COLLISION
    with pytest.raises(ValueError, match="collision must be 'first_wins' or 'error'"):
        al.tools.BasicToolExecutor([first], collision="last_wins")  # type: ignore[arg-type]


async def test_a_collision_under_the_error_policy_fails_the_driver_before_the_model_call() -> None:
    first = al.ToolRegistry("first").with_tool(named("same", "1"))
    second = al.ToolRegistry("second").with_tool(named("same", "2"))
    model = al.testing.ScriptedModel(["never"])
    agent = (
        al.Agent.builder()
        .model(model)
        .tool_executor(al.tools.BasicToolExecutor([first, second], collision="error"))
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s1")
    with pytest.raises(al.ToolError) as caught:
        await driver.next()
    assert str(caught.value) == COLLISION
    assert driver.state is al.DriverState.FAILED
    assert model.requests == []
    with pytest.raises(al.InvalidStateError, match="in state FAILED: an earlier step raised "):
        await driver.next()


class Events:
    """Records events and how many model requests had been made when each arrived."""

    def __init__(self, model: al.testing.ScriptedModel) -> None:
        self.model = model
        self.events: list[tuple[int, al.observe.AgentEvent]] = []

    def handle_event(self, event: al.observe.AgentEvent) -> None:
        self.events.append((len(self.model.requests), event))

    def catalog(self) -> list[tuple[int, al.observe.AgentEvent]]:
        return [(n, e) for n, e in self.events if isinstance(e, al.observe.ToolCatalogChanged)]


async def test_catalog_changes_are_reported_before_the_next_model_call() -> None:
    registry = al.ToolRegistry("live")

    @al.tool
    async def install(name: str) -> str:
        """Install a tool called name."""
        registry.add(named(name, f"I am {name}"))
        registry.remove("install")
        return f"installed {name}"

    registry.with_tool(install)
    model = al.testing.ScriptedModel(
        [tool_calls(call("install", {"name": "fresh"})), tool_calls(call("fresh")), "done"]
    )
    events = Events(model)
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
    # one event, after the first model call and before the second
    assert events.catalog() == [
        (1, al.observe.ToolCatalogChanged("live", ("fresh",), ("install",), ()))
    ]
    assert [[s.name for s in r.available_tools] for r in model.requests] == [
        ["install"],
        ["fresh"],
        ["fresh"],
    ]
    assert [r.output for r in results_of(driver)] == ["installed fresh", "I am fresh"]


async def test_a_changed_spec_is_reported_and_sent_with_the_next_call() -> None:
    live = Versioned("live")
    registry = al.ToolRegistry("mcp:docs").with_tool(live)

    @al.tool
    async def upgrade() -> str:
        """Upgrade the live tool."""
        live.version = 2
        return "upgraded"

    registry.with_tool(upgrade)
    model = al.testing.ScriptedModel(
        [tool_calls(call("upgrade")), tool_calls(call("live")), "done"]
    )
    events = Events(model)
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(registry)
        .observer(events)
        .input([user("go")])
        .build()
    )
    driver = await agent.start("s1")
    assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert events.catalog() == [(1, al.observe.ToolCatalogChanged("mcp:docs", (), (), ("live",)))]
    assert [[(s.name, s.description) for s in r.available_tools] for r in model.requests] == [
        [("live", "version 1"), ("upgrade", "Upgrade the live tool.")],
        [("live", "version 2"), ("upgrade", "Upgrade the live tool.")],
        [("live", "version 2"), ("upgrade", "Upgrade the live tool.")],
    ]
    assert [r.output for r in results_of(driver)] == ["upgraded", "live v2"]


def test_a_registry_refuses_a_non_string_name() -> None:
    with pytest.raises(al.InvalidInputError, match=r"expects the source's name as a str, got list"):
        al.ToolRegistry([])  # type: ignore[arg-type]


async def test_sessions_sharing_a_registry_each_see_a_catalog_change() -> None:
    registry = al.ToolRegistry("shared").with_tool(named("old", "old"))
    model = al.testing.ScriptedModel(["one", "two", "three", "four"])
    events = Events(model)
    agent = al.Agent.builder().model(model).add_tool_source(registry).observer(events).build()
    first, second = await agent.start("a"), await agent.start("b")
    first.submit_input([user("hi")])
    assert isinstance(await first.next(), al.Finished)
    assert events.catalog() == []  # what a session starts with is not a change

    registry.add(named("new", "new"))
    first.submit_input([user("again")])
    second.submit_input([user("hello")])
    assert isinstance(await first.next(), al.Finished)
    assert isinstance(await second.next(), al.Finished)
    change = al.observe.ToolCatalogChanged("shared", ("new",), (), ())
    assert events.catalog() == [(1, change), (2, change)]  # once per session
    assert [[s.name for s in r.available_tools] for r in model.requests] == [
        ["old"],
        ["new", "old"],
        ["new", "old"],
    ]


async def test_a_change_another_drain_took_is_still_news_for_the_driver() -> None:
    # The driver lists the catalog once per model call and reuses the specs
    # while the listing is unchanged; a change taken by a direct drain in
    # between and undone again is measured against what the executor saw.
    registry = al.ToolRegistry("shared").with_tool(named("old", "old"))
    executor = al.tools.BasicToolExecutor([registry])
    model = al.testing.ScriptedModel(["one", "two", "three", "four"])
    events = Events(model)
    agent = al.Agent.builder().model(model).tool_executor(executor).observer(events).build()
    driver = await agent.start("s")
    driver.submit_input([user("hi")])
    assert isinstance(await driver.next(), al.Finished)
    registry.add(named("new", "new"))
    assert executor.drain_catalog_events() == [al.tools.ToolCatalogEvent("shared", added=("new",))]
    registry.remove("new")  # the listing the driver saw last, object for object
    for text in ("again", "more"):
        driver.submit_input([user(text)])
        assert isinstance(await driver.next(), al.Finished)
    assert events.catalog() == [(1, al.observe.ToolCatalogChanged("shared", (), ("new",), ()))]
    assert [[s.name for s in r.available_tools] for r in model.requests] == [
        ["old"],
        ["old"],
        ["old"],
    ]
    registry.add(named("later", "later"))
    driver.submit_input([user("last")])
    assert isinstance(await driver.next(), al.Finished)
    assert events.catalog()[-1] == (3, al.observe.ToolCatalogChanged("shared", ("later",), (), ()))
    assert [s.name for s in model.requests[-1].available_tools] == ["later", "old"]
