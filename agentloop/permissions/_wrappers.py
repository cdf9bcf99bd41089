"""What a command line really runs: looking through ``env``, ``sh -c``, ``sudo`` and friends.

:func:`unwrap` turns an argv into the chain of programs the OS will execute
(``["env", "X=1", "nice", "rm", "f"]`` runs ``env``, ``nice`` and ``rm``).
Options are parsed from a table of what each wrapper accepts; anything the
table does not know (an unknown option, a shell script with operators or
expansions, a runner whose command cannot be read from its arguments)
makes the rest *opaque*: a policy may then never allow the command outright.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence

import attrs

__all__ = ["CommandChain", "SHELLS", "WRAPPERS", "OPAQUE_RUNNERS", "unwrap"]

_MAX_DEPTH = 16


@attrs.frozen
class _Options:
    """What a wrapper accepts before the command it runs."""

    flags: str = ""  # short options without a value
    valued: str = ""  # short options that take a value
    opaque: str = ""  # short options after which what runs cannot be read
    long_flags: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    long_opaque: frozenset[str] = frozenset()
    positional: int = 0  # arguments before the command (``timeout DURATION``)
    assignments: bool = False  # ``NAME=VALUE`` words before the command (``env``, ``sudo``)
    numeric: bool = False  # ``-5`` style options (``nice -5``)
    default: tuple[str, ...] = ()  # what runs when no command is given (``xargs``: echo)


def _long(*names: str) -> frozenset[str]:
    return frozenset(names)


WRAPPERS: dict[str, _Options] = {
    "env": _Options(
        flags="i0v",
        valued="u",
        opaque="CSP",
        long_flags=_long(
            "ignore-environment",
            "null",
            "debug",
            "ignore-signal",
            "default-signal",
            "block-signal",
            "list-signal-handling",
        ),
        long_valued=_long("unset"),
        long_opaque=_long("chdir", "split-string"),
        assignments=True,
    ),
    "nice": _Options(valued="n", long_valued=_long("adjustment"), numeric=True),
    "nohup": _Options(),
    "timeout": _Options(
        flags="v",
        valued="sk",
        long_flags=_long("foreground", "preserve-status", "verbose"),
        long_valued=_long("signal", "kill-after"),
        positional=1,
    ),
    "stdbuf": _Options(valued="ioe", long_valued=_long("input", "output", "error")),
    "xargs": _Options(
        flags="0optrx",
        valued="adEILnPs",
        opaque="eil",
        long_flags=_long(
            "null", "open-tty", "interactive", "no-run-if-empty", "verbose", "exit", "show-limits"
        ),
        long_valued=_long(
            "arg-file",
            "delimiter",
            "eof",
            "replace",
            "max-lines",
            "max-args",
            "max-procs",
            "max-chars",
            "process-slot-var",
        ),
        default=("echo",),
    ),
    "sudo": _Options(
        flags="AbEHkKnPSBN",
        valued="ugCDhprtTU",
        opaque="sieclvV",
        long_flags=_long(
            "askpass",
            "background",
            "bell",
            "preserve-env",
            "set-home",
            "non-interactive",
            "preserve-groups",
            "stdin",
            "reset-timestamp",
            "remove-timestamp",
            "no-update",
        ),
        long_valued=_long(
            "user",
            "group",
            "close-from",
            "host",
            "prompt",
            "role",
            "type",
            "command-timeout",
            "other-user",
        ),
        long_opaque=_long("chdir", "chroot", "login", "shell", "edit", "list", "validate"),
        assignments=True,
    ),
    "doas": _Options(flags="n", valued="u", opaque="sC"),
    "time": _Options(
        flags="pvqa",
        valued="fo",
        long_flags=_long("portability", "verbose", "quiet", "append"),
        long_valued=_long("format", "output"),
    ),
    "setsid": _Options(flags="cfw", long_flags=_long("ctty", "fork", "wait")),
    "ionice": _Options(flags="t", valued="cn", opaque="pPu", long_flags=_long("ignore")),
    "command": _Options(flags="p", opaque="vV"),
    "exec": _Options(flags="cl", valued="a"),
    "builtin": _Options(),
}
"""Programs that run another command given in their arguments, with the options they take."""

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh"})
"""Shells whose ``-c SCRIPT`` is looked into."""

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
        "flock",
        "watch",
        "strace",
        "ltrace",
        "gdb",
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
    }
)
"""Programs that run commands this module does not parse: what they run is opaque."""

_SHELL_VALUED = "oO"
_SHELL_LONG_VALUED = frozenset({"rcfile", "init-file"})
_SIMPLE_SCRIPT = re.compile(r"^[A-Za-z0-9_\-./:,+=@% \t'\"]*$")
_SHELL_WORDS = frozenset(
    {
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "for",
        "while",
        "until",
        "do",
        "done",
        "case",
        "esac",
        "function",
        "select",
        "coproc",
        "trap",
        "alias",
        "exec",
        "eval",
        "source",
        ".",
        "command",
        "builtin",
        "time",
        "!",
        "{",
        "[[",
    }
)
_WORD = re.compile(r"[^A-Za-z0-9_.+@%:,/\-]+")


@attrs.frozen
class CommandChain:
    """The programs a command line runs, outermost first, and what could not be read.

    ``opaque`` says why the innermost command could not be looked through
    (``None``: every program is known); ``words`` are the words of that
    unreadable part, for a deny list to scan; ``changes_environment`` says a
    wrapper sets variables (``env PATH=...``), which can change what a name
    runs.
    """

    programs: tuple[str, ...]
    opaque: str | None = None
    words: tuple[str, ...] = ()
    changes_environment: bool = False


def program_name(program: str) -> str:
    """The base name a wrapper or shell is known by (``/usr/bin/env`` -> ``env``)."""
    return os.path.basename(program)


def unwrap(argv: Sequence[str]) -> CommandChain:
    """Every program ``argv`` runs, looking through wrappers and simple ``sh -c`` scripts."""
    programs: list[str] = []
    changes_environment = False
    current = list(argv)
    under_xargs = False
    for _ in range(_MAX_DEPTH):
        if not current:
            break
        program = current[0]
        programs.append(program)
        name = program_name(program)
        if name in OPAQUE_RUNNERS:
            return _opaque(programs, f"{name} runs commands that cannot be looked through", current)
        if name in SHELLS:
            script = _shell_script(current[1:])
            if script is None:
                break  # the shell runs a file or its input: it is the program
            if isinstance(script, _Unreadable):
                return _opaque(programs, f"{name} {script.reason}", current)
            inner = _simple_script(script)
            if inner is None:
                return _opaque(
                    programs,
                    f"{name} -c runs a script with shell syntax that cannot be looked through",
                    [script],
                )
            current = inner
            continue
        options = WRAPPERS.get(name)
        if options is None:
            break
        if under_xargs:
            return _opaque(programs, f"xargs adds arguments read from its input to {name}", current)
        parsed = _after_options(current[1:], options)
        if isinstance(parsed, _Unreadable):
            return _opaque(programs, f"{name} {parsed.reason}", current)
        inner, assigned = parsed
        changes_environment = changes_environment or assigned
        under_xargs = name == "xargs"
        current = inner or list(options.default)
    else:
        return _opaque(programs, "the command nests wrappers too deeply", current)
    return CommandChain(tuple(programs), changes_environment=changes_environment)


@attrs.frozen
class _Unreadable:
    reason: str


def _opaque(programs: list[str], reason: str, rest: Sequence[str]) -> CommandChain:
    words = tuple(word for text in rest for word in _WORD.split(text) if word)
    return CommandChain(tuple(programs), reason, words)


def _after_options(args: list[str], options: _Options) -> tuple[list[str], bool] | _Unreadable:
    """The command a wrapper runs (its arguments after the wrapper's own), and whether
    the wrapper sets environment variables."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            index += 1
            break
        if arg.startswith("--"):
            name, has_value, _ = arg[2:].partition("=")
            if name in options.long_opaque:
                return _Unreadable(f"option {arg!r} changes what runs in a way not looked into")
            if name in options.long_valued:
                index += 1 if has_value else 2
                continue
            if name in options.long_flags:
                index += 1
                continue
            return _Unreadable(f"has the unknown option {arg!r}")
        if arg.startswith("-") and arg != "-":
            if options.numeric and arg[1:].lstrip("-").isdigit():
                index += 1
                continue
            step = _short_cluster(arg, options)
            if isinstance(step, _Unreadable):
                return step
            index += step
            continue
        if arg == "-" and options.assignments:  # env -: the same as -i
            index += 1
            continue
        break
    assigned = False
    if options.assignments:
        while index < len(args) and _is_assignment(args[index]):
            assigned = True
            index += 1
    index += options.positional
    return args[index:], assigned


def _short_cluster(arg: str, options: _Options) -> int | _Unreadable:
    """How many arguments a ``-abc`` cluster takes (1, or 2 when its value is separate)."""
    for position, letter in enumerate(arg[1:], start=1):
        if letter in options.opaque:
            return _Unreadable(f"option -{letter} changes what runs in a way not looked into")
        if letter in options.valued:
            return 1 if position < len(arg) - 1 else 2
        if letter not in options.flags:
            return _Unreadable(f"has the unknown option -{letter}")
    return 1


def _is_assignment(word: str) -> bool:
    name, equals, _ = word.partition("=")
    return bool(equals) and name.isidentifier()


def _shell_script(args: list[str]) -> str | _Unreadable | None:
    """The script of ``sh -c SCRIPT``; ``None`` if the shell runs a file or its input."""
    index = 0
    has_c = False
    while index < len(args):
        arg = args[index]
        if arg in ("--", "-"):
            index += 1
            break
        if arg.startswith("--"):
            name = arg[2:].partition("=")[0]
            index += 2 if name in _SHELL_LONG_VALUED and "=" not in arg else 1
            continue
        if arg[:1] in ("-", "+") and len(arg) > 1:
            letters = arg[1:]
            has_c = has_c or "c" in letters
            index += 2 if letters[-1] in _SHELL_VALUED else 1
            continue
        break
    if not has_c:
        return None
    if index >= len(args):
        return _Unreadable("-c has no script in its arguments")
    return args[index]


def _simple_script(script: str) -> list[str] | None:
    """``script`` as an argv when it is one plain command (no operators, expansions,
    redirections, assignments or keywords); ``None`` otherwise."""
    if not _SIMPLE_SCRIPT.match(script):
        return None
    try:
        words = shlex.split(script)
    except ValueError:
        return None
    if not words or _is_assignment(words[0]) or words[0] in _SHELL_WORDS:
        return None
    return words
