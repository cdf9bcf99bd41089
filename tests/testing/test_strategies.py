"""The strategies produce what they claim."""

from __future__ import annotations

import subprocess
import sys

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop.testing
from agentloop import (
    AfterToolResult,
    ApprovalRequest,
    AwaitingInput,
    Item,
    ItemKind,
    ToolRequest,
    ToolResultPart,
    TranscriptError,
    structure,
    unstructure,
)
from agentloop.permissions import AllowAll
from agentloop.testing import (
    VIOLATION_KINDS,
    Approve,
    ApproveWith,
    Cancel,
    CancelPoint,
    Continue,
    DenyCall,
    Interject,
    InvalidTranscript,
    Submit,
    host_actions,
    invalid_transcripts,
    items,
    tool_inputs,
    tool_specs,
    transcripts,
)
from agentloop.tools import BasicToolExecutor, PreparedCall, ResultOutcome, result_outcome
from agentloop.transcript import find_violation, has_pending_input, validate_transcript

FAST = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@FAST
@given(transcripts())
def test_valid_transcripts_validate(transcript: list[Item]) -> None:
    validate_transcript(transcript)


@FAST
@given(transcripts(ends_with="input"))
def test_input_ending_is_a_fresh_turn(transcript: list[Item]) -> None:
    assert find_violation(transcript) is None
    assert transcript[-1].kind in (ItemKind.USER, ItemKind.NOTIFICATION)


@FAST
@given(transcripts(ends_with="tool_result"))
def test_tool_result_ending_follows_a_tool_round(transcript: list[Item]) -> None:
    assert find_violation(transcript) is None
    assert has_pending_input(transcript)
    last_assistant = max(i for i, item in enumerate(transcript) if item.kind is ItemKind.ASSISTANT)
    assert any(transcript[last_assistant].tool_calls())
    assert all(item.kind is not ItemKind.ASSISTANT for item in transcript[last_assistant + 1 :])


@FAST
@given(transcripts(ends_with="answer"))
def test_answer_ending_is_an_assistant_item(transcript: list[Item]) -> None:
    assert find_violation(transcript) is None
    assert transcript[-1].kind is ItemKind.ASSISTANT
    assert not any(transcript[-1].tool_calls())


@settings(FAST, max_examples=200)
@given(transcripts())
def _record_shapes(transcript: list[Item]) -> None:
    # Not a property: records which shapes appear (checked below).
    calls = [item for item in transcript if any(item.tool_calls())]
    _SEEN["several rounds"] |= len(calls) > 1
    _SEEN["parallel calls"] |= any(len(list(item.tool_calls())) > 1 for item in calls)
    results = [r for item in transcript for r in item.tool_results()]
    _SEEN["error results"] |= any(r.is_error for r in results)
    _SEEN["synthesized results"] |= any(result_outcome(r) is not None for r in results)
    kinds = {item.kind for item in transcript}
    for kind in (ItemKind.SYSTEM, ItemKind.CONTEXT, ItemKind.NOTIFICATION):
        _SEEN[kind.value] |= kind in kinds
    _SEEN["reasoning"] |= any(
        p.__class__.__name__ == "ReasoningPart" for i in transcript for p in i.parts
    )


_SEEN: dict[str, bool] = dict.fromkeys(
    [
        "several rounds",
        "parallel calls",
        "error results",
        "synthesized results",
        "system",
        "context",
        "notification",
        "reasoning",
    ],
    False,
)


def test_every_shape_was_generated() -> None:
    _record_shapes()
    assert [shape for shape, seen in _SEEN.items() if not seen] == []


@FAST
@given(invalid_transcripts())
def test_invalid_transcripts_are_rejected_with_the_named_violation(bad: InvalidTranscript) -> None:
    transcript, kind = bad
    assert kind in VIOLATION_KINDS
    with pytest.raises(TranscriptError) as raised:
        validate_transcript(transcript)
    assert raised.value.violation == kind


@pytest.mark.parametrize("kind", VIOLATION_KINDS)
def test_each_violation_kind_can_be_requested(kind: str) -> None:
    @FAST
    @given(invalid_transcripts(kinds=[kind]))
    def check(bad: InvalidTranscript) -> None:
        violation = find_violation(bad.items)
        assert violation is not None
        assert violation.kind == kind

    check()


def test_invalid_transcripts_refuses_unknown_kinds() -> None:
    with pytest.raises(ValueError, match=r"kinds must be a non-empty subset of .*'orphaned'"):
        invalid_transcripts(kinds=["backwards"])


@FAST
@given(transcripts(valid=False))
def test_transcripts_valid_false_are_invalid(transcript: list[Item]) -> None:
    assert find_violation(transcript) is not None


@FAST
@given(items())
def test_items_survive_a_serialization_round_trip(item: Item) -> None:
    assert structure(unstructure(item), Item) == item


@FAST
@given(st.data())
def test_tool_inputs_match_the_schema_and_the_executor_agrees(data: st.DataObject) -> None:
    spec = data.draw(tool_specs())
    good = data.draw(tool_inputs(spec))
    jsonschema.validate(good, spec.input_schema)

    class Tool:
        async def invoke(self, request: ToolRequest, ctx: object) -> str:
            return "ok"

    tool = Tool()
    tool.spec = spec  # type: ignore[attr-defined]
    registry = agentloop.ToolRegistry().with_tool(tool)  # type: ignore[arg-type]
    executor = BasicToolExecutor([registry])
    request = ToolRequest("call-1", spec.name, good, "s", "turn-1")
    assert isinstance(executor.prepare(request, AllowAll(), approved=False), PreparedCall)


@settings(FAST, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_invalid_tool_inputs_are_rejected(data: st.DataObject) -> None:
    spec = data.draw(tool_specs())
    bad = data.draw(tool_inputs(spec, valid=False))
    validator = jsonschema.Draft202012Validator(spec.input_schema)
    assert not validator.is_valid(bad)


def test_tool_inputs_accepts_a_bare_schema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    @FAST
    @given(tool_inputs(schema), tool_inputs(schema, valid=False))
    def check(good: object, bad: object) -> None:
        assert isinstance(good, dict)
        assert isinstance(good["n"], int)
        assert not jsonschema.Draft202012Validator(schema).is_valid(bad)

    check()


@pytest.mark.parametrize(
    ("step", "allowed"),
    [
        (AwaitingInput, (Submit, Cancel, Continue)),
        (ApprovalRequest, (Approve, ApproveWith, DenyCall, Cancel, Continue)),
        (AfterToolResult, (Interject, Cancel, Continue)),
    ],
)
def test_host_actions_fit_the_step(step: type, allowed: tuple[type, ...]) -> None:
    @FAST
    @given(host_actions(step))
    def check(action: object) -> None:
        assert isinstance(action, allowed)
        if isinstance(action, Cancel) and action.point.is_immediate:
            expected = CancelPoint.APPROVAL if step is ApprovalRequest else CancelPoint.PAUSE
            assert action.point is expected
        if isinstance(action, Submit | Interject):
            assert action.items[-1].kind in (ItemKind.USER, ItemKind.NOTIFICATION)

    check()


def test_public_surface_is_sorted_and_resolves() -> None:
    names = agentloop.testing.__all__

    def isort_style(name: str) -> tuple[int, str]:  # constants, classes, functions
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert names == sorted(names, key=isort_style)
    for name in names:
        assert getattr(agentloop.testing, name) is not None


def test_scripted_model_imports_without_hypothesis() -> None:
    program = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "hypothesis" or name.startswith("hypothesis."):
            raise ModuleNotFoundError("No module named 'hypothesis'", name="hypothesis")
sys.meta_path.insert(0, Block())
from agentloop.testing import ScriptedModel, assert_transcript_valid, text
ScriptedModel(["hi"]); assert_transcript_valid([])
try:
    from agentloop.testing import transcripts
except ImportError as error:
    print("ImportError:", error)
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "agentloop.testing.transcripts needs hypothesis" in done.stdout


def test_synthesized_results_carry_a_real_outcome() -> None:
    @FAST
    @given(transcripts())
    def check(transcript: list[Item]) -> None:
        for item in transcript:
            for part in item.tool_results():
                assert isinstance(part, ToolResultPart)
                outcome = result_outcome(part)
                assert outcome is None or outcome in ResultOutcome

    check()
