"""Typed dependencies and output, used correctly: ``mypy --strict`` accepts this file."""

from __future__ import annotations

import attrs

import agentloop as al
import agentloop.tools
from agentloop.testing import ScriptedModel


@attrs.frozen
class Deps:
    prices: dict[str, int]


@attrs.frozen
class Quote:
    item: str
    price: int


@al.tool
def price_of(ctx: al.ToolContext[Deps], item: str) -> int:
    """The price of ``item``."""
    return ctx.resources.prices[item]


def build() -> al.Agent[Deps, Quote]:
    registry = al.ToolRegistry().with_tool(price_of)
    return (
        al.Agent.builder()
        .model(ScriptedModel([]))
        .add_tool_source(registry)
        .resources(Deps({"tea": 3}))
        .output(Quote)
        .build()
    )


def total(agent: al.Agent[Deps, Quote]) -> int:
    quote: Quote = al.run_sync(agent, "How much is tea?").output
    return quote.price + 1


async def total_async(agent: al.Agent[Deps, Quote]) -> int:
    result = await al.run(agent, "How much is tea?")
    async with al.stream(agent, "And coffee?") as events:
        streamed = await events.result()
    return result.output.price + streamed.output.price


def untyped_output() -> dict[str, object]:
    agent = al.Agent.builder().model(ScriptedModel([])).output({"type": "object"}).build()
    value: dict[str, object] = al.run_sync(agent, "?").output
    return value
