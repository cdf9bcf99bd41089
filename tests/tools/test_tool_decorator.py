"""@tool: spec from the function, structuring, return values, options, sync tools."""

from __future__ import annotations

import enum
import threading
from typing import Annotated, Any, Literal

import anyio
import attrs
import pytest
from tools_support import outcome, run_one

import agentloop as al
import agentloop.permissions
import agentloop.tools

pytestmark = pytest.mark.anyio


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


@attrs.frozen
class Place:
    """Where to look."""

    city: str
    country: Annotated[str, "ISO country code"] = "NL"


@attrs.frozen
class Forecast:
    city: str
    degrees: float
    unit: Unit


@al.tool(read_only=True, idempotent=True, timeout=5)
async def weather(
    place: Place,
    days: Annotated[int, "how many days ahead"] = 1,
    unit: Unit = Unit.CELSIUS,
    detail: Literal["short", "long"] = "short",
    hourly: bool = False,
    tags: list[str] | None = None,
    window: tuple[int, int] = (8, 18),
    weights: dict[str, float] | None = None,
    scale: float = 1.0,
    note: None = None,
) -> Forecast:
    """Forecast the weather.

    Returns degrees for the place.
    """
    return Forecast(place.city, 21.5 * scale + days, unit)


WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "place": {
            "type": "object",
            "description": "Where to look.",
            "properties": {
                "city": {"type": "string"},
                "country": {"type": "string", "description": "ISO country code", "default": "NL"},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
        "days": {"type": "integer", "description": "how many days ahead", "default": 1},
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
        "detail": {"type": "string", "enum": ["short", "long"], "default": "short"},
        "hourly": {"type": "boolean", "default": False},
        "tags": {
            "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
            "default": None,
        },
        "window": {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "integer"}],
            "items": False,
            "minItems": 2,
            "maxItems": 2,
            "default": [8, 18],
        },
        "weights": {
            "anyOf": [
                {"type": "object", "additionalProperties": {"type": "number"}},
                {"type": "null"},
            ],
            "default": None,
        },
        "scale": {"type": "number", "default": 1.0},
        "note": {"type": "null", "default": None},
    },
    "required": ["place"],
    "additionalProperties": False,
}


def test_spec_comes_from_the_function() -> None:
    assert weather.spec == al.ToolSpec(
        "weather",
        "Forecast the weather.\n\nReturns degrees for the place.",
        WEATHER_SCHEMA,
        annotations=al.ToolAnnotations(read_only=True, idempotent=True),
    )
    assert weather.timeout == 5
    assert isinstance(weather, al.Tool)
    assert isinstance(weather, al.tools.FunctionTool)
    assert al.tools.json_schema_for(Place) == WEATHER_SCHEMA["properties"]["place"]  # type: ignore[index]


def test_name_and_description_can_be_overridden() -> None:
    @al.tool(name="rm-file", description="Delete a file.", destructive=True)
    def remove(path: str) -> str:
        """Ignored docstring."""
        return path

    assert remove.spec.name == "rm-file"
    assert remove.spec.description == "Delete a file."
    assert remove.spec.annotations == al.ToolAnnotations(destructive=True)
    assert remove("x") == "x"  # the function itself is still callable


def test_a_function_without_docstring_has_an_empty_description() -> None:
    @al.tool
    def ping() -> str:
        return "pong"

    assert ping.spec == al.ToolSpec(
        "ping", "", {"type": "object", "properties": {}, "additionalProperties": False}
    )


def untyped(x):  # type: ignore[no-untyped-def]
    return x


def variadic(*names: str) -> str:
    return ""


class Opaque:
    pass


def opaque(thing: Opaque) -> str:
    return ""


def int_keys(table: dict[int, str]) -> str:
    return ""


@pytest.mark.parametrize(
    ("function", "options", "error", "message"),
    [
        (
            untyped,
            {},
            TypeError,
            "@tool 'untyped': parameter 'x' of untyped has no type hint; annotate it "
            "(e.g. `: str`)",
        ),
        (
            variadic,
            {},
            TypeError,
            "@tool 'variadic': parameter 'names' of variadic: *args and **kwargs are not "
            "supported; name each argument",
        ),
        (
            opaque,
            {},
            TypeError,
            "@tool 'opaque': parameter 'thing' of opaque: cannot describe type Opaque in JSON "
            "Schema; use str, int, float, bool, None, list, tuple, dict, Literal, an Enum, a "
            "union, an attrs class or Annotated",
        ),
        (
            int_keys,
            {},
            TypeError,
            "@tool 'int_keys': parameter 'table' of int_keys: cannot describe dict[int, str] in "
            "JSON Schema: JSON object keys are strings; use dict[str, ...]",
        ),
        (
            opaque,
            {"name": "no spaces allowed"},
            ValueError,
            "@tool: name 'no spaces allowed' is not a valid tool name; use 1-64 letters, digits, "
            "'_' or '-' (pass name=... to override the function's name)",
        ),
        (
            opaque,
            {"timeout": 0},
            ValueError,
            "@tool: timeout must be a positive number of seconds or None (no limit), got 0",
        ),
    ],
)
def test_bad_functions_are_refused_at_decoration(
    function: Any, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        al.tool(**options)(function)
    assert str(caught.value) == message


async def test_async_tool_structures_input_and_returns_structured_output() -> None:
    result = await run_one(
        weather, {"place": {"city": "Delft"}, "days": 2, "unit": "f", "scale": 2}
    )
    assert result == al.ToolResultPart("call-1", {"city": "Delft", "degrees": 45.0, "unit": "f"})


def test_arguments_are_structured_strictly() -> None:
    arguments = weather.arguments({"place": {"city": "Oslo", "country": "NO"}, "window": [1, 2]})
    assert arguments == {
        "place": Place("Oslo", "NO"),
        "days": 1,
        "unit": Unit.CELSIUS,
        "detail": "short",
        "hourly": False,
        "tags": None,
        "window": (1, 2),
        "weights": None,
        "scale": 1.0,
        "note": None,
    }
    with pytest.raises(al.InvalidInputError) as caught:
        weather.arguments({"place": {"town": "x"}, "days": "2", "bogus": 1, "hourly": 1})
    assert str(caught.value) == (
        "at $: unexpected properties 'bogus'; "
        "at $.place.city: required property is missing; "
        "at $.place: unexpected properties 'town'; "
        "at $.days: expected integer, got string; "
        "at $.hourly: expected boolean, got integer"
    )


thread_ids: list[int] = []


@al.tool
def blocking_sum(numbers: list[int]) -> int:
    """Add numbers, synchronously."""
    thread_ids.append(threading.get_ident())
    return sum(numbers)


async def test_sync_tool_runs_in_a_worker_thread() -> None:
    thread_ids.clear()
    result = await run_one(blocking_sum, {"numbers": [1, 2, 3]})
    assert result == al.ToolResultPart("call-1", 6)
    assert len(thread_ids) == 1
    assert thread_ids[0] != threading.get_ident()


@al.tool
async def listing(kind: Literal["dict", "list", "none", "output", "text", "tuple"]) -> Any:
    """Return a value of the given kind."""
    values: dict[str, Any] = {
        "dict": {"a": [1, Unit.CELSIUS]},
        "list": [Place("A"), Place("B", "BE")],
        "none": None,
        "output": al.ToolOutput("custom failure", is_error=True, metadata={"k": 1}),
        "text": "plain",
        "tuple": (1, "two"),
    }
    return values[kind]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("dict", al.ToolResultPart("call-1", {"a": [1, "c"]})),
        (
            "list",
            al.ToolResultPart(
                "call-1", [{"city": "A", "country": "NL"}, {"city": "B", "country": "BE"}]
            ),
        ),
        ("none", al.ToolResultPart("call-1", "(no output)")),
        ("output", al.ToolResultPart("call-1", "custom failure", True, metadata={"k": 1})),
        ("text", al.ToolResultPart("call-1", "plain")),
        ("tuple", al.ToolResultPart("call-1", [1, "two"])),
    ],
)
async def test_return_values_become_outputs(kind: str, expected: al.ToolResultPart) -> None:
    assert await run_one(listing, {"kind": kind}) == expected


contexts: list[al.ToolContext] = []


@al.tool
async def whoami(ctx: al.ToolContext, greeting: str = "hi") -> str:
    """Say who runs this call."""
    contexts.append(ctx)
    return f"{greeting} from {ctx.session_id}/{ctx.turn_id}/{ctx.call_id}: {ctx.resources}"


async def test_tool_context_gives_ids_cancellation_and_resources() -> None:
    contexts.clear()
    assert "ctx" not in whoami.spec.input_schema["properties"]
    result = await run_one(whoami, {}, resources="the-db")
    assert result == al.ToolResultPart("call-1", "hi from s1/turn-1/call-1: the-db")
    (ctx,) = contexts
    assert (ctx.session_id, ctx.turn_id, ctx.call_id, ctx.resources) == (
        "s1",
        "turn-1",
        "call-1",
        "the-db",
    )


@al.tool(timeout=0.05)
async def stuck() -> str:
    """Never returns."""
    await anyio.sleep_forever()
    return "unreachable"


release = threading.Event()


@al.tool(timeout=0.05)
def stuck_in_thread() -> str:
    """Blocks its worker thread until released."""
    release.wait(10)
    return "released"


async def test_tool_timeout_option_bounds_async_tools() -> None:
    result = await run_one(stuck, {})
    assert result.output == "tool 'stuck' timed out after 0.05 s"
    assert result.is_error
    assert outcome(result) == "timed_out"


async def test_tool_timeout_option_bounds_sync_tools() -> None:
    release.clear()
    try:
        with anyio.fail_after(5):
            result = await run_one(stuck_in_thread, {})
    finally:
        release.set()
    # the thread cannot be stopped: the result says its work may still complete
    assert result.output == (
        "tool 'stuck_in_thread' timed out after 0.05 s while its code ran in a worker thread, "
        "which cannot be stopped: the work may still complete, and its result will not be "
        "reported (waited 1 s for it)"
    )
    assert outcome(result) == "in_doubt"


written: list[str] = []


@al.tool(destructive=True, permissions=lambda args: [al.permissions.FileSystemWrite(args["path"])])
async def save(path: str, text: str) -> str:
    """Write a note."""
    written.append(path)
    return f"saved {len(text)} characters"


def test_permissions_function_sees_structured_arguments() -> None:
    request = al.ToolRequest("c", "save", {"path": "a.txt", "text": "x"}, "s", "t")
    assert list(save.proposed_requests(request)) == [al.permissions.FileSystemWrite("a.txt")]


async def test_permissions_function_requests_are_checked_before_the_call() -> None:
    written.clear()
    result = await run_one(
        save, {"path": "/etc/motd", "text": "hello"}, permissions=al.permissions.DenyAll()
    )
    assert result.output == (
        "tool permission denied: all tool permissions are denied (Call tool save) "
        "(code: policy_denied)"
    )
    assert outcome(result) == "permission_denied"
    denied_writes = al.permissions.PolicyChain(
        al.permissions.RequestKindPolicy(deny=["filesystem.write"])
    )
    result = await run_one(save, {"path": "/etc/motd", "text": "hello"}, permissions=denied_writes)
    assert result.output == (
        "tool permission denied: filesystem.write requests are not allowed (Write /etc/motd) "
        "(code: policy_denied)"
    )
    assert written == []
    assert await run_one(save, {"path": "n.txt", "text": "hello"}) == al.ToolResultPart(
        "call-1", "saved 5 characters"
    )
    assert written == ["n.txt"]


@attrs.define
class CountedPoint:
    x: int
    y: int = 0

    def __attrs_post_init__(self) -> None:
        CountedPoint.count += 1

    count = 0


async def test_a_call_without_a_permissions_function_is_structured_once() -> None:
    @al.tool
    async def where(point: CountedPoint, label: str, scale: float = 1.0) -> str:
        return f"{label}:{point.x},{point.y}x{scale}"

    CountedPoint.count = 0
    result = await run_one(where, {"point": {"x": 1, "y": 2}, "label": "p", "scale": 2.0})
    assert result == al.ToolResultPart("call-1", "p:1,2x2.0")
    assert CountedPoint.count == 1  # by prepare; invoke reuses the same arguments


async def test_a_permissions_function_sees_arguments_the_call_does_not_share() -> None:
    seen: list[CountedPoint] = []

    def permissions(arguments: Any) -> list[al.permissions.PermissionRequest]:
        seen.append(arguments["point"])
        arguments["point"].x = 99  # the call itself gets freshly structured arguments
        return []

    @al.tool(permissions=permissions)
    async def where(point: CountedPoint) -> str:
        return f"{point.x}"

    CountedPoint.count = 0
    result = await run_one(where, {"point": {"x": 1}})
    assert result == al.ToolResultPart("call-1", "1")
    assert CountedPoint.count == 2
    assert seen[0].x == 99
