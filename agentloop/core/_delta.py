"""Streaming deltas: enough for a UI to render a model's output as it arrives."""

from __future__ import annotations

import attrs

from ._items import Part, PartKind

__all__ = ["AppendText", "BeginPart", "CommitPart", "Delta"]


@attrs.frozen
class Delta:
    """Base of every streaming delta; ``part_id`` names the part being built."""

    part_id: str


@attrs.frozen
class BeginPart(Delta):
    """A new part of ``kind`` starts."""

    kind: PartKind


@attrs.frozen
class AppendText(Delta):
    """More text for a text or reasoning part, or more JSON for a tool call's arguments."""

    text: str


@attrs.frozen
class CommitPart(Delta):
    """The part is complete; ``part`` is its fully assembled value."""

    part: Part
