"""Reading, checking and rewriting a transcript.

The checks (:func:`validate_transcript`, :func:`find_violation`) state the
invariant every transcript keeps (each tool call answered by exactly one result,
after it); a :class:`LoopMutator` rewrites the transcript at a
:class:`MutationPoint` through a :class:`TranscriptCursor` and must keep it.
Ready mutators that shrink a transcript live in :mod:`agentloop.compaction`.
"""

from ..core._transcript import (
    TranscriptView,
    TranscriptViolation,
    find_violation,
    has_pending_input,
    validate_transcript,
)
from ..loop._mutators import LoopMutator, MutationContext, MutationPoint, TranscriptCursor

__all__ = [
    "LoopMutator",
    "MutationContext",
    "MutationPoint",
    "TranscriptCursor",
    "TranscriptView",
    "TranscriptViolation",
    "find_violation",
    "has_pending_input",
    "validate_transcript",
]
