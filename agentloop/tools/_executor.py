"""Turning one tool call into exactly one result: lookup, validation,
permissions (``prepare``, synchronous) and invocation (``invoke``, async).

Every failure becomes an error ``ToolResultPart`` with a typed outcome in its
metadata; nothing here raises for a bad call.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, TypeAlias

import anyio
import anyio.to_thread
import attrs
import cattrs
import jsonschema
import structlog

from ..core._errors import ToolError
from ..core._items import (
    ResultOutcome,
    TextPart,
    ToolResultPart,
)
from ..core._results import RAW_ARGUMENTS_KEY, synthesized_result
from ..core._tool_spec import ToolSpec
from ..permissions._policies import Abstain
from ..permissions._requests import (
    Allow,
    Deny,
    PermissionChecker,
    PermissionRequest,
    RequireApproval,
    ToolInvocation,
)
from ._registry import ToolCatalogEvent, ToolSource, catalog_change
from ._tool import Tool, ToolContext, ToolOutput, ToolRequest, current_spec, proposed_requests

__all__ = [
    "RAW_ARGUMENTS_KEY",
    "ApprovalNeeded",
    "BasicToolExecutor",
    "PreparedCall",
    "PrepareOutcome",
    "ToolExecutor",
    "synthesized_result",
]

log = structlog.get_logger("agentloop")
_plain = cattrs.Converter()


@attrs.frozen
class PreparedCall:
    """A call that passed lookup, validation and permissions and may now run."""

    tool: Tool
    request: ToolRequest
    timeout: float | None


@attrs.frozen
class ApprovalNeeded:
    """A call a checker wants a human to approve before it runs."""

    request: ToolRequest
    permission: PermissionRequest
    decision: RequireApproval


PrepareOutcome: TypeAlias = PreparedCall | ApprovalNeeded | ToolResultPart


class ToolExecutor(Protocol):
    """Looks tools up, checks calls, and runs them."""

    def specs(self) -> list[ToolSpec]:
        """All advertised specs, sorted by name."""
        ...

    def drain_catalog_events(self) -> list[ToolCatalogEvent]:
        """Catalog changes of every source since the last drain."""
        ...

    def prepare(
        self, request: ToolRequest, permissions: PermissionChecker, *, approved: bool
    ) -> PrepareOutcome:
        """Check a call without running it (``approved``: a human already said yes)."""
        ...

    async def invoke(self, call: PreparedCall, ctx: ToolContext) -> ToolResultPart:
        """Run a prepared call; never raises for a tool failure."""
        ...


def _spec(tool: Tool) -> ToolSpec:
    return current_spec(tool) or tool.spec


_SHARED_VALIDATORS_MAX = 512
_shared_validators: dict[str, jsonschema.protocols.Validator] = {}
"""Checked, compiled validators by schema text, shared by every executor.

Checking a schema against its metaschema and compiling it costs ~1.5 ms; an
``Agent`` makes an executor per session, so without this every session paid
it again. Only plain JSON schemas are shared (their ``repr`` is then exact),
compiled from a private deep copy so no caller's dict is ever aliased."""


def _shared_validator(schema: Any) -> jsonschema.protocols.Validator:
    """The validator for ``schema``: checked against its metaschema, compiled once.

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
    if key is not None:
        if len(_shared_validators) >= _SHARED_VALIDATORS_MAX:
            _shared_validators.pop(next(iter(_shared_validators)), None)  # the oldest
        _shared_validators[key] = validator
    return validator


def _specs_by_name(source: ToolSource) -> dict[str, ToolSpec]:
    return {spec.name: spec for spec in source.specs()}


def _same_objects(now: Mapping[str, ToolSpec], before: Mapping[str, ToolSpec]) -> bool:
    """Whether both map the same names to the very same spec objects."""
    return len(now) == len(before) and all(before.get(name) is spec for name, spec in now.items())


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

    def __init__(
        self,
        sources: Sequence[ToolSource] = (),
        *,
        collision: Literal["first_wins", "error"] = "first_wins",
        max_output_chars: int | None = 100_000,
        tool_timeout: float | None = None,
    ) -> None:
        if collision not in ("first_wins", "error"):
            raise ValueError(f"collision must be 'first_wins' or 'error', got {collision!r}")
        if max_output_chars is not None and not _is_positive_int(max_output_chars):
            raise ValueError(
                "BasicToolExecutor: max_output_chars must be a positive integer or None, "
                f"got {max_output_chars!r}"
            )
        self.sources = list(sources)
        # What this executor (one per session) last advertised, per source: catalog
        # changes are computed per session, so sessions sharing a source all see them.
        self._seen: dict[int, dict[str, ToolSpec]] = {
            id(source): _specs_by_name(source) for source in self.sources
        }
        self.collision = collision
        self.max_output_chars = max_output_chars
        self.tool_timeout = tool_timeout
        self._validators: dict[int, tuple[Any, jsonschema.protocols.Validator]] = {}

    # -- catalog ---------------------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        """Visible specs of all sources, first source winning a name, sorted by name."""
        chosen: dict[str, ToolSpec] = {}
        for source in self.sources:
            for spec in source.specs():
                if spec.name in chosen:
                    if self.collision == "error":
                        raise ToolError(
                            f"tool name collision: {spec.name!r} is offered by more than one "
                            "source; rename one or use collision='first_wins'"
                        )
                    continue
                chosen[spec.name] = spec
        return [chosen[name] for name in sorted(chosen)]

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
        events: list[ToolCatalogEvent] = []
        for source in self.sources:
            now = _specs_by_name(source)
            before = self._seen.setdefault(id(source), now)
            if _same_objects(now, before):  # the usual case, decided without comparing
                continue
            self._seen[id(source)] = now
            change = catalog_change(
                str(getattr(source, "name", type(source).__name__)), before, now
            )
            if change is not None:
                events.append(change)
        return events

    # -- prepare ---------------------------------------------------------------

    def prepare(
        self, request: ToolRequest, permissions: PermissionChecker, *, approved: bool
    ) -> PrepareOutcome:
        """Look the tool up, validate the input, and evaluate its permission requests."""
        tool = self.lookup(request.tool_name)
        if tool is None:
            available = ", ".join(spec.name for spec in self.specs()) or "(none)"
            return synthesized_result(
                request.call_id,
                f"unknown tool {request.tool_name!r}; available tools: {available}",
                ResultOutcome.UNKNOWN_TOOL,
            )
        spec = _spec(tool)
        problem = self._input_problem(spec, request)
        if problem is not None:
            return synthesized_result(
                request.call_id,
                f"invalid input for tool {request.tool_name!r}: {problem}",
                ResultOutcome.INVALID_INPUT,
            )
        try:
            invocation = ToolInvocation(request.tool_name, spec.annotations)
            wanted: list[PermissionRequest] = [invocation]
            wanted.extend(proposed_requests(tool, request))
        except Exception as error:  # the tool could not read its own input
            return synthesized_result(
                request.call_id,
                f"invalid input for tool {request.tool_name!r}: {error}",
                ResultOutcome.INVALID_INPUT,
            )
        for permission in wanted:
            decision = permissions.evaluate(permission)
            if isinstance(decision, Allow):
                continue
            if isinstance(decision, Deny):
                return synthesized_result(
                    request.call_id,
                    f"tool permission denied: {decision.message} (code: {decision.code})",
                    ResultOutcome.PERMISSION_DENIED,
                )
            if isinstance(decision, RequireApproval):
                if approved:
                    continue
                return ApprovalNeeded(request, permission, decision)
            hint = (
                "; a policy that can abstain must be wrapped in PolicyChain(...)"
                if isinstance(decision, Abstain)
                else ""
            )
            raise ToolError(
                f"permission checker {type(permissions).__name__} returned {decision!r} for "
                f"{permission.kind}; expected Allow, Deny or RequireApproval{hint}"
            )
        timeout = getattr(tool, "timeout", None) or self.tool_timeout
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
            validator = self._validator(spec.input_schema)
            errors = list(validator.iter_errors(call_input))
        except jsonschema.SchemaError as error:
            return f"the tool's own input schema is invalid ({error.message}); fix its ToolSpec"
        if not errors:
            return None
        errors.sort(key=_error_order)
        return "; ".join(f"at {_json_path(e.absolute_path)}: {e.message}" for e in errors)

    def _validator(self, schema: Any) -> jsonschema.protocols.Validator:
        """By identity first (a dict lookup), then by content across executors."""
        cached = self._validators.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        validator = _shared_validator(schema)
        self._validators[id(schema)] = (schema, validator)
        return validator

    # -- invoke ----------------------------------------------------------------

    async def invoke(self, call: PreparedCall, ctx: ToolContext) -> ToolResultPart:
        """Run the tool; exceptions, timeouts and oversized outputs become results."""
        if call.timeout is None:
            # No deadline: no cancel scope of our own (it costs ~15 us per call).
            # An outer cancellation reaches the tool either way.
            return await self._run(call, ctx)
        with anyio.move_on_after(call.timeout):
            return await self._run(call, ctx)
        request = call.request
        return synthesized_result(
            request.call_id,
            f"tool {request.tool_name!r} timed out after {_seconds(call.timeout)} s",
            ResultOutcome.TIMED_OUT,
        )

    async def _run(self, call: PreparedCall, ctx: ToolContext) -> ToolResultPart:
        """Call the tool; an exception becomes a failed result, the value a result part."""
        request = call.request
        try:
            value = await _call_tool(call.tool, request, ctx)
        except Exception as error:
            log.warning(
                "tool raised", tool=request.tool_name, call_id=request.call_id, exc_info=True
            )
            return synthesized_result(
                request.call_id,
                f"tool {request.tool_name!r} failed: {type(error).__name__}: {error}",
                ResultOutcome.FAILED,
            )
        return self._to_result(request.call_id, value, self._output_limit(call.tool))

    def _output_limit(self, tool: Tool) -> int | None:
        own = getattr(tool, "max_output_chars", None)
        return own if _is_positive_int(own) else self.max_output_chars

    def _to_result(self, call_id: str, value: Any, limit: int | None) -> ToolResultPart:
        is_error = False
        metadata: Any = {}
        if isinstance(value, ToolOutput):
            is_error, metadata, value = value.is_error, value.metadata, value.value
        elif attrs.has(type(value)):
            value = _plain.unstructure(value)
        value = _truncate(value, limit)
        return ToolResultPart(call_id, value, is_error, metadata=metadata)


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _truncate(value: Any, limit: int | None) -> Any:
    """``value``, or its text cut to ``limit`` characters with a marker saying how much."""
    if limit is None:
        return value
    text = _as_text(value)
    if text is None or len(text) <= limit:
        return value
    cut = len(text) - limit
    return f"{text[:limit]}\n[output truncated: {cut} of {len(text)} characters cut]"


def _as_text(value: Any) -> str | None:
    """``value`` as the text whose length the output limit counts (``None``: not measured,
    e.g. parts with media)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(attrs.has(type(part)) for part in value):
        if all(isinstance(part, TextPart) for part in value):
            return "\n".join(part.text for part in value)
        return None
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return None


async def _call_tool(tool: Tool, request: ToolRequest, ctx: ToolContext) -> Any:
    """Await an async ``invoke``; run a plain function ``invoke`` in a worker thread."""
    if inspect.iscoroutinefunction(tool.invoke):
        return await tool.invoke(request, ctx)
    value = await anyio.to_thread.run_sync(
        functools.partial(tool.invoke, request, ctx), abandon_on_cancel=True
    )
    return await value if inspect.isawaitable(value) else value


def _seconds(value: float | None) -> str:
    if value is None:
        return "?"
    return str(int(value)) if math.isclose(value, round(value)) else f"{value:g}"
