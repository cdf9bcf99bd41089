"""``Compactor``: triggers and a pipeline as one loop mutator, reporting every pass."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import attrs

from .._log import get_logger
from ..loop._agent import AgentBuilder
from ..loop._events import LoopWarning as WarningEvent
from ..loop._mutators import MutationContext, MutationPoint, TranscriptCursor
from ..model._protocol import ModelAdapter
from ..tools._registry import ToolRegistry
from ._archive import MemoryResultArchive, ResultArchive, read_result_tool
from ._pipeline import CompactionPipeline, CompactionRequest, CompactionStrategy
from ._report import (
    REPORT_KEY,
    CompactionOutcome,
    CompactionReport,
    is_compaction_mark,
    report_metadata,
)
from ._strategies import DropFailedResults, KeepRecent, TrimLargeOutputs
from ._summarize import SummarizeOlder
from ._tokens import CHARS_PER_TOKEN, TokenEstimator, estimate_tokens, estimate_transcript
from ._tokens import request_tokens as _request_tokens
from ._triggers import CompactionTrigger, ContextOverflowTrigger, TokenBudgetTrigger

__all__ = ["Compactor", "default_compactor"]

_log = get_logger()


class Compactor:
    """A :class:`~agentloop.LoopMutator` that compacts the transcript when a trigger fires.

    At each mutation point every trigger is checked; if any fires, the
    ``pipeline`` runs with a target of ``target_tokens`` (default
    ``max_tokens``) and every pass is reported:

    - a :class:`CompactionReport` is appended to :attr:`reports` and logged
      (structlog event ``"compaction"``);
    - its JSON form is stamped on the last item of the transcript, under
      ``metadata["agentloop.compaction"]`` (the rendered request does not
      change);
    - a pass that removed nothing (``NO_OP``: the transcript is left as it
      was) or left the transcript above ``max_tokens`` (``OVER_BUDGET``)
      also emits a ``LoopWarning`` event. Neither is reported as success.

    With no trigger firing the transcript is not touched, so consecutive
    requests share their prefix. The driver validates every pass: a
    strategy that split a tool pair fails the step with ``MutatorError``.
    ``archive`` is where trimmed outputs are kept; :meth:`install` then adds
    the ``read_result`` tool, which reads ``page_chars`` characters at a time.
    """

    def __init__(
        self,
        pipeline: CompactionStrategy | Sequence[CompactionStrategy],
        *,
        triggers: Sequence[CompactionTrigger],
        max_tokens: int | None = None,
        target_tokens: int | None = None,
        estimator: TokenEstimator = estimate_tokens,
        archive: ResultArchive | None = None,
        page_chars: int = 8_000,
        name: str = "compactor",
        keep_reports: int = 100,
    ) -> None:
        if not triggers:
            raise ValueError("Compactor needs at least one trigger; it would never run")
        for value, label in ((max_tokens, "max_tokens"), (target_tokens, "target_tokens")):
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value <= 0
            ):
                raise ValueError(f"Compactor: {label} must be a positive int, got {value!r}")
        if isinstance(pipeline, Sequence):
            pipeline = CompactionPipeline(*pipeline)
        self.pipeline: CompactionStrategy = pipeline
        self.triggers: tuple[CompactionTrigger, ...] = tuple(triggers)
        self.max_tokens = max_tokens
        self.target_tokens = target_tokens if target_tokens is not None else max_tokens
        self.estimator = estimator
        self.archive = archive
        self.page_chars = page_chars
        self.name = name
        self.reports: deque[CompactionReport] = deque(maxlen=keep_reports)

    def __repr__(self) -> str:
        return (
            f"Compactor({self.name!r}, pipeline={self.pipeline!r}, "
            f"max_tokens={self.max_tokens}, target_tokens={self.target_tokens})"
        )

    @property
    def last_report(self) -> CompactionReport | None:
        """The report of the latest triggered pass, if any."""
        return self.reports[-1] if self.reports else None

    def handle_event(self, event: Any) -> None:
        """Observer hook: hands events to triggers that watch them (context overflow)."""
        for trigger in self.triggers:
            handle = getattr(trigger, "handle_event", None)
            if handle is not None:
                handle(event)

    def observe_error(self, error: object) -> bool:
        """Arm the overflow triggers if ``error`` is a context overflow; return whether it was."""
        seen = False
        for trigger in self.triggers:
            if isinstance(trigger, ContextOverflowTrigger):
                seen = trigger.observe(error) or seen
        return seen

    def install(self, builder: AgentBuilder) -> AgentBuilder:
        """Add this compactor to ``builder``: as a mutator, as an observer (for overflow
        events), and with an archive, the ``read_result`` tool."""
        builder.mutator(self).observer(self)
        if self.archive is not None:
            builder.add_tool_source(
                ToolRegistry("compaction").with_tool(
                    read_result_tool(self.archive, page_chars=self.page_chars)
                )
            )
        return builder

    async def mutate(self, cursor: TranscriptCursor, ctx: MutationContext) -> None:
        """Check the triggers; on a hit, run the pipeline and report the pass."""
        items = cursor.items
        reasons = [
            reason for trigger in self.triggers if (reason := trigger.check(items, ctx.point))
        ]
        if not reasons or not items:
            return
        request = CompactionRequest(
            session_id=ctx.session_id,
            turn_id=ctx.turn_id,
            point=ctx.point.value,
            reason="; ".join(reasons),
            target_tokens=self.target_tokens,
            estimator=self.estimator,
            cancellation=ctx.cancellation,
        )
        before = list(items)
        tokens_before = estimate_transcript(before, self.estimator)
        _, reported = _request_tokens(before, self.estimator, stale_before=is_compaction_mark)
        if isinstance(self.pipeline, CompactionPipeline):
            after, steps = await self.pipeline.run(before, request)
        else:
            after, steps = await CompactionPipeline(self.pipeline).run(before, request)
        tokens_after = estimate_transcript(after, self.estimator)
        if after is before or not after or tokens_after >= tokens_before:
            outcome = CompactionOutcome.NO_OP
            after, tokens_after = before, tokens_before
        elif self.max_tokens is not None and tokens_after > self.max_tokens:
            outcome = CompactionOutcome.OVER_BUDGET
        else:
            outcome = CompactionOutcome.COMPACTED
        report = CompactionReport(
            outcome=outcome,
            reason=request.reason,
            point=request.point,
            session_id=ctx.session_id,
            turn_id=ctx.turn_id,
            items_before=len(before),
            items_after=len(after),
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            max_tokens=self.max_tokens,
            target_tokens=self.target_tokens,
            reported_input_tokens=reported,
            steps=steps,
        )
        self.reports.append(report)
        last = after[-1]
        stamped = [
            *after[:-1],
            attrs.evolve(last, metadata={**last.metadata, REPORT_KEY: report_metadata(report)}),
        ]
        cursor.replace(stamped)
        fields = report_metadata(report)
        del fields["steps"]
        if outcome is CompactionOutcome.COMPACTED:
            _log.info("compaction", mutator=self.name, **fields)
        else:
            _log.warning("compaction", mutator=self.name, **fields)
            ctx.emit(WarningEvent(f"{ctx.turn_id}: {report.summary}"))


def default_compactor(
    max_context_tokens: int,
    *,
    summary_model: ModelAdapter | None = None,
    archive: ResultArchive | None = None,
    threshold: float = 0.8,
    target: float = 0.5,
) -> Compactor:
    """The compaction a chat needs for a context window of ``max_context_tokens``.

    Fires at turn boundaries when the request reaches ``threshold`` of the
    window, inside a turn (after a tool round) only when it would exceed the
    window, and at the next model call after a context-overflow error; then
    compacts down to ``target`` of the window with, in order, until it fits:
    emptying failed results, trimming large outputs (kept in ``archive``,
    default in memory, readable with ``read_result``), summarizing older
    turns with ``summary_model`` (if given), and dropping the oldest turns.
    Wire it with ``compactor.install(builder)``.
    """
    if not isinstance(max_context_tokens, int) or max_context_tokens <= 0:
        raise ValueError(
            f"default_compactor: max_context_tokens must be a positive int, got "
            f"{max_context_tokens!r}"
        )
    if not 0 < target < threshold <= 1:
        raise ValueError(
            f"default_compactor: need 0 < target < threshold <= 1, got target={target!r}, "
            f"threshold={threshold!r}"
        )
    archive = archive if archive is not None else MemoryResultArchive()
    max_chars = min(8_000, max(200, max_context_tokens * CHARS_PER_TOKEN // 10))
    strategies: list[CompactionStrategy] = [
        DropFailedResults(keep_last=4),
        TrimLargeOutputs(
            max_chars=max_chars,
            head_chars=max_chars * 3 // 10,
            tail_chars=max_chars // 5,
            archive=archive,
        ),
    ]
    if summary_model is not None:
        strategies.append(SummarizeOlder(model=summary_model, keep_last=None))
    strategies.append(KeepRecent())
    return Compactor(
        CompactionPipeline(*strategies),
        triggers=[
            TokenBudgetTrigger(max_tokens=max_context_tokens, threshold=threshold),
            TokenBudgetTrigger(
                max_tokens=max_context_tokens,
                threshold=1.0,
                points=[MutationPoint.AFTER_TOOL_RESULT],
                name="token_budget_mid_turn",
            ),
            ContextOverflowTrigger(),
        ],
        max_tokens=max_context_tokens,
        target_tokens=max(1, int(max_context_tokens * target)),
        archive=archive,
        page_chars=max_chars,
    )
