"""Structured output: one typed answer in each mode, a retry, and the typed error.

Run: python examples/output_modes.py
"""

from __future__ import annotations

from typing import Any

import attrs

import agentloop as al
import agentloop.tools
from agentloop.testing import ScriptedModel, call, tool_calls


@attrs.frozen
class Forecast:
    """Tomorrow's weather in a city."""

    city: str
    celsius: int
    rain: bool


@al.tool
def temperature(city: str) -> int:
    """Tomorrow's temperature in a city, in degrees Celsius."""
    return {"Oslo": 4, "Rome": 19}[city]


def agent(
    model: ScriptedModel, mode: str = "auto", max_retries: int = 2
) -> al.Agent[Any, Forecast]:
    registry = al.ToolRegistry().with_tool(temperature)
    builder = al.Agent.builder().model(model).add_tool_source(registry)
    return builder.output(Forecast, mode=mode, max_retries=max_retries).build()


def main() -> None:
    # Tool mode (the scripted model has no native mode): tools first, then final_answer.
    model = ScriptedModel(
        [
            tool_calls(call("temperature", {"city": "Oslo"})),
            tool_calls(call("final_answer", {"city": "Oslo", "celsius": 4, "rain": True})),
        ]
    )
    result = al.run_sync(agent(model), "Tomorrow in Oslo?")
    print("tool mode:", result.output)
    print("  offered:", [spec.name for spec in model.requests[0].available_tools])

    # Native mode: the answer is the response's JSON text; a bad one goes back once.
    model = ScriptedModel(
        [
            '{"city": "Rome", "celsius": "warm", "rain": false}',
            '{"city": "Rome", "celsius": 19, "rain": false}',
        ]
    )
    result = al.run_sync(agent(model, mode="native"), "Tomorrow in Rome?")
    print("native mode:", result.output)
    print("  feedback:", model.requests[1].transcript[-1].text_content)

    # Past the limit: the turn ends with a typed error naming what was wrong.
    model = ScriptedModel(['{"city": "Rome"}'])
    failed = al.run_sync(agent(model, mode="native", max_retries=0), "Tomorrow in Rome?")
    error = failed.error
    assert isinstance(error, al.OutputValidationError)
    print("error:", failed.finish_reason, error.problems)


if __name__ == "__main__":
    main()
