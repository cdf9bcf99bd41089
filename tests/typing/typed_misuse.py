"""Typed dependencies and output, misused: ``mypy --strict`` must reject each marked line."""

from __future__ import annotations

import attrs

import agentloop as al
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
    return ctx.resources.stock[item]  # error: Deps has no "stock"


def build() -> al.Agent[Deps, Quote]:
    builder = al.Agent.builder().model(ScriptedModel([])).resources({"tea": 3})
    return builder.output(Quote).build()  # error: the dependencies are a dict, not Deps


def name(agent: al.Agent[Deps, Quote]) -> str:
    return al.run_sync(agent, "?").output.price  # error: int is not str


def wrong_output(agent: al.Agent[Deps, Quote]) -> al.Agent[Deps, str]:
    return agent  # error: the output is Quote, not str
