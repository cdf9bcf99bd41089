"""The distribution's name and its extras: what to install when an import is missing.

agentloop is published as ``agentloop-runtime`` (``agentloop`` on PyPI is an
unrelated project); the import name is ``agentloop``. One table says which
extra brings which top-level module, so every "missing extra" error names the
same install command.
"""

from __future__ import annotations

import importlib.util
import sys

__all__ = [
    "DISTRIBUTION",
    "EXTRA_OF_MODULE",
    "install_command",
    "is_installed",
    "missing_extra_message",
    "require_extra",
]

DISTRIBUTION = "agentloop-runtime"
"""The name to ``pip install`` (the import name is ``agentloop``)."""

EXTRA_OF_MODULE = {
    "rich": "cli",
    "starlette": "serve",
    "uvicorn": "serve",
    "sse_starlette": "serve",
    "jinja2": "serve",
    "psycopg": "postgres",
    "redis": "redis",
    "mcp": "mcp",
    "mcp_types": "mcp",
    "httpx2": "mcp",
    "opentelemetry": "otel",
    "dbos": "dbos",
    "hypothesis": "testing",
    "ag_ui": "agui",
    "pydantic": "agui",
    "a2a": "a2a",
}
"""Top-level module -> the extra of ``agentloop-runtime`` that installs it."""


def install_command(extra: str) -> str:
    """``pip install 'agentloop-runtime[EXTRA]'`` (from a clone: ``pip install '.[EXTRA]'``)."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_extra_message(error: BaseException, what: str = "agentloop") -> str | None:
    """One line naming the extra to install, when ``error`` is a missing extra's module.

    ``None`` for anything else (another module missing, another error).
    """
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return None
    module = error.name.partition(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return (
        f"{what} needs the {extra} extra ({module} is not installed): {install_command(extra)} "
        f"(in a clone: pip install '.[{extra}]')"
    )


def is_installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: imports of it are blocked
    return importlib.util.find_spec(module) is not None


def require_extra(extra: str, what: str, *modules: str) -> None:
    """Raise one ``ModuleNotFoundError`` naming the install command if ``modules`` are missing.

    For a package that is all the extra's (``agentloop.mcp``): called first in
    its ``__init__``, so ``import agentloop.mcp`` without the extra says what to
    install instead of naming a module deep inside.
    """
    missing = [module for module in modules if not is_installed(module)]
    if missing:
        raise ModuleNotFoundError(
            f"{what} needs the {extra} extra ({missing[0]} is not installed): "
            f"{install_command(extra)} (in a clone: pip install '.[{extra}]')",
            name=missing[0],
        )
