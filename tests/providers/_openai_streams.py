"""OpenAI Chat Completions SSE fixtures.

Shapes follow OpenAI's published streaming examples:
- the ``chat.completion.chunk`` object and its streamed example (role chunk with
  ``content: ""``, content deltas, a final chunk with ``finish_reason`` and an
  empty delta, ``data: [DONE]``):
  https://platform.openai.com/docs/api-reference/chat-streaming/streaming
- the extra usage chunk with ``choices: []`` sent before ``[DONE]`` when
  ``stream_options.include_usage`` is set:
  https://platform.openai.com/docs/api-reference/chat/create#chat-create-stream_options
- streamed tool calls: the first fragment per ``index`` carries ``id``, ``type``
  and ``function.name`` with empty ``arguments``; later fragments carry only
  ``arguments`` pieces; the final chunk has ``finish_reason: "tool_calls"``:
  https://platform.openai.com/docs/guides/function-calling#streaming
- ``reasoning_content`` deltas as sent by DeepSeek / vLLM reasoning parsers:
  https://api-docs.deepseek.com/guides/reasoning_model
"""

from __future__ import annotations

import json
from typing import Any

from ._server import events


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    """One ``data:`` record holding a chat.completion.chunk for choice 0."""
    body: dict[str, Any] = {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
    }
    body.update(extra)
    return "data: " + json.dumps(body, ensure_ascii=False)


def usage_chunk(prompt: int = 9, completion: int = 12, cached: int = 0, reasoning: int = 0) -> str:
    """The include_usage chunk: ``choices: []`` and the totals."""
    body = {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
        },
    }
    return "data: " + json.dumps(body)


DONE = "data: [DONE]"


def text_stream(finish: str = "stop") -> bytes:
    """Hello wörld 🌍 — role chunk, three content deltas, finish, usage, [DONE]."""
    return events(
        chunk({"role": "assistant", "content": "", "refusal": None}),
        chunk({"content": "Hello"}),
        chunk({"content": " wörld"}),
        chunk({"content": " 🌍"}),
        chunk({}, finish),
        usage_chunk(),
        DONE,
    )


def tool_call_stream() -> bytes:
    """One call of get_weather with arguments streamed in three pieces."""
    return events(
        chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ],
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Par'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'is"}'}}]}),
        chunk({}, "tool_calls"),
        usage_chunk(30, 17),
        DONE,
    )


def parallel_calls_stream() -> bytes:
    """Two calls (index 0 and 1), interleaved argument fragments."""
    return events(
        chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ],
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"tz": '}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '"CET"}'}}]}),
        chunk({}, "tool_calls"),
        DONE,
    )


def reasoning_stream() -> bytes:
    """reasoning_content deltas, then content, then usage with reasoning tokens."""
    return events(
        chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
        chunk({"reasoning_content": "Think: 2+2"}),
        chunk({"reasoning_content": " is 4."}),
        chunk({"content": "4"}),
        chunk({}, "stop"),
        usage_chunk(10, 20, cached=6, reasoning=15),
        DONE,
    )


def repeated_name_stream() -> bytes:
    """llama-cpp-python style: the function name repeated in every chunk."""
    call = {"index": 0, "id": "call__0_add_cmpl-1", "type": "function"}
    return events(
        chunk({"tool_calls": [{**call, "function": {"name": "add", "arguments": '{"a":'}}]}),
        chunk({"tool_calls": [{**call, "function": {"name": "add", "arguments": " 1}"}}]}),
        chunk({}, "tool_calls"),
        DONE,
    )


def bad_arguments_stream() -> bytes:
    """A tool call whose argument text is not JSON."""
    return events(
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_x",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": Par'},
                    }
                ]
            }
        ),
        chunk({}, "tool_calls"),
        DONE,
    )


def error_midstream() -> bytes:
    """Some text, then an error object in the stream (as OpenAI and OpenRouter send)."""
    error = {"error": {"message": "The server had an error", "type": "server_error", "code": None}}
    return events(chunk({"content": "Hel"}), "data: " + json.dumps(error))


def malformed_stream() -> bytes:
    """A chunk that is not JSON."""
    return events(chunk({"content": "Hel"}), 'data: {"id": "chatcmpl-123", "choices": [')
