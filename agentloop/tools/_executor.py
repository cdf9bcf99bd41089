"""Turning one tool call into exactly one result: lookup, validation,
permissions (``prepare``, synchronous) and invocation (``invoke``, async).

Every failure becomes an error ``ToolResultPart`` with a typed outcome in its
metadata; nothing here raises for a bad call.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import math
from collections.abc import Awaitable, Collection, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeAlias

import anyio
import anyio.to_thread
import attrs
import cattrs
import jsonschema

from .._log import get_logger
from ..core._errors import ToolError
from ..core._items import (
    ResultOutcome,
    ToolResultPart,
)
from ..core._synthesized_results import RAW_ARGUMENTS_KEY, synthesized_result
from ..core._tool_spec import ToolAnnotations, ToolSpec
from ..permissions._requests import (
    PendingPermission,
    PermissionChecker,
    PermissionRequest,
    ToolInvocation,
)
from ._errors import ToolInDoubtError, describe_error
from ._fast_check import FastCheck, compile_fast_check
from ._outputs import OutputProblem, stored_result
from ._permission_check import Asked, PendingApproval, evaluate_requests
from ._registry import ToolCatalogEvent, ToolSource, compare_catalogs
from ._threads import (
    ThreadCall,
    really_cancelled,
    run_in_thread,
    stop_collecting,
    thread_calls,
    wait_for_threads,
)
from ._tool import Tool, ToolContext, ToolRequest, current_spec, proposed_requests

__all__ = [
    "RAW_ARGUMENTS_KEY",
    "PendingApproval",
    "BasicToolExecutor",
    "PreparedCall",
    "PrepareOutcome",
    "ToolExecutor",
    "synthesized_result",
]

log = get_logger()
_plain = cattrs.Converter()


@attrs.frozen
class PreparedCall:
    """A call that passed lookup, validation and permissions and may now run."""

    tool: Tool
    request: ToolRequest
    timeout: float | None


PrepareOutcome: TypeAlias = PreparedCall | PendingApproval | ToolResultPart


class ToolExecutor(Protocol):
    """Looks tools up, checks calls, and runs them."""

    def specs(self) -> list[ToolSpec]:
        """All advertised specs, sorted by name."""
        ...

    def drain_catalog_events(self) -> list[ToolCatalogEvent]:
        """Catalog changes of every source since the last drain."""
        ...

    def prepare(
        self,
        request: ToolRequest,
        permissions: PermissionChecker,
        *,
        approved: bool | Collection[PendingPermission],
    ) -> PrepareOutcome:
        """Check a call without running it.

        ``approved``: the requests a human granted (those of the
        ``PendingApproval`` they were shown), ``True`` for any, ``False`` for none.
        """
        ...

    async def invoke(self, call: PreparedCall, ctx: ToolContext) -> ToolResultPart:
        """Run a prepared call; never raises for a tool failure."""
        ...


_invocations: dict[str, ToolInvocation] = {}
"""The ``ToolInvocation`` asked before each call, by tool name (frozen, so one serves
every call of a tool whose annotations are the very same object)."""


def _pending(
    request: ToolRequest, asked: Asked, approved: bool | Collection[PendingPermission]
) -> PendingApproval | None:
    """The approval ``asked`` still needs once ``approved`` is granted, if any."""
    granted = approved if isinstance(approved, bool) else {p.request_key for p in approved}
    ungranted = [
        (permission, decision, pending)
        for permission, decision, pending in asked
        if granted is not True and (granted is False or pending.request_key not in granted)
    ]
    if not ungranted:
        return None
    permission, decision, _ = ungranted[0]
    return PendingApproval(
        request, permission, decision, tuple(pending for _, _, pending in ungranted)
    )


def _invocation(name: str, annotations: ToolAnnotations) -> ToolInvocation:
    """A new ``ToolInvocation``, kept for the tool's next calls (bounded)."""
    invocation = ToolInvocation(name, annotations)
    if len(_invocations) >= _SHARED_VALIDATORS_MAX:
        with contextlib.suppress(StopIteration, KeyError, RuntimeError):
            del _invocations[next(iter(_invocations))]  # the oldest
    _invocations[name] = invocation
    return invocation


_SHARED_VALIDATORS_MAX = 512
_NO_EVENTS: tuple[ToolCatalogEvent, ...] = ()  # what most drains return
_Compiled = tuple[jsonschema.protocols.Validator, FastCheck | None]
_shared_validators: dict[str, _Compiled] = {}
_validators_by_identity: dict[int, tuple[Any, _Compiled]] = {}
"""The same validators by the schema object's identity (a dict lookup, no JSON dump);
each entry keeps its schema alive, so an id is never reused while it is cached."""
"""Checked, compiled validators by schema text, shared by every executor.

Checking a schema against its metaschema and compiling it costs ~1.5 ms; an
``Agent`` makes an executor per session, so without this every session paid
it again. Only plain JSON schemas are shared (their ``repr`` is then exact),
compiled from a private deep copy so no caller's dict is ever aliased. Each
comes with its fast check (``_fast_check``) when the schema allows one."""


def _shared_validator(schema: Any) -> _Compiled:
    """The validator for ``schema`` (checked against its metaschema, compiled once) and
    its fast check for valid input, if any.

    Raises ``jsonschema.SchemaError`` for an invalid schema (never cached).
    """
    key = repr(schema) if _is_plain_json(schema) else None
    if key is not None and (shared := _shared_validators.get(key)) is not None:
        return shared
    if key is not None:
        schema = copy.deepcopy(schema)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    validator: jsonschema.protocols.Validator = cls(schema)
    # The fast path decides like Draft 2020-12 only, and is compiled only from a
    # private copy (a caller's dict could change under it); others validate slowly.
    fast = (
        compile_fast_check(schema)
        if key is not None and cls is jsonschema.Draft202012Validator
        else None
    )
    compiled = (validator, fast)
    if key is not None:
        if len(_shared_validators) >= _SHARED_VALIDATORS_MAX:
            _shared_validators.pop(next(iter(_shared_validators)), None)  # the oldest
        _shared_validators[key] = compiled
    return compiled


def _same_objects(now: Mapping[str, ToolSpec], before: Mapping[str, ToolSpec]) -> bool:
    """Whether both map the same names to the very same spec objects."""
    return len(now) == len(before) and all(before.get(name) is spec for name, spec in now.items())


def _same_specs(now: Sequence[ToolSpec], before: Sequence[ToolSpec]) -> bool:
    """Whether two listings hold the very same spec objects in the same order."""
    if len(now) != len(before):
        return False
    for position, spec in enumerate(now):  # noqa: SIM110 (all() over a generator is slower)
        if before[position] is not spec:
            return False
    return True


_Seen = tuple[tuple[ToolSource, tuple[ToolSpec, ...]], ...]
"""An executor's listings as last seen: (source, listing) pairs."""


def _listing_of(
    pairs: Sequence[tuple[ToolSource, tuple[ToolSpec, ...]]], source: ToolSource
) -> tuple[ToolSpec, ...] | None:
    """``source``'s listing among ``pairs`` (by identity), or ``None``."""
    for seen_source, listing in pairs:
        if seen_source is source:
            return listing
    return None


def _same_pairs(
    now: Sequence[tuple[ToolSource, tuple[ToolSpec, ...]]],
    before: Sequence[tuple[ToolSource, tuple[ToolSpec, ...]]],
) -> bool:
    """Whether both hold the very same sources and listing objects, in the same order."""
    if len(now) != len(before):
        return False
    for index, (source, listing) in enumerate(now):
        if before[index][0] is not source or before[index][1] is not listing:
            return False
    return True


def _is_plain_json(value: Any) -> bool:
    """Whether ``value`` is built only of dict (str keys), list, str, int, float, bool, None."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _is_plain_json(v) for k, v in value.items())
    if kind is list:
        return all(_is_plain_json(element) for element in value)
    return kind in (str, int, float, bool) or value is None


def _error_order(error: jsonschema.ValidationError) -> tuple[list[tuple[int, int, str]], str]:
    """Sort key: by JSON path (parents first, indexes numerically), then by message."""
    path = [(0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in error.absolute_path]
    return path, error.message


def _json_path(path: Sequence[Any]) -> str:
    out = "$"
    for element in path:
        out += f"[{element}]" if isinstance(element, int) else f".{element}"
    return out


class BasicToolExecutor:
    """The default executor over one or more tool sources.

    ``collision``: ``"first_wins"`` (an earlier source shadows a later tool of
    the same name) or ``"error"`` (a duplicate name raises ``ToolError`` when
    specs are listed). ``max_output_chars`` truncates longer outputs with a
    marker saying how much was cut, unless the tool sets its own
    ``max_output_chars`` attribute (``@tool(max_output_chars=...)``).
    ``tool_timeout`` applies to tools without their own ``timeout`` attribute.
    """

    __slots__ = (
        "__weakref__",
        "_interrupted",
        "_seen",
        "_specs_memo",
        "collision",
        "max_output_chars",
        "sources",
        "thread_grace",
        "tool_timeout",
    )

    def __init__(
        self,
        sources: Sequence[ToolSource] = (),
        *,
        collision: Literal["first_wins", "error"] = "first_wins",
        max_output_chars: int | None = 100_000,
        tool_timeout: float | None = None,
        thread_grace: float = 1.0,
    ) -> None:
        if collision not in ("first_wins", "error"):
            raise ValueError(f"collision must be 'first_wins' or 'error', got {collision!r}")
        if max_output_chars is not None and not _is_positive_int(max_output_chars):
            raise ValueError(
                "BasicToolExecutor: max_output_chars must be a positive integer or None, "
                f"got {max_output_chars!r}"
            )
        if tool_timeout is not None and not _is_timeout(tool_timeout):
            raise ValueError(
                "BasicToolExecutor: tool_timeout must be a positive number of seconds or None "
                f"(no limit), got {tool_timeout!r}"
            )
        if not (_is_timeout(thread_grace) or thread_grace == 0) or math.isinf(thread_grace):
            raise ValueError(
                "BasicToolExecutor: thread_grace must be a finite number of seconds >= 0, "
                f"got {thread_grace!r}"
            )
        self.sources = list(sources)
        # What this executor (one per session) last advertised, per source: catalog
        # changes are computed per session, so sessions sharing a source all see them.
        # Pairs of a source and its listing as last seen (as listed, not by name: the
        # usual drain compares it object by object, without building a mapping), in
        # the order of ``sources``, then any source no longer among them. A tuple of
        # pairs, not a dict: a third of the memory for the usual one or two sources.
        self._seen: _Seen = ()  # filled below: a first look starts every source as seen
        self.collision = collision
        self.max_output_chars = max_output_chars
        self.tool_timeout = tool_timeout
        self.thread_grace = float(thread_grace)
        self._interrupted: dict[str, ToolResultPart] | None = None  # made when needed
        self._specs_memo: tuple[_Seen, tuple[ToolSpec, ...], str] | None = None
        """``_drain_with_specs``: the ``_seen`` the specs were chosen from, those specs
        and the collision rule."""
        self._drain([source.specs() for source in self.sources])

    # -- catalog ---------------------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        """Visible specs of all sources, first source winning a name, sorted by name."""
        return self._chosen([source.specs() for source in self.sources])

    def _chosen(self, listed: list[list[ToolSpec]]) -> list[ToolSpec]:
        """``specs()`` from each source's listed specs."""
        chosen: dict[str, ToolSpec] = {}
        for specs in listed:
            for spec in specs:
                if spec.name in chosen:
                    if self.collision == "error":
                        raise ToolError(
                            f"tool name collision: {spec.name!r} is offered by more than one "
                            "source; rename one or use collision='first_wins'"
                        )
                    continue
                chosen[spec.name] = spec
        return [chosen[name] for name in sorted(chosen)]

    async def reconcile(self, request: ToolRequest, ctx: ToolContext) -> ToolResultPart | None:
        """Settle a call left in doubt (it started before a restart and left no result)
        with its tool's ``reconcile(request, ctx)``, if it has one: the result it returns
        (converted like ``invoke``'s), or ``None`` when the tool does not know (or has no
        ``reconcile``, or it raised: logged)."""
        tool = self.lookup(request.tool_name)
        settle = getattr(tool, "reconcile", None) if tool is not None else None
        if settle is None:
            return None
        try:
            value = await settle(request, ctx)
        except Exception:
            log.warning(
                "reconcile raised; the call stays in doubt",
                tool=request.tool_name,
                call_id=request.call_id,
                exc_info=True,
            )
            return None
        if value is None or tool is None:
            return None
        return self._to_result(request, value, self._output_limit(tool))

    def lookup(self, name: str) -> Tool | None:
        """The tool called ``name`` in the first source that has it."""
        for source in self.sources:
            tool = source.get(name)
            if tool is not None:
                return tool
        return None

    def drain_catalog_events(self) -> list[ToolCatalogEvent]:
        """The net change of each source's specs since this executor last looked.

        One event per changed source, in source order. The comparison is per
        executor (so per session): two sessions sharing a registry both see a
        change. A source added to ``sources`` later starts as seen.
        """
        return self._drain([source.specs() for source in self.sources])

    def _drain_with_specs(
        self,
    ) -> tuple[Sequence[ToolCatalogEvent], tuple[ToolSpec, ...] | None]:
        """``drain_catalog_events()`` and, when it found no change, ``specs()`` from the
        same listing (the driver's call before each model call; internal).

        Each source's ``specs()`` is asked once instead of twice, and while every
        source lists the very same spec objects as last time the previous tuple
        is returned as it is. With changes the specs are ``None``: the caller
        tells observers first, then asks ``specs()`` (an observer may change a
        catalog).
        """
        listed = [source.specs() for source in self.sources]
        memo = self._specs_memo
        if memo is not None and memo[2] == self.collision and self._as_seen(memo[0], listed):
            # The very objects the memo's specs were chosen from: no change, same specs.
            return _NO_EVENTS, memo[1]
        events = self._drain(listed)
        if events:
            return events, None
        specs = tuple(self._chosen(listed))
        self._specs_memo = (self._seen, specs, self.collision)
        return events, specs

    def _as_seen(self, memo_seen: _Seen, listed: list[list[ToolSpec]]) -> bool:
        """Whether ``_seen`` is still ``memo_seen``, in the order of ``sources``, and
        every source listed the very spec objects seen."""
        seen = self._seen
        sources = self.sources
        if memo_seen is not seen or len(sources) > len(seen):
            return False
        for index, source in enumerate(sources):
            pair = seen[index]
            if pair[0] is not source or not _same_specs(listed[index], pair[1]):
                return False
        return True

    def _drain(self, listed: list[list[ToolSpec]]) -> list[ToolCatalogEvent]:
        events: list[ToolCatalogEvent] = []
        seen = self._seen
        pairs: list[tuple[ToolSource, tuple[ToolSpec, ...]]] = []
        for source, specs in zip(self.sources, listed, strict=True):
            before_specs = _listing_of(pairs, source)  # a source listed twice: once
            if before_specs is None:
                before_specs = _listing_of(seen, source)
            if before_specs is None or _same_specs(specs, before_specs):
                # The usual case (the very objects, in the same order), or a source
                # added later: it starts as seen.
                pairs.append((source, tuple(specs) if before_specs is None else before_specs))
                continue
            pairs.append((source, tuple(specs)))
            now = {spec.name: spec for spec in specs}
            before = {spec.name: spec for spec in before_specs}
            if _same_objects(now, before):  # listed in another order: no change
                continue
            change = compare_catalogs(
                str(getattr(source, "name", type(source).__name__)), before, now
            )
            if change is not None:
                events.append(change)
        # Sources no longer listed keep their last listing (one may come back).
        pairs.extend(pair for pair in seen if _listing_of(pairs, pair[0]) is None)
        if not _same_pairs(pairs, seen):
            self._seen = tuple(pairs)
            self._specs_memo = None  # chosen from a listing no longer the one seen
        return events

    # -- prepare ---------------------------------------------------------------

    def prepare(
        self,
        request: ToolRequest,
        permissions: PermissionChecker,
        *,
        approved: bool | Collection[PendingPermission] = False,
    ) -> PrepareOutcome:
        """Look the tool up, validate the input, and evaluate its permission requests.

        Every request the call proposes is evaluated: one denied request
        denies the call; the requests that need approval and are not among
        ``approved`` (``True``: all are) come back together as one
        :class:`PendingApproval`. A checker that raises or answers something
        else than a decision fails this call only, with an error result.
        """
        tool = self.lookup(request.tool_name)
        if tool is None:
            available = ", ".join(spec.name for spec in self.specs()) or "(none)"
            return synthesized_result(
                request.call_id,
                f"unknown tool {request.tool_name!r}; available tools: {available}",
                ResultOutcome.UNKNOWN_TOOL,
            )
        spec = current_spec(tool) or tool.spec
        problem = self._input_problem(spec, request)
        if problem is not None:
            return synthesized_result(
                request.call_id,
                f"invalid input for tool {request.tool_name!r}: {problem}",
                ResultOutcome.INVALID_INPUT,
            )
        try:
            invocation = _invocations.get(request.tool_name)
            if invocation is None or invocation.annotations is not spec.annotations:
                invocation = _invocation(request.tool_name, spec.annotations)
            wanted: list[PermissionRequest] = [invocation]
            proposed = list(proposed_requests(tool, request))
            for index, permission in enumerate(proposed):
                if not isinstance(permission, PermissionRequest):
                    raise TypeError(
                        f"its permission request {index} is {type(permission).__name__}, "
                        "expected a PermissionRequest"
                    )
            wanted.extend(proposed)
        except Exception as error:  # the tool could not read its own input
            return synthesized_result(
                request.call_id,
                f"invalid input for tool {request.tool_name!r}: {describe_error(error)}",
                ResultOutcome.INVALID_INPUT,
            )
        asked = evaluate_requests(request, wanted, permissions)
        if isinstance(asked, ToolResultPart):
            return asked
        if asked and (pending := _pending(request, asked, approved)) is not None:
            return pending
        timeout = getattr(tool, "timeout", None)
        if timeout is None:
            timeout = self.tool_timeout
        elif not _is_timeout(timeout):
            return synthesized_result(
                request.call_id,
                f"tool {request.tool_name!r} was not run: its timeout attribute is "
                f"{timeout!r}; set a positive number of seconds or None",
                ResultOutcome.FAILED,
            )
        return PreparedCall(tool, request, timeout)

    def _input_problem(self, spec: ToolSpec, request: ToolRequest) -> str | None:
        call_input = request.input
        if RAW_ARGUMENTS_KEY in request.metadata:
            raw = str(request.metadata[RAW_ARGUMENTS_KEY])
            shown = raw if len(raw) <= 200 else raw[:200] + "..."
            return f"the arguments are not valid JSON: {shown!r}"
        if not isinstance(call_input, dict):
            return f"the input must be a JSON object, got {type(call_input).__name__}"
        try:
            schema = spec.input_schema
            cached = _validators_by_identity.get(id(schema))  # the usual hit, inline
            validator, fast = (
                cached[1] if cached is not None and cached[0] is schema else self._validator(schema)
            )
            if fast is not None and fast(call_input):
                return None  # valid: jsonschema would find no error
            errors = list(validator.iter_errors(call_input))
        except jsonschema.SchemaError as error:
            return f"the tool's own input schema is invalid ({error.message}); fix its ToolSpec"
        if not errors:
            return None
        errors.sort(key=_error_order)
        return "; ".join(f"at {_json_path(e.absolute_path)}: {e.message}" for e in errors)

    def _validator(self, schema: Any) -> _Compiled:
        """By identity first (a dict lookup), then by content across executors."""
        cached = _validators_by_identity.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        validator = _shared_validator(schema)
        if len(_validators_by_identity) >= _SHARED_VALIDATORS_MAX:
            with contextlib.suppress(StopIteration, KeyError, RuntimeError):
                del _validators_by_identity[next(iter(_validators_by_identity))]  # the oldest
        _validators_by_identity[id(schema)] = (schema, validator)
        return validator

    # -- invoke ----------------------------------------------------------------

    async def invoke(self, call: PreparedCall, ctx: ToolContext) -> ToolResultPart:
        """Run the tool; exceptions, timeouts and unstorable outputs become results.

        A call whose worker thread was still running when the call was
        cancelled or timed out is settled as described in
        :meth:`take_interrupted_result`.
        """
        if call.timeout is None:
            # No deadline: no cancel scope of our own (it costs ~15 us per call).
            # An outer cancellation reaches the tool either way.
            return await self._run(call, ctx, None)
        with anyio.move_on_after(call.timeout) as deadline:
            return await self._run(call, ctx, deadline)
        request = call.request
        settled = self.take_interrupted_result(request.call_id)
        if settled is not None:
            return settled
        return synthesized_result(
            request.call_id,
            f"tool {request.tool_name!r} timed out after {_seconds(call.timeout)} s",
            ResultOutcome.TIMED_OUT,
        )

    def take_interrupted_result(self, call_id: str) -> ToolResultPart | None:
        """What really became of a cancelled call whose code ran in a worker thread.

        A thread cannot be stopped: after a cancel or timeout the executor
        waits up to ``thread_grace`` seconds (shielded) for it. If it
        finished, this is the call's real result; if not, an ``in_doubt``
        result saying its work may still complete. ``None`` when the call ran
        no thread (its cancellation was real). Each result is taken once.
        """
        interrupted = self._interrupted
        return None if interrupted is None else interrupted.pop(call_id, None)

    async def _run(
        self, call: PreparedCall, ctx: ToolContext, deadline: anyio.CancelScope | None
    ) -> ToolResultPart:
        """Call the tool; whatever it raises becomes a failed result, except the host's
        cancellation, which propagates once any worker thread is settled."""
        request = call.request
        calls, token = thread_calls()
        try:
            value = await _call_tool(call.tool, request, ctx)
        except BaseException as error:
            if _is_cancellation(error) and await really_cancelled():
                timed_out = deadline is not None and deadline.cancel_called
                await self._settle(call, calls, timed_out=timed_out)
                raise
            return self._failed(request, error)
        finally:
            stop_collecting(token)
        return self._to_result(request, value, self._output_limit(call.tool))

    def _failed(self, request: ToolRequest, error: BaseException) -> ToolResultPart:
        if isinstance(error, ToolInDoubtError):
            text = error.args[0] if error.args and isinstance(error.args[0], str) else ""
            return synthesized_result(
                request.call_id, text or describe_error(error), ResultOutcome.IN_DOUBT
            )
        stray = " (a cancellation the host did not ask for)" if _is_cancellation(error) else ""
        log.warning("tool raised", tool=request.tool_name, call_id=request.call_id, exc_info=True)
        return synthesized_result(
            request.call_id,
            f"tool {request.tool_name!r} failed: {describe_error(error)}{stray}",
            ResultOutcome.FAILED,
        )

    async def _settle(
        self, call: PreparedCall, calls: list[ThreadCall], *, timed_out: bool
    ) -> None:
        """Wait (bounded, shielded) for the call's worker thread; record what happened."""
        if not calls:
            return
        await wait_for_threads(calls, self.thread_grace)
        request = call.request
        last = calls[-1]
        if last.done.is_set() and all(c.done.is_set() for c in calls):
            try:
                value = last.outcome()
            except BaseException as error:
                settled = self._failed(request, error)
            else:
                settled = self._to_result(request, value, self._output_limit(call.tool))
        else:
            why = "was cancelled"
            if timed_out and call.timeout is not None:
                why = f"timed out after {_seconds(call.timeout)} s"
            settled = synthesized_result(
                request.call_id,
                f"tool {request.tool_name!r} {why} while its code ran in a worker thread, "
                "which cannot be stopped: the work may still complete, and its result will "
                f"not be reported (waited {_seconds(self.thread_grace)} s for it)",
                ResultOutcome.IN_DOUBT,
            )
        interrupted = self._interrupted
        if interrupted is None:
            interrupted = self._interrupted = {}
        elif len(interrupted) >= _MAX_INTERRUPTED:
            interrupted.pop(next(iter(interrupted)))
        interrupted[request.call_id] = settled

    def _output_limit(self, tool: Tool) -> int | None:
        own = getattr(tool, "max_output_chars", None)
        return own if _is_positive_int(own) else self.max_output_chars

    def _to_result(self, request: ToolRequest, value: Any, limit: int | None) -> ToolResultPart:
        try:
            return stored_result(request.call_id, value, limit)
        except OutputProblem as problem:
            return synthesized_result(
                request.call_id,
                f"tool {request.tool_name!r} returned a value that cannot be stored: {problem}",
                ResultOutcome.FAILED,
            )


_MAX_INTERRUPTED = 1_000


async def reconciled_result(
    executor: ToolExecutor, request: ToolRequest, ctx: ToolContext
) -> ToolResultPart | None:
    """``executor.reconcile(request, ctx)`` when the executor can reconcile, else ``None``."""
    reconcile = getattr(executor, "reconcile", None)
    return None if reconcile is None else await reconcile(request, ctx)


def interrupted_result(executor: ToolExecutor, call_id: str) -> ToolResultPart | None:
    """The executor's record of a cancelled call whose worker thread it settled
    (``take_interrupted_result``), if the executor keeps such records."""
    take = getattr(executor, "take_interrupted_result", None)
    return take(call_id) if take is not None else None


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_timeout(value: Any) -> bool:
    """A positive number of seconds (``inf`` included; 0, negatives and NaN are not)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _is_cancellation(error: BaseException) -> bool:
    cancelled = anyio.get_cancelled_exc_class()
    if isinstance(error, BaseExceptionGroup):
        return any(_is_cancellation(inner) for inner in error.exceptions)
    return isinstance(error, cancelled)


_ASYNC_INVOKE: dict[type, tuple[object, bool]] = {}
"""By tool class: its ``invoke`` function and whether that is a coroutine function."""


def _async_invoke(tool: Tool) -> bool:
    """``inspect.iscoroutinefunction(tool.invoke)``, remembered per class for a plain
    method (~1 us less per call); asked each time for anything else."""
    kind = type(tool)
    function = getattr(kind, "invoke", None)
    known = _ASYNC_INVOKE.get(kind)
    if known is not None and known[0] is function and "invoke" not in getattr(tool, "__dict__", ()):
        return known[1]
    answer = inspect.iscoroutinefunction(tool.invoke)
    if inspect.isfunction(function) and "invoke" not in getattr(tool, "__dict__", ()):
        if len(_ASYNC_INVOKE) >= 256:  # classes made on the fly: keep it bounded
            _ASYNC_INVOKE.clear()
        _ASYNC_INVOKE[kind] = (function, answer)
    return answer


def _call_tool(tool: Tool, request: ToolRequest, ctx: ToolContext) -> Awaitable[Any]:
    """Await an async ``invoke`` (its own coroutine: no frame of ours above it while it
    runs); run a plain function ``invoke`` in a worker thread."""
    if _async_invoke(tool):
        return tool.invoke(request, ctx)
    return _call_in_thread(tool, request, ctx)


async def _call_in_thread(tool: Tool, request: ToolRequest, ctx: ToolContext) -> Any:
    value = await run_in_thread(functools.partial(tool.invoke, request, ctx))
    return await value if inspect.isawaitable(value) else value


def _seconds(value: float | None) -> str:
    if value is None:
        return "?"
    if not math.isfinite(value):
        return str(value)
    return str(int(value)) if math.isclose(value, round(value)) else f"{value:g}"
