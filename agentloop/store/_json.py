"""Strict JSON text, both ways: what a store writes must load back exactly.

``json_text`` refuses what JSON would not give back as it was (a tuple, a
non-string key, NaN or infinity, any other object), naming where it is;
``parse_json`` refuses NaN and infinity, non-text and non-UTF-8 bytes.
``describe_error`` words a converter's refusal in one line.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from json.encoder import (  # type: ignore[attr-defined]  # not in typeshed
    c_make_encoder,
    encode_basestring,
)
from typing import Any

import cattrs

__all__ = ["compact", "describe_error", "json_text", "key_text", "parse_json"]

_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=False
)
"""No cycle check: callers check values first (:func:`_is_plain_json` meets a cycle as a
``RecursionError``)."""

_C_ENCODE = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _ENCODER.default, encode_basestring, None, ":", ",", False, False, False
    )
)
"""What ``_ENCODER.encode`` calls for a list or dict, made once instead of per call."""


def compact(value: Any) -> str:
    """``value`` (checked JSON) as compact text: ``_ENCODER.encode`` without its per-call setup."""
    if _C_ENCODE is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


@lru_cache(maxsize=1024)
def key_text(key: str) -> str:
    """An object member's key as JSON text, with the colon."""
    return encode_basestring(key) + ":"


def json_text(value: Any, where: str, *path: object) -> str:
    """``value`` as compact JSON text; ``ValueError`` naming where a non-JSON value is
    (``where``, then ``[step]`` for each step of ``path``: built only then)."""
    if not _is_plain_json(value):  # _check_json names the offending path, or accepts subclasses
        _check_json(value, where + "".join(f"[{step!r}]" for step in path))
    return compact(value)


def _is_plain_json(value: Any) -> bool:
    """Whether ``value`` is exact JSON built of the plain types only (no path names built).

    The fast check of a valid document; ``False`` sends the value to
    :func:`_check_json`, which decides (subclasses of the JSON types pass
    there) and names the path of what fails.
    """
    kind = type(value)
    if kind is dict:
        for key, element in value.items():
            if type(key) is not str or not (type(element) is str or _is_plain_json(element)):
                return False
        return True
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is list:
        for element in value:  # noqa: SIM110 (all() over a generator is slower in this hot path)
            if not (type(element) is str or _is_plain_json(element)):
                return False
        return True
    if kind is float:
        return math.isfinite(value)
    return False


def _check_json(value: Any, where: str) -> None:
    """Raise ``ValueError`` naming the path (from ``where``) of what in ``value`` is not JSON."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}, which JSON cannot represent")
        return
    if isinstance(value, list):
        for index, element in enumerate(value):
            _check_json(element, f"{where}[{index}]")
        return
    if isinstance(value, dict):
        for key, element in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has the non-string key {key!r}")
            _check_json(element, f"{where}[{key!r}]")
        return
    raise ValueError(
        f"{where} has type {type(value).__name__}, which is not JSON (use dict, list, str, "
        "int, float, bool or None)"
    )


def parse_json(text: object) -> Any:
    """The value of JSON ``text`` (``str`` or UTF-8 bytes); ``ValueError`` saying what it
    "is not" or "holds" otherwise (NaN and infinity are not JSON)."""
    if isinstance(text, bytes | bytearray | memoryview):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("is not UTF-8 text") from None
    if not isinstance(text, str):
        raise ValueError(f"holds {type(text).__name__}, expected JSON text")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as error:
        reason = (
            f"{error.msg} at column {error.colno}"
            if isinstance(error, json.JSONDecodeError)
            else str(error)
        )
        raise ValueError(f"is not JSON ({reason})") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def describe_error(error: Exception) -> str:
    """A one-line reason why structuring a value with the converter failed."""
    if isinstance(error, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(error))
    return f"{type(error).__name__}: {error}"
