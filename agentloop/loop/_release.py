"""How a host drops a driver it is done with: ``LoopDriver.release()``, shielded and bounded.

A server run that rests (a question, an approval, the end of a turn) has its
session saved and drops the driver; a call still running in the task manager
(one waiting in ``ToolContext.ask`` for the answer to a ``CallQuestion``)
would otherwise wait there for the life of the process. :func:`release_dropped`
releases the driver in a ``finally`` block: shielded, so a run the client left
still releases, and bounded, so a tool that ignores cancellation cannot hold
the run; a failure is logged, never raised over the run's own outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from .._log import get_logger

if TYPE_CHECKING:
    from ._driver import LoopDriver

__all__ = ["RELEASE_SECONDS", "release_dropped"]

log = get_logger()

RELEASE_SECONDS = 10.0
"""How long a dropped driver's running calls get to end once cancelled."""


async def release_dropped(driver: LoopDriver | None) -> None:
    """``driver.release()`` (nothing for ``None``), shielded, within ``RELEASE_SECONDS``;
    logs instead of raising."""
    if driver is None:
        return
    with anyio.CancelScope(shield=True):
        with anyio.move_on_after(RELEASE_SECONDS) as scope:
            try:
                await driver.release()
            except Exception:
                log.exception("releasing a dropped driver failed", session_id=driver.session_id)
                return
        if scope.cancelled_caught:
            log.warning(
                "a dropped driver's calls did not end in time after cancelling them",
                session_id=driver.session_id,
                seconds=RELEASE_SECONDS,
            )
