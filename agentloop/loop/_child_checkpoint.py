"""A child agent's checkpoint, taken when it asks its parent's host (``Agent.as_tool``).

The call running a child asks with the child's state as the question's
``resume`` data, so the parent's checkpoint holds the tree. A child may ask
while other calls of its round still run (an approval surfaces while they go
on): ``driver.checkpoint()`` refuses then, since a restore could not tell
whether they ran. :func:`child_resume` takes it all the same, the way a
driver with a store saves such a moment: the running calls are written as
not started, and listed as started (``RESUME_STARTED``). Restored with
:func:`restore_child`, a child answers the non-idempotent ones in doubt
(never run twice) and runs the idempotent ones again; the host's answer then
goes to the step it was given for.

The resume data is ``{RESUME_CHECKPOINT: document, RESUME_STARTED: [call id,
...]}``; a bare checkpoint document (what the first release of nested agents
wrote) is read as one with nothing started.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core._errors import InvalidStateError
from ._checkpoint import capture
from ._driver import LoopDriver
from ._state import CallStatus, DriverState

__all__ = ["RESUME_CHECKPOINT", "RESUME_STARTED", "child_resume", "restore_child"]

RESUME_CHECKPOINT = "agent.checkpoint"
"""Resume data key: the child's checkpoint document."""
RESUME_STARTED = "agent.started_calls"
"""Resume data key: the child's calls that ran when it asked (restored as started)."""

_RESTING = (DriverState.AWAITING_APPROVAL, DriverState.AWAITING_ANSWER)


def child_resume(driver: LoopDriver) -> dict[str, Any] | None:
    """The resume data for a question the child ``driver`` asks now (``None``: it does not
    rest on an approval or question, so no restore could go on from here)."""
    core = driver._core
    if driver.released or core.state not in _RESTING:
        return None
    turn = core.turn
    running: list[str] = []
    if turn is not None and turn.round is not None:
        idempotent = {
            spec.name for spec in driver._runner.tools.specs() if spec.annotations.idempotent
        }
        running = [
            call.call.id
            for call in turn.round.calls
            if call.status is CallStatus.RUNNING
            and call.question is None
            and call.call.name not in idempotent
        ]
    document = capture(core, core.state, driver.config)
    return {RESUME_CHECKPOINT: document, RESUME_STARTED: running}


async def restore_child(agent: Any, resume: Any) -> LoopDriver | None:
    """The child driver ``resume`` data restores (``None``: it holds no checkpoint)."""
    if not isinstance(resume, Mapping):
        return None
    if RESUME_CHECKPOINT not in resume:  # a bare checkpoint document
        driver: LoopDriver = await agent.resume(resume)
        return driver
    started = resume.get(RESUME_STARTED)
    if not isinstance(started, list) or not all(isinstance(c, str) for c in started):
        raise InvalidStateError(
            f"cannot resume a child agent: {RESUME_STARTED} must be a list of call ids, "
            f"got {started!r}"
        )
    driver = await agent.resume(resume[RESUME_CHECKPOINT], started_calls=started)
    return driver
