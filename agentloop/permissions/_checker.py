"""A built-in policy given where a checker is expected, made the checker it means.

A checker must answer every request; a built-in policy abstains on what is
none of its business. Given alone (``.permissions(RequestKindPolicy(...))``), it
means "this policy, and the default for the rest": :func:`as_checker` makes
it ``PolicyChain(policy)``, whose fallback is :class:`Allow`, the agent's
default checker. Any other object is used as it is: a custom policy that
abstains is still answered with an error result for that call (its type does
not say whether it may abstain).
"""

from __future__ import annotations

from typing import TypeAlias

from ..core._errors import InvalidInputError
from ._commands import CommandPolicy
from ._network import NetworkPolicy
from ._policies import PathPolicy, PolicyChain, RequestKindPolicy, ToolPolicy
from ._requests import PermissionChecker

__all__ = ["AbstainingPolicy", "CheckerLike", "as_checker"]

AbstainingPolicy: TypeAlias = (
    RequestKindPolicy | ToolPolicy | PathPolicy | CommandPolicy | NetworkPolicy
)
"""The built-in policies that abstain on requests that are none of their business."""

CheckerLike: TypeAlias = PermissionChecker | AbstainingPolicy
"""What may be given as a checker: a checker, or a built-in policy alone."""

_ABSTAINING = (RequestKindPolicy, ToolPolicy, PathPolicy, CommandPolicy, NetworkPolicy)


def as_checker(checker: CheckerLike, *, operation: str) -> PermissionChecker:
    """``checker`` itself, or ``PolicyChain(checker)`` for a built-in policy alone.

    Raises :class:`InvalidInputError` (naming ``operation``) for an object
    without an ``evaluate`` method.
    """
    if isinstance(checker, _ABSTAINING):
        return PolicyChain(checker)
    if not callable(getattr(checker, "evaluate", None)):
        raise InvalidInputError(
            f"{operation} expects a PermissionChecker (an object with an evaluate(request) "
            f"method) or a policy, got {type(checker).__name__}; combine policies with "
            "PolicyChain(...)"
        )
    return checker
