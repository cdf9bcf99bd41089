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

from types import TracebackType

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
        self.scopes: set[anyio.CancelScope] | None = None
        """The snapshot's scopes now entered (made by the first one)."""


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
        release = self._release
        release.released = True
        for scope in release.scopes or ():
            self.handle._unregister(scope)
        release.scopes = None

    async def cancelled(self) -> None:
        """Wait until this snapshot is cancelled (forever, once released)."""
        await self.handle.cancelled_since(self.generation)
        if self._release.released:
            await anyio.sleep_forever()

    def scope(self) -> _SnapshotScope:
        """An anyio cancel scope that an interrupt after this snapshot cancels
        (``with snapshot.scope() as scope:``).

        The scope is cancelled at once if the snapshot already is. Check
        ``scope.cancelled_caught`` (or :attr:`is_cancelled`) after the block.
        """
        return _SnapshotScope(self)


class _SnapshotScope:
    """``TurnCancellation.scope()``: a context manager around one anyio cancel scope
    (a class, not a generator: the driver enters one per model call and per round)."""

    __slots__ = ("_scope", "_snapshot")

    def __init__(self, snapshot: TurnCancellation) -> None:
        self._snapshot = snapshot
        self._scope: anyio.CancelScope | None = None

    def __enter__(self) -> anyio.CancelScope:
        snapshot = self._snapshot
        scope = self._scope = anyio.CancelScope()
        scope.__enter__()
        if snapshot.is_cancelled:
            scope.cancel()
        release = snapshot._release
        if not release.released:
            snapshot.handle._register(scope, snapshot.generation)
            if release.scopes is None:
                release.scopes = set()
            release.scopes.add(scope)
        return scope

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        scope = self._scope
        assert scope is not None, "exit without enter"
        snapshot = self._snapshot
        try:
            snapshot.handle._unregister(scope)
            if snapshot._release.scopes is not None:
                snapshot._release.scopes.discard(scope)
        finally:
            swallowed = scope.__exit__(exc_type, exc, traceback)
        return bool(swallowed)
