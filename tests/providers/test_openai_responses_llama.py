"""OpenAIResponsesModel against a REAL server: llama.cpp's ``llama-server`` on ``/v1/responses``.

The pinned ``llama-server`` (``make llama-server``) serves SmolLM2-135M; its Responses
stream addresses items by ``item_id`` only (no ``output_index`` / ``content_index``),
reports ``status: completed`` even when ``max_output_tokens`` stopped it, and ends with
``response.completed`` carrying ``usage``. The model is tiny, so the tests assert shapes
and counts, never wording. They skip only when the server is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from agentloop import (
    AppendText,
    BeginPart,
    FinishReason,
    Item,
    ItemKind,
    PartKind,
    ProviderError,
    ProviderErrorKind,
    TextPart,
    Usage,
)
from agentloop.local import LlamaServer, llama_server_available
from agentloop.providers import OpenAIResponsesModel

from ._helpers import collect, result_of, turn, user

pytestmark = pytest.mark.anyio

REQUEST_LIMIT = 180  # seconds; a busy 2-core host can be very slow for a while


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    if not llama_server_available():
        pytest.skip("llama.cpp's llama-server is not installed; run `make llama-server`")
    with LlamaServer(startup_timeout=120) as running:
        yield running


def model_for(server: LlamaServer, **options: object) -> OpenAIResponsesModel:
    # the server's per-run key: LlamaServer.model() builds Chat Completions adapters only
    key = server._api_key
    return OpenAIResponsesModel(
        "smollm2", base_url=server.base_url, api_key=key, temperature=0.0, **options
    )


async def test_a_streamed_answer_with_instructions_usage_and_ids(server: LlamaServer) -> None:
    transcript = [Item.text(ItemKind.SYSTEM, "Be brief."), user("Say hello.")]
    with anyio.fail_after(REQUEST_LIMIT):
        events = await collect(model_for(server, max_tokens=12), turn(transcript))
    result = result_of(events)
    assert events[0] == BeginPart("part-0", PartKind.TEXT)
    deltas = [event.text for event in events if isinstance(event, AppendText)]
    assert len(deltas) > 1
    (part,) = result.output_items[0].parts
    assert isinstance(part, TextPart)
    assert part.text == "".join(deltas) != ""
    assert str(part.metadata["openai.item_id"]).startswith("msg_")
    assert result.finish_reason is FinishReason.COMPLETED  # the server says completed
    assert result.metadata == {"agentloop.provider_finish_reason": "completed"}
    assert result.model == "smollm2"
    assert str(result.response_id).startswith("resp_")
    usage = result.usage
    assert isinstance(usage, Usage)
    assert events[-2] == usage
    assert 0 < usage.output_tokens <= 12
    assert 0 <= usage.cache_read_tokens < usage.input_tokens


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the slowest: one backend is enough
async def test_a_second_turn_sends_the_first_answer_back(
    server: LlamaServer, anyio_backend: str
) -> None:
    model = model_for(server, max_tokens=8)
    with anyio.fail_after(REQUEST_LIMIT):
        first = result_of(await collect(model, turn([user("Name a colour.")])))
        follow = [user("Name a colour."), first.output_items[0], user("Another one?")]
        second = result_of(await collect(model, turn(follow)))
    assert second.finish_reason is FinishReason.COMPLETED
    assert second.output_items[0].text_content != ""
    usage = second.usage
    assert isinstance(usage, Usage)
    assert first.usage is not None
    assert usage.input_tokens > first.usage.input_tokens  # the first answer went back in


async def test_a_wrong_api_key_is_an_auth_error(server: LlamaServer) -> None:
    model = OpenAIResponsesModel("smollm2", base_url=server.base_url, api_key="not-the-key")
    with anyio.fail_after(REQUEST_LIMIT), pytest.raises(ProviderError) as caught:
        await collect(model, turn([user("hi")]))
    assert (caught.value.status, caught.value.kind) == (401, ProviderErrorKind.AUTH)
    assert "not-the-key" not in str(caught.value)
