"""The terminal: reading lines without losing any, and what Ctrl-C does.

``TerminalReader`` reads each line in a daemon thread. A read that is
cancelled (Ctrl-C at a prompt) leaves that thread waiting; the next read
reuses it, so a line typed later is never swallowed by an abandoned reader,
and the process can exit without waiting for Enter.

``CtrlC`` routes SIGINT while a command runs: the first Ctrl-C cancels the
prompt being shown and the running turn (through the agent's
``CancellationController``); a second one, before anything else happened,
exits with status 130.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator

import anyio
import anyio.from_thread
import anyio.lowlevel
import attrs
from rich.console import Console
from rich.text import Text

from ..core._cancellation import CancellationController
from ._render import Renderer

__all__ = ["EXIT_INTERRUPTED", "CtrlC", "PromptInterrupted", "ReadLine", "TerminalReader"]

EXIT_INTERRUPTED = 130
"""The exit status after Ctrl-C ended the command (128 + SIGINT)."""

ReadLine = Callable[[str], Awaitable[str | None]]
"""Shows a prompt and returns the line typed (``None`` at end of input)."""


class PromptInterrupted(Exception):
    """Raised by a read that Ctrl-C cancelled."""


class TerminalReader:
    """``await reader(prompt)``: a line from the terminal, ``None`` at end of input."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._pending: _PendingLine | None = None

    async def __call__(self, prompt: str) -> str | None:
        if self._pending is None:
            self._pending = self._start(prompt)
        else:  # an earlier read still waits for its line: it answers this prompt
            self.console.print(Text(prompt), end="")
        pending = self._pending
        await pending.done.wait()
        self._pending = None
        if pending.error is not None:
            raise pending.error
        return pending.line

    def _start(self, prompt: str) -> _PendingLine:
        pending = _PendingLine(anyio.Event())
        token = anyio.lowlevel.current_token()

        def read() -> None:
            try:  # Text: a prompt like "[y/n/e(dit)]" is not rich markup
                pending.line = self.console.input(Text(prompt))
            except EOFError:
                pending.line = None
            except Exception as error:  # pragma: no cover - the terminal broke
                pending.error = error
            with contextlib.suppress(RuntimeError):  # the loop is gone: the command ended
                anyio.from_thread.run_sync(pending.done.set, token=token)

        threading.Thread(target=read, name="agentloop-input", daemon=True).start()
        return pending


@attrs.define
class _PendingLine:
    done: anyio.Event
    line: str | None = None
    error: Exception | None = None


class CtrlC:
    """What Ctrl-C does while a command runs (see the module docstring)."""

    def __init__(self, renderer: Renderer, controller: CancellationController | None) -> None:
        self.renderer = renderer
        self.controller = controller
        self.turn_running = False
        self.exiting = False
        self.pressed = 0
        self._armed = False
        self._prompt: anyio.CancelScope | None = None
        self._command: anyio.CancelScope | None = None
        self._stoppable: anyio.CancelScope | None = None

    def press(self) -> None:
        """One Ctrl-C."""
        self.pressed += 1
        if self._stoppable is not None:  # work the user stops at once (a build)
            self.exiting = True
            self.renderer.error("interrupted")
            self._stoppable.cancel()
            return
        if self._armed:
            self.exiting = True
            self.renderer.error("interrupted")
            if self._command is not None:
                self._command.cancel()
            return
        self._armed = True
        if self._prompt is not None:
            self._prompt.cancel()
        if self.turn_running and self.controller is not None:
            self.renderer.note("(Ctrl-C: cancelling the current turn; press it again to exit)")
            self.controller.interrupt()
        else:
            self.renderer.note("(Ctrl-C: press it again to exit, or type /quit)")

    @contextlib.contextmanager
    def stoppable(self) -> Iterator[anyio.CancelScope]:
        """A scope the first Ctrl-C cancels, ending the command (exit 130)."""
        with anyio.CancelScope() as scope:
            self._stoppable = scope
            try:
                yield scope
            finally:
                self._stoppable = None

    def start_turn(self) -> None:
        """A turn starts: Ctrl-C cancels it."""
        self.turn_running = True
        self._armed = False

    def end_turn(self) -> None:
        """The turn ended (finished or cancelled)."""
        self.turn_running = False

    def prompts(self, read_line: ReadLine) -> ReadLine:
        """``read_line`` made cancellable: Ctrl-C at the prompt raises ``PromptInterrupted``."""

        async def read(prompt: str) -> str | None:
            with anyio.CancelScope() as scope:
                self._prompt = scope
                try:
                    line = await read_line(prompt)
                finally:
                    self._prompt = None
                self._armed = False
                return line
            self.renderer.end_inline()
            raise PromptInterrupted(prompt)

        return read

    async def run(self, command: Callable[[], Awaitable[int]]) -> int:
        """Run ``command`` with SIGINT routed here; its status, or 130 after a second Ctrl-C."""
        status = EXIT_INTERRUPTED
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async with anyio.create_task_group() as group:
                self._command = group.cancel_scope

                async def route() -> None:
                    async for _signal in signals:
                        self.press()

                group.start_soon(route)
                status = await command()
                group.cancel_scope.cancel()
        return EXIT_INTERRUPTED if self.exiting else status
