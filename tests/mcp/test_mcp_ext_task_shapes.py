"""A hostile 2026-07-28 server answering with any task shape (malformed tasks, wrong
ids, unknown statuses, huge messages, any JSON) never gets past the source: the call
returns an output or raises ``McpCallError`` naming the server, with a bounded message,
within ``task_timeout``, and the same connection serves the next call. The shapes are
drawn by hypothesis and sent by ``ext_task_server.py`` (its ``shaped`` tool answers
``tools/call`` and each ``tasks/get`` with what the arguments say) in its own process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from mcp_support import LOADED, ext_task_server

import agentloop as al
from agentloop.mcp import McpCallError, McpToolSource

pytestmark = pytest.mark.anyio

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
task_ids = st.one_of(st.just("t-1"), st.just("t-1"), st.just("t-1"), st.just("t-2"), json_values)
statuses = st.sampled_from(["working", "input_required", "completed", "failed", "cancelled"])
messages = st.one_of(st.none(), st.none(), st.text(max_size=30), st.just("m" * 1_000_000))
results = (
    st.sampled_from(
        [
            {"content": [{"type": "text", "text": "done"}], "isError": False},
            {"content": "not a list"},
            {"content": [], "structuredContent": {"n": 1}},
        ]
    )
    | json_values
)
errors = st.sampled_from([{"code": -32603, "message": "boom"}, {"code": "x"}]) | json_values
requests = st.sampled_from(
    [
        {"k": {"method": "elicitation/create", "params": {"message": "hi",
               "requestedSchema": {"type": "object", "properties": {}}}}},
        {"k": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1}}},
        {"k": {"method": "nothing/here", "params": {}}},
    ]
) | json_values  # fmt: skip


def task(status: str, task_id: Any, message: Any, extra: dict[str, Any]) -> dict[str, Any]:
    shape: dict[str, Any] = {
        "taskId": task_id,
        "status": status,
        "createdAt": "2026-12-07T00:00:00Z",
        "lastUpdatedAt": "2026-12-07T00:00:00Z",
        "ttlMs": 60000,
        "pollIntervalMs": 1,
        **extra,
    }
    if message is not None:
        shape["statusMessage"] = message
    return shape


json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=4)


def mutated(shape: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """A shape, one with a key dropped or replaced by any JSON, or any JSON object (a
    JSON-RPC result is an object: the SDK's reader drops a frame whose result is not,
    and the request waits out call_timeout as with a hung server)."""

    def drop(value: dict[str, Any], key: str) -> dict[str, Any]:
        return {k: v for k, v in value.items() if k != key}

    keys = st.sampled_from(["taskId", "status", "createdAt", "ttlMs", "pollIntervalMs",
                            "resultType", "result", "error", "inputRequests"])  # fmt: skip
    return st.one_of(
        shape,
        shape,
        st.builds(drop, shape, keys),
        st.builds(lambda v, k, x: {**v, k: x}, shape, keys, json_values),
        json_objects,
    )


created = mutated(
    st.builds(lambda *a: {"resultType": "task", **task(*a)}, statuses, task_ids, messages,
              st.just({}))
)  # fmt: skip
PAYLOADS = {"completed": ("result", results), "failed": ("error", errors),
            "input_required": ("inputRequests", requests)}  # fmt: skip


@st.composite
def coherent(draw: st.DrawFn) -> dict[str, Any]:
    """A ``tasks/get`` answer whose payload (mostly) fits its status."""
    status = draw(statuses)
    extra: dict[str, Any] = {}
    if status in PAYLOADS:
        key, values = PAYLOADS[status]
        extra[key] = draw(values)
    return {"resultType": "complete", **task(status, draw(task_ids), draw(messages), extra)}


polled = mutated(coherent())


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(create=created, polls=st.lists(polled, min_size=1, max_size=3))
async def test_any_task_shape_is_an_output_or_a_clear_error(
    tmp_path: Path, create: Any, polls: list[Any]
) -> None:
    source = McpToolSource(ext_task_server(tmp_path), task_timeout=1.5, connect_timeout=LOADED)
    async with source:
        failure: McpCallError | None = None
        try:
            output = await source.call_tool("shaped", {"create": create, "polls": polls})
        except McpCallError as error:
            failure = error
        after = await source.call_tool("plain", {})
        assert (after.value, source.connections) == ("ran plainly: plain {}", 1)
    if failure is not None:
        event("error")
        assert str(failure).startswith("MCP server 'ext'")
        assert len(str(failure)) < 4_000
        assert failure.server == "ext"
    else:
        event(f"output, error={output.is_error}")
        assert isinstance(output, al.ToolOutput)
