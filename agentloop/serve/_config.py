"""``ServeConfig``: what the inbox server needs besides a store."""

from __future__ import annotations

import secrets

import attrs

__all__ = ["ServeConfig", "new_token"]

SERVE_MODULES = ("starlette", "uvicorn", "sse_starlette", "jinja2")
"""The serve extra's modules, in the order a missing one is named."""


def new_token() -> str:
    """A fresh random access token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def _check_token(instance: object, attribute: object, value: str) -> None:
    if not isinstance(value, str) or len(value) < 16:
        raise ValueError("the access token must be a str of at least 16 characters")


def _check_session_ttl(instance: object, attribute: object, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 1:
        raise ValueError(f"session_ttl must be a number of seconds >= 1, got {value!r}")


def _check_hosts(instance: object, attribute: object, value: tuple[str, ...]) -> None:
    for host in value:
        if not isinstance(host, str) or not host or any(c in host for c in " /\\@,"):
            raise ValueError(
                f"allowed_hosts: expected names like 'inbox.example.com' or "
                f"'inbox.example.com:8443', got {host!r}"
            )


@attrs.frozen(kw_only=True)
class ServeConfig:
    """Settings of one inbox server.

    ``token`` is required on every request: ``?token=`` once, which the
    server exchanges for a session cookie (named for the port, derived from
    the token, never the token itself) valid for ``session_ttl`` seconds; or
    ``Authorization: Bearer TOKEN`` on each request. Requests whose ``Host``
    is not the bound address (``127.0.0.1``, ``localhost`` or ``[::1]`` with
    the port) nor one of ``allowed_hosts`` (``name`` or ``name:port``, e.g.
    the name a reverse proxy forwards) are refused with 421. A decision is recorded as made by the
    value of ``identity_header`` when set and present (a trusted reverse
    proxy's user header), else by ``identity``. ``approval_ttl`` (seconds
    after the call was made) expires approvals that state no deadline of
    their own. ``secrets`` are redacted wherever they would be rendered.
    """

    token: str = attrs.field(factory=new_token, validator=_check_token, repr=False)
    identity: str = "operator"
    identity_header: str | None = None
    agent_name: str = "agent"
    approval_ttl: float | None = None
    poll_interval: float = 1.0
    worker: bool = True
    secrets: tuple[str, ...] = attrs.field(default=(), repr=False)
    session_ttl: float = attrs.field(default=12 * 3600.0, validator=_check_session_ttl)
    allowed_hosts: tuple[str, ...] = attrs.field(
        default=(), converter=tuple, validator=_check_hosts
    )
