"""@tool: a typed function becomes a tool; the model's calls are checked and structured.

Run: python examples/tools_decorator.py
"""

from __future__ import annotations

import enum
import json
from typing import Annotated

import anyio
import attrs

import agentloop as al
import agentloop.testing
import agentloop.tools
from agentloop.testing import call, tool_calls


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


@attrs.frozen
class Reading:
    city: str
    degrees: float
    unit: Unit


@al.tool(read_only=True, idempotent=True, timeout=10)
async def temperature(
    city: Annotated[str, "city name, e.g. Delft"], unit: Unit = Unit.CELSIUS
) -> Reading:
    """Current temperature in a city."""
    celsius = {"Delft": 14.0, "Oslo": 3.5}.get(city, 20.0)
    degrees = celsius if unit is Unit.CELSIUS else celsius * 9 / 5 + 32
    return Reading(city, degrees, unit)


@al.tool
def shout(text: str, times: int = 1) -> str:
    """Repeat text in capitals (a sync function: it runs in a worker thread)."""
    return " ".join([text.upper()] * times)


async def main() -> None:
    print("schema:", json.dumps(temperature.spec.input_schema, sort_keys=True))
    model = al.testing.ScriptedModel(
        [
            tool_calls(
                call("temperature", {"city": "Oslo", "unit": "f"}),
                call("shout", {"text": "hi", "times": 2}),
                call("shout", {"text": "hi", "times": "two"}),
            ),
            "Oslo is cold.",
        ]
    )
    registry = al.ToolRegistry().with_tool(temperature).with_tool(shout)
    agent = (
        al.Agent.builder()
        .model(model)
        .add_tool_source(registry)
        .input([al.Item.text(al.ItemKind.USER, "How cold is Oslo?")])
        .build()
    )
    driver = await agent.start("demo")
    step = await driver.run_until_blocked()
    assert isinstance(step, al.Finished)
    for item in driver.snapshot().transcript:
        for result in item.tool_results():
            print(f"{result.call_id}: {result.output!r} error={result.is_error}")
    print("answer:", step.result.final_items[0].text_content)


if __name__ == "__main__":
    anyio.run(main)
