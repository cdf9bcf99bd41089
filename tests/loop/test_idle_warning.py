"""A host loop that keeps calling ``next()`` on ``AwaitingInput`` without submitting is told."""

from __future__ import annotations

import logging
import warnings

import pytest

import agentloop as al
import agentloop.observe
import agentloop.testing

pytestmark = pytest.mark.anyio

HINT = (
    "the driver is idle and next() returns AwaitingInput at once: submit input "
    "(step.submit(...) or driver.submit_input(...)) or end the host loop on AwaitingInput"
)
MESSAGE = (
    "session 's': next() returned AwaitingInput 5 times in a row with no input submitted; " + HINT
)


class Recorder:
    def __init__(self) -> None:
        self.events: list[al.observe.AgentEvent] = []

    def handle_event(self, event: al.observe.AgentEvent) -> None:
        self.events.append(event)


async def _driver(recorder: Recorder) -> al.LoopDriver:
    agent = (
        al.Agent.builder()
        .model(al.testing.ScriptedModel(["Hello!", "Again!"]))
        .observer(recorder)
        .build()
    )
    return await agent.start(al.SessionConfig("s"))


async def _spin(driver: al.LoopDriver, times: int) -> None:
    for _ in range(times):
        assert isinstance(await driver.next(), al.AwaitingInput)


async def test_a_spinning_host_gets_one_warning_and_one_log_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agentloop")
    recorder = Recorder()
    driver = await _driver(recorder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await _spin(driver, 4)
        assert caught == []
        await _spin(driver, 50)
    assert [(w.category, str(w.message)) for w in caught] == [(al.IdleLoopWarning, MESSAGE)]
    assert caught[0].filename == __file__  # points at the host's next() call
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        (
            "agentloop",
            logging.WARNING,
            f"idle loop session_id='s' awaiting_input=5 hint={HINT!r}",
        )
    ]
    assert [e.message for e in recorder.events if isinstance(e, al.observe.LoopWarning)] == [
        MESSAGE
    ]


async def test_submitting_input_resets_the_count() -> None:
    recorder = Recorder()
    driver = await _driver(recorder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await _spin(driver, 4)
        driver.submit_input("Hi")
        assert isinstance(await driver.next(), al.Finished)
        await _spin(driver, 4)
        assert caught == []  # 4 + 4 idle steps, with a turn in between: no warning
        await _spin(driver, 1)
        assert len(caught) == 1
        step = await driver.next()
        assert isinstance(step, al.AwaitingInput)
        step.submit("Once more")
        assert isinstance(await driver.next(), al.Finished)
        await _spin(driver, 5)
    assert [str(w.message) for w in caught] == [MESSAGE, MESSAGE]  # once per idle run


async def test_run_and_a_host_that_stops_on_awaiting_input_are_never_warned() -> None:
    agent = al.Agent.builder().model(al.testing.ScriptedModel(["Hello!"])).build()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = await al.run(agent, "Hi")
        assert result.final_text == "Hello!"
        driver = await agent.start(al.SessionConfig("t"))
        for _ in range(4):
            await driver.next()


async def test_a_host_that_configured_structlog_gets_the_record_there() -> None:
    from structlog.testing import capture_logs

    driver = await _driver(Recorder())
    with warnings.catch_warnings(), capture_logs() as logs:
        warnings.simplefilter("ignore", al.IdleLoopWarning)
        await _spin(driver, 6)
    assert logs == [
        {
            "event": "idle loop",
            "log_level": "warning",
            "session_id": "s",
            "awaiting_input": 5,
            "hint": HINT,
        }
    ]


def test_the_warning_is_a_user_warning_not_an_error() -> None:
    assert issubclass(al.IdleLoopWarning, UserWarning)
    assert not issubclass(al.IdleLoopWarning, al.AgentLoopError)
    assert "IdleLoopWarning" in al.__all__
