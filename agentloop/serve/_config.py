"""``ServeConfig``: what the inbox server needs besides a store."""

from __future__ import annotations

import secrets

import attrs

__all__ = ["ServeConfig", "new_token"]


def new_token() -> str:
    """A fresh random access token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def _check_token(instance: object, attribute: object, value: str) -> None:
    if not isinstance(value, str) or len(value) < 16:
        raise ValueError("the access token must be a str of at least 16 characters")


@attrs.frozen(kw_only=True)
class ServeConfig:
    """Settings of one inbox server.

    ``token`` is required on every request (``?token=`` once, then a cookie,
    or ``Authorization: Bearer``). A decision is recorded as made by the
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
