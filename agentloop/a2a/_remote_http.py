"""The HTTP side of the A2A tool source: a size-bounded transport, the card, the client.

Every response the remote agent sends (the card, a JSON-RPC answer, a whole
server-sent event stream) is read through :class:`BoundedTransport`, which
ends it with a :class:`~agentloop.a2a.RemoteAgentError` once it passes
``max_bytes``: a hostile or broken server cannot make us buffer without end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import AgentCard

from ._errors import RemoteAgentConnectionError, RemoteAgentError
from ._remote_questions import bounded

__all__ = ["BoundedTransport", "describe", "open_client", "origin"]


class _BoundedStream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, limit: int, agent: str, url: str) -> None:
        self._inner = inner
        self._limit = limit
        self._agent = agent
        self._url = url

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise RemoteAgentError(
                    f"remote agent {self._agent} sent more than {self._limit} bytes in one "
                    f"response from {self._url}; the response was dropped (raise "
                    "A2AToolSource(max_response_bytes=...) if such answers are expected)",
                    agent=self._agent,
                )
            yield chunk

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()


class BoundedTransport(httpx.AsyncBaseTransport):
    """``inner``, its response bodies cut off past ``max_bytes`` (with an error)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, max_bytes: int, agent: str) -> None:
        self._inner = inner
        self._max_bytes = max_bytes
        self._agent = agent

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self._max_bytes:
            await response.aclose()
            raise RemoteAgentError(
                f"remote agent {self._agent} announced {length} bytes from {request.url} "
                f"(at most {self._max_bytes} are read); the response was dropped",
                agent=self._agent,
            )
        stream = _BoundedStream(response.stream, self._max_bytes, self._agent, str(request.url))
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def origin(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of ``url`` (the port made explicit)."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def describe(error: BaseException) -> str:
    """One bounded line for a foreign error (its type when its text is empty)."""
    text = str(error).strip() or type(error).__name__
    return bounded(" ".join(text.split()), 1_000)


async def open_client(
    agent: str,
    http: httpx.AsyncClient,
    *,
    streaming: bool,
    card_timeout: float,
    other_origins: bool,
) -> tuple[AgentCard, Client]:
    """Fetch ``agent``'s card (within ``card_timeout``) and make an a2a-sdk client for it;
    raises :class:`RemoteAgentConnectionError` saying what was wrong."""
    resolver = A2ACardResolver(http, agent)
    try:
        with anyio.fail_after(card_timeout):
            card = await resolver.get_agent_card()
    except TimeoutError:
        raise RemoteAgentConnectionError(
            f"cannot read the agent card of {agent}: no answer within {card_timeout:g} s",
            agent=agent,
        ) from None
    except RemoteAgentError as error:
        raise RemoteAgentConnectionError(
            f"cannot read the agent card of {agent}: {error}", agent=agent
        ) from None
    except Exception as error:
        raise RemoteAgentConnectionError(
            f"cannot read the agent card of {agent}: {describe(error)}", agent=agent
        ) from None
    _check_card(agent, card, other_origins)
    config = ClientConfig(streaming=streaming, httpx_client=http)
    try:
        client = ClientFactory(config).create(card)
    except Exception as error:
        bindings = sorted({i.protocol_binding for i in card.supported_interfaces}) or ["none"]
        raise RemoteAgentConnectionError(
            f"the agent card of {agent} offers no interface this client speaks "
            f"({describe(error)}; offered: {', '.join(bindings)}; expected JSONRPC)",
            agent=agent,
        ) from None
    return card, client


def _check_card(agent: str, card: AgentCard, other_origins: bool) -> None:
    if not card.name.strip():
        raise RemoteAgentConnectionError(
            f"the agent card of {agent} has no name; expected an A2A 1.0 agent card",
            agent=agent,
        )
    jsonrpc = [i for i in card.supported_interfaces if i.protocol_binding == "JSONRPC"]
    if not jsonrpc:
        offered = sorted({i.protocol_binding for i in card.supported_interfaces}) or ["none"]
        raise RemoteAgentConnectionError(
            f"the agent card of {agent} offers no JSONRPC interface (offered: "
            f"{', '.join(offered)}); this client speaks A2A over JSON-RPC",
            agent=agent,
        )
    if other_origins:
        return
    for interface in jsonrpc:
        if origin(interface.url) != origin(agent):
            raise RemoteAgentConnectionError(
                f"the agent card of {agent} sends calls to {bounded(interface.url, 300)}, "
                "another origin than the card's; the headers (your credentials) would go "
                "there. Pass A2AToolSource(allow_other_origins=True) if that is intended",
                agent=agent,
            )
