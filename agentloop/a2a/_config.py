"""``A2AConfig``: what the A2A server needs besides an agent (no framework imports)."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from ..serve._config import new_token

__all__ = ["A2AConfig"]


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _check_token(instance: object, attribute: object, value: str) -> None:
    if not isinstance(value, str) or len(value) < 16:
        raise ValueError("A2AConfig: the access token must be a str of at least 16 characters")


def _check_url(instance: object, attribute: object, value: str) -> None:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ValueError(
            f"A2AConfig: url must be the server's public http(s) URL (the agent card names "
            f"it), got {value!r}"
        )


@attrs.frozen(kw_only=True)
class A2AConfig:
    """Settings of one A2A server (:func:`agentloop.a2a.create_a2a_app`).

    ``url`` is where clients reach the server (the agent card names it as the
    JSON-RPC endpoint); ``name``, ``description`` and ``version`` go in the
    card. Every request but the card's needs ``token`` (``Authorization:
    Bearer TOKEN``; the card declares it); requests whose ``Host`` is not the
    bound address nor one of ``allowed_hosts`` answer 421. Decisions are
    recorded as made by ``identity``; ``approval_ttl`` expires approvals that
    state no deadline. A task holds its session's lease for ``lease_ttl``
    seconds, renewed while it runs.
    """

    url: str = attrs.field(validator=_check_url)
    token: str = attrs.field(factory=new_token, validator=_check_token, repr=False)
    name: str = "agentloop agent"
    description: str = "An agentloop agent; tool calls that need approval wait in input-required."
    version: str = "1.0.0"
    identity: str = "a2a"
    agent_name: str = "agent"
    approval_ttl: float | None = None
    allowed_hosts: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    lease_ttl: float = 60.0
    secrets: tuple[str, ...] = attrs.field(default=(), converter=_strings, repr=False)
