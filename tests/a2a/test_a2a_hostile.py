"""A hostile or broken remote agent (any bytes, any JSON, any task shape, as one answer
or as an event stream, on every request) never gets past the A2A tool source: a call
returns an output or raises ``RemoteAgentError`` naming the agent, with a bounded
message, and never hangs; a card of any shape is used or refused with
``RemoteAgentConnectionError``. The server here is httpx's ``MockTransport`` (it answers
what hypothesis draws, byte for byte), on both anyio backends."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop.a2a import A2AToolSource, RemoteAgentConnectionError, RemoteAgentError

pytestmark = pytest.mark.anyio

URL = "http://hostile.test"
STATES = [
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
parts = st.one_of(
    st.fixed_dictionaries({"text": st.text(max_size=20)}),
    st.fixed_dictionaries({"data": json_values}),
    st.fixed_dictionaries({"raw": st.sampled_from(["aGk=", "!!", ""]),
                           "mediaType": st.sampled_from(["image/png", "text/x", ""])}),
    st.fixed_dictionaries({"url": st.text(max_size=20)}),
    st.fixed_dictionaries({"data": st.fixed_dictionaries(
        {"approvals": st.lists(st.fixed_dictionaries(
            {"callId": st.text(max_size=8)}, optional={"toolName": json_values}), max_size=3)})}),
    json_values,
)  # fmt: skip
messages = st.fixed_dictionaries(
    {"messageId": st.text(max_size=6), "role": st.just("ROLE_AGENT"),
     "parts": st.lists(parts, max_size=3)}
)  # fmt: skip
statuses = st.fixed_dictionaries(
    {"state": st.sampled_from(STATES) | json_values}, optional={"message": messages}
)
ids = st.sampled_from(["t-1", "t-2", ""]) | st.text(max_size=6)
tasks = st.fixed_dictionaries(
    {"id": ids, "contextId": ids, "status": statuses},
    optional={"artifacts": st.lists(
        st.fixed_dictionaries({"artifactId": ids, "parts": st.lists(parts, max_size=3)}),
        max_size=2)},
)  # fmt: skip
results = st.one_of(
    st.fixed_dictionaries({"task": tasks}),
    st.fixed_dictionaries({"message": messages}),
    st.fixed_dictionaries({"statusUpdate": st.fixed_dictionaries(
        {"taskId": ids, "contextId": ids, "status": statuses})}),
    st.fixed_dictionaries({"artifactUpdate": st.fixed_dictionaries(
        {"taskId": ids, "artifact": st.fixed_dictionaries(
            {"artifactId": ids, "parts": st.lists(parts, max_size=2)}),
         "append": st.booleans()})}),
    tasks,
    json_values,
)  # fmt: skip
good_tasks = st.fixed_dictionaries(
    {"id": st.just("t-1"), "contextId": st.just("c-1"),
     "status": st.fixed_dictionaries({"state": st.sampled_from(STATES)},
                                     optional={"message": messages})},
    optional={"artifacts": st.lists(
        st.fixed_dictionaries({"artifactId": ids, "parts": st.lists(parts, max_size=3)}),
        max_size=2)},
)  # fmt: skip
good_results = st.one_of(
    st.fixed_dictionaries({"task": good_tasks}),
    st.fixed_dictionaries({"message": messages}),
    st.fixed_dictionaries({"statusUpdate": st.fixed_dictionaries(
        {"taskId": st.just("t-1"), "contextId": st.just("c-1"),
         "status": st.fixed_dictionaries({"state": st.sampled_from(STATES)})})}),
)  # fmt: skip
envelopes = st.one_of(
    st.builds(lambda r: {"jsonrpc": "2.0", "id": "1", "result": r}, good_results),
    st.builds(lambda r: {"jsonrpc": "2.0", "id": "1", "result": r}, results),
    st.builds(lambda e: {"jsonrpc": "2.0", "id": "1", "error": e}, json_values),
    json_values,
)
answers = st.one_of(
    st.builds(lambda e: ("application/json", json.dumps(e).encode()), envelopes),
    st.builds(
        lambda es: (
            "text/event-stream",
            b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in es),
        ),
        st.lists(envelopes, max_size=4),
    ),
    st.tuples(st.sampled_from(["application/json", "text/event-stream"]), st.binary(max_size=60)),
)


def card(streaming: bool) -> dict[str, Any]:
    return {
        "name": "hostile",
        "description": "says anything",
        "version": "1",
        "supportedInterfaces": [
            {"protocolBinding": "JSONRPC", "protocolVersion": "1.0", "url": URL + "/"}
        ],
        "capabilities": {"streaming": streaming},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }


def hostile(card_body: bytes, answered: list[tuple[str, bytes]]) -> httpx.MockTransport:
    """Serves ``card_body``, then ``answered`` one per request, then JSON-RPC errors."""
    queue = list(answered)

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("agent-card.json"):
            return httpx.Response(
                200, content=card_body, headers={"content-type": "application/json"}
            )
        if queue:
            kind, body = queue.pop(0)
            return httpx.Response(200, content=body, headers={"content-type": kind})
        error = {"jsonrpc": "2.0", "id": "1", "error": {"code": -32603, "message": "no more"}}
        return httpx.Response(200, json=error)

    return httpx.MockTransport(handle)


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", "[1, Infinity]", '{"a": NaN}'])
@pytest.mark.parametrize("where", ["message", "artifact", "failed"])
async def test_a_data_part_json_cannot_carry_is_an_error(value: str, where: str) -> None:
    part = '{"data": ' + value + "}"
    if where == "message":
        result = '{"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [' + part + "]}}"
    else:
        state = "TASK_STATE_COMPLETED" if where == "artifact" else "TASK_STATE_FAILED"
        result = (
            '{"task": {"id": "t-1", "contextId": "c", "status": {"state": "' + state + '"}, '
            '"artifacts": [{"artifactId": "a", "parts": [' + part + "]}]}}"
        )
    body = ('{"jsonrpc": "2.0", "id": "1", "result": ' + result + "}").encode()
    transport = hostile(json.dumps(card(False)).encode(), [("application/json", body)])
    source = A2AToolSource(URL, http_transport=transport, call_timeout=5, poll_interval=0.001)
    async with source:
        [spec] = source.specs()
        tool = source.get(spec.name)
        assert tool is not None
        request = al.ToolRequest("c1", spec.name, {"message": "hi"}, "s", "t")
        with pytest.raises(RemoteAgentError) as raised:
            await tool.invoke(request, al.ToolContext("s", "t", "c1"))
    task = "(a message)" if where == "message" else "t-1"
    assert str(raised.value).startswith(
        f"remote agent {URL}: task {task} answered badly: a data part is not JSON (Fail to "
        "serialize"
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(streaming=st.booleans(), answered=st.lists(answers, min_size=1, max_size=5))
async def test_any_answer_is_an_output_or_a_remote_agent_error(
    streaming: bool, answered: list[tuple[str, bytes]]
) -> None:
    transport = hostile(json.dumps(card(streaming)).encode(), answered)
    source = A2AToolSource(URL, http_transport=transport, call_timeout=5, poll_interval=0.001)
    async with source:
        [spec] = source.specs()
        tool = source.get(spec.name)
        assert tool is not None
        request = al.ToolRequest("c1", spec.name, {"message": "hi"}, "s", "t")
        failure: RemoteAgentError | None = None
        try:
            output = await tool.invoke(request, al.ToolContext("s", "t", "c1"))
        except RemoteAgentError as error:
            failure = error
    if failure is not None:
        event("error")
        assert str(failure).startswith(f"remote agent {URL}")
        assert len(str(failure)) < 6_000
    else:
        event(f"output, error={output.is_error}")
        assert isinstance(output, al.ToolOutput)
        json.dumps(al.ToolResultPart("c1", output.value).output, default=repr)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.one_of(
    st.binary(max_size=80),
    st.builds(lambda v: json.dumps(v).encode(), json_values),
    st.builds(lambda c, k, v: json.dumps({**c, k: v}).encode(),
              st.builds(card, st.booleans()),
              st.sampled_from(["name", "supportedInterfaces", "capabilities", "skills"]),
              json_values),
))  # fmt: skip
async def test_a_card_of_any_shape_is_used_or_refused(body: bytes) -> None:
    source = A2AToolSource(URL, http_transport=hostile(body, []))
    failure: RemoteAgentConnectionError | None = None
    try:
        async with source:
            specs = source.specs()
    except RemoteAgentConnectionError as error:
        failure = error
    if failure is not None:
        event("refused")
        assert str(failure).startswith(("cannot read the agent card of", "the agent card of"))
        assert source.specs() == []
    else:
        event("used")
        assert len(specs) == 1


@pytest.mark.parametrize("arguments", [{}, {"message": ""}, {"message": 3, "data": {}}])
async def test_a_call_by_hand_without_a_message_sends_nothing(arguments: dict[str, Any]) -> None:
    sent: list[httpx.Request] = []
    transport = hostile(json.dumps(card(False)).encode(), [])

    async def record(request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("agent-card.json"):
            sent.append(request)
        return await transport.handle_async_request(request)

    async with A2AToolSource(URL, http_transport=httpx.MockTransport(record)) as source:
        tool = source.get("a2a__hostile")
        assert tool is not None
        request = al.ToolRequest("c1", "a2a__hostile", arguments, "s", "t")
        with pytest.raises(RemoteAgentError) as raised:
            await tool.invoke(request, al.ToolContext("s", "t", "c1"))
    assert str(raised.value) == (
        f"remote agent {URL}: tool 'a2a__hostile' expects the input {{message: non-empty "
        f"str, data?: object}}, got {arguments!r}; nothing was sent"
    )
    assert sent == []
