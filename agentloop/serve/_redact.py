"""Keep secrets out of every page: API-key shapes and known secret values become ``[redacted]``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["Redactor"]

_KEY_SHAPES = re.compile(
    r"(sk-ant-[A-Za-z0-9_\-]{8,}"  # Anthropic
    r"|sk-(?:proj-)?[A-Za-z0-9_\-]{16,}"  # OpenAI
    r"|AIza[0-9A-Za-z_\-]{30,}"  # Google
    r"|gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub
    r"|xox[abpr]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/\-]{16,}=*)"
)

REDACTED = "[redacted]"


class Redactor:
    """Replaces key-shaped strings and the given secret values in text and JSON values."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= 8}, key=len, reverse=True)

    def text(self, value: str) -> str:
        """``value`` with every secret replaced."""
        for secret in self._secrets:
            value = value.replace(secret, REDACTED)
        return _KEY_SHAPES.sub(REDACTED, value)

    def json(self, value: Any) -> Any:
        """A copy of a JSON value with every string (keys too) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.json(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.json(v) for v in value]
        return value
