"""The library's logger: follows the host's logging configuration, quiet by default.

structlog's out-of-the-box configuration prints every log line to stdout,
which a library must never do. So every module logs through
:func:`get_logger`, whose logger decides at each call:

- the host configured structlog (``structlog.configure(...)``): the line goes
  through the host's structlog configuration, as ``structlog.get_logger("agentloop")``;
- otherwise the line goes to the stdlib logger ``"agentloop"`` (rendered as
  ``event key=value ...``), which carries a ``NullHandler``: nothing is shown
  until the host configures stdlib logging (``logging.basicConfig(...)``, or a
  handler on ``"agentloop"``), and levels filter before anything is rendered.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["LOGGER_NAME", "get_logger"]

LOGGER_NAME = "agentloop"

_stdlib = logging.getLogger(LOGGER_NAME)
_stdlib.addHandler(logging.NullHandler())

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
}


def _render(event: str, fields: dict[str, Any]) -> str:
    if not fields:
        return event
    rest = " ".join(f"{key}={value!r}" for key, value in fields.items())
    return f"{event} {rest}"


class _LibraryLogger:
    """Dispatches each call to the host's structlog or to stdlib logging."""

    __slots__ = ("_context",)

    def __init__(self, context: dict[str, Any] | None = None) -> None:
        self._context = context or {}

    def bind(self, **fields: Any) -> _LibraryLogger:
        """A logger that adds ``fields`` to every line."""
        return _LibraryLogger({**self._context, **fields})

    def _log(self, method: str, event: str, fields: dict[str, Any]) -> None:
        merged = {**self._context, **fields} if self._context else fields
        if structlog.is_configured():
            getattr(structlog.get_logger(LOGGER_NAME), method)(event, **merged)
            return
        level = _LEVELS[method]
        if not _stdlib.isEnabledFor(level):
            return
        exc_info = merged.pop("exc_info", None) or (method == "exception")
        _stdlib.log(level, "%s", _render(event, merged), exc_info=exc_info)

    def debug(self, event: str, **fields: Any) -> None:
        """Log ``event`` at DEBUG."""
        self._log("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        """Log ``event`` at INFO."""
        self._log("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Log ``event`` at WARNING."""
        self._log("warning", event, fields)

    warn = warning

    def error(self, event: str, **fields: Any) -> None:
        """Log ``event`` at ERROR."""
        self._log("error", event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        """Log ``event`` at ERROR with the current exception's traceback."""
        self._log("exception", event, fields)

    def critical(self, event: str, **fields: Any) -> None:
        """Log ``event`` at CRITICAL."""
        self._log("critical", event, fields)


_LOGGER = _LibraryLogger()


def get_logger() -> _LibraryLogger:
    """The library's logger (see the module docstring)."""
    return _LOGGER
