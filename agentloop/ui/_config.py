"""``AguiConfig``: what the AG-UI endpoint needs besides an agent (no framework imports)."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from ..serve._config import ServeConfig, new_token

__all__ = ["AguiConfig", "agui_config"]


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _check_token(instance: object, attribute: object, value: str) -> None:
    if not isinstance(value, str) or len(value) < 16:
        raise ValueError("AguiConfig: the access token must be a str of at least 16 characters")


def _check_origins(instance: object, attribute: object, value: tuple[str, ...]) -> None:
    for origin in value:
        if not isinstance(origin, str) or "://" not in origin or origin.endswith("/"):
            raise ValueError(
                "AguiConfig: allowed_origins: expected origins like 'https://app.example.com' "
                f"or 'http://localhost:3000' (scheme, host, optional port; no path), got {origin!r}"
            )


def _check_seconds(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"AguiConfig: {attribute.name} must be seconds > 0, got {value!r}")


def _check_steps(instance: object, attribute: object, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"AguiConfig: max_steps must be an int >= 1, got {value!r}")


@attrs.frozen(kw_only=True)
class AguiConfig:
    """Settings of one AG-UI endpoint (:func:`agentloop.ui.create_agui_app`).

    Every request needs ``token`` (``Authorization: Bearer TOKEN``). Requests
    whose ``Host`` is not the bound address (``127.0.0.1``, ``localhost``,
    ``[::1]`` with the port) nor one of ``allowed_hosts`` answer 421; a
    browser request whose ``Origin`` is another site than the endpoint's own
    or one of ``allowed_origins`` answers 403. Decisions are recorded (in the
    store and the audit log) as made by the value of ``identity_header`` when
    set and present, else by ``identity``. ``approval_ttl`` (seconds after
    the call was made) expires approvals that state no deadline of their own.
    A run holds the session's lease for ``lease_ttl`` seconds, renewed while
    it drives; a run that takes more than ``max_steps`` steps ends in
    ``RUN_ERROR``. ``secrets`` are redacted in what the endpoint sends.
    """

    token: str = attrs.field(factory=new_token, validator=_check_token, repr=False)
    identity: str = "ag-ui"
    identity_header: str | None = None
    agent_name: str = "agent"
    approval_ttl: float | None = None
    allowed_hosts: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    allowed_origins: tuple[str, ...] = attrs.field(
        default=(), converter=_strings, validator=_check_origins
    )
    lease_ttl: float = attrs.field(default=60.0, validator=_check_seconds)
    max_steps: int = attrs.field(default=100, validator=_check_steps)
    secrets: tuple[str, ...] = attrs.field(default=(), converter=_strings, repr=False)


def agui_config(serve: ServeConfig) -> AguiConfig:
    """The AG-UI endpoint's settings inside ``agentloop serve``: the inbox's own."""
    return AguiConfig(
        token=serve.token,
        identity=serve.identity,
        identity_header=serve.identity_header,
        agent_name=serve.agent_name,
        approval_ttl=serve.approval_ttl,
        allowed_hosts=serve.allowed_hosts,
        secrets=serve.secrets,
    )
