"""``RunRefused``: why a run ends in ``RUN_ERROR`` before it changed anything."""

from __future__ import annotations

__all__ = ["RunRefused"]


class RunRefused(Exception):
    """Raised when a run cannot go on; ``code`` is the ``RUN_ERROR`` code sent with it."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
