"""A typed result from the real local model: SmolLM2-135M behind both local servers.

llama.cpp's ``llama-server`` takes the OpenAI ``response_format: json_schema`` form;
llama-cpp-python's server its ``json_object`` + ``schema`` form. Both turn the schema
into a grammar, so the model's answer parses as the schema asks (its wording is the
toy model's: only the shape is checked). They skip only when the servers are not
installed; ``make test`` builds them first.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import attrs
import pytest

import agentloop as al
from agentloop.local import LlamaServer, LocalServer, llama_server_available, local_server_available

pytestmark = pytest.mark.anyio

REQUEST_LIMIT = 240  # seconds, for the whole turn; a busy 2-core host can be very slow


@attrs.frozen
class Capital:
    country: str
    city: str


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    if not llama_server_available():
        pytest.skip("llama.cpp's llama-server is not installed; run `make llama-server`")
    with LlamaServer(startup_timeout=120) as running:
        yield running


@pytest.fixture(scope="module")
def local_server() -> Iterator[LocalServer]:
    if not local_server_available():
        pytest.skip("the local model server is not installed; run `make local-server`")
    with LocalServer(startup_timeout=120) as running:
        yield running


async def ask(model: al.ModelAdapter) -> al.RunResult[Capital]:
    agent = al.Agent.builder().model(model).output(Capital).build()
    with anyio.fail_after(REQUEST_LIMIT):
        return await al.run(agent, "What is the capital of France?")


async def test_llama_server_returns_a_typed_result(llama_server: LlamaServer) -> None:
    result = await ask(llama_server.model(max_tokens=96))
    assert result.finish_reason is al.FinishReason.COMPLETED
    assert isinstance(result.output, Capital)
    assert isinstance(result.output.city, str)
    assert isinstance(result.output.country, str)
    assert result.driver is not None
    assert result.driver.config.output is not None
    assert result.driver.config.output.mode is al.OutputMode.NATIVE


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # one backend: a slower server
async def test_llama_cpp_python_returns_a_typed_result(local_server: LocalServer) -> None:
    result = await ask(local_server.model(max_tokens=96))
    assert result.finish_reason is al.FinishReason.COMPLETED
    assert isinstance(result.output, Capital)
    assert isinstance(result.output.city, str)
