"""Typed reads of provider JSON: wrong types become a precise ``ProviderError``.

Every translator reads its provider's chunks through these helpers, so a
chunk that is valid JSON but has the wrong type anywhere (a ``delta`` that is a
list, a ``content`` that is a number...) fails with a ``ProviderError`` of kind
``INVALID_RESPONSE`` naming the field, the expected type and what came,
never with a raw ``TypeError`` or ``AttributeError``.

Usage numbers are sanitized here too (:func:`usage_count`, :func:`usage_cost`):
a count or cost that is a bool, NaN, infinite, negative, fractional, not a
number, or absurdly large is ignored (counted as 0 / no cost) with a logged
``provider.usage_invalid`` warning, so a broken server can neither bypass
limits nor store a value that breaks a save.
"""

from __future__ import annotations

import math
from typing import Any

from .._log import get_logger
from ..core._errors import ProviderError, ProviderErrorKind
from ._config import shorten

__all__ = [
    "MAX_REPORTED_COST",
    "MAX_REPORTED_TOKENS",
    "get_bool",
    "get_index",
    "get_list",
    "get_mapping",
    "get_str",
    "malformed",
    "require_mapping",
    "usage_cost",
    "usage_count",
]

log = get_logger()

MAX_REPORTED_TOKENS = 10**9
"""Token counts above this (per call) are treated as garbage and ignored."""
MAX_REPORTED_COST = 1_000_000.0
"""Costs above this (per call, in the provider's currency) are treated as garbage and ignored."""


def malformed(provider: str, what: str, expected: str, value: Any) -> ProviderError:
    """The error for ``what`` not being ``expected``."""
    shown = shorten(repr(value), 80)
    return ProviderError(
        f"{provider}: malformed response: expected {what} to be {expected}, "
        f"got {_type_name(value)} {shown}",
        error_type="malformed_stream",
        kind=ProviderErrorKind.INVALID_RESPONSE,
    )


def _type_name(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def require_mapping(value: Any, what: str, provider: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else a ``ProviderError`` naming ``what``."""
    if not isinstance(value, dict):
        raise malformed(provider, what, "an object", value)
    return value


def get_mapping(parent: dict[str, Any], key: str, what: str, provider: str) -> dict[str, Any]:
    """``parent[key]`` as an object; missing or null is ``{}``."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise malformed(provider, f"{what}.{key}", "an object or null", value)
    return value


def get_list(parent: dict[str, Any], key: str, what: str, provider: str) -> list[Any]:
    """``parent[key]`` as an array; missing or null is ``[]``."""
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise malformed(provider, f"{what}.{key}", "an array or null", value)
    return value


def get_str(parent: dict[str, Any], key: str, what: str, provider: str) -> str | None:
    """``parent[key]`` as a string; missing or null is ``None``."""
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise malformed(provider, f"{what}.{key}", "a string or null", value)
    return value


def get_bool(parent: dict[str, Any], key: str, what: str, provider: str) -> bool:
    """``parent[key]`` as a boolean; missing or null is ``False``."""
    value = parent.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise malformed(provider, f"{what}.{key}", "a boolean or null", value)
    return value


def get_index(parent: dict[str, Any], key: str, what: str, provider: str, default: int = 0) -> int:
    """``parent[key]`` as a non-negative integer index; missing or null is ``default``."""
    value = parent.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise malformed(provider, f"{what}.{key}", "a non-negative integer", value)
    return value


def usage_count(usage: dict[str, Any], key: str, provider: str) -> int:
    """The token count ``usage[key]`` (0 if absent); garbage is ignored with a warning."""
    value = usage.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _ignored(provider, key, value)
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        return _ignored(provider, key, value)
    count = int(value)
    if count < 0 or count > MAX_REPORTED_TOKENS:
        return _ignored(provider, key, value)
    return count


def usage_cost(value: Any, provider: str, key: str = "cost") -> float | None:
    """A reported cost (``None`` if absent); garbage is ignored (``None``) with a warning."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or value > MAX_REPORTED_COST
    ):
        _ignored(provider, key, value)
        return None
    return float(value)


def _ignored(provider: str, key: str, value: Any) -> int:
    log.warning(
        "provider.usage_invalid",
        provider=provider,
        field=key,
        value=shorten(repr(value), 80),
        action="ignored",
    )
    return 0
