"""Compaction: keep long sessions within the context window, validly.

A :class:`Compactor` is a loop mutator: when one of its triggers fires
(:class:`TokenBudgetTrigger`, :class:`ItemCountTrigger`,
:class:`ContextOverflowTrigger`) it runs a :class:`CompactionPipeline` of
strategies (:class:`DropFailedResults`, :class:`TrimLargeOutputs`,
:class:`SummarizeOlder`, :class:`KeepRecent`) and reports what it did in a
:class:`CompactionReport`. The driver validates every pass. See
``docs/compaction.md``; :func:`default_compactor` is the one-call setup.
"""

from ._archive import (
    READ_RESULT_TOOL,
    MemoryResultArchive,
    ResultArchive,
    SqliteResultArchive,
    read_result_tool,
)
from ._compactor import Compactor, default_compactor
from ._pipeline import CompactionPipeline, CompactionRequest, CompactionStrategy
from ._report import (
    REPORT_KEY,
    CompactionOutcome,
    CompactionReport,
    StrategyStep,
    is_compaction_mark,
    report_metadata,
)
from ._strategies import (
    DROPPED_KEY,
    ELIDED_KEY,
    SUMMARY_KEY,
    DropFailedResults,
    KeepRecent,
    TrimLargeOutputs,
)
from ._summarize import DEFAULT_SUMMARY_PROMPT, SummarizeOlder, render_for_summary
from ._tokens import (
    CHARS_PER_TOKEN,
    MEDIA_TOKENS,
    TokenEstimator,
    estimate_tokens,
    estimate_transcript,
    output_text,
    request_tokens,
)
from ._triggers import (
    CONTEXT_OVERFLOW,
    ERROR_KIND_KEY,
    CompactionTrigger,
    ContextOverflowTrigger,
    ItemCountTrigger,
    TokenBudgetTrigger,
    is_context_overflow,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "CONTEXT_OVERFLOW",
    "DEFAULT_SUMMARY_PROMPT",
    "DROPPED_KEY",
    "ELIDED_KEY",
    "ERROR_KIND_KEY",
    "MEDIA_TOKENS",
    "READ_RESULT_TOOL",
    "REPORT_KEY",
    "SUMMARY_KEY",
    "CompactionOutcome",
    "CompactionPipeline",
    "CompactionReport",
    "CompactionRequest",
    "CompactionStrategy",
    "CompactionTrigger",
    "Compactor",
    "ContextOverflowTrigger",
    "DropFailedResults",
    "ItemCountTrigger",
    "KeepRecent",
    "MemoryResultArchive",
    "ResultArchive",
    "SqliteResultArchive",
    "StrategyStep",
    "SummarizeOlder",
    "TokenBudgetTrigger",
    "TokenEstimator",
    "TrimLargeOutputs",
    "default_compactor",
    "estimate_tokens",
    "estimate_transcript",
    "is_compaction_mark",
    "is_context_overflow",
    "output_text",
    "read_result_tool",
    "render_for_summary",
    "report_metadata",
    "request_tokens",
]
