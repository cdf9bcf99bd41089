"""Base URLs are checked up front; environment keys go only to the provider's own host."""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import InvalidInputError
from agentloop.providers import AnthropicModel, GeminiModel, OpenAIChatModel, from_string

from . import _anthropic_streams as anthropic_streams
from . import _gemini_streams as gemini_streams
from . import _openai_streams as openai_streams
from ._helpers import collect, fast_retry, turn, user
from ._server import ReplayServer, sse

pytestmark = pytest.mark.anyio

ENV_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture
def env_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_KEYS:
        monkeypatch.setenv(name, f"env-secret-{name.lower()}")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "openai-compatible:127.0.0.1:8080#m",
            "OpenAIChatModel: base_url '127.0.0.1:8080' must start with http:// or https:// "
            "(did you mean 'http://127.0.0.1:8080'?); write it as 'http://HOST:PORT/PATH' or "
            "'https://HOST/PATH'",
        ),
        (
            "openai-compatible:localhost:11434/v1#m",
            "OpenAIChatModel: base_url 'localhost:11434/v1' must start with http:// or https:// "
            "(did you mean 'http://localhost:11434/v1'?); write it as 'http://HOST:PORT/PATH' or "
            "'https://HOST/PATH'",
        ),
        (
            "openai-compatible:ftp://host/v1#m",
            "OpenAIChatModel: base_url 'ftp://host/v1' must start with http:// or https://; "
            "write it as 'http://HOST:PORT/PATH' or 'https://HOST/PATH'",
        ),
        (
            "openai-compatible:http:///v1#m",
            "OpenAIChatModel: base_url 'http:///v1' names no host; write it as "
            "'http://HOST:PORT/PATH' or 'https://HOST/PATH'",
        ),
        (
            "openai-compatible:http://host/v1?key=1#m",
            "OpenAIChatModel: base_url 'http://host/v1?key=1' must not have a query or fragment; "
            "put options in headers= or extra_body=",
        ),
        (
            "openai-compatible:http://ho st/v1#m",
            "OpenAIChatModel: base_url 'http://ho st/v1' contains whitespace; write it as "
            "'http://HOST:PORT/PATH' or 'https://HOST/PATH'",
        ),
        (
            "openai-compatible:http://host:99999/v1#m",
            "OpenAIChatModel: base_url 'http://host:99999/v1' has port 99999, outside 1-65535; "
            "write it as 'http://HOST:PORT/PATH' or 'https://HOST/PATH'",
        ),
    ],
)
def test_from_string_refuses_bad_urls_up_front(spec: str, message: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        from_string(spec)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "factory",
    [
        lambda url: AnthropicModel("m", base_url=url, api_key="key-0123"),
        lambda url: GeminiModel("m", base_url=url, api_key="key-0123"),
        lambda url: OpenAIChatModel("m", base_url=url),
    ],
)
@pytest.mark.parametrize("url", ["example.com", "", "http://", "https://x/#frag"])
def test_every_adapter_checks_its_base_url(factory: Any, url: str) -> None:
    with pytest.raises(InvalidInputError, match=r"base_url"):
        factory(url)


def test_good_urls_are_kept_without_trailing_slashes() -> None:
    model = from_string("openai-compatible:http://127.0.0.1:8080/v1/#qwen")
    assert model.base_url == "http://127.0.0.1:8080/v1"
    assert (
        from_string("openai-compatible:https://[::1]:8000/v1#m").base_url == "https://[::1]:8000/v1"
    )


async def test_the_openai_env_key_is_not_sent_to_another_server(env_keys: None) -> None:
    async with ReplayServer([sse(openai_streams.text_stream())]) as server:
        model = OpenAIChatModel("m", base_url=f"{server.url}/v1", retry=fast_retry())
        await collect(model, turn([user("hi")]))
    assert "authorization" not in server.requests[0].headers
    assert repr(model).endswith("api_key=none)")


async def test_the_env_key_is_sent_when_explicitly_asked(env_keys: None) -> None:
    async with ReplayServer([sse(openai_streams.text_stream())]) as server:
        model = OpenAIChatModel(
            "m", base_url=f"{server.url}/v1", retry=fast_retry(), use_env_key=True
        )
        await collect(model, turn([user("hi")]))
    assert server.requests[0].headers["authorization"] == "Bearer env-secret-openai_api_key"


async def test_anthropic_and_gemini_env_keys_stay_home(env_keys: None) -> None:
    replies = [sse(anthropic_streams.text_stream()), sse(gemini_streams.text_stream())]
    async with ReplayServer(replies) as server:
        await collect(AnthropicModel("m", base_url=server.url), turn([user("hi")]))
        await collect(GeminiModel("m", base_url=server.url), turn([user("hi")]))
    assert "x-api-key" not in server.requests[0].headers
    assert "x-goog-api-key" not in server.requests[1].headers


def test_the_env_key_is_used_for_the_providers_own_host(env_keys: None) -> None:
    models = [
        OpenAIChatModel("m"),
        OpenAIChatModel("m", base_url="https://api.openai.com/v1/"),
        AnthropicModel("m"),
        GeminiModel("m"),
    ]
    auth = [model.endpoint().headers for model in models]
    assert (
        auth[0]["Authorization"] == auth[1]["Authorization"] == ("Bearer env-secret-openai_api_key")
    )
    assert auth[2]["x-api-key"] == "env-secret-anthropic_api_key"
    assert auth[3]["x-goog-api-key"] == "env-secret-gemini_api_key"


def test_use_env_key_false_never_reads_the_environment(env_keys: None) -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", use_env_key=False)
    assert "Authorization" not in model.endpoint().headers
    with pytest.raises(Exception, match=r"^OpenAIChatModel: no API key: pass api_key=\.\.\."):
        OpenAIChatModel("m", use_env_key=False)


def test_a_look_alike_host_is_not_the_providers_own(env_keys: None) -> None:
    for url in ("http://api.openai.com/v1", "https://api.openai.com.evil.example/v1"):
        assert "Authorization" not in OpenAIChatModel("m", base_url=url).endpoint().headers
