"""``MODULE:ATTR`` specs (``--model python:...``, ``--tools``, ``serve --agent``), resolved
as ``python -m`` would: the current directory first, then ``sys.path``.

The ``agentloop`` console script does not put the current directory on
``sys.path`` (``python -m agentloop`` does), so a module next to the user's
shell would not be found; :func:`current_directory_on_path` puts it there.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any

from .core._errors import InvalidInputError

__all__ = ["current_directory_on_path", "import_attribute", "not_found_hint", "split_spec"]

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def current_directory_on_path() -> None:
    """Put the current directory first on ``sys.path``, as ``python -m`` does (once)."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def split_spec(
    option: str, spec: str, prefix: str = "python:", example: str = "mybot:model"
) -> tuple[str, str]:
    """``PREFIX MODULE:ATTR`` -> ``(MODULE, ATTR)``; ``InvalidInputError`` saying what is wrong."""
    example = f"{prefix}MODULE:ATTR (e.g. {prefix}{example})"
    if not spec.startswith(prefix):
        raise InvalidInputError(f"{option} {spec!r}: expected {example}")
    module_name, colon, attribute = spec.removeprefix(prefix).partition(":")
    if not colon:
        raise InvalidInputError(f"{option} {spec!r}: expected {example}; the ':ATTR' is missing")
    if not module_name:
        raise InvalidInputError(f"{option} {spec!r}: expected {example}; MODULE is empty")
    if not attribute:
        raise InvalidInputError(f"{option} {spec!r}: expected {example}; ATTR is empty")
    if not _DOTTED.match(module_name):
        raise InvalidInputError(
            f"{option} {spec!r}: {module_name!r} is not a module name (a file my_bot.py is "
            "the module my_bot; a package directory's module is pkg.module)"
        )
    if not _DOTTED.match(attribute):
        raise InvalidInputError(
            f"{option} {spec!r}: {attribute!r} is not an attribute name (a Python name, "
            "or names joined by dots)"
        )
    return module_name, attribute


def not_found_hint(module_name: str) -> str:
    """Where a ``MODULE`` is looked for, and how to make it found."""
    top = module_name.partition(".")[0]
    return (
        f"MODULE is imported as `python -m` would: from the current directory "
        f"({os.getcwd()}), then sys.path; run agentloop from the directory that holds "
        f"{top}.py (or the package {top}/), or add that directory to PYTHONPATH"
    )


def import_attribute(
    option: str, spec: str, prefix: str = "python:", example: str = "mybot:model"
) -> Any:
    """The value ``spec`` names, imported from the current directory first."""
    module_name, attribute = split_spec(option, spec, prefix, example)
    current_directory_on_path()
    try:
        value: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and (
            module_name == error.name or module_name.startswith(f"{error.name}.")
        ):
            raise InvalidInputError(
                f"{option} {spec!r}: no module named {error.name!r}; {not_found_hint(module_name)}"
            ) from None
        raise InvalidInputError(
            f"{option} {spec!r}: importing {module_name!r} failed: {error}"
        ) from None
    except Exception as error:
        raise InvalidInputError(
            f"{option} {spec!r}: importing {module_name!r} raised {type(error).__name__}: {error}"
        ) from None
    for name in attribute.split("."):
        try:
            value = getattr(value, name)
        except AttributeError:
            where = getattr(value, "__file__", None) or type(value).__name__
            raise InvalidInputError(
                f"{option} {spec!r}: {module_name!r} ({where}) has no attribute {attribute!r}"
            ) from None
    return value
