"""A long chat under a context budget: default_compactor() on a scripted model.

See docs/compaction.md.
"""

import itertools

import anyio

import agentloop as al
import agentloop.model
import agentloop.tools
from agentloop.compaction import default_compactor, estimate_transcript
from agentloop.testing import Reply, ScriptedModel, call, text, tool_calls

BUDGET = 8_000  # tokens per request


@al.tool
def fetch_log(day: int) -> str:
    """Fetch a day's log (about 5,000 characters)."""
    return f"log of day {day}:\n" + "".join(f"{day:03d}-{line:03d} ok\n" for line in range(420))


def model(request: al.model.TurnRequest) -> Reply:
    """Asks for a log on every question, then answers; reports the request's size as usage."""
    usage = al.Usage(input_tokens=estimate_transcript(request.transcript), output_tokens=30)
    last = request.transcript[-1]
    if last.kind is al.ItemKind.USER:
        day = int(last.text_content.split()[-1])
        return tool_calls(call("fetch_log", {"day": day}), usage=usage)
    return text("Everything was ok that day.", usage=usage)


async def main() -> None:
    scripted = ScriptedModel(model)
    compactor = default_compactor(BUDGET)
    builder = (
        al.Agent.builder()
        .model(scripted)
        .transcript([al.Item.text(al.ItemKind.SYSTEM, "You read logs.")])
        .add_tool_source(al.ToolRegistry().with_tool(fetch_log))
    )
    driver = await compactor.install(builder).build().start("logs")
    for day in range(1, 61):
        driver.submit_input([al.Item.text(al.ItemKind.USER, f"how was day {day}")])
        while not isinstance(step := await driver.next(), al.Finished):
            assert isinstance(step, al.AfterToolResult)
    largest = max(estimate_transcript(request.transcript) for request in scripted.requests)
    print(f"requests: {len(scripted.requests)}, largest ~{largest} tokens (budget {BUDGET})")
    print(f"compactions: {len(compactor.reports)}")
    requests = scripted.requests
    extended = sum(
        list(after.transcript[: len(before.transcript)]) == list(before.transcript)
        for before, after in itertools.pairwise(requests)
    )
    print(
        f"requests that extend the previous one (cacheable prefix): {extended} of "
        f"{len(requests) - 1}"
    )
    print(f"first: {compactor.reports[0].summary}")
    scripted.assert_requests_valid()
    first_is_prompt = all(r.transcript[0].text_content == "You read logs." for r in requests)
    print(f"every request valid, the system prompt first: {first_is_prompt}")


if __name__ == "__main__":
    anyio.run(main)
