"""Cooperative cancellation by generation counter.

A :class:`CancellationController` owns a generation counter. The agent gets
its :meth:`~CancellationController.handle`; the driver takes a
:class:`TurnCancellation` snapshot when a turn starts. ``interrupt()`` bumps
the generation, so every snapshot taken before it is cancelled and every
later snapshot is clean: "cancel this turn, keep the session".

Cancellation really aborts work: the driver runs model streams, tools and
mutators inside :meth:`TurnCancellation.scope`, an anyio cancel scope that
``interrupt()`` cancels directly. Call ``interrupt()`` from the event loop's
thread (from another thread, go through ``anyio.from_thread.run_sync``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import attrs

__all__ = ["CancellationController", "CancellationHandle", "TurnCancellation"]


class CancellationHandle:
    """The shared, read side of a controller: take snapshots, watch generations."""

    __slots__ = ("_generation", "_scopes", "_waiters")

    def __init__(self) -> None:
        self._generation = 0
        self._scopes: dict[anyio.CancelScope, int] = {}
        self._waiters: list[tuple[int, anyio.Event]] = []

    @property
    def generation(self) -> int:
        """How many interrupts happened so far."""
        return self._generation

    def snapshot(self) -> TurnCancellation:
        """Capture the current generation; the result is cancelled by any later interrupt."""
        return TurnCancellation(self, self._generation)

    def is_cancelled_since(self, generation: int) -> bool:
        """Whether an interrupt happened after ``generation`` was captured."""
        return self._generation != generation

    async def cancelled_since(self, generation: int) -> None:
        """Wait until an interrupt happens after ``generation`` (returns at once if one did)."""
        if self._generation != generation:
            return
        event = anyio.Event()
        self._waiters.append((generation, event))
        await event.wait()

    def _interrupt(self) -> int:
        self._generation += 1
        for scope, generation in list(self._scopes.items()):
            if generation != self._generation:
                scope.cancel()
        waiters, self._waiters = self._waiters, []
        for _generation, event in waiters:
            event.set()
        return self._generation

    def _register(self, scope: anyio.CancelScope, generation: int) -> None:
        self._scopes[scope] = generation

    def _unregister(self, scope: anyio.CancelScope) -> None:
        self._scopes.pop(scope, None)


class CancellationController:
    """The write side: ``interrupt()`` cancels everything snapshotted before it."""

    __slots__ = ("_handle",)

    def __init__(self) -> None:
        self._handle = CancellationHandle()

    def handle(self) -> CancellationHandle:
        """The handle to give to ``AgentBuilder.cancellation``."""
        return self._handle

    def interrupt(self) -> int:
        """Cancel every snapshot taken so far; returns the new generation."""
        return self._handle._interrupt()


class _Release:
    """A snapshot's switch: once released, interrupts no longer reach it."""

    __slots__ = ("released", "scopes")

    def __init__(self) -> None:
        self.released = False
        self.scopes: set[anyio.CancelScope] = set()


@attrs.frozen
class TurnCancellation:
    """A snapshot: cancelled once any interrupt happens after it was taken.

    :meth:`for_call` derives a snapshot for one tool call; the driver calls
    its :meth:`release` when the call moves to the background, so the turn's
    later interrupts no longer reach it.
    """

    handle: CancellationHandle
    generation: int
    _release: _Release = attrs.field(factory=_Release, init=False, eq=False, repr=False)

    @classmethod
    def fired(cls) -> TurnCancellation:
        """A snapshot that is already cancelled (a restored turn an interrupt had hit)."""
        handle = CancellationHandle()
        snapshot = handle.snapshot()
        handle._interrupt()
        return snapshot

    @property
    def is_cancelled(self) -> bool:
        """Whether an interrupt happened since this snapshot (never, once released)."""
        return not self._release.released and self.handle.is_cancelled_since(self.generation)

    @property
    def is_released(self) -> bool:
        """Whether :meth:`release` was called."""
        return self._release.released

    def for_call(self) -> TurnCancellation:
        """The same snapshot with its own release switch (one per tool call)."""
        return TurnCancellation(self.handle, self.generation)

    def release(self) -> None:
        """Stop following interrupts: scopes entered from here stop being cancelled by them."""
        self._release.released = True
        for scope in self._release.scopes:
            self.handle._unregister(scope)
        self._release.scopes.clear()

    async def cancelled(self) -> None:
        """Wait until this snapshot is cancelled (forever, once released)."""
        await self.handle.cancelled_since(self.generation)
        if self._release.released:
            await anyio.sleep_forever()

    @contextmanager
    def scope(self) -> Iterator[anyio.CancelScope]:
        """An anyio cancel scope that an interrupt after this snapshot cancels.

        The scope is cancelled at once if the snapshot already is. Check
        ``scope.cancelled_caught`` (or :attr:`is_cancelled`) after the block.
        """
        with anyio.CancelScope() as scope:
            if self.is_cancelled:
                scope.cancel()
            if not self._release.released:
                self.handle._register(scope, self.generation)
                self._release.scopes.add(scope)
            try:
                yield scope
            finally:
                self.handle._unregister(scope)
                self._release.scopes.discard(scope)
