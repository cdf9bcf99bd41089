"""OpenAI Responses API stream fixtures, and the real recordings' loader.

Hand-built events follow the shapes OpenAI documents (openai-python's
``types/responses/*_event.py``, and the streaming guide
https://platform.openai.com/docs/guides/streaming-responses): every record is
``event: TYPE`` plus ``data: {"type": TYPE, "sequence_number": n, ...}``; an output
item is announced by ``response.output_item.added`` and finished by
``response.output_item.done`` carrying the whole item; deltas address it by
``output_index`` (and ``content_index`` for message content, ``summary_index`` for
reasoning summaries). ``recorded()`` reads the real exchanges in ``recordings/``
(see its README for their origin).
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import attrs
import yaml

RECORDINGS = Path(__file__).parent / "recordings"
RESPONSE_ID = "resp_67ccd2bed1ec8190b14f964abc054267"
MODEL = "gpt-5-2025-08-07"


class Stream:
    """Builds one response's SSE body, numbering the events as the API does."""

    def __init__(self, response_id: str = RESPONSE_ID, model: str = MODEL) -> None:
        self.response_id = response_id
        self.model = model
        self.records: list[str] = []
        self._numbers = itertools.count()

    def event(self, kind: str, **fields: Any) -> Stream:
        """Add one ``event: kind`` record whose data is ``{"type": kind, ...fields}``."""
        data = {"type": kind, "sequence_number": next(self._numbers), **fields}
        self.records.append(f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}")
        return self

    def response(self, status: str = "in_progress", **fields: Any) -> dict[str, Any]:
        """A ``response`` object (``usage`` and ``output`` as given)."""
        body: dict[str, Any] = {
            "id": self.response_id,
            "object": "response",
            "created_at": 1741290958,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": self.model,
            "output": [],
            "usage": None,
        }
        body.update(fields)
        return body

    def created(self) -> Stream:
        """``response.created`` then ``response.in_progress``."""
        self.event("response.created", response=self.response())
        return self.event("response.in_progress", response=self.response())

    def completed(self, usage: dict[str, Any] | None = None, **fields: Any) -> Stream:
        """``response.completed`` with ``usage`` (default: :func:`usage`)."""
        usage = usage if usage is not None else make_usage()
        response = self.response("completed", usage=usage, **fields)
        return self.event("response.completed", response=response)

    def incomplete(self, reason: str, usage: dict[str, Any] | None = None) -> Stream:
        """``response.incomplete`` for ``reason`` (``max_output_tokens``, ``content_filter``)."""
        response = self.response(
            "incomplete", usage=usage or make_usage(), incomplete_details={"reason": reason}
        )
        return self.event("response.incomplete", response=response)

    def message(self, index: int, *texts: str, item_id: str = "msg_1", **extra: Any) -> Stream:
        """A message item whose output_text parts stream each text in two deltas."""
        added = {"type": "message", "id": item_id, "status": "in_progress", "role": "assistant"}
        self.event(
            "response.output_item.added", output_index=index, item={**added, **extra, "content": []}
        )
        contents = []
        for position, text in enumerate(texts):
            part = {"type": "output_text", "text": "", "annotations": []}
            where = {"item_id": item_id, "output_index": index, "content_index": position}
            self.event("response.content_part.added", **where, part=part)
            half = len(text) // 2
            for piece in (text[:half], text[half:]):
                self.event("response.output_text.delta", **where, delta=piece, logprobs=[])
            self.event("response.output_text.done", **where, text=text, logprobs=[])
            done = {**part, "text": text}
            self.event("response.content_part.done", **where, part=done)
            contents.append(done)
        item = {**added, **extra, "status": "completed", "content": contents}
        return self.event("response.output_item.done", output_index=index, item=item)

    def call(
        self, index: int, name: str, arguments: str, call_id: str, item_id: str = "fc_1"
    ) -> Stream:
        """A function_call item whose arguments stream in three pieces."""
        item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name}
        self.event(
            "response.output_item.added",
            output_index=index,
            item={**item, "arguments": "", "status": "in_progress"},
        )
        third = max(len(arguments) // 3, 1)
        pieces = [arguments[:third], arguments[third : 2 * third], arguments[2 * third :]]
        for piece in pieces:
            self.event(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=piece,
            )
        self.event(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            arguments=arguments,
        )
        done = {**item, "arguments": arguments, "status": "completed"}
        return self.event("response.output_item.done", output_index=index, item=done)

    def reasoning(
        self, index: int, *summaries: str, item_id: str = "rs_1", encrypted: str = "gAAAA-enc"
    ) -> Stream:
        """A reasoning item with summary parts streamed; ``encrypted`` only on ``done``."""
        item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": []}
        self.event(
            "response.output_item.added",
            output_index=index,
            item={**item, "encrypted_content": encrypted[:4]},
        )
        for position, text in enumerate(summaries):
            where = {"item_id": item_id, "output_index": index, "summary_index": position}
            part = {"type": "summary_text", "text": ""}
            self.event("response.reasoning_summary_part.added", **where, part=part)
            self.event("response.reasoning_summary_text.delta", **where, delta=text)
            self.event("response.reasoning_summary_text.done", **where, text=text)
            self.event("response.reasoning_summary_part.done", **where, part={**part, "text": text})
        summary = [{"type": "summary_text", "text": text} for text in summaries]
        done = {**item, "summary": summary, "encrypted_content": encrypted}
        return self.event("response.output_item.done", output_index=index, item=done)

    def body(self) -> bytes:
        """The SSE body: every record followed by a blank line."""
        return "".join(record + "\n\n" for record in self.records).encode("utf-8")


def make_usage(
    input_tokens: int = 36, output_tokens: int = 87, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    """A ``usage`` object."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def text_stream(*texts: str) -> bytes:
    """created, one message with ``texts`` (default ``Hello wörld 🌍``), completed."""
    stream = Stream().created()
    stream.message(0, *(texts or ("Hello wörld 🌍",)))
    return stream.completed().body()


# -- recordings ------------------------------------------------------------------------------


@attrs.frozen
class Exchange:
    """One recorded request and its response: the body as the provider sent it."""

    uri: str
    request: Any
    status: int
    body: str


def recording_text(name: str) -> bytes:
    """A recording's bytes (uncompressed if it is stored gzipped)."""
    raw = (RECORDINGS / name).read_bytes()
    return gzip.decompress(raw) if name.endswith(".gz") else raw


def recorded(name: str) -> list[Exchange]:
    """The exchanges of recording ``name`` (a path under ``recordings/``).

    A streamed response is its recorded SSE text; a response recorded parsed
    (``parsed_body``, non-streamed JSON) is that JSON serialized again.
    """
    document = yaml.safe_load(recording_text(name))
    exchanges = []
    for interaction in document["interactions"]:
        request, response = interaction["request"], interaction["response"]
        if "body" in response:
            body = response["body"]["string"]
        else:
            body = json.dumps(response["parsed_body"], ensure_ascii=False)
        exchanges.append(
            Exchange(request["uri"], request.get("parsed_body"), response["status"]["code"], body)
        )
    return exchanges
