"""The programs that run other programs, and how each reads its options.

Each :class:`~._options.Options` entry copies the option table of the
program's source (GNU coreutils 9, findutils 4.9, util-linux 2.38, procps-ng
4, sudo 1.9, OpenBSD doas, GNU time 1.9), including ``--help`` and
``--version`` so that abbreviations resolve as they do in the program.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ._options import Options, Parsed

__all__ = [
    "COMMAND_READERS",
    "INTERPRETERS",
    "OPAQUE_RUNNERS",
    "RUNNER_REASONS",
    "SHELLS",
    "WRAPPERS",
    "is_interpreter",
]

_STANDARD = " help:help version:version"
_EXITS = " help version"

WRAPPERS: dict[str, Options] = {
    "env": Options(
        short="+C:iS:u:v0",
        long="ignore-environment:i null:0 unset=:u chdir=:C split-string=:S debug:v "
        "default-signal=? ignore-signal=? block-signal=? list-signal-handling" + _STANDARD,
        opaque="C S" + _EXITS,
        assignments=True,
        lone_dash=True,
    ),
    "nice": Options(short="+n:", long="adjustment=:n" + _STANDARD, opaque=_EXITS, numeric=True),
    "nohup": Options(short="+", long=_STANDARD.strip(), opaque=_EXITS),
    "timeout": Options(
        short="+k:s:v",
        long="foreground kill-after=:k preserve-status signal=:s verbose:v" + _STANDARD,
        opaque=_EXITS,
        positional=1,
    ),
    "stdbuf": Options(
        short="+i:o:e:", long="input=:i output=:o error=:e" + _STANDARD, opaque=_EXITS
    ),
    "xargs": Options(
        short="+0a:E:e::i::I:l::L:n:oprP:xs:d:t",
        long="null:0 arg-file=:a delimiter=:d eof=?:e replace=?:i max-lines=?:l max-args=:n "
        "open-tty:o interactive:p no-run-if-empty:r max-chars=:s verbose:t show-limits:S "
        "exit:x max-procs=:P process-slot-var=" + _STANDARD,
        opaque="S" + _EXITS,
        default=("echo",),
        feeds="adds arguments read from its input to",
    ),
    "flock": Options(
        short="+sexnouw:E:FhV",
        long="shared:s exclusive:x unlock:u nonblocking:n nonblock:n timeout=:w wait=:w "
        "conflict-exit-code=:E close:o no-fork:F verbose help:h version:V",
        opaque="h V",
        positional=1,
    ),
    "watch": Options(
        short="+bced::ghn:pq:twxv",
        long="beep:b color:c differences=?:d errexit:e chgexit:g equexit=:q interval=:n "
        "precise:p no-title:t no-wrap:w exec:x help:h version:v",
        opaque="h v",
    ),
    "sudo": Options(
        short="+ABbC:D:Eeg:Hh::iKklNnPp:R:r:SsT:t:U:u:Vv",
        long="askpass:A background:b bell:B close-from=:C "
        "chdir=:D preserve-env=?:E edit:e group=:g set-home:H help:h host=:host login:i "
        "remove-timestamp:K reset-timestamp:k list:l no-update:N non-interactive:n "
        "preserve-groups:P prompt=:p chroot=:R role=:r stdin:S shell:s type=:t "
        "command-timeout=:T other-user=:U user=:u version:V validate:v",
        opaque="D R e h i K l s V v",
        assignments=True,
    ),
    "doas": Options(short="+C:Lnsu:", opaque="C L s"),
    "time": Options(
        short="+af:o:pqvV",
        long="append:a format=:f output=:o portability:p quiet:q verbose:v help:h version:V",
        opaque="h V",
    ),
    "setsid": Options(short="+cfwhV", long="ctty:c fork:f wait:w help:h version:V", opaque="h V"),
    "ionice": Options(
        short="+c:n:p:P:u:thV",
        long="class=:c classdata=:n pid=:p pgid=:P uid=:u ignore:t help:h version:V",
        opaque="p P u h V",
    ),
    "command": Options(short="+pvV", opaque="v V"),
    "exec": Options(short="+cla:"),
    "builtin": Options(),
}
"""Programs that run another command given in their arguments, with the options they take.

``sudo`` is the Linux build: no ``-a``/``--auth-type`` (BSD auth) nor ``-c``/``--login-class``
(BSD login classes), so those are unknown options here."""


def _flock_command(parsed: Parsed) -> str | None:
    if parsed.rest[:1] in (("-c",), ("--command",)):
        return "flock -c runs its command through the shell named by $SHELL"
    return None


def _watch_command(parsed: Parsed) -> str | None:
    if parsed.has("x") or not parsed.rest:
        return None
    return "watch runs its command through sh -c unless given -x"


COMMAND_READERS: dict[str, Callable[[Parsed], str | None]] = {
    "flock": _flock_command,
    "watch": _watch_command,
}
"""Why the command after a wrapper's options is not run as an argv (``None``: it is)."""

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh"})
"""Shells whose ``-c SCRIPT`` is looked into (when no wrapper runs them)."""

INTERPRETERS = frozenset(
    {
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "node",
        "nodejs",
        "deno",
        "bun",
        "perl",
        "python",
        "pypy",
        "ruby",
        "irb",
        "php",
        "lua",
        "luajit",
        "tclsh",
        "wish",
        "R",
        "Rscript",
        "julia",
        "pwsh",
        "osascript",
        "java",
        "jshell",
        "groovy",
        "scala",
        "erl",
        "elixir",
        "guile",
        "racket",
        "sbcl",
        "ghci",
        "runghc",
        "sed",
        "vim",
        "vi",
        "nvim",
        "emacs",
        "ed",
        "ex",
    }
)
"""Programs that run code given to them as data: under a wrapper, never looked through."""

_VERSIONED = re.compile(r"^(python|pypy|perl|ruby|php|lua|node|tclsh|wish)[0-9.]+$")


def is_interpreter(name: str) -> bool:
    """Whether ``name`` is a shell or an interpreter (``python3.11`` is ``python``)."""
    return name in SHELLS or name in INTERPRETERS or bool(_VERSIONED.match(name))


RUNNER_REASONS = {
    "chroot": "chroot runs its command from another root directory, where a name may be any file",
    "ssh": "ssh runs its command on another host, through that host's shell",
    "su": "su runs its command through the target user's shell",
}
"""Why some runners are not looked through (the others: they run commands not parsed here)."""

OPAQUE_RUNNERS = frozenset(
    {
        "su",
        "runuser",
        "chroot",
        "unshare",
        "nsenter",
        "chrt",
        "taskset",
        "numactl",
        "prlimit",
        "strace",
        "ltrace",
        "valgrind",
        "script",
        "expect",
        "parallel",
        "systemd-run",
        "firejail",
        "bwrap",
        "busybox",
        "eval",
        "source",
        ".",
        "fish",
        "csh",
        "tcsh",
        "rc",
        "pkexec",
        "sg",
        "newgrp",
        "cgexec",
        "setpriv",
        "unbuffer",
        "chronic",
        "ssh",
        "gdb",
    }
)
"""Programs that run commands this module does not parse: what they run is opaque."""
