"""Asking the permission checker about every request of one call, contained.

A checker is host code: it may raise, or answer with something that is no
decision. Either fails the one call it was asked about (an error result),
never the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from .._log import get_logger
from ..core._items import ResultOutcome, ToolResultPart
from ..permissions._base import NoVerdict
from ..permissions._requests import (
    Allow,
    AskApproval,
    Deny,
    PendingPermission,
    PermissionChecker,
    PermissionRequest,
    request_key,
)
from ._errors import describe_error, synthesized_result
from ._tool import ToolRequest


@attrs.frozen
class PendingApproval:
    """A call a checker wants a human to approve before it runs.

    ``pending`` lists every request of the call that needs approval (the
    host must be shown all of them); ``permission`` and ``decision`` are the
    first of them.
    """

    request: ToolRequest
    permission: PermissionRequest
    decision: AskApproval
    pending: tuple[PendingPermission, ...] = ()


class _Decision(Protocol):
    @property
    def approved(self) -> bool: ...

    @property
    def kind(self) -> str: ...


class _Approval(Protocol):
    @property
    def requests(self) -> Sequence[PendingPermission]: ...


class _ApprovedCall(Protocol):
    """A driver's call record: the host's decision and the approval it answered."""

    @property
    def decision(self) -> _Decision | None: ...

    @property
    def approval(self) -> _Approval | None: ...


__all__ = ["approval_summary", "evaluate_requests", "granted_permissions"]

log = get_logger()

Asked = list[tuple[PermissionRequest, AskApproval, PendingPermission]]


def evaluate_requests(
    request: ToolRequest, wanted: Sequence[PermissionRequest], permissions: PermissionChecker
) -> Asked | ToolResultPart:
    """The requests that need approval, or the call's error result.

    Every request is evaluated, so a denial anywhere denies the call even
    when an earlier request only asked for approval.
    """
    asked: Asked = []
    for permission in wanted:
        try:
            decision = permissions.evaluate(permission)
        except Exception as error:
            log.warning(
                "permission checker raised",
                tool=request.tool_name,
                call_id=request.call_id,
                exc_info=True,
            )
            return _failed(
                request,
                f"the permission checker {type(permissions).__name__} raised "
                f"{describe_error(error)} while evaluating {_kind(permission)}",
            )
        if isinstance(decision, Allow):
            continue
        if isinstance(decision, Deny):
            return synthesized_result(
                request.call_id,
                f"tool permission denied: {_text(decision.message)} (code: {_text(decision.code)})",
                ResultOutcome.PERMISSION_DENIED,
            )
        if isinstance(decision, AskApproval):
            try:
                pending = PendingPermission(
                    permission.kind,
                    str(decision.summary or permission.summary),
                    str(decision.reason),
                    request_key(permission),
                )
            except Exception as error:
                return _failed(
                    request,
                    f"the {_kind(permission)} request cannot be shown for approval: "
                    f"{describe_error(error)}",
                )
            asked.append((permission, decision, pending))
            continue
        hint = (
            "; a policy that can abstain must be wrapped in PolicyChain(...)"
            if isinstance(decision, NoVerdict)
            else ""
        )
        log.error(
            "permission checker returned no decision",
            tool=request.tool_name,
            call_id=request.call_id,
            decision=_repr(decision),
        )
        return _failed(
            request,
            f"permission checker {type(permissions).__name__} returned {_repr(decision)} for "
            f"{_kind(permission)}; expected Allow, Deny or AskApproval{hint}",
        )
    return asked


def _failed(request: ToolRequest, why: str) -> ToolResultPart:
    return synthesized_result(
        request.call_id,
        f"tool {request.tool_name!r} was not run: {why}",
        ResultOutcome.PERMISSION_DENIED,
    )


def _kind(permission: PermissionRequest) -> str:
    try:
        return str(permission.kind)
    except Exception:
        return type(permission).__name__


def _text(value: object) -> str:
    """A ``str`` code or message as it is, anything else as :func:`_repr`."""
    return value if isinstance(value, str) else _repr(value)


def _repr(value: object) -> str:
    """``repr(value)``, never raising."""
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


def approval_summary(needed: PendingApproval) -> str:
    """The one-line summary of an approval: the first request's, or all of them joined."""
    if len(needed.pending) <= 1:
        return needed.decision.summary
    return "; ".join(pending.summary for pending in needed.pending)


def granted_permissions(call: _ApprovedCall) -> bool | tuple[PendingPermission, ...]:
    """What a host's answer grants a call: the requests its approval showed when it was
    approved; everything the edited call asks approval for after ``approve_with`` (the host
    wrote that input) or when the approval lists no requests; ``False`` before any answer
    or after a denial. A denial by the checker still denies the call either way."""
    decision = call.decision
    if decision is None or not decision.approved:
        return False
    if decision.kind == "approve_with":
        return True
    approval = call.approval
    if approval is None:
        return False
    # An approval that lists nothing (built by a custom executor, or restored from a
    # checkpoint written before approvals listed their requests) grants the call, as
    # approvals always did.
    return tuple(approval.requests) or True
