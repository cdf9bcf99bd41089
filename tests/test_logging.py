"""The library logs through the host's configuration and is quiet by default."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

from agentloop._log import LOGGER_NAME, get_logger


@pytest.fixture(autouse=True)
def unconfigured_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


def test_unconfigured_host_sees_nothing_on_stdout_or_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = get_logger()
    log.warning("provider.retry", attempt=2)
    log.info("local_server.ready", port=8080)
    log.error("boom")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ""


def test_stdlib_logging_receives_rendered_lines_at_their_levels(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    log = get_logger()
    log.debug("hidden", detail=1)
    log.info("local_server.ready", port=8080, server="llama")
    log.bind(session_id="s-1").warning("checkpoint not saved", reason="disk full")
    records = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert records == [
        (LOGGER_NAME, logging.INFO, "local_server.ready port=8080 server='llama'"),
        (LOGGER_NAME, logging.WARNING, "checkpoint not saved session_id='s-1' reason='disk full'"),
    ]


def test_exception_carries_the_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER_NAME)
    try:
        raise ValueError("bad value")
    except ValueError:
        get_logger().exception("observer raised", observer="Printer")
    (record,) = caplog.records
    assert record.getMessage() == "observer raised observer='Printer'"
    assert record.exc_info is not None
    assert record.exc_info[0] is ValueError


def test_a_host_that_configured_structlog_gets_structlog_events() -> None:
    with capture_logs() as logs:
        get_logger().bind(turn="turn-1").warning("provider.retry", attempt=3)
    assert logs == [
        {"event": "provider.retry", "turn": "turn-1", "attempt": 3, "log_level": "warning"}
    ]
