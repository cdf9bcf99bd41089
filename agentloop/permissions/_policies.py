"""Composable permission policies and the ``PolicyChain`` that combines them.

A *policy* answers a :class:`PermissionRequest` like a checker does, or
answers :class:`NoVerdict` when the request is none of its business. A
:class:`PolicyChain` asks its policies in order and the first one that does
not abstain decides; if all abstain, the chain's ``fallback`` does. Only the
chain is a :class:`PermissionChecker`: a policy that abstains would leave the
executor without an answer, so ``AgentBuilder.permissions()`` puts a built-in
policy given alone in a chain (see ``_checker.py``).

Everything here is synchronous and side-effect free, except that
:class:`PathPolicy` (and :class:`CommandPolicy` with ``cwd_roots``) read the file
system to resolve symlinks. A checker that raises, or returns something
else than a decision, is answered by the executor with an error result for
that one call.
"""

from __future__ import annotations

import fnmatch
from typing import Literal, Protocol, TypeAlias, runtime_checkable

import attrs

from ._base import NoVerdict, PolicyVerdict, _containing_root, _names, _paths, _reason
from ._commands import CommandPolicy
from ._paths import resolve_path
from ._requests import (
    Allow,
    ApprovalReason,
    AskApproval,
    Deny,
    DenyCode,
    FileSystemRead,
    FileSystemWrite,
    PermissionRequest,
    ToolInvocation,
    Verdict,
)

__all__ = [
    "NoVerdict",
    "CommandPolicy",
    "RequestKindPolicy",
    "PathPolicy",
    "PermissionPolicy",
    "PolicyChain",
    "PolicyVerdict",
    "ToolPolicy",
    "RuleAction",
]


RuleAction: TypeAlias = Literal["allow", "deny", "approve"]
"""What a policy rule does with a request it matches (``ToolPolicy(destructive="approve")``):
allow it, deny it, or ask for approval; the rule's answer is then a :data:`Verdict`."""

_VERDICTS = ("allow", "deny", "approve")
_SEVERITY = {"allow": 0, "approve": 1, "deny": 2}


@runtime_checkable
class PermissionPolicy(Protocol):
    """Decides a permission request, or abstains (every checker is also a policy)."""

    def evaluate(self, request: PermissionRequest) -> PolicyVerdict:
        """Allow, deny, ask for approval, or :class:`NoVerdict`."""
        ...


class PolicyChain:
    """A checker made of policies: the first policy that does not abstain decides.

    When every policy abstains, ``fallback`` is the answer (default
    :class:`Allow`, like the agent's default checker; pass
    ``fallback=Deny(...)`` for deny-by-default).
    """

    def __init__(self, *policies: PermissionPolicy, fallback: Verdict | None = None) -> None:
        fallback = Allow() if fallback is None else fallback
        if not isinstance(fallback, Allow | Deny | AskApproval):
            raise TypeError(
                f"PolicyChain fallback must be Allow, Deny or AskApproval, got {fallback!r}"
            )
        self.policies = policies
        self.fallback = fallback

    def __repr__(self) -> str:
        inner = ", ".join(repr(policy) for policy in self.policies)
        return f"PolicyChain({inner}, fallback={self.fallback!r})"

    def evaluate(self, request: PermissionRequest) -> Verdict:
        """The first non-abstaining policy's decision, else ``fallback``."""
        for policy in self.policies:
            decision = policy.evaluate(request)
            if isinstance(decision, NoVerdict):
                continue
            if isinstance(decision, Allow | Deny | AskApproval):
                return decision
            raise TypeError(
                f"policy {type(policy).__name__} returned {decision!r} for {request.kind}; "
                "expected Allow, Deny, AskApproval or NoVerdict"
            )
        return self.fallback


_verdict_or_none = attrs.validators.optional(attrs.validators.in_(_VERDICTS))


@attrs.frozen(kw_only=True)
class ToolPolicy:
    """Decides :class:`ToolInvocation` requests by tool name, then by annotation.

    Name rules come first (``deny``, then ``require_approval``, then
    ``allow``). Otherwise each annotation the tool has and a verdict is set
    for (``destructive="approve"``: "approve every destructive tool")
    applies, and the strictest of them wins (deny > approve > allow). Any
    other request, or a tool no rule matches: :class:`NoVerdict`.
    """

    allow: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    deny: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    require_approval: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    read_only: RuleAction | None = attrs.field(default=None, validator=_verdict_or_none)
    destructive: RuleAction | None = attrs.field(default=None, validator=_verdict_or_none)
    idempotent: RuleAction | None = attrs.field(default=None, validator=_verdict_or_none)
    open_world: RuleAction | None = attrs.field(default=None, validator=_verdict_or_none)

    def evaluate(self, request: PermissionRequest) -> PolicyVerdict:
        """Decide a tool call by name or annotations; abstain on anything else."""
        if not isinstance(request, ToolInvocation):
            return NoVerdict()
        name = request.tool_name
        if name in self.deny:
            return Deny(DenyCode.TOOL_NOT_ALLOWED, f"tool {name!r} is not allowed")
        if name in self.require_approval:
            return AskApproval(ApprovalReason.POLICY_REQUIRES_CONFIRMATION, request.summary)
        if name in self.allow:
            return Allow()
        return self._by_annotation(request)

    def _by_annotation(self, request: ToolInvocation) -> PolicyVerdict:
        matched: list[tuple[str, RuleAction]] = []
        for label in ("destructive", "open_world", "read_only", "idempotent"):
            verdict: RuleAction | None = getattr(self, label)
            if verdict is not None and getattr(request.annotations, label):
                matched.append((label, verdict))
        if not matched:
            return NoVerdict()
        label, verdict = max(matched, key=lambda pair: _SEVERITY[pair[1]])
        described = label.replace("_", "-")
        if verdict == "deny":
            return Deny(
                DenyCode.TOOL_NOT_ALLOWED,
                f"tool {request.tool_name!r} is {described}, and {described} tools are not allowed",
            )
        if verdict == "approve":
            reason = (
                ApprovalReason.DESTRUCTIVE_TOOL
                if label == "destructive"
                else ApprovalReason.POLICY_REQUIRES_CONFIRMATION
            )
            return AskApproval(reason, f"{request.summary} ({described})")
        return Allow()


@attrs.frozen(kw_only=True)
class RequestKindPolicy:
    """Decides requests by ``kind`` pattern (``fnmatch`` style: ``"mcp.*"``).

    ``deny`` is checked first, then ``require_approval``, then ``allow``;
    other kinds: :class:`NoVerdict`.
    """

    allow: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    deny: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    require_approval: frozenset[str] = attrs.field(default=frozenset(), converter=_names)

    def evaluate(self, request: PermissionRequest) -> PolicyVerdict:
        """Decide by the request's kind."""
        kind = request.kind
        if _matches(kind, self.deny):
            return Deny(
                DenyCode.POLICY_DENIED, f"{kind} requests are not allowed ({request.summary})"
            )
        if _matches(kind, self.require_approval):
            return AskApproval(ApprovalReason.POLICY_REQUIRES_CONFIRMATION, request.summary)
        if _matches(kind, self.allow):
            return Allow()
        return NoVerdict()


def _matches(kind: str, patterns: frozenset[str]) -> bool:
    return any(fnmatch.fnmatchcase(kind, pattern) for pattern in patterns)


@attrs.frozen(kw_only=True)
class PathPolicy:
    """Decides file-system requests by where the OS will really open the path.

    The path (a relative one against ``base``, default the process's working
    directory) and the roots are resolved component by component as the
    kernel does: ``..``, every symlink (``/proc/self/root`` too), so a link
    inside a root that points outside it is outside. A path that cannot be
    resolved is denied: not a string, empty, a NUL byte, a name or path too
    long, a symlink loop or more than 40 links in a row, a component that may
    not be looked at or is not a directory, a link whose target does not
    exist. Then, in order: a write under a ``read_only_roots`` entry is
    denied; a path under an ``allowed_roots`` entry is allowed; a read under
    a read-only root is allowed; anything else is denied
    (``outside="approve"``: asks for approval). A root that cannot be
    resolved contains nothing. Other requests: :class:`NoVerdict`.

    The answer holds when it is given; the file system may change before the
    tool opens the path (see ``docs/security.md``, and
    :func:`~agentloop.permissions.open_beneath` for tools that open files).
    """

    allowed_roots: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    read_only_roots: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    outside: Literal["deny", "approve"] = attrs.field(
        default="deny", validator=attrs.validators.in_(("deny", "approve"))
    )
    base: str | None = None

    def evaluate(self, request: PermissionRequest) -> PolicyVerdict:
        """Allow, deny or ask for a read or write of ``request.path``."""
        if isinstance(request, FileSystemWrite):
            return self._decide(request.path, write=True)
        if isinstance(request, FileSystemRead):
            return self._decide(request.path, write=False)
        return NoVerdict()

    def _decide(self, path: object, *, write: bool) -> PolicyVerdict:
        verb = "write" if write else "read"
        try:
            real = self.resolve(path)  # type: ignore[arg-type]
        except (OSError, ValueError, TypeError) as error:
            return Deny(
                DenyCode.PATH_NOT_ALLOWED,
                f"cannot {verb} {path!r}: it cannot be resolved: {_reason(error)}",
            )
        read_only = _containing_root(real, self._resolved(self.read_only_roots))
        if write and read_only is not None:
            return Deny(
                DenyCode.PATH_NOT_ALLOWED,
                f"cannot write {path!r}: it is under the read-only root {read_only}",
            )
        if _containing_root(real, self._resolved(self.allowed_roots)) is not None:
            return Allow()
        if read_only is not None:
            return Allow()
        if self.outside == "approve":
            return AskApproval(
                ApprovalReason.SENSITIVE_PATH,
                f"{verb.capitalize()} {real} (outside the allowed roots)",
            )
        roots = ", ".join(self.allowed_roots) or "none"
        if not write and self.read_only_roots:
            roots += "; read-only: " + ", ".join(self.read_only_roots)
        return Deny(
            DenyCode.PATH_NOT_ALLOWED,
            f"cannot {verb} {path!r}: it resolves to {real}, outside the allowed roots "
            f"({roots}); use a path under one of them",
        )

    def _resolved(self, roots: tuple[str, ...]) -> list[str]:
        found: list[str] = []
        for root in roots:
            try:
                found.append(self.resolve(root))
            except (OSError, ValueError, TypeError):
                continue  # a root that cannot be resolved contains nothing
        return found

    def resolve(self, path: str) -> str:
        """``path`` made absolute (against ``base``) with ``..`` and symlinks resolved.

        Raises ``TypeError``, ``ValueError`` or ``OSError`` for a path that
        cannot be resolved (see the class docstring).
        """
        return resolve_path(path, self.base)
