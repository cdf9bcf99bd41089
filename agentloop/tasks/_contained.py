"""Running a launch so that whatever its runner raises becomes the call's one result."""

from __future__ import annotations

import anyio

from .._log import get_logger
from ..core._items import ResultOutcome, ToolResultPart
from ..tools._errors import describe_error, synthesized_result
from ..tools._threads import really_cancelled
from ._protocol import TaskLaunch

__all__ = ["run_contained"]

log = get_logger()


async def run_contained(launch: TaskLaunch, task_id: str | None = None) -> ToolResultPart:
    """``launch.run()``'s result; any exception (``SystemExit`` and ``KeyboardInterrupt``
    too, and a stray ``CancelledError``) or a non-result becomes a failed result. Only a
    real cancellation propagates."""
    request = launch.request
    try:
        result = await launch.run()
    except BaseException as error:
        if isinstance(error, anyio.get_cancelled_exc_class()) and await really_cancelled():
            raise
        log.warning("task raised", task_id=task_id, tool=request.tool_name, exc_info=True)
        return synthesized_result(
            request.call_id,
            f"tool {request.tool_name!r} failed: {describe_error(error)}",
            ResultOutcome.FAILED,
        )
    if not isinstance(result, ToolResultPart):
        return synthesized_result(
            request.call_id,
            f"tool {request.tool_name!r} failed: its runner returned "
            f"{type(result).__name__}, expected a ToolResultPart",
            ResultOutcome.FAILED,
        )
    return result
