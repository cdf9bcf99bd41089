"""Each adapter's native structured-output request fields (``OutputMode.NATIVE``).

- OpenAI-compatible Chat Completions (also llama.cpp's server, which enforces the
  schema with a grammar): ``response_format: {type: json_schema, json_schema:
  {name, schema, strict}}`` (``strict`` only when the schema fits strict mode).
- OpenAI Responses: ``text: {format: {type: json_schema, name, schema, strict}}``.
- Anthropic Messages: ``output_config: {format: {type: json_schema, schema}}`` (the
  generally available form; no beta header).
- Gemini: ``generationConfig.responseMimeType: application/json`` and
  ``responseJsonSchema`` (full JSON Schema, as the adapter sends tool schemas).

The fields are added by the session every HTTP adapter shares
(:class:`~agentloop.providers._session.HttpSession`), after the adapter built its
body; keys of the adapter's ``extra_body`` win. The adapters are named by class
path, not imported (they import the shared session).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model._protocol import TurnRequest
from ..output._spec import OutputMode, OutputSpec

__all__ = [
    "Renderer",
    "add_output_fields",
    "has_native_output",
    "json_object_output",
    "register_native_output",
]


def _openai(spec: OutputSpec[Any], body: dict[str, Any]) -> None:
    schema: dict[str, Any] = {"name": spec.name}
    if spec.description:
        schema["description"] = spec.description
    schema["schema"] = dict(spec.schema)
    schema["strict"] = spec.strict
    body.setdefault("response_format", {"type": "json_schema", "json_schema": schema})


def _responses(spec: OutputSpec[Any], body: dict[str, Any]) -> None:
    text = body.setdefault("text", {})
    if isinstance(text, dict):
        schema: dict[str, Any] = {"type": "json_schema", "name": spec.name}
        if spec.description:
            schema["description"] = spec.description
        schema["schema"] = dict(spec.schema)
        schema["strict"] = spec.strict
        text.setdefault("format", schema)


def _anthropic(spec: OutputSpec[Any], body: dict[str, Any]) -> None:
    config = body.setdefault("output_config", {})
    if isinstance(config, dict):
        config.setdefault("format", {"type": "json_schema", "schema": dict(spec.schema)})


def _gemini(spec: OutputSpec[Any], body: dict[str, Any]) -> None:
    generation = body.setdefault("generationConfig", {})
    if isinstance(generation, dict):
        generation.setdefault("responseMimeType", "application/json")
        generation.setdefault("responseJsonSchema", dict(spec.schema))


def json_object_output(spec: OutputSpec[Any], body: dict[str, Any]) -> None:
    """llama-cpp-python's server form: ``response_format: {type: json_object, schema}``."""
    body.setdefault("response_format", {"type": "json_object", "schema": dict(spec.schema)})


Renderer = Callable[[OutputSpec[Any], dict[str, Any]], None]
"""Adds an adapter's native output fields to a request body."""

_RENDERERS: dict[str, Renderer] = {
    "agentloop.providers._openai.OpenAIChatModel": _openai,
    "agentloop.providers._responses.OpenAIResponsesModel": _responses,
    "agentloop.providers._anthropic.AnthropicModel": _anthropic,
    "agentloop.providers._gemini.GeminiModel": _gemini,
}


def register_native_output(cls: type, render: Renderer) -> None:
    """Give adapter class ``cls`` (and its subclasses) the native output mode ``render``."""
    _RENDERERS[f"{cls.__module__}.{cls.__qualname__}"] = render


def _renderer(model: object) -> Renderer | None:
    for cls in type(model).__mro__:
        found = _RENDERERS.get(f"{cls.__module__}.{cls.__qualname__}")
        if found is not None:
            return found
    return None


def has_native_output(model: object) -> bool:
    """Whether ``model`` (an adapter) has a native structured-output mode."""
    return _renderer(model) is not None


def add_output_fields(model: object, request: TurnRequest, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with ``model``'s native output fields when ``request`` asks for a
    ``NATIVE`` output (unchanged otherwise)."""
    spec = request.output
    if spec is None or spec.mode is not OutputMode.NATIVE:
        return body
    render = _renderer(model)
    if render is not None:
        render(spec, body)
    return body
