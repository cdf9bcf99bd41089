"""Resource contents and prompt results to parts, for any contents (pure conversions)."""

from __future__ import annotations

import base64

import mcp_types
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentloop as al
from agentloop.mcp._resources import contents_parts, to_prompt_result

uris = st.from_regex(r"\A[a-z]{1,8}://[a-z0-9/_.-]{0,20}\Z")
mimes = st.none() | st.sampled_from(["text/plain", "application/json", "image/png"])
texts = st.text(max_size=50)
blobs = st.binary(max_size=40).map(lambda data: base64.b64encode(data).decode())


@st.composite
def contents(draw: st.DrawFn) -> mcp_types.TextResourceContents | mcp_types.BlobResourceContents:
    uri, mime = draw(uris), draw(mimes)
    if draw(st.booleans()):
        return mcp_types.TextResourceContents(uri=uri, text=draw(texts), mime_type=mime)
    return mcp_types.BlobResourceContents(uri=uri, blob=draw(blobs), mime_type=mime)


@given(st.lists(contents(), max_size=6))
def test_every_contents_becomes_one_part_keeping_uri_text_and_data(
    found: list[mcp_types.TextResourceContents | mcp_types.BlobResourceContents],
) -> None:
    parts = contents_parts("srv", "x://y", mcp_types.ReadResourceResult(contents=found))
    assert len(parts) == len(found)
    for part, item in zip(parts, found, strict=True):
        if isinstance(item, mcp_types.TextResourceContents):
            meta = {"mcp.uri": item.uri}
            if item.mime_type is not None:
                meta["mcp.mime_type"] = item.mime_type
            assert part == al.TextPart(item.text, metadata=meta)
        else:
            assert isinstance(part, al.FilePart)
            assert (part.data, part.uri, part.mime_type) == (item.blob, item.uri, item.mime_type)
            assert part.name == (item.uri.rstrip("/").rsplit("/", 1)[-1] or None)


@given(
    st.lists(contents(), max_size=3),
    st.sampled_from(["%%", "abc", "a===", "Zm9v!"]),
    uris,
)
def test_a_blob_that_is_not_base64_is_refused_naming_it(
    before: list[mcp_types.TextResourceContents | mcp_types.BlobResourceContents],
    bad: str,
    uri: str,
) -> None:
    result = mcp_types.ReadResourceResult(
        contents=[*before, mcp_types.BlobResourceContents(uri=uri, blob=bad)]
    )
    with pytest.raises(ValueError, match="is not base64") as caught:
        contents_parts("srv", "asked://it", result)
    assert str(caught.value).startswith(
        f"MCP server 'srv' answered resources/read 'asked://it' with contents[{len(before)}] "
        f"({uri}) whose blob is not base64: "
    )


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), texts), max_size=5))
def test_prompt_messages_keep_their_roles_and_order(said: list[tuple[str, str]]) -> None:
    result = mcp_types.GetPromptResult.model_validate(
        {"messages": [{"role": r, "content": {"type": "text", "text": t}} for r, t in said]}
    )
    prompt = to_prompt_result("p", result)
    assert [(m.role, m.part) for m in prompt.messages] == [(r, al.TextPart(t)) for r, t in said]
