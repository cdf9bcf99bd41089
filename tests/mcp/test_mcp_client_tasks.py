"""The client as a task receiver (MCP 2025-11-25): a server written by hand
(``task_requestor_server.py``) sends task-augmented elicitation and sampling
requests and ``tasks/*``, well formed or not; every answer is checked whole."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_support import HERE, LOADED, agent_on, outputs, wait_for_file
from structlog.testing import capture_logs

import agentloop as al
from agentloop.mcp import McpToolSource, StdioServer
from agentloop.testing import call, text, tool_calls

pytestmark = pytest.mark.anyio

REQUESTOR = StdioServer("req", sys.executable, [str(HERE / "task_requestor_server.py")])
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ELICIT = {"message": "Name?", "requestedSchema": SCHEMA, "task": {"ttl": 60000}}
SAMPLE = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "a haiku"}}],
    "maxTokens": 20,
    "task": {"ttl": 60000},
}
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def drive(*steps: dict[str, Any]) -> Any:
    return tool_calls(call("mcp__req__drive", {"steps": list(steps)}, id="a"))


def answers(driver: al.LoopDriver) -> list[dict[str, Any]]:
    [output] = outputs(driver)
    found: list[dict[str, Any]] = json.loads(output)
    return found


def task(task_id: str, status: str, message: str | None = None, ttl: int = 60000) -> Any:
    """The wire task (timestamps checked apart, then left out)."""
    wire = {"taskId": task_id, "status": status, "ttl": ttl, "pollInterval": 500}
    return wire if message is None else {**wire, "statusMessage": message}


def plain(value: Any) -> Any:
    """``value`` with each task's timestamps checked (ISO 8601, UTC) and removed."""
    if isinstance(value, dict):
        if "createdAt" in value:
            assert ISO.match(value["createdAt"])
            assert ISO.match(value["lastUpdatedAt"])
            assert value["createdAt"] <= value["lastUpdatedAt"]
        return {k: plain(v) for k, v in value.items() if k not in ("createdAt", "lastUpdatedAt")}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def invalid(message: str) -> dict[str, Any]:
    return {"error": {"code": -32602, "message": message}}


def related(task_id: str) -> dict[str, Any]:
    return {"io.modelcontextprotocol/related-task": {"taskId": task_id}}


@pytest.mark.parametrize(
    ("options", "requests"),
    [
        (
            {"elicitation": True, "sampling": True},
            {"elicitation": {"create": {}}, "sampling": {"createMessage": {}}},
        ),
        ({"elicitation": True}, {"elicitation": {"create": {}}}),
        ({"sampling": "model"}, {"sampling": {"createMessage": {}}}),
    ],
)
async def test_the_client_advertises_the_task_requests_it_answers(
    options: dict[str, Any], requests: dict[str, Any]
) -> None:
    async with McpToolSource(
        REQUESTOR, connect_timeout=LOADED, protocol="legacy", **options
    ) as source:
        sent = json.loads((await source.call_tool("capabilities", {})).value)
    assert sent["tasks"] == {"list": {}, "cancel": {}, "requests": requests}


async def test_without_elicitation_or_sampling_no_tasks_are_advertised() -> None:
    async with McpToolSource(REQUESTOR, connect_timeout=LOADED, protocol="legacy") as source:
        sent = json.loads((await source.call_tool("capabilities", {})).value)
    assert sent == {}


async def test_an_elicitation_task_waits_for_the_host_and_its_result_is_the_answer(
    tmp_path: Path,
) -> None:
    mark = tmp_path / "asked"
    script = [
        drive(
            {"send": "elicitation/create", "params": ELICIT},
            {"poll": "input_required"},
            {"mark": str(mark)},
            {"send": "tasks/result", "params": {"taskId": "$task"}},  # waits for the end
            {"send": "tasks/get", "params": {"taskId": "$task"}},
            {"send": "tasks/cancel", "params": {"taskId": "$task"}},
            {"send": "tasks/list"},
        ),
        "ok",
    ]
    async with agent_on(REQUESTOR, script, protocol="legacy", elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        assert (step.question.kind, step.question.message, step.question.schema) == (
            "mcp.elicitation",
            "Name?",
            SCHEMA,
        )
        await wait_for_file(mark)
        step.answer({"name": "Ada"})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    created, polled, result, got, cancel, listed = answers(driver)
    task_id = created["result"]["task"]["taskId"]
    done = task(task_id, "completed", "the host answered: accept")
    assert plain([created, polled, result, got, cancel, listed]) == [
        {"result": {"task": task(task_id, "working")}},
        {"result": task(task_id, "input_required", "waiting for the host's answer")},
        {"result": {"action": "accept", "content": {"name": "Ada"}, "_meta": related(task_id)}},
        {"result": done},
        invalid(
            f"tasks/cancel: task {task_id!r} already ended (completed); only a working or "
            "input_required task can be cancelled"
        ),
        {"result": {"tasks": [done]}},
    ]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_refused_elicitation_task_completes_with_the_refusal(action: str) -> None:
    script = [
        drive(
            {"send": "elicitation/create", "params": ELICIT},
            {"send": "tasks/result", "params": {"taskId": "$task"}},
        ),
        "ok",
    ]
    async with agent_on(REQUESTOR, script, protocol="legacy", elicitation=True) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        getattr(step, action)()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    created, result = answers(driver)
    task_id = created["result"]["task"]["taskId"]
    assert result == {"result": {"action": action, "_meta": related(task_id)}}


async def test_tasks_cancel_during_the_question_withdraws_it_and_the_call_goes_on(
    tmp_path: Path,
) -> None:
    mark = tmp_path / "cancelled"
    script = [
        drive(
            {"send": "elicitation/create", "params": ELICIT},
            {"poll": "input_required"},
            {"send": "tasks/cancel", "params": {"taskId": "$task"}},
            {"send": "tasks/get", "params": {"taskId": "$task"}},
            {"send": "tasks/result", "params": {"taskId": "$task"}},
            {"send": "tasks/cancel", "params": {"taskId": "$task"}},
            {"send": "ping", "params": {}},
            {"mark": str(mark)},
        ),
        "ok",
    ]
    with capture_logs() as logs:
        async with agent_on(REQUESTOR, script, protocol="legacy", elicitation=True) as driver:
            step = await driver.next()
            assert isinstance(step, al.CallQuestion)
            await wait_for_file(mark)
            with pytest.raises(al.QuestionWithdrawnError) as withdrawn:
                step.answer({"name": "late"})
            assert str(withdrawn.value) == (
                f"cannot answer_question_for({step.id!r}): the question was withdrawn: call "
                "a (mcp__req__drive) stopped waiting for it before an answer (it ended, was "
                "cancelled or timed out); nothing was recorded; call next() to go on with "
                "the call's result"
            )
            assert isinstance(await driver.run_until_blocked(), al.Finished)
    created, _, cancelled, got, result, again, _pong = answers(driver)
    task_id = created["result"]["task"]["taskId"]
    withdrawn_logs = [e for e in logs if e["event"] == "mcp task question withdrawn"]
    assert withdrawn_logs == [
        {
            "event": "mcp task question withdrawn",
            "log_level": "info",
            "server": "req",
            "task": task_id,
            "status": "cancelled",
            "reason": "the server sent tasks/cancel",
        }
    ]
    assert not [e for e in logs if e["event"] == "mcp task answer dropped"]
    ended = task(task_id, "cancelled", "the server sent tasks/cancel")
    assert plain([cancelled, got, result, again]) == [
        {"result": ended},
        {"result": ended},
        {
            "error": {
                "code": -32600,
                "message": f"task {task_id!r} was cancelled (the server sent tasks/cancel); "
                "it has no result",
            }
        },
        invalid(
            f"tasks/cancel: task {task_id!r} already ended (cancelled); only a working or "
            "input_required task can be cancelled"
        ),
    ]


@pytest.mark.parametrize("by", ["host", "model"])
async def test_a_sampling_task_is_answered_by_the_host_or_the_model(by: str) -> None:
    steps = (
        {"send": "sampling/createMessage", "params": SAMPLE},
        {"poll": "completed"},
        {"send": "tasks/result", "params": {"taskId": "$task"}},
    )
    if by == "model":
        script = [drive(*steps), text("Old pond."), "ok"]
        async with agent_on(REQUESTOR, script, protocol="legacy", sampling="model") as driver:
            assert isinstance(await driver.run_until_blocked(), al.Finished)
        model, who = "scripted-model", "the agent's model"
    else:
        async with agent_on(
            REQUESTOR, [drive(*steps), "ok"], protocol="legacy", sampling=True
        ) as driver:
            step = await driver.next()
            assert isinstance(step, al.CallQuestion)
            assert step.question.kind == "mcp.sampling"
            assert step.question.data["messages"] == SAMPLE["messages"]
            step.answer({"text": "Old pond.", "model": "host-model"})
            assert isinstance(await driver.run_until_blocked(), al.Finished)
        model, who = "host-model", "the host"
    created, polled, result = answers(driver)
    task_id = created["result"]["task"]["taskId"]
    assert plain(polled) == {"result": task(task_id, "completed", f"{who} answered")}
    assert result == {
        "result": {
            "role": "assistant",
            "content": {"type": "text", "text": "Old pond."},
            "model": model,
            "stopReason": "endTurn",
            "_meta": related(task_id),
        }
    }


async def test_a_declined_sampling_task_fails_with_the_requests_error() -> None:
    steps = (
        {"send": "sampling/createMessage", "params": SAMPLE},
        {"send": "tasks/result", "params": {"taskId": "$task"}},
        {"send": "tasks/get", "params": {"taskId": "$task"}},
    )
    async with agent_on(
        REQUESTOR, [drive(*steps), "ok"], protocol="legacy", sampling=True
    ) as driver:
        step = await driver.next()
        assert isinstance(step, al.CallQuestion)
        step.decline()
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    created, result, got = answers(driver)
    task_id = created["result"]["task"]["taskId"]
    refused = "the user rejected the sampling request (decline)"
    assert result == {"error": {"code": -1, "message": refused}}
    assert plain(got) == {"result": task(task_id, "failed", refused)}


async def test_a_task_is_dropped_after_its_ttl() -> None:
    short = {**SAMPLE, "task": {"ttl": 0}}  # raised to the shortest kept: 1 s
    steps = (
        {"send": "sampling/createMessage", "params": short},
        {"poll": "completed"},
        {"sleep": 1.2},
        {"send": "tasks/get", "params": {"taskId": "$task"}},
        {"send": "tasks/result", "params": {"taskId": "$task"}},
        {"send": "tasks/list"},
    )
    script = [drive(*steps), text("Old pond."), "ok"]
    async with agent_on(REQUESTOR, script, protocol="legacy", sampling="model") as driver:
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    created, polled, got, result, listed = answers(driver)
    task_id = created["result"]["task"]["taskId"]
    assert plain(created) == {"result": {"task": task(task_id, "working", ttl=1000)}}
    assert polled["result"]["status"] == "completed"
    gone = (
        "Task not found: no task {!r} on this connection (never made here, or dropped "
        "after its ttl)"
    )
    assert [got, result, listed] == [
        invalid("tasks/get: " + gone.format(task_id)),
        invalid("tasks/result: " + gone.format(task_id)),
        {"result": {"tasks": []}},
    ]


async def test_at_most_64_tasks_run_and_the_list_comes_in_pages(tmp_path: Path) -> None:
    mark = tmp_path / "listed"
    steps = (
        *[{"send": "elicitation/create", "params": ELICIT}] * 65,
        {"send": "tasks/list"},
        {"send": "tasks/list", "params": {"cursor": "$cursor"}},
        {"mark": str(mark)},
        {"poll": "completed"},  # the last one made: asked last
    )
    script = [drive(*steps), "ok"]
    async with agent_on(REQUESTOR, script, protocol="legacy", elicitation=True) as driver:
        step = await driver.next()
        await wait_for_file(mark)  # no question is answered before the 65th request
        asked = 0
        while isinstance(step, al.CallQuestion):
            asked += 1
            step.decline()
            step = await driver.run_until_blocked()
        assert isinstance(step, al.Finished)
    found = answers(driver)
    made = [answer["result"]["task"]["taskId"] for answer in found[:64]]
    refused, first, second, last = found[64:]
    assert asked == 64
    assert len(set(made)) == 64
    assert refused == {
        "error": {
            "code": -32600,
            "message": "elicitation/create: this client already runs 64 tasks for the server "
            "(its limit); no task made: read or cancel one first",
        }
    }
    assert [t["taskId"] for t in first["result"]["tasks"]] == made[:50]
    assert [t["taskId"] for t in second["result"]["tasks"]] == made[50:]
    assert "nextCursor" in first["result"]
    assert "nextCursor" not in second["result"]
    assert (last["result"]["taskId"], last["result"]["status"]) == (made[-1], "completed")


# -- hostile requests -------------------------------------------------------------------


@pytest.fixture
async def source() -> AsyncIterator[McpToolSource]:
    async with McpToolSource(
        REQUESTOR, connect_timeout=LOADED, protocol="legacy", elicitation=True, sampling=True
    ) as opened:
        yield opened


async def sent(source: McpToolSource, *steps: dict[str, Any]) -> list[dict[str, Any]]:
    """What the client answered each step (the call runs without a driver)."""
    output = await source.call_tool("drive", {"steps": list(steps)})
    assert output.is_error is False
    found: list[dict[str, Any]] = json.loads(output.value)
    return found


async def test_unknown_and_malformed_task_ids_get_the_specs_error(source: McpToolSource) -> None:
    ids: list[Any] = ["nope", "", 7, None, ["x"]]
    steps = [
        {"send": method, "params": {"taskId": task_id}}
        for method in ("tasks/get", "tasks/result", "tasks/cancel")
        for task_id in ids
    ]
    found = await sent(
        source, *steps, {"send": "tasks/get"}, {"send": "tasks/list", "params": {"cursor": "x"}}
    )
    expected = []
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        expected.append(
            invalid(
                f"{method}: Task not found: no task 'nope' on this connection (never made "
                "here, or dropped after its ttl)"
            )
        )
        expected.extend(
            invalid(
                f"{method}: params.taskId must be the non-empty string a CreateTaskResult "
                f"gave, got {task_id!r}"
            )
            for task_id in ids[1:]
        )
    assert found == [
        *expected,
        invalid(
            "tasks/get: params.taskId must be the non-empty string a CreateTaskResult gave, "
            "got None"
        ),
        invalid(
            "tasks/list: cursor 'x' is not one this client gave; pass the nextCursor of the "
            "previous page, or none for the first"
        ),
    ]
    # The connection stays usable; nothing was made.
    assert await sent(source, {"send": "tasks/list"}) == [{"result": {"tasks": []}}]
    assert source.connections == 1


async def test_a_task_request_outside_a_call_of_a_driver_is_refused(source: McpToolSource) -> None:
    found = await sent(source, {"send": "elicitation/create", "params": ELICIT})
    assert found == [
        {
            "error": {
                "code": -32600,
                "message": "elicitation/create is answered only during a tool call of this "
                "client; no task made",
            }
        }
    ]


words = st.text(st.characters(codec="utf-8"), max_size=5).filter(lambda w: not w.startswith("$"))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | words,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=6,
)
bad_tasks = json_values.filter(lambda value: not isinstance(value, dict))
bad_ttls = (
    st.integers(max_value=-1)
    | words
    | st.booleans()
    | st.lists(st.integers(), max_size=2)
    | st.floats(max_value=-0.001, allow_nan=False, allow_infinity=False)
)
bad_elicitations = st.fixed_dictionaries(
    {},
    optional={
        "message": json_values.filter(lambda value: not isinstance(value, str)),
        "requestedSchema": json_values.filter(lambda value: not isinstance(value, dict)),
    },
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    tasks=st.lists(bad_tasks, max_size=3),
    ttls=st.lists(bad_ttls, max_size=3),
    elicitations=st.lists(bad_elicitations, max_size=3),
)
async def test_malformed_task_params_are_refused_and_nothing_is_made(
    source: McpToolSource, tasks: list[Any], ttls: list[Any], elicitations: list[Any]
) -> None:
    method = "elicitation/create"
    steps = [{"send": method, "params": {**ELICIT, "task": value}} for value in tasks]
    steps += [{"send": method, "params": {**ELICIT, "task": {"ttl": ttl}}} for ttl in ttls]
    steps += [{"send": method, "params": {**body, "task": {}}} for body in elicitations]
    found = await sent(source, *steps, {"send": "tasks/list"})
    expected: list[Any] = [
        invalid(
            f'{method}: params.task must be an object ({{"ttl": ms}}), got {value!r}; no task made'
        )
        for value in tasks
    ]
    expected += [
        invalid(
            f"{method}: params.task.ttl must be a number of milliseconds >= 0 (or null), got "
            f"{ttl!r}; no task made"
        )
        for ttl in ttls
    ]
    assert found[: len(expected)] == expected
    malformed = found[len(expected) : -1]
    assert len(malformed) == len(elicitations)
    for answer in malformed:
        assert answer["error"]["code"] == -32602
        assert answer["error"]["message"].startswith(f"{method}: malformed params (")
        assert answer["error"]["message"].endswith("); no task made")
    assert found[-1] == {"result": {"tasks": []}}
    assert source.connections == 1


def expected_for(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """What the client answers ``method`` with ``params`` when it has no task."""
    if method == "tasks/list":
        cursor = params.get("cursor")
        if cursor is None or (isinstance(cursor, str) and cursor.isdecimal() and len(cursor) < 20):
            return {"result": {"tasks": []}}
        return invalid(
            f"tasks/list: cursor {cursor!r} is not one this client gave; pass the nextCursor "
            "of the previous page, or none for the first"
        )
    task_id = params.get("taskId")
    if isinstance(task_id, str) and task_id:
        return invalid(
            f"{method}: Task not found: no task {task_id!r} on this connection (never made "
            "here, or dropped after its ttl)"
        )
    return invalid(
        f"{method}: params.taskId must be the non-empty string a CreateTaskResult gave, "
        f"got {task_id!r}"
    )


task_methods = st.sampled_from(["tasks/get", "tasks/result", "tasks/cancel", "tasks/list"])
task_params = st.dictionaries(
    st.sampled_from(["taskId", "cursor", "_meta", "other"]) | words, json_values, max_size=3
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(requests=st.lists(st.tuples(task_methods, task_params), min_size=1, max_size=6))
async def test_any_tasks_request_gets_a_clear_answer_and_the_connection_stays(
    source: McpToolSource, requests: list[tuple[str, dict[str, Any]]]
) -> None:
    steps = [{"send": method, "params": params} for method, params in requests]
    found = await sent(source, *steps)
    assert found == [expected_for(method, params) for method, params in requests]
    assert source.connections == 1


async def test_the_calls_timeout_stops_while_any_question_waits_and_goes_on_after(
    tmp_path: Path,
) -> None:
    mark = tmp_path / "asked"
    steps = (
        {"send": "elicitation/create", "params": ELICIT},
        {"send": "elicitation/create", "params": ELICIT},
        {"poll": "input_required"},
        {"mark": str(mark)},
        {"poll": "completed"},  # both answered, first asked first: the timeout runs again
        {"sleep": 1.5},
    )
    script = [drive(*steps), "ok"]
    options = {"protocol": "legacy", "elicitation": True, "call_timeout": 1.0}
    async with agent_on(REQUESTOR, script, **options) as driver:
        first = await driver.next()
        await wait_for_file(mark)  # the host takes its time: not counted
        assert isinstance(first, al.CallQuestion)
        first.answer({"name": "one"})
        second = await driver.next()
        assert isinstance(second, al.CallQuestion)
        assert second.id != first.id
        second.answer({"name": "two"})
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    assert outputs(driver) == [
        "tool 'mcp__req__drive' failed: McpCallError: MCP server 'req' did not answer "
        "tools/call 'drive' within 1 s; the call was "
        "cancelled and the connection will be reopened on the next call"
    ]


async def test_a_task_is_kept_at_most_an_hour_and_ten_minutes_when_no_ttl_is_asked() -> None:
    steps = (
        {"send": "sampling/createMessage", "params": {**SAMPLE, "task": {"ttl": 10**12}}},
        {"poll": "completed"},
        {"send": "sampling/createMessage", "params": {**SAMPLE, "task": {}}},
        {"poll": "completed"},
        {"send": "sampling/createMessage", "params": {**SAMPLE, "task": {"ttl": None}}},
        {"poll": "completed"},
    )
    script = [drive(*steps), text("one"), text("two"), text("three"), "ok"]
    async with agent_on(REQUESTOR, script, protocol="legacy", sampling="model") as driver:
        assert isinstance(await driver.run_until_blocked(), al.Finished)
    found = answers(driver)
    assert [answer["result"]["task"]["ttl"] for answer in found[0::2]] == [3600000, 600000, 600000]
    assert [answer["result"]["ttl"] for answer in found[1::2]] == [3600000, 600000, 600000]
