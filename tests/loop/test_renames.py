"""The renamed names (docs/renames.md): deprecated aliases warn and still work."""

from __future__ import annotations

import pytest
from loop_support import user
from test_checkpoint import make_agent, planned_model

import agentloop as al

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("old", "new"), [("ApprovalDecision", "ApprovalAnswer"), ("Warning", "LoopWarning")]
)
def test_a_deprecated_root_name_warns_and_is_the_new_one(old: str, new: str) -> None:
    with pytest.warns(
        DeprecationWarning, match=f"agentloop.{old} is deprecated; use agentloop.{new}"
    ):
        value = getattr(al, old)
    assert value is getattr(al, new)
    assert old not in al.__all__


@pytest.mark.parametrize(
    "gone", ["TaskDone", "TaskMovedToBackground", "RequireApproval", "DecisionKind", "Nope"]
)
def test_other_old_names_are_gone(gone: str) -> None:
    with pytest.raises(AttributeError, match=f"has no attribute '{gone}'"):
        getattr(al, gone)


def test_a_star_import_no_longer_shadows_the_builtin_warning() -> None:
    namespace: dict[str, object] = {}
    exec("from agentloop import *", namespace)
    assert "Warning" not in namespace
    assert namespace["LoopWarning"] is al.LoopWarning


@pytest.mark.parametrize("method", ["resolve_approval", "resolve_approval_for"])
async def test_the_deprecated_driver_methods_warn_and_answer(method: str) -> None:
    driver = await make_agent(planned_model(1, calls_per_round=1)).start("s")
    driver.submit_input([user("go")])
    request = await driver.next()
    assert isinstance(request, al.ApprovalRequest)
    args = () if method == "resolve_approval" else (request.call_id,)
    with pytest.warns(DeprecationWarning, match=f"LoopDriver.{method} is deprecated"):
        getattr(driver, method)(*args, al.ApprovalAnswer.deny("no"))
    step = await driver.next()
    while isinstance(step, al.ApprovalRequest):
        step.approve()
        step = await driver.next()
    results = [
        part
        for item in driver.snapshot().transcript
        for part in item.parts
        if isinstance(part, al.ToolResultPart) and part.call_id == request.call_id
    ]
    assert len(results) == 1
    assert results[0].is_error is True
