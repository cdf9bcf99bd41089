"""``@tool``: a typed Python function as a :class:`~agentloop.Tool`.

The function's name is the tool name, its docstring the description, and its
type hints the input JSON Schema (see ``_schema``). A call's input is checked
against that schema by the executor, then structured (strictly) into the
function's arguments. Sync functions run in a worker thread.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Generic, ParamSpec, TypeVar, get_args, get_origin, overload

import attrs

from ..core._errors import InvalidInputError
from ..core._tool_spec import ToolAnnotations, ToolSpec
from ..permissions._requests import PermissionRequest
from ._schema import (
    MISSING_PROPERTY,
    argument_converter,
    object_schema,
    structure_value,
    unexpected_properties,
)
from ._threads import run_in_thread
from ._tool import ToolContext, ToolOutput, ToolRequest

__all__ = ["FunctionTool", "PermissionsFunction", "tool"]

P = ParamSpec("P")
R = TypeVar("R")

PermissionsFunction = Callable[[Mapping[str, Any]], Iterable[PermissionRequest]]
"""Given a call's structured arguments by parameter name, the permissions the call needs."""

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

NO_OUTPUT_TEXT = "(no output)"
"""The text result of a tool function that returned ``None``."""


_PLAIN_SCALARS = (str, bool, int, float)

_MAX_PREPARED = 256
"""How many calls' structured arguments a tool keeps between prepare and invoke."""


@attrs.frozen
class _Parameter:
    name: str
    hint: Any
    default: Any
    positional_only: bool

    @property
    def plain(self) -> type | None:
        """The hint when it is exactly ``str``, ``bool``, ``int`` or ``float``: a value of
        exactly that type structures as itself."""
        return self.hint if self.hint in _PLAIN_SCALARS else None


class FunctionTool(Generic[P, R]):
    """A :class:`~agentloop.Tool` made by :func:`tool` from a typed function.

    Calling the object calls the function unchanged; ``spec``, ``timeout``,
    ``max_output_chars``, ``invoke`` and ``proposed_requests`` make it a tool.
    """

    def __init__(
        self,
        function: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        permissions: PermissionsFunction | None = None,
        timeout: float | None = None,
        max_output_chars: int | None = None,
        asks_host: bool = False,
    ) -> None:
        tool_name = name if name is not None else function.__name__
        if not isinstance(tool_name, str) or not _TOOL_NAME.match(tool_name):
            raise ValueError(
                f"@tool: name {tool_name!r} is not a valid tool name; use 1-64 letters, digits, "
                "'_' or '-' (pass name=... to override the function's name)"
            )
        if timeout is not None and not (
            isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0
        ):
            raise ValueError(
                f"@tool: timeout must be a positive number of seconds or None (no limit), got "
                f"{timeout!r}"
            )
        if max_output_chars is not None and not (
            isinstance(max_output_chars, int)
            and not isinstance(max_output_chars, bool)
            and max_output_chars > 0
        ):
            raise ValueError(
                f"@tool {tool_name!r}: max_output_chars must be a positive integer or None, "
                f"got {max_output_chars!r}"
            )
        self.function = function
        self.timeout = timeout
        self.max_output_chars = max_output_chars
        self.asks_host = bool(asks_host)
        self.permissions = permissions
        self._reconciler: Callable[..., Awaitable[Any]] | None = None
        self._is_async = inspect.iscoroutinefunction(function)
        self._parameters, self._context_name = _parameters(function, tool_name)
        self._plain = [(p, p.plain) for p in self._parameters]
        self._known = frozenset(p.name for p in self._parameters)
        self._positional_only = tuple(p.name for p in self._parameters if p.positional_only)
        # Arguments structured by proposed_requests (no permissions function saw
        # them), taken by invoke for the same request object: converted once.
        self._prepared: dict[int, tuple[ToolRequest, dict[str, Any]]] = {}
        schema = object_schema(
            [(p.name, p.hint, p.default) for p in self._parameters],
        )
        text = description if description is not None else (inspect.getdoc(function) or "")
        self.spec = ToolSpec(tool_name, text, schema, annotations=annotations or ToolAnnotations())
        functools.update_wrapper(self, function)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<FunctionTool {self.spec.name!r} of {self.function.__qualname__}>"

    def arguments(self, call_input: Any) -> dict[str, Any]:
        """``call_input`` (a JSON object) structured into the function's arguments by name,
        defaults filled in; raises ``InvalidInputError`` naming every problem's JSON path."""
        if not isinstance(call_input, dict):
            raise InvalidInputError(
                f"the input must be a JSON object, got {type(call_input).__name__}"
            )
        known = self._known
        problems: list[str] = []
        if not call_input.keys() <= known:  # at C speed; the names only when some are extra
            extra = [key for key in call_input if key not in known]
            problems.append(f"at $: {unexpected_properties(extra)}")
        arguments: dict[str, Any] = {}
        for parameter, plain in self._plain:
            if parameter.name not in call_input:
                if parameter.default is inspect.Parameter.empty:
                    problems.append(f"at $.{parameter.name}: {MISSING_PROPERTY}")
                else:
                    arguments[parameter.name] = parameter.default
                continue
            value = call_input[parameter.name]
            if plain is not None and type(value) is plain:
                arguments[parameter.name] = value  # what the strict converter returns
                continue
            try:
                arguments[parameter.name] = structure_value(
                    call_input[parameter.name], parameter.hint
                )
            except InvalidInputError as error:
                problems.append(str(error).replace("at $", f"at $.{parameter.name}"))
        if problems:
            raise InvalidInputError("; ".join(problems))
        return arguments

    def proposed_requests(self, request: ToolRequest) -> Sequence[PermissionRequest]:
        """Structure the input (so a bad one fails before any permission is asked) and
        return what the ``permissions`` function asks for."""
        arguments = self.arguments(request.input)
        if self.permissions is None:
            self._keep(request, arguments)
            return ()
        return tuple(self.permissions(arguments))

    def _keep(self, request: ToolRequest, arguments: dict[str, Any]) -> None:
        prepared = self._prepared
        if len(prepared) >= _MAX_PREPARED:
            # The oldest goes (never invoked, or invoked later: structured again then).
            with contextlib.suppress(StopIteration, KeyError, RuntimeError):
                del prepared[next(iter(prepared))]
        prepared[id(request)] = (request, arguments)

    def _take(self, request: ToolRequest) -> dict[str, Any]:
        """The arguments ``proposed_requests`` structured for this very request, else new."""
        kept = self._prepared.pop(id(request), None)
        if kept is not None and kept[0] is request:
            return kept[1]
        return self.arguments(request.input)

    def reconciler(self, function: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """Decorate an async ``function(ctx, **arguments)`` that settles a call of this
        tool left in doubt by a restart: it gets the call's context (its
        ``idempotency_key``) and structured arguments, and returns the output the call
        came to, or ``None`` when it cannot tell (the call stays in doubt)."""
        if not inspect.iscoroutinefunction(function):
            raise ValueError(
                f"@{self.spec.name}.reconciler expects an async function, got {function!r}"
            )
        self._reconciler = function
        return function

    async def reconcile(self, request: ToolRequest, ctx: ToolContext) -> Any:
        """What the reconciler says the call came to (``None``: unknown, or none set)."""
        if self._reconciler is None:
            return None
        value = await self._reconciler(ctx, **self.arguments(request.input))
        return None if value is None else tool_output(value)

    async def invoke(self, request: ToolRequest, ctx: ToolContext) -> Any:
        """Call the function with the structured input (a sync one in a worker thread)."""
        arguments = self._take(request)
        if self._context_name is not None:
            arguments[self._context_name] = ctx
        positional = (
            [arguments.pop(name) for name in self._positional_only if name in arguments]
            if self._positional_only
            else ()
        )
        if self._is_async:
            coroutine: Callable[..., Awaitable[Any]] = self.function  # type: ignore[assignment]
            return tool_output(await coroutine(*positional, **arguments))
        call = functools.partial(self.function, *positional, **arguments)
        return await run_in_thread(call, tool_output)


_AS_THEY_ARE = (str, ToolOutput)  # a tuple: ``str | ToolOutput`` would build a union per call


def tool_output(value: Any) -> Any:
    """A function's return value as a result output: ``str`` and ``ToolOutput`` as they
    are, ``None`` as ``"(no output)"``, attrs classes and enums unstructured; the
    executor then converts the rest to JSON by its documented rules."""
    if isinstance(value, _AS_THEY_ARE):
        return value
    if value is None:
        return NO_OUTPUT_TEXT
    return argument_converter.unstructure(value)


def _parameters(
    function: Callable[..., Any], tool_name: str
) -> tuple[list[_Parameter], str | None]:
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except NameError as error:
        raise TypeError(
            f"@tool {tool_name!r}: cannot resolve the type hints of {function.__qualname__}: "
            f"{error}; define the types at module level"
        ) from error
    parameters: list[_Parameter] = []
    context_name: str | None = None
    for parameter in inspect.signature(function).parameters.values():
        where = f"@tool {tool_name!r}: parameter {parameter.name!r} of {function.__qualname__}"
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"{where}: *args and **kwargs are not supported; name each argument")
        if parameter.name not in hints:
            raise TypeError(f"{where} has no type hint; annotate it (e.g. `: str`)")
        hint = hints[parameter.name]
        if _strip(hint) is ToolContext or get_origin(_strip(hint)) is ToolContext:
            context_name = parameter.name
            continue
        try:
            object_schema([(parameter.name, hint, parameter.default)])
        except TypeError as error:
            raise TypeError(f"{where}: {error}") from error
        parameters.append(
            _Parameter(
                parameter.name,
                hint,
                parameter.default,
                parameter.kind is parameter.POSITIONAL_ONLY,
            )
        )
    return parameters, context_name


def _strip(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


@overload
def tool(function: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
    permissions: PermissionsFunction | None = None,
    timeout: float | None = None,
    max_output_chars: int | None = None,
    asks_host: bool = False,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    function: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
    permissions: PermissionsFunction | None = None,
    timeout: float | None = None,
    max_output_chars: int | None = None,
    asks_host: bool = False,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Turn a typed async or sync function into a tool (``@tool`` or ``@tool(...)``).

    ``name`` and ``description`` override the function's name and docstring;
    ``read_only``, ``destructive``, ``idempotent`` and ``open_world`` set the
    spec's :class:`~agentloop.ToolAnnotations`; ``permissions`` maps the
    call's structured arguments to the :class:`~agentloop.PermissionRequest`
    s it needs; ``timeout`` (seconds) bounds each call; ``max_output_chars``
    replaces the executor's output limit for this tool; ``asks_host`` says the
    function may ``await ctx.ask(...)`` (the driver then never runs its calls
    inline). A parameter typed :class:`~agentloop.ToolContext` receives the
    call's context and is not part of the schema.
    """
    annotations = ToolAnnotations(
        read_only=read_only, destructive=destructive, idempotent=idempotent, open_world=open_world
    )

    def decorate(fn: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(
            fn,
            name=name,
            description=description,
            annotations=annotations,
            permissions=permissions,
            timeout=timeout,
            max_output_chars=max_output_chars,
            asks_host=asks_host,
        )

    return decorate if function is None else decorate(function)
