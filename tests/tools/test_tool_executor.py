"""BasicToolExecutor through the driver: every bad call becomes one readable error result."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import structlog
from tools_support import outcome, run_one, run_round

import agentloop as al
import agentloop.permissions
import agentloop.tools
from agentloop.testing import call

pytestmark = pytest.mark.anyio

invoked: list[dict[str, Any]] = []


@al.tool
async def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    invoked.append({"a": a, "b": b})
    return a + b


class Loose:
    """A hand-written tool whose schema allows extra properties."""

    spec = al.ToolSpec("loose", "Anything goes.", {"type": "object", "properties": {}})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> Any:
        return request.input


class Boom:
    spec = al.ToolSpec("boom", "Always fails.")

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        raise RuntimeError("kaboom")


class Sleepy:
    spec = al.ToolSpec("sleepy", "Never returns.")

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        await anyio.sleep_forever()
        return "unreachable"


class Chatty:
    spec = al.ToolSpec(
        "chatty", "Long output.", {"type": "object", "properties": {"n": {"type": "integer"}}}
    )

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> Any:
        n = request.input["n"]
        return "x" * n if n >= 0 else {"items": list(range(-n))}


class SyncInvoke:
    """A tool whose ``invoke`` is a plain function (run in a worker thread)."""

    spec = al.ToolSpec("sync", "Plain invoke.")

    def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return "from a thread"


class BadSchema:
    spec = al.ToolSpec("bad_schema", "Broken spec.", {"type": "no-such-type"})

    async def invoke(self, request: al.ToolRequest, ctx: al.ToolContext) -> str:
        return "unreachable"


def invalid(text: str) -> str:
    return f"invalid input for tool 'add': {text}"


@pytest.mark.parametrize(
    ("call_input", "problem"),
    [
        ({}, "at $: 'a' is a required property"),
        ({"a": "1"}, "at $.a: '1' is not of type 'integer'"),
        ({"a": 1, "c": 2}, "at $: Additional properties are not allowed ('c' was unexpected)"),
        (
            {"a": True, "b": 1.5, "z": 0},
            "at $: Additional properties are not allowed ('z' was unexpected); "
            "at $.a: True is not of type 'integer'; at $.b: 1.5 is not of type 'integer'",
        ),
        ([1, 2], "the input must be a JSON object, got list"),
    ],
)
async def test_schema_violations_become_error_results(call_input: Any, problem: str) -> None:
    invoked.clear()
    result = await run_one(add, call_input)
    assert result == al.ToolResultPart(
        "call-1", invalid(problem), True, metadata={al.tools.OUTCOME_KEY: "invalid_input"}
    )
    assert invoked == []


async def test_malformed_json_arguments_become_an_error_result() -> None:
    invoked.clear()
    broken = al.ToolCallPart("call-1", "add", {}, metadata={al.tools.RAW_ARGUMENTS_KEY: '{"a": 1,'})
    (result,) = await run_round([add], [broken])
    assert result.output == invalid("the arguments are not valid JSON: '{\"a\": 1,'")
    assert outcome(result) == "invalid_input"
    assert invoked == []


async def test_extra_properties_pass_where_the_schema_allows_them() -> None:
    result = await run_one(Loose(), {"anything": [1]})
    assert result == al.ToolResultPart("call-1", {"anything": [1]})


async def test_unknown_tool_lists_the_available_tools() -> None:
    results = await run_round([add, Loose()], [call("nope", {}, id="call-1")])
    assert results == [
        al.ToolResultPart(
            "call-1",
            "unknown tool 'nope'; available tools: add, loose",
            True,
            metadata={al.tools.OUTCOME_KEY: "unknown_tool"},
        )
    ]


async def test_a_raising_tool_becomes_an_error_result_and_a_logged_traceback() -> None:
    with structlog.testing.capture_logs() as logs:
        result = await run_one(Boom(), {})
    assert result == al.ToolResultPart(
        "call-1",
        "tool 'boom' failed: RuntimeError: kaboom",
        True,
        metadata={al.tools.OUTCOME_KEY: "failed"},
    )
    assert [(log["event"], log["tool"], log["exc_info"]) for log in logs] == [
        ("tool raised", "boom", True)
    ]


async def test_a_tool_that_never_returns_times_out_by_loop_limits() -> None:
    with anyio.fail_after(5):
        result = await run_one(Sleepy(), {}, limits=al.LoopLimits(tool_timeout=0.05))
    assert result == al.ToolResultPart(
        "call-1",
        "tool 'sleepy' timed out after 0.05 s",
        True,
        metadata={al.tools.OUTCOME_KEY: "timed_out"},
    )


async def test_executor_tool_timeout_and_whole_seconds_in_the_message() -> None:
    registry = al.ToolRegistry().with_tool(Sleepy())
    executor = al.tools.BasicToolExecutor([registry], tool_timeout=1)
    prepared = executor.prepare(
        al.ToolRequest("c1", "sleepy", {}, "s", "t"), al.permissions.AllowAll(), approved=False
    )
    assert isinstance(prepared, al.tools.PreparedCall)
    assert prepared.timeout == 1
    with anyio.fail_after(5):
        result = await executor.invoke(prepared, al.ToolContext("s", "t", "c1"))
    assert result.output == "tool 'sleepy' timed out after 1 s"


@pytest.mark.parametrize(
    ("n", "output"),
    [
        (20, "x" * 20),
        (25, "x" * 20 + "\n[output truncated: 5 of 25 characters cut]"),
        (-2, {"items": [0, 1]}),
        (-8, '{"items": [0, 1, 2, \n[output truncated: 15 of 35 characters cut]'),
    ],
)
async def test_large_outputs_are_truncated_with_a_marker(n: int, output: Any) -> None:
    executor = al.tools.BasicToolExecutor(
        [al.ToolRegistry().with_tool(Chatty())], max_output_chars=20
    )
    result = await run_one(Chatty(), {"n": n}, executor=executor)
    assert result == al.ToolResultPart("call-1", output)


async def test_a_plain_function_invoke_runs() -> None:
    assert await run_one(SyncInvoke(), {}) == al.ToolResultPart("call-1", "from a thread")


async def test_an_invalid_tool_schema_is_reported_not_raised() -> None:
    result = await run_one(BadSchema(), {})
    assert result.output == (
        "invalid input for tool 'bad_schema': the tool's own input schema is invalid "
        "('no-such-type' is not valid under any of the given schemas); fix its ToolSpec"
    )
    assert outcome(result) == "invalid_input"


class AbstainingPolicy:
    """A policy of the host's own that abstains (a built-in one alone is put in a chain)."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.PolicyVerdict:
        return al.permissions.NoVerdict()


async def test_a_bare_policy_that_abstains_fails_the_call_not_the_session() -> None:
    (result,) = await run_round(
        [add],
        [call("add", {"a": 1}, id="call-1")],
        permissions=AbstainingPolicy(),  # type: ignore[arg-type]
    )
    assert result == al.ToolResultPart(
        "call-1",
        "tool 'add' was not run: permission checker AbstainingPolicy returned NoVerdict() for "
        "tool.invoke; expected Allow, Deny or AskApproval; a policy that can abstain must "
        "be wrapped in PolicyChain(...)",
        True,
        metadata={al.tools.OUTCOME_KEY: "permission_denied"},
    )


async def test_every_call_of_a_mixed_round_gets_exactly_one_result_in_order() -> None:
    results = await run_round(
        [add, Boom()],
        [
            call("add", {"a": 2, "b": 3}, id="call-1"),
            call("boom", {}, id="call-2"),
            call("missing", {}, id="call-3"),
            call("add", {"a": "x"}, id="call-4"),
        ],
    )
    assert [(r.call_id, r.output, outcome(r)) for r in results] == [
        ("call-1", 5, None),
        ("call-2", "tool 'boom' failed: RuntimeError: kaboom", "failed"),
        ("call-3", "unknown tool 'missing'; available tools: add, boom", "unknown_tool"),
        ("call-4", invalid("at $.a: 'x' is not of type 'integer'"), "invalid_input"),
    ]


@al.tool(max_output_chars=5)
async def terse(n: int) -> str:
    """Say n letters; only five reach the model."""
    return "y" * n


@al.tool(max_output_chars=30)
async def roomy(n: int) -> str:
    """Say n letters; up to thirty reach the model."""
    return "z" * n


async def test_a_tool_can_set_its_own_output_limit() -> None:
    executor = al.tools.BasicToolExecutor(
        [al.ToolRegistry().with_tool(terse).with_tool(roomy).with_tool(Chatty())],
        max_output_chars=20,
    )
    results = await run_round(
        [],
        [
            call("terse", {"n": 8}, id="call-1"),
            call("roomy", {"n": 25}, id="call-2"),
            call("roomy", {"n": 32}, id="call-3"),
            call("chatty", {"n": 22}, id="call-4"),
        ],
        executor=executor,
    )
    assert [r.output for r in results] == [
        "yyyyy\n[output truncated: 3 of 8 characters cut]",
        "z" * 25,
        "z" * 30 + "\n[output truncated: 2 of 32 characters cut]",
        "x" * 20 + "\n[output truncated: 2 of 22 characters cut]",
    ]
    assert (terse.max_output_chars, add.max_output_chars) == (5, None)


@pytest.mark.parametrize("limit", [0, -1, 2.5, True])
def test_output_limits_must_be_positive_integers(limit: Any) -> None:
    with pytest.raises(ValueError, match="max_output_chars") as caught:
        al.tools.BasicToolExecutor([], max_output_chars=limit)
    assert str(caught.value) == (
        f"BasicToolExecutor: max_output_chars must be a positive integer or None, got {limit!r}"
    )
    with pytest.raises(ValueError, match="max_output_chars") as caught:
        al.tool(max_output_chars=limit)(terse.function)
    assert str(caught.value) == (
        f"@tool 'terse': max_output_chars must be a positive integer or None, got {limit!r}"
    )
