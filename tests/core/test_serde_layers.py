"""The converter is built layer by layer, and the layers import downwards only."""

from __future__ import annotations

import ast
from pathlib import Path

from source_ast import parse_source

import agentloop as al
import agentloop.model
import agentloop.observe
from agentloop.core._converter import make_converter
from agentloop.loop._converter import configure_loop
from agentloop.model._config_codec import configure_model

PACKAGE = Path(al.__file__).parent


def test_the_core_converter_knows_the_core_types() -> None:
    converter = make_converter()
    result = al.ToolResultPart("call-1", [al.TextPart("a")], metadata={"k": 1})
    item = al.Item(al.ItemKind.TOOL, (result,))
    data = converter.unstructure(item)
    assert data["parts"] == [
        {
            "call_id": "call-1",
            "output_type": "parts",
            "output": [{"text": "a", "metadata": {}, "type": "text"}],
            "is_error": False,
            "metadata": {"k": 1},
            "type": "tool_result",
        }
    ]
    assert data["kind"] == "tool"
    assert converter.structure(data, al.Item) == item


def test_events_and_cache_strategies_are_tagged_only_by_their_own_layers() -> None:
    event = al.observe.TurnStarted("s", "turn-1")
    strategy = al.model.PromptCacheRequest.automatic().strategy
    converter = make_converter()
    assert "type" not in converter.unstructure(event, al.observe.TurnStarted)
    configure_model(converter)
    assert converter.unstructure(strategy, al.model.PromptCacheStrategy)["type"] == "automatic"
    configure_loop(converter)
    data = {"session_id": "s", "turn_id": "turn-1", "type": "turn_started"}
    assert al.unstructure(event) == data
    assert al.structure(data, al.observe.AgentEvent) == event
    approval = al.ApprovalRequest("c", "t", {}, "tool", "r", "s", "approval:c", "turn-1")
    written = converter.unstructure(approval)
    assert "driver" not in written
    assert "_driver" not in written


def imported_layers(layer: str) -> set[str]:
    """The top-level subpackages the modules of ``layer`` import (relative imports)."""
    found: set[str] = set()
    for path in (PACKAGE / layer).glob("*.py"):
        for node in ast.walk(parse_source(path)):
            if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
                found.add(node.module.split(".")[0])
    return found


def test_the_core_imports_nothing_above_it() -> None:
    assert imported_layers("core") <= {"core"}


def test_the_model_layer_does_not_import_the_loop() -> None:
    # model/_accumulator.py still reads RAW_ARGUMENTS_KEY through tools/ (moved as is);
    # a turn request carries the output spec (output/ sits on core and tools).
    assert imported_layers("model") <= {"core", "model", "output", "tools"}


def test_the_output_layer_sits_on_core_and_tools() -> None:
    assert imported_layers("output") <= {"core", "output", "tools"}
