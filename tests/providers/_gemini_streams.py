"""Gemini ``streamGenerateContent?alt=sse`` fixtures.

Each record is ``data: <GenerateContentResponse JSON>`` terminated by a blank
line with CRLF line endings, and there is no ``[DONE]`` sentinel: the last
chunk carries ``finishReason`` and the full ``usageMetadata``. Shapes follow
https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent
(response: ``candidates[].content.parts``, ``finishReason``, ``usageMetadata``,
``modelVersion``, ``responseId``), function calls from
https://ai.google.dev/gemini-api/docs/function-calling (``functionCall`` parts
with ``name`` and ``args``, sent whole in one chunk), thought summaries and
signatures from https://ai.google.dev/gemini-api/docs/thinking (``thought: true``
parts, ``thoughtSignature``, ``thoughtsTokenCount``), and finish reasons from
https://ai.google.dev/api/generate-content#FinishReason.
"""

from __future__ import annotations

import json
from typing import Any


def chunk(
    parts: list[dict[str, Any]] | None = None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    **extra: Any,
) -> str:
    """One data record holding a GenerateContentResponse."""
    candidate: dict[str, Any] = {"content": {"parts": parts or [], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {
        "candidates": [candidate],
        "usageMetadata": usage or {"promptTokenCount": 9, "totalTokenCount": 9},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "mVYQaLDiFsKrnvgPlKWj8Qc",
    }
    body.update(extra)
    return "data: " + json.dumps(body, ensure_ascii=False)


def gemini_events(*records: str) -> bytes:
    """Records joined with CRLF blank lines, as Gemini sends them."""
    return "".join(r + "\r\n\r\n" for r in records).encode("utf-8")


FINAL_USAGE = {
    "promptTokenCount": 9,
    "candidatesTokenCount": 12,
    "totalTokenCount": 21,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 9}],
}


def text_stream(finish: str = "STOP") -> bytes:
    """Hello wörld 🌍 over three chunks."""
    return gemini_events(
        chunk([{"text": "Hello"}]),
        chunk([{"text": " wörld"}]),
        chunk([{"text": " 🌍"}], finish, FINAL_USAGE),
    )


def call_stream() -> bytes:
    """One functionCall, sent whole (no id, as the Gemini API does)."""
    return gemini_events(
        chunk(
            [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}],
            "STOP",
            {"promptTokenCount": 40, "candidatesTokenCount": 7, "totalTokenCount": 47},
        )
    )


def parallel_stream() -> bytes:
    """Two functionCalls in one chunk, the first with a thoughtSignature and an id."""
    return gemini_events(
        chunk(
            [
                {
                    "functionCall": {
                        "id": "fc_1",
                        "name": "get_weather",
                        "args": {"city": "Paris"},
                    },
                    "thoughtSignature": "CiQBVKhc7ijr",
                },
                {"functionCall": {"id": "fc_2", "name": "get_time", "args": {"tz": "CET"}}},
            ],
            "STOP",
        )
    )


def thinking_stream() -> bytes:
    """A thought summary, then the answer; usage with thoughts and cached tokens."""
    return gemini_events(
        chunk([{"text": "Adding 2 and 2.", "thought": True}]),
        chunk([{"text": "4"}]),
        chunk(
            [{"text": "", "thoughtSignature": "Cs4BAdHtim9"}],
            "STOP",
            {
                "promptTokenCount": 120,
                "candidatesTokenCount": 1,
                "thoughtsTokenCount": 30,
                "cachedContentTokenCount": 100,
                "totalTokenCount": 151,
            },
        ),
    )


def error_midstream() -> bytes:
    """Text, then an error object (as the API sends when a stream fails)."""
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    return gemini_events(chunk([{"text": "Hel"}]), "data: " + json.dumps(error))


def malformed_stream() -> bytes:
    """A record that is not JSON."""
    return gemini_events(chunk([{"text": "Hel"}]), 'data: {"candidates": [{"content": ')
