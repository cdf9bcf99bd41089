"""The output spec: what an agent's answer must be, and how an answer is judged."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Generic, TypeVar, is_typeddict

import attrs
import cattrs
import jsonschema
from jsonschema.exceptions import SchemaError

from ..core._errors import InvalidInputError
from ._schema import is_strict_schema, schema_for_type, strip_required, typed_dict_hints

__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "OutputMode",
    "OutputProblems",
    "OutputSpec",
    "WRAPPED_KEY",
    "output_spec",
]

OutT = TypeVar("OutT")

DEFAULT_OUTPUT_RETRIES = 2
"""How many times the model may answer again after an answer that did not validate."""

WRAPPED_KEY = "result"
"""The property a non-object output is sent under (providers want an object at the root)."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class OutputMode(StrEnum):
    """How the model is asked for a structured answer."""

    AUTO = "auto"
    """The provider's native mode when the adapter has one, else the final-answer tool."""
    NATIVE = "native"
    """The provider's own structured-output request (``response_format``, ``output_config``,
    ``responseJsonSchema``); the answer is the response's text."""
    TOOL = "tool"
    """A final-answer tool the model calls with the answer as its input (any model)."""


def _retries(_instance: Any, _attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"output max_retries must be an int >= 0, got {value!r}")


def _typed_dict_hook(cls: Any) -> Any:
    """TypedDicts structured key by key (cattrs reads ``__required_keys__``, which Python
    3.11 gets wrong under ``from __future__ import annotations``; the schema check
    already said which keys must be there)."""
    hints = {name: strip_required(hint) for name, hint in typed_dict_hints(cls).items()}

    def structure(value: Any, _cls: Any) -> Any:
        return {key: _CONVERTER.structure(item, hints[key]) for key, item in value.items()}

    return structure


_CONVERTER = cattrs.Converter()
_CONVERTER.register_structure_hook_factory(is_typeddict, _typed_dict_hook)


class OutputProblems(InvalidInputError):
    """Raised by :meth:`OutputSpec.check` and :meth:`OutputSpec.parse` when an answer does
    not match; ``problems`` lists each, with its JSON path."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)


@attrs.frozen(kw_only=True)
class OutputSpec(Generic[OutT]):
    """What an agent's answer must be: a JSON schema, and the type answers become.

    Make one with :func:`output_spec` (or ``AgentBuilder.output``). ``schema`` is
    what providers receive (always an object: a non-object output is wrapped under
    :data:`WRAPPED_KEY` when ``wrapped``); ``target`` is the type ``cattrs``
    structures a valid answer into (``None``: the JSON value itself).
    ``max_retries`` is how many answers that do not validate the model may follow
    with another before the turn ends with ``OutputValidationError``.
    """

    name: str
    schema: Mapping[str, Any]
    target: Any = attrs.field(default=None, eq=False)
    wrapped: bool = False
    mode: OutputMode = OutputMode.AUTO
    max_retries: int = attrs.field(default=DEFAULT_OUTPUT_RETRIES, validator=_retries)
    description: str | None = None

    @property
    def strict(self) -> bool:
        """Whether ``schema`` fits providers' strict modes (all properties required,
        no others allowed)."""
        return is_strict_schema(self.schema)

    @property
    def tool_name(self) -> str:
        """The final-answer tool's name in ``TOOL`` mode."""
        return "final_answer"

    def with_mode(self, mode: OutputMode) -> OutputSpec[OutT]:
        """A copy asking for the answer in ``mode``."""
        return attrs.evolve(self, mode=OutputMode(mode))

    def problems(self, value: Any) -> list[str]:
        """What is wrong with ``value`` (a JSON value) against ``schema``, each with its
        JSON path; empty when it matches."""
        validator = jsonschema.Draft202012Validator(self.schema)
        found = sorted(validator.iter_errors(value), key=lambda error: list(error.absolute_path))
        return [f"at {_path(error.absolute_path)}: {error.message}" for error in found]

    def check(self, value: Any) -> OutT:
        """``value`` (a JSON value) validated and structured into ``target``; raises
        ``OutputProblems`` listing every problem."""
        problems = self.problems(value)
        if problems:
            raise OutputProblems(problems)
        inner = value[WRAPPED_KEY] if self.wrapped else value
        if self.target is None:
            return inner  # type: ignore[no-any-return]
        try:
            return _CONVERTER.structure(inner, self.target)  # type: ignore[no-any-return]
        except Exception as error:  # a schema the type does not fully describe
            target = getattr(self.target, "__qualname__", self.target)
            raise OutputProblems(
                [f"at $: the value matches the schema but cannot become {target!r}: {error}"]
            ) from error

    def parse(self, text: str) -> OutT:
        """``text`` (a JSON document, optionally in a Markdown code fence) as the output;
        raises ``OutputProblems`` saying what is wrong."""
        return self.check(self.decode(text))

    def decode(self, text: str) -> Any:
        """``text`` as a JSON value; raises ``OutputProblems`` if it is not JSON."""
        stripped = _unfenced(text.strip())
        try:
            return json.loads(stripped)
        except ValueError as error:
            shown = stripped if len(stripped) <= 80 else stripped[:77] + "..."
            raise OutputProblems(
                [f"at $: the answer is not JSON ({error.args[0]}): {shown!r}"]
            ) from None

    def unstructure(self, value: OutT) -> Any:
        """``value`` (an output) as the JSON value the model sends for it."""
        plain = json.loads(json.dumps(_CONVERTER.unstructure(value)))  # tuples -> lists
        return {WRAPPED_KEY: plain} if self.wrapped else plain


def _unfenced(text: str) -> str:
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        body = text[3:-3]
        first, _, rest = body.partition("\n")
        return (rest if first.strip().isalpha() or not first.strip() else body).strip()
    return text


def _path(path: Any) -> str:
    out = "$"
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else f".{step}"
    return out


def output_spec(
    target: Any,
    *,
    name: str | None = None,
    mode: OutputMode | str = OutputMode.AUTO,
    max_retries: int = DEFAULT_OUTPUT_RETRIES,
    description: str | None = None,
) -> OutputSpec[Any]:
    """The spec of an output: ``target`` is an attrs class, a dataclass, a ``TypedDict``,
    a plain type (``int``, ``list[str]``, ``Literal[...]``...) or a JSON schema (a
    ``dict``; answers are then JSON values). Raises ``InvalidInputError`` naming what
    cannot be used."""
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise InvalidInputError(f"output max_retries must be an int >= 0, got {max_retries!r}")
    try:
        mode = OutputMode(mode)
    except ValueError:
        raise InvalidInputError(
            f"output mode must be 'auto', 'native' or 'tool', got {mode!r}"
        ) from None
    schema, python_type = _target_schema(target)
    name = name or _default_name(target, schema)
    if not _NAME.match(name):
        raise InvalidInputError(
            f"output name must be 1-64 letters, digits, '_' or '-', got {name!r}"
        )
    wrapped = schema.get("type") != "object"
    if wrapped:
        schema = {"type": "object", "properties": {WRAPPED_KEY: schema},
                  "required": [WRAPPED_KEY], "additionalProperties": False}  # fmt: skip
    return OutputSpec(
        name=name,
        schema=schema,
        target=python_type,
        wrapped=wrapped,
        mode=mode,
        max_retries=max_retries,
        description=description or schema.get("description"),
    )


def _target_schema(target: Any) -> tuple[dict[str, Any], Any]:
    """``output_spec``'s target as a JSON schema, and the Python type answers are
    structured into (``None`` for a schema given as a mapping)."""
    if isinstance(target, Mapping):
        schema = dict(target)
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except SchemaError as error:
            raise InvalidInputError(
                f"the output schema is not a valid JSON Schema: {error.message}"
            ) from None
        return schema, None
    try:
        return schema_for_type(target), target
    except TypeError as error:
        raise InvalidInputError(f"cannot use {target!r} as an output type: {error}") from None


def _default_name(target: Any, schema: Mapping[str, Any]) -> str:
    title = schema.get("title")
    if isinstance(title, str) and _NAME.match(title):
        return title
    name = getattr(target, "__name__", None)
    if isinstance(name, str) and _NAME.match(name):
        return name
    return "output"
