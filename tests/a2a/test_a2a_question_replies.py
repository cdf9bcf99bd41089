"""The A2A server's reading of answers to questions (pure functions): any message either
gives answers that fit their questions or is refused as ``bad_answer`` naming the first
bad entry; and the tool source's reading of a ``{"questions": [...]}`` status: each entry
is asked with its kind and schema, and any answer goes back naming its question."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop.a2a._remote_questions import MAX_APPROVALS, Asked, answer_parts, asked_of
from agentloop.a2a._remote_questions import question_for as remote_question
from agentloop.a2a._replies import Reply, question_answers, question_entry
from agentloop.store import PendingQuestion
from agentloop.tools import Question
from agentloop.tools._questions import check_answer
from agentloop.ui._problems import RunRefused

SEAT = {
    "type": "object",
    "properties": {"seat": {"type": "string", "minLength": 2}},
    "required": ["seat"],
    "additionalProperties": False,
}


def pending(n: int, *, schema: Any = SEAT, resumable: bool = True) -> PendingQuestion:
    return PendingQuestion(
        question_id=f"question:call-{n}:1",
        call_id=f"call-{n}",
        tool_name="book",
        kind="mcp.elicitation",
        message="Which seat?",
        schema=schema,
        data={"mode": "form"},
        resumable=resumable,
    )


QUESTIONS = (pending(1), pending(2, schema=None))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
fitting = st.one_of(
    st.builds(
        lambda seat: {
            "questionId": "question:call-1:1",
            "action": "accept",
            "content": {"seat": seat},
        },
        st.text(min_size=2, max_size=4),
    ),
    st.builds(
        lambda n, action: {"questionId": f"question:call-{n}:1", "action": action},
        st.sampled_from([1, 2]),
        st.sampled_from(["decline", "cancel"]),
    ),
    st.just({"questionId": "question:call-2:1", "action": "accept"}),
)
entries = st.one_of(
    fitting,
    st.fixed_dictionaries(
        {},
        optional={
            "questionId": st.sampled_from([q.question_id for q in QUESTIONS] + ["other"]),
            "action": st.sampled_from(["accept", "decline", "cancel", "maybe"]),
            "content": json_values | st.fixed_dictionaries({"seat": st.text(max_size=4)}),
            "extra": json_values,
        },
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(entries | json_values, max_size=2),
    text=st.sampled_from(["", "decline", "cancel", "yes"]),
)
def test_answers_fit_their_questions_or_are_refused(data: list[Any], text: str) -> None:
    refusals: list[RunRefused] = []
    try:
        replies = question_answers(Reply(data=tuple(data), text=text), QUESTIONS)
    except RunRefused as refused:
        refusals.append(refused)
    if refusals:
        assert refusals[0].code == "bad_answer"
        assert refusals[0].message.endswith("Nothing was recorded")
        return
    by_id = {q.question_id: q for q in QUESTIONS}
    assert len({r.question_id for r in replies}) == len(replies)
    for reply in replies:
        asked = by_id[reply.question_id]
        schema = dict(asked.schema) if asked.schema is not None else None
        check_answer(Question(asked.kind, asked.message, schema), reply.answer, "answer")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            Reply(text="sure"),
            "the task waits for the answer to a question: send a data part {questionId?, "
            "action: accept|decline|cancel, content?} per question, or the text 'decline' "
            "or 'cancel'. Nothing was recorded",
        ),
        (
            Reply(data=({"action": "cancel"},)),
            "answers[0] names no questionId, but 2 questions wait (question:call-1:1, "
            "question:call-2:1); name the question with questionId. Nothing was recorded",
        ),
        (
            Reply(data=({"questionId": "question:call-2:1", "action": "accept", "content": 1},)),
            "answers[0]: question 'question:call-2:1': content: the question has no schema, so "
            "an accept carries no content; got 1. Nothing was recorded",
        ),
        (
            Reply(
                data=(
                    {"questionId": "question:call-2:1", "action": "cancel"},
                    {"questionId": "question:call-2:1", "action": "decline"},
                )
            ),
            "answers[1] answers question 'question:call-2:1' a second time. Nothing was "
            "recorded",
        ),
        (Reply(data=("yes",)), "answers[0] must be an object {questionId?, action, content?}, "
         "got 'yes'. Nothing was recorded"),
    ],
)  # fmt: skip
def test_bad_answers_say_what_was_wrong(reply: Reply, expected: str) -> None:
    with pytest.raises(RunRefused) as raised:
        question_answers(reply, QUESTIONS)
    assert (raised.value.code, raised.value.message) == ("bad_answer", expected)


def test_a_question_that_cannot_resume_takes_only_a_decline_or_cancel() -> None:
    once = (pending(1, resumable=False),)
    accept = Reply(data=({"action": "accept", "content": {"seat": "2A"}},))
    with pytest.raises(RunRefused) as raised:
        question_answers(accept, once)
    assert raised.value.message == (
        "answers[0]: call call-1 (book) cannot go on from an answer sent now (its question "
        "has no resume data); decline or cancel it (the call is then answered as in doubt). "
        "Nothing was recorded"
    )
    [reply] = question_answers(Reply(text=" Cancel "), once)
    assert reply.answer == al.QuestionAnswer.cancel()


remote_entries = st.fixed_dictionaries(
    {
        "questionId": st.text(min_size=1, max_size=20),
        "kind": st.text(min_size=1, max_size=20),
        "message": st.text(max_size=50),
    },
    optional={
        "schema": st.sampled_from([None, SEAT, {"type": "nope"}, "x"]),
        "data": json_values,
        "toolName": json_values,
    },
)
WHERE = {"agent": "http://remote.test", "taskId": "t-1", "contextId": "c-1"}


@settings(max_examples=100, deadline=None)
@given(listed=st.lists(remote_entries | json_values, max_size=4), text=st.text(max_size=20))
def test_a_remote_questions_status_asks_each_entry_with_its_schema(
    listed: list[Any], text: str
) -> None:
    parts = [{"questions": listed}]
    valid = [
        e for e in listed
        if isinstance(e, dict) and isinstance(e.get("questionId"), str)
        and e.get("schema", None) in (None, SEAT)
    ]  # fmt: skip
    asked = asked_of(text, parts)
    if not valid:
        assert asked == [Asked()]
        return
    assert [a.question["questionId"] for a in asked if a.question] == [
        e["questionId"] for e in valid
    ]
    for one, entry in zip(asked, valid, strict=True):
        question = remote_question(one, agent="http://remote.test", text=text,
                                   data_parts=parts, where=WHERE)  # fmt: skip
        assert (question.kind, question.schema) == (entry["kind"], entry.get("schema"))
        assert Asked.from_json(json.loads(json.dumps(one.to_json()))) == one
        assert {k: question.data[k] for k in WHERE} == WHERE
        for answer in (al.QuestionAnswer.decline(), al.QuestionAnswer.cancel()):
            reply = {"questionId": entry["questionId"], "action": answer.action.value}
            assert answer_parts(one, answer) == [{"data": reply}]


def test_what_the_server_shows_the_tool_source_asks_back() -> None:
    shown = [{"questions": [question_entry(pending(1))]}]
    [one] = asked_of("waiting for an answer", shown)
    question = remote_question(one, agent="http://b", text="", data_parts=shown, where=WHERE)
    assert (question.kind, question.schema, question.message) == (
        "mcp.elicitation",
        SEAT,
        "remote agent 'http://b' (book) asks: Which seat?",
    )
    answer = al.QuestionAnswer.accept({"seat": "2A"})
    sent = answer_parts(one, answer)
    assert sent == [
        {"data": {"questionId": "question:call-1:1", "action": "accept", "content": {"seat": "2A"}}}
    ]
    [reply] = question_answers(Reply(data=(sent[0]["data"],)), (pending(1),))
    assert reply.answer == answer


def test_more_questions_than_the_bound_are_refused() -> None:
    many = [{"questions": [{"questionId": f"q{n}", "kind": "k", "message": "m"}
                           for n in range(MAX_APPROVALS + 1)]}]  # fmt: skip
    with pytest.raises(ValueError, match="questions at once") as raised:
        asked_of("", many)
    assert str(raised.value) == (
        "the remote task asks for 51 questions at once (at most 50 are asked)"
    )
