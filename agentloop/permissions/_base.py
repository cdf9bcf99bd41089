"""What every policy shares: ``NoVerdict``, the decision type, argument converters."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TypeAlias

import attrs

from ._paths import is_within
from ._requests import Allow, AskApproval, Deny

__all__ = ["NoVerdict", "PolicyVerdict"]


@attrs.frozen
class NoVerdict:
    """A policy's "not my business": the next policy of the chain decides."""


PolicyVerdict: TypeAlias = Allow | Deny | AskApproval | NoVerdict
"""A policy's answer: a :data:`Verdict`, or :class:`NoVerdict` to let the next policy decide."""


def _names(values: Iterable[str]) -> frozenset[str]:
    if isinstance(values, str):
        raise TypeError(f"expected a collection of names, got the string {values!r}")
    return frozenset(values)


def _paths(values: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    if isinstance(values, str | os.PathLike):
        raise TypeError(f"expected a collection of paths, got the single path {values!r}")
    return tuple(os.fspath(value) for value in values)


def _reason(error: BaseException) -> str:
    """An error's text without Python's ``[Errno N]`` prefix."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


def _containing_root(real: str, roots: list[str]) -> str | None:
    """The first of ``roots`` (resolved) that holds the resolved path ``real``."""
    for root in roots:
        if is_within(real, root):
            return root
    return None
