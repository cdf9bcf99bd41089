"""The roots a source advertises to its server: the directories of a ``PathPolicy``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TypeAlias

import attrs
import mcp_types

from ..permissions._paths import resolve_path
from ..permissions._policies import PathPolicy, PolicyChain

__all__ = ["READ_ONLY_KEY", "Roots", "RootsLike", "to_roots"]

READ_ONLY_KEY = "agentloop/readOnly"
"""A root's ``_meta`` key, ``true`` for a ``PathPolicy``'s read-only root."""

RootsLike: TypeAlias = PathPolicy | PolicyChain | Iterable[str | os.PathLike[str]]
"""What ``McpToolSource(roots=...)`` takes: a path policy, a chain holding path
policies, or the directories themselves."""


@attrs.frozen
class _Root:
    path: str
    base: str | None
    read_only: bool


@attrs.frozen
class Roots:
    """The directories to advertise, resolved each time the server asks."""

    entries: tuple[_Root, ...]

    async def list_roots(self, context: object) -> mcp_types.ListRootsResult:
        """The SDK's ``list_roots_callback``: :meth:`listed`."""
        return self.listed()

    def listed(self) -> mcp_types.ListRootsResult:
        """The ``roots/list`` answer: each root resolved as ``PathPolicy`` resolves it
        (symlinks followed), once (read-only if any of its entries is); a root that
        cannot be resolved is left out."""
        found: dict[str, tuple[str, bool]] = {}  # uri -> (name, read-only)
        for entry in self.entries:
            try:
                real = resolve_path(entry.path, entry.base)
            except (OSError, ValueError, TypeError):
                continue  # a root that cannot be resolved contains nothing
            uri = Path(real).as_uri()
            name, read_only = found.get(uri, (entry.path, False))
            found[uri] = (name, read_only or entry.read_only)
        return mcp_types.ListRootsResult(
            roots=[
                mcp_types.Root.model_validate(
                    {
                        "uri": uri,
                        "name": name,
                        "_meta": {READ_ONLY_KEY: True} if read_only else None,
                    }
                )
                for uri, (name, read_only) in found.items()
            ]
        )


def to_roots(roots: RootsLike) -> Roots:
    """The roots of ``roots``; raises ``TypeError`` for anything else (a single path)."""
    if isinstance(roots, str | os.PathLike):
        raise TypeError(
            f"McpToolSource roots must be a PathPolicy, a PolicyChain or a collection of "
            f"paths, got the single path {roots!r}; pass [{roots!r}]"
        )
    if isinstance(roots, PathPolicy | PolicyChain):
        return Roots(tuple(_from_policy(roots)))
    entries: list[_Root] = []
    for path in roots:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(
                f"McpToolSource roots must be paths (str or os.PathLike), got "
                f"{type(path).__name__}: {path!r}"
            )
        entries.append(_Root(os.fspath(path), None, read_only=False))
    return Roots(tuple(entries))


def _from_policy(policy: object) -> Iterable[_Root]:
    if isinstance(policy, PathPolicy):
        for path in policy.allowed_roots:
            yield _Root(path, policy.base, read_only=False)
        for path in policy.read_only_roots:
            yield _Root(path, policy.base, read_only=True)
    elif isinstance(policy, PolicyChain):
        for inner in policy.policies:
            yield from _from_policy(inner)
