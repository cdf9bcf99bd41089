"""Usage and cost totals per session, counted once per model call."""

from __future__ import annotations

import attrs

from ..core._items import Item, ItemKind, Usage
from ..loop._agent import AgentBuilder
from ..loop._events import AgentEvent, RunStarted, TurnStarted

__all__ = ["SessionUsage", "UsageTotals"]


@attrs.frozen
class SessionUsage:
    """One session's totals: ``usage`` summed over ``model_calls`` calls (``cost`` inside)."""

    session_id: str
    model_calls: int = 0
    usage: Usage = attrs.field(factory=Usage)


class UsageTotals:
    """Sums the usage stamped on assistant items, per session.

    Register it for events and items (``UsageTotals().attach(builder)``).
    Each model call is counted once, from the usage the driver stamps on its
    assistant item, never also from ``UsageUpdated`` or ``TurnFinished``.
    Events carry no session id: the totals go to the session that last
    started (give concurrently driven sessions their own instance).
    """

    def __init__(self) -> None:
        self._sessions: dict[str, SessionUsage] = {}
        self._current: str | None = None

    def attach(self, builder: AgentBuilder) -> AgentBuilder:
        """Register on an ``AgentBuilder`` for events and items; returns the builder."""
        return builder.observer(self).transcript_observer(self)

    def handle_event(self, event: AgentEvent) -> None:
        """Follow which session is running."""
        if isinstance(event, RunStarted | TurnStarted):
            self._current = event.session_id
            self._sessions.setdefault(event.session_id, SessionUsage(event.session_id))

    def on_item_appended(self, item: Item) -> None:
        """Add an assistant item's usage to its session."""
        if item.kind is not ItemKind.ASSISTANT or item.usage is None or self._current is None:
            return
        before = self._sessions.get(self._current) or SessionUsage(self._current)
        self._sessions[self._current] = SessionUsage(
            self._current, before.model_calls + 1, before.usage + item.usage
        )

    def session(self, session_id: str) -> SessionUsage:
        """The totals of ``session_id`` (zero if it used nothing)."""
        return self._sessions.get(session_id) or SessionUsage(session_id)

    def sessions(self) -> list[SessionUsage]:
        """Every session's totals, by session id."""
        return [self._sessions[key] for key in sorted(self._sessions)]

    @property
    def total(self) -> Usage:
        """All sessions together."""
        total = Usage()
        for entry in self._sessions.values():
            total = total + entry.usage
        return total
