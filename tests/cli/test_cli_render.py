"""What the renderer prints for streamed arguments, entities, ids, usage and failures."""

from __future__ import annotations

import pytest
from cli_support import Answers, console, lines

import agentloop as al
from agentloop.cli import main
from agentloop.cli._render import Renderer, format_usage, short_id
from agentloop.loop._events import ContentDelta


def render(*deltas: al.Delta) -> list[str]:
    target, buffer = console()
    renderer = Renderer(target)
    for delta in deltas:
        renderer.event(ContentDelta(delta))
    renderer.end_inline()
    return lines(buffer)


def test_streamed_tool_arguments_are_labelled_apart_from_text() -> None:
    assert render(
        al.BeginPart("text-0", al.PartKind.TEXT),
        al.AppendText("text-0", "Let me add."),
        al.BeginPart("call-0", al.PartKind.TOOL_CALL),
        al.AppendText("call-0", '{"a": 1, '),
        al.AppendText("call-0", '"b": 2}'),
    ) == ["Let me add.", '   arguments: {"a": 1, "b": 2}']


@pytest.mark.parametrize(
    ("chunks", "shown"),
    [
        (["It&#39;s fine"], "It's fine"),
        (["It&#3", "9;s fine"], "It's fine"),  # an entity cut between two chunks
        (["a &amp; b &lt;c&gt;"], "a & b <c>"),
        (["tail &"], "tail &"),  # a bare ampersand at the end is kept
        (["5 & 6 && 7"], "5 & 6 && 7"),
    ],
)
def test_html_entities_are_decoded_for_display(chunks: list[str], shown: str) -> None:
    deltas = [al.AppendText("text-0", chunk) for chunk in chunks]
    assert render(al.BeginPart("text-0", al.PartKind.TEXT), *deltas) == [shown]


@pytest.mark.parametrize(
    ("call_id", "shown"),
    [
        ("call-1", "call-1"),
        ("call_123456789", "call_1…6789"),
        ("chatcmpl-tool-8f3a1c2e9b7d4e6f91c2", "chatcm…91c2"),
        ("x" * 12, "x" * 12),
    ],
)
def test_long_call_ids_are_shortened(call_id: str, shown: str) -> None:
    assert short_id(call_id) == shown


@pytest.mark.parametrize(
    ("usage", "shown"),
    [
        (None, "not reported"),
        (al.Usage(), "not reported"),
        (al.Usage(0, 3), "input 0 tokens, output 3 tokens"),
        (al.Usage(10, 2, cost=0.5), "input 10 tokens, output 2 tokens, cost $0.5000"),
    ],
)
def test_usage_says_not_reported_rather_than_zeros(usage: al.Usage | None, shown: str) -> None:
    assert format_usage(usage) == shown


def test_a_provider_error_is_printed_once_and_the_chat_goes_on() -> None:
    target, buffer = console()
    argv = ["chat", "--model", "python:cli_support:make_model", "--tools", "cli_support:TOOLS"]
    assert main(argv, console=target, read_line=Answers(target, ["fail", "hi", "/quit"])) == 0
    out = lines(buffer)
    assert out[1:4] == [
        "you> fail",
        "failed: ProviderError: the server said no (HTTP 503)",
        "you> hi",
    ]
