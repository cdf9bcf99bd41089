"""``CommandPolicy``: shell commands decided by every program they run, and by directory."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Literal

import attrs

from ._base import NoVerdict, PolicyVerdict, _containing_root, _names, _paths, _reason
from ._paths import resolve_path
from ._requests import (
    Allow,
    ApprovalReason,
    AskApproval,
    Deny,
    DenyCode,
    PermissionRequest,
    ShellCommand,
)
from ._wrappers import CommandChain, unwrap

__all__ = ["CommandPolicy"]

_ENVIRONMENT = "a wrapper sets environment variables, which can change what runs"


def _denied_by(program: str, entries: frozenset[str]) -> str | None:
    """The deny entry naming ``program``: same text, or same base name either way."""
    name = os.path.basename(program)
    for entry in sorted(entries):
        if entry == program or os.path.basename(entry) == name:
            return entry
    return None


def _program_file(program: str, directory: str | None, search_path: Sequence[str]) -> str | None:
    """The file ``program`` runs: a path resolved against ``directory``, a bare name looked
    up on ``search_path``; ``None`` if there is none."""
    found = program if "/" in program else shutil.which(program, path=os.pathsep.join(search_path))
    if found is None:
        return None
    try:
        return resolve_path(found, directory)
    except (OSError, ValueError, TypeError):
        return None


@attrs.frozen(kw_only=True)
class CommandPolicy:
    """Decides :class:`ShellCommand` requests by every program they run, and by directory.

    The command is looked through first: wrappers (``env``, ``nice``,
    ``timeout``, ``nohup``, ``stdbuf``, ``xargs``, ``flock``, ``watch -x``,
    ``sudo``, ``doas``, ``time``, ``setsid``, ``ionice``; options read as the
    program reads them), ``find``'s ``-exec``/``-execdir``/``-ok``/``-okdir``
    commands and ``sh -c``/``bash -c`` scripts that are one plain command give
    the programs they run, which are decided too. What cannot be looked
    through is never allowed outright: a script with pipes, ``;``, ``$``,
    redirections or quoting tricks; ``su``, ``chroot``, ``ssh``, ``strace``
    and other runners; a shell or interpreter that a wrapper runs
    (``xargs -I X sh -c X``); ``git`` with ``-c`` settings that may run
    programs, ``--exec-path``, aliases or subcommands that run what they are
    given; an option the wrapper table does not know, an ambiguous one or a
    missing value.

    In order: any program of the chain on ``deny`` is denied (an entry and a
    program match by exact text or by base name either way, so ``rm`` and
    ``/bin/rm`` deny each other), and so is a denied name appearing anywhere
    in a part that cannot be looked through. With ``cwd_roots``, a command
    whose working directory (``cwd`` against ``base``; no ``cwd``: ``base``,
    default the process's working directory) resolves outside every root is
    denied, resolved as in :class:`PathPolicy`. Then the command is allowed
    if every program of the chain is on ``allow``, the chain was read to its
    end and no wrapper sets environment variables
    (``env PATH=/tmp/x ls`` may run another ``ls``); any other asks for
    approval (``unknown="deny"``: denied). ``allow=["env"]`` allows ``env``
    alone, not what it runs. Allowing an interpreter (``sh`` running a
    file, ``python``) still allows everything it can run. Other requests:
    :class:`NoVerdict`.

    An ``allow`` entry and a program match when they are the same text or
    name the same file, whether given as a path or a bare name: ``git``
    and ``/usr/bin/git`` match if ``git`` found on ``search_path`` (default:
    the process's ``PATH``) is that file; ``/tmp/x/git`` matches neither.
    Relative program paths are taken against the command's directory.
    """

    allow: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    deny: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    unknown: Literal["approve", "deny"] = attrs.field(
        default="approve", validator=attrs.validators.in_(("approve", "deny"))
    )
    cwd_roots: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    base: str | None = None
    search_path: tuple[str, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(_paths)
    )

    def evaluate(self, request: PermissionRequest) -> PolicyVerdict:
        """Allow, deny or ask for a shell command."""
        if not isinstance(request, ShellCommand):
            return NoVerdict()
        argv = request.argv
        if not argv or not argv[0]:
            return Deny(DenyCode.COMMAND_NOT_ALLOWED, "cannot run an empty command")
        if not all(isinstance(arg, str) for arg in argv):
            return Deny(
                DenyCode.COMMAND_NOT_ALLOWED,
                f"cannot run {argv!r}: every argument must be a string",
            )
        if any("\0" in arg for arg in argv):
            return Deny(
                DenyCode.COMMAND_NOT_ALLOWED,
                f"cannot run {request.command!r}: an argument contains a NUL byte",
            )
        chain = unwrap(argv)
        if (denied := self._denied(request, chain)) is not None:
            return denied
        if self.cwd_roots and (denied := self._outside_cwd_roots(request)) is not None:
            return denied
        unknown = self._not_allowed(chain, request)
        if unknown is None:
            return Allow()
        if self.unknown == "approve":
            summary = f"Run {request.summary}"
            if chain.programs != (request.program,) or chain.opaque or chain.changes_environment:
                summary += f" ({unknown})"
            return AskApproval(ApprovalReason.SENSITIVE_COMMAND, summary)
        return Deny(
            DenyCode.COMMAND_NOT_ALLOWED, f"command {request.command!r} is not allowed: {unknown}"
        )

    def _denied(self, request: ShellCommand, chain: CommandChain) -> Deny | None:
        for program in chain.programs:
            if _denied_by(program, self.deny) is not None:
                runs = "" if program == request.program else " (it runs it)"
                return Deny(
                    DenyCode.COMMAND_NOT_ALLOWED,
                    f"command {request.command!r} is not allowed: {program!r} is on the deny "
                    f"list{runs}",
                )
        why = chain.opaque if chain.opaque is not None else _ENVIRONMENT
        if chain.opaque is not None or chain.changes_environment:
            for word in chain.words:
                if _denied_by(word, self.deny) is not None:
                    return Deny(
                        DenyCode.COMMAND_NOT_ALLOWED,
                        f"command {request.command!r} is not allowed: it may run {word!r}, "
                        f"which is on the deny list ({why})",
                    )
        return None

    def _not_allowed(self, chain: CommandChain, request: ShellCommand) -> str | None:
        """Why the chain is not allowed outright (``None``: it is)."""
        missing = [p for p in chain.programs if not self._allowed(p, request)]
        if missing:
            allowed = ", ".join(sorted(self.allow)) or "none"
            names = ", ".join(repr(p) for p in dict.fromkeys(missing))
            verb = "is" if len(set(missing)) == 1 else "are"
            return f"{names} {verb} not on the allow list ({allowed})"
        if chain.opaque is not None:
            return chain.opaque
        if chain.changes_environment:
            return _ENVIRONMENT
        return None

    def _allowed(self, program: str, request: ShellCommand) -> bool:
        """Whether ``program`` is on ``allow``: the same text, or the same program file."""
        if program in self.allow:
            return True
        search = os.get_exec_path() if self.search_path is None else list(self.search_path)
        try:
            directory = resolve_path("." if request.cwd is None else request.cwd, self.base)
        except (OSError, ValueError, TypeError):
            directory = None
        name = os.path.basename(program)
        candidates = [e for e in self.allow if os.path.basename(e) == name]
        if not candidates or directory is None:
            return False
        real = _program_file(program, directory, search)
        return real is not None and any(
            _program_file(entry, directory, search) == real for entry in candidates
        )

    def _outside_cwd_roots(self, request: ShellCommand) -> Deny | None:
        cwd = "." if request.cwd is None else request.cwd
        shown = "the default directory" if request.cwd is None else repr(request.cwd)
        try:
            real = resolve_path(cwd, self.base)
        except (OSError, ValueError, TypeError) as error:
            return Deny(
                DenyCode.COMMAND_NOT_ALLOWED,
                f"cannot run {request.command!r} in {shown}: {_reason(error)}",
            )
        roots: list[str] = []
        for root in self.cwd_roots:
            try:
                roots.append(resolve_path(root, self.base))
            except (OSError, ValueError, TypeError):
                continue
        if _containing_root(real, roots) is not None:
            return None
        return Deny(
            DenyCode.COMMAND_NOT_ALLOWED,
            f"cannot run {request.command!r} in {shown}: it resolves to {real}, outside the "
            f"allowed working directories ({', '.join(self.cwd_roots)}); pass a cwd under one "
            "of them",
        )
