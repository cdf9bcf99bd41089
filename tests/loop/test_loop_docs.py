"""The host loop of docs/loop.md's "Failures and retries" section runs as written."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio.lowlevel
import pytest
from test_failures import KeepSystemAndLastUser

import agentloop as al
import agentloop.model
import agentloop.testing
from agentloop.testing import fail

pytestmark = pytest.mark.anyio

DOC = Path(__file__).resolve().parents[2] / "docs" / "loop.md"


def failures_snippet() -> str:
    section = DOC.read_text(encoding="utf-8").split("## Failures and retries", 1)[1]
    (snippet,) = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)
    return snippet


async def no_wait(seconds: float) -> None:
    slept.append(seconds)
    await anyio.lowlevel.checkpoint()


slept: list[float] = []


def load_drive() -> Any:
    namespace: dict[str, Any] = {"al": al, "anyio": SimpleNamespace(sleep=no_wait)}
    exec(compile(failures_snippet(), "docs/loop.md failures snippet", "exec"), namespace)
    return namespace["drive"]


def overflow_until_compacted(request: al.model.TurnRequest) -> Any:
    if len(request.transcript) > 2:
        return fail(al.ProviderError("too long", kind=al.ProviderErrorKind.CONTEXT_OVERFLOW))
    return "compacted answer"


async def test_the_documented_host_loop_retries_and_compacts() -> None:
    drive = load_drive()
    slept.clear()
    overloaded = al.ProviderError("503", status=503, retryable=True)
    model = al.testing.ScriptedModel([fail(overloaded), fail(overloaded), "fine"])
    driver = (
        await al.Agent.builder()
        .model(model)
        .input([al.Item.text(al.ItemKind.USER, "q")])
        .build()
        .start("s")
    )
    result = await drive(driver, KeepSystemAndLastUser())
    assert result.finish_reason is al.FinishReason.COMPLETED
    assert slept == [2, 4]

    history = [al.Item.text(al.ItemKind.USER, "old"), al.Item.text(al.ItemKind.ASSISTANT, "r")]
    model = al.testing.ScriptedModel(overflow_until_compacted)
    agent = (
        al.Agent.builder()
        .model(model)
        .transcript(history)
        .input([al.Item.text(al.ItemKind.USER, "new")])
        .build()
    )
    result = await drive(await agent.start("s"), KeepSystemAndLastUser())
    assert result.final_items[0].text_content == "compacted answer"

    model = al.testing.ScriptedModel(
        [fail(al.ProviderError("bad key", kind=al.ProviderErrorKind.AUTH))]
    )
    agent = al.Agent.builder().model(model).input([al.Item.text(al.ItemKind.USER, "q")]).build()
    result = await drive(await agent.start("s"), KeepSystemAndLastUser())
    assert result.finish_reason is al.FinishReason.ERROR
    assert len(model.requests) == 1
