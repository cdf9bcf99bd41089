"""Renamed names are gone (CHANGELOG.md): the old spelling raises, nothing warns."""

from __future__ import annotations

import warnings

import pytest
from test_checkpoint import make_agent, planned_model

import agentloop as al

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "gone",
    [
        "ApprovalDecision",
        "Warning",
        "TaskDone",
        "TaskMovedToBackground",
        "RequireApproval",
        "DecisionKind",
        "ApproverReply",
        "PermissionVerdict",
        "Abstain",
        "TaskFinished",
    ],
)
def test_old_root_names_are_gone(gone: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match=f"has no attribute '{gone}'"):
            getattr(al, gone)


def test_a_star_import_does_not_shadow_the_builtin_warning() -> None:
    namespace: dict[str, object] = {}
    exec("from agentloop import *", namespace)
    assert "Warning" not in namespace


@pytest.mark.parametrize("method", ["resolve_approval", "resolve_approval_for"])
async def test_the_old_driver_methods_are_gone(method: str) -> None:
    driver = await make_agent(planned_model(1, calls_per_round=1)).start("s")
    assert not hasattr(driver, method)
    assert callable(driver.answer_approval)
    assert callable(driver.answer_approval_for)
