"""Federated tool sources, a live catalog reported to observers, and per-tool output limits.

Run: python examples/tools_catalog.py
"""

from __future__ import annotations

import anyio

import agentloop as al
import agentloop.model
import agentloop.observe
import agentloop.testing
import agentloop.tools
from agentloop.testing import Reply, call, tool_calls

builtin = al.ToolRegistry("builtin")
plugins = al.ToolRegistry("plugins")


@al.tool
async def search(query: str) -> str:
    """Search the built-in index."""
    return f"builtin results for {query!r}"


@al.tool(name="search")
async def plugin_search(query: str) -> str:
    """Search the web (shadowed: the builtin source comes first)."""
    return "never called"


@al.tool(max_output_chars=24)
async def readme(project: str) -> str:
    """A project's README; only the first 24 characters reach the model."""
    return f"# {project}\n\n" + "A very long introduction. " * 4


@al.tool
async def install_readme() -> str:
    """Install the readme tool, replacing this installer."""
    plugins.add(readme)
    plugins.remove("install_readme")
    return "installed readme"


class Catalog:
    """An observer that prints catalog changes as the driver reports them."""

    def handle_event(self, event: al.observe.AgentEvent) -> None:
        if isinstance(event, al.observe.ToolCatalogChanged):
            print(
                f"catalog of {event.source}: added={list(event.added)} "
                f"removed={list(event.removed)} changed={list(event.changed)}"
            )


def script(request: al.model.TurnRequest) -> Reply | str:
    """The scripted model: prints the tools it is offered, then answers by round."""
    print("model sees:", ", ".join(spec.name for spec in request.available_tools))
    replies: list[Reply | str] = [
        tool_calls(call("search", {"query": "anyio"}), call("install_readme")),
        tool_calls(call("readme", {"project": "agentloop"})),
        "All done.",
    ]
    return replies[sum(item.kind is al.ItemKind.ASSISTANT for item in request.transcript)]


async def main() -> None:
    builtin.with_tool(search)
    plugins.with_tool(plugin_search).with_tool(install_readme)
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(script))
        .add_tool_source(builtin)  # first source wins a name (collision="first_wins")
        .add_tool_source(plugins)
        .observer(Catalog())
        .input([al.Item.text(al.ItemKind.USER, "Find docs.")])
        .build()
    )
    driver = await agent.start("demo")
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    for item in driver.snapshot().transcript:
        for result in item.tool_results():
            print(f"{result.call_id}: {result.output!r}")

    strict = al.tools.BasicToolExecutor([builtin, plugins], collision="error")
    try:
        strict.specs()
    except al.ToolError as error:
        print("collision='error':", error)


if __name__ == "__main__":
    anyio.run(main)
