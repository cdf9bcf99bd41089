"""A custom compaction pipeline with a summary model, and its property test.

See docs/compaction.md.
"""

import anyio

import agentloop as al
from agentloop.compaction import (
    Compactor,
    DropFailedResults,
    ItemCountTrigger,
    KeepRecent,
    SummarizeOlder,
)
from agentloop.testing import ScriptedModel, check_mutator


def summarizer() -> ScriptedModel:
    """Stands in for a small, cheap model that writes the summaries."""
    return ScriptedModel(lambda request: "The user and the assistant talked about the weather.")


def compactor() -> Compactor:
    return Compactor(
        [DropFailedResults(), SummarizeOlder(model=summarizer(), keep_last=4), KeepRecent()],
        triggers=[ItemCountTrigger(max_items=12)],  # at turn boundaries
    )


async def chat() -> None:
    model = ScriptedModel(lambda request: f"reply {len(request.transcript)}")
    mine = compactor()
    builder = (
        al.Agent.builder().model(model).transcript([al.Item.text(al.ItemKind.SYSTEM, "Be brief.")])
    )
    driver = await mine.install(builder).build().start("weather")
    for number in range(10):
        driver.submit_input([al.Item.text(al.ItemKind.USER, f"question {number}")])
        assert isinstance(await driver.next(), al.Finished)
    for item in model.last_request.transcript:
        print(f"  {item.kind.value}: {item.text_content}")
    print(f"reports: {[report.outcome.value for report in mine.reports]}")


def test_the_pipeline_keeps_every_transcript_valid() -> None:
    check_mutator(compactor, max_examples=50)  # both mutation points, fresh compactor each


if __name__ == "__main__":
    anyio.run(chat)
    test_the_pipeline_keeps_every_transcript_valid()
    print("property: every generated transcript stays valid")
