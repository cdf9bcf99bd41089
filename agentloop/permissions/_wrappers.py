"""What a command line really runs: looking through ``env``, ``sh -c``, ``find -exec`` and friends.

:func:`unwrap` turns an argv into the programs the OS will execute
(``["env", "X=1", "nice", "rm", "f"]`` runs ``env``, ``nice`` and ``rm``).
Options are read from a table of what each wrapper accepts, as the program
reads them (:mod:`._options`, :mod:`._wrapper_table`, :mod:`._find_git`).
Anything that cannot be read that way makes the rest *opaque*, and a policy
may then never allow the command outright: an unknown option, a shell script
with operators or expansions, a runner whose command cannot be read from its
arguments, and a shell or interpreter that a wrapper runs (what it runs is
data: ``xargs -I X sh -c X`` runs each input line as a script).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence

import attrs

from ._find_git import read_find, read_git
from ._options import Unreadable, is_assignment, read_options
from ._wrapper_table import (
    COMMAND_READERS,
    OPAQUE_RUNNERS,
    RUNNER_REASONS,
    SHELLS,
    WRAPPERS,
    is_interpreter,
)

__all__ = ["CommandChain", "OPAQUE_RUNNERS", "SHELLS", "WRAPPERS", "program_name", "unwrap"]

_MAX_DEPTH = 16

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

    ``opaque`` says why a part of the command could not be looked through
    (``None``: every program is known); ``words`` are the words of the
    unreadable parts and of the variables wrappers set, for a deny list to
    scan; ``changes_environment`` says a wrapper sets variables
    (``env PATH=...``), which can change what a name runs.
    """

    programs: tuple[str, ...]
    opaque: str | None = None
    words: tuple[str, ...] = ()
    changes_environment: bool = False


@attrs.frozen
class _Under:
    """The wrapper that runs a command (``None``: none, or a shell's ``-c`` script), and
    how it adds words to it at run time (``None``: it does not)."""

    wrapper: str | None = None
    feeds: str | None = None


def program_name(program: str) -> str:
    """The base name a wrapper or shell is known by (``/usr/bin/env`` -> ``env``)."""
    return os.path.basename(program)


def unwrap(argv: Sequence[str]) -> CommandChain:
    """Every program ``argv`` runs, looking through wrappers and simple ``sh -c`` scripts."""
    return _unwrap(tuple(argv), _Under(), _MAX_DEPTH)


def _unwrap(argv: tuple[str, ...], under: _Under, depth: int) -> CommandChain:
    if not argv:
        return CommandChain(())
    program = argv[0]
    name = program_name(program)
    if depth == 0:
        return _opaque(program, "the command nests wrappers too deeply", argv)
    if name in OPAQUE_RUNNERS:
        reason = RUNNER_REASONS.get(name, f"{name} runs commands that cannot be looked through")
        return _opaque(program, reason, argv)
    if under.wrapper is not None and is_interpreter(name):
        return _opaque(
            program,
            f"{name} is a shell or interpreter run by {under.wrapper}, and what a wrapper "
            "runs through one is not looked into",
            argv,
        )
    if under.feeds is not None and (name in WRAPPERS or name in ("find", "git")):
        return _opaque(program, f"{under.wrapper} {under.feeds} {name}", argv)
    if name in SHELLS:
        return _shell(argv, depth)
    if name == "find":
        return _find(argv, depth)
    if name == "git":
        unreadable = read_git(argv[1:])
        if unreadable is None:
            return CommandChain((program,))
        return _opaque(program, unreadable, argv)
    if name in WRAPPERS:
        return _wrapper(argv, depth)
    return CommandChain((program,))


def _wrapper(argv: tuple[str, ...], depth: int) -> CommandChain:
    program, name = argv[0], program_name(argv[0])
    options = WRAPPERS[name]
    parsed = read_options(argv[1:], options)
    if isinstance(parsed, Unreadable):
        return _opaque(program, f"{name} {parsed.reason}", argv)
    reader = COMMAND_READERS.get(name)
    if reader is not None and (reason := reader(parsed)) is not None:
        return _opaque(program, reason, argv, assigned=bool(parsed.assignments))
    command = parsed.rest or options.default
    inner = _unwrap(command, _Under(name, options.feeds), depth - 1)
    return _prefixed(program, inner, assignments=parsed.assignments)


def _find(argv: tuple[str, ...], depth: int) -> CommandChain:
    program = argv[0]
    commands = read_find(argv[1:])
    if isinstance(commands, Unreadable):
        return _opaque(program, f"find {commands.reason}", argv)
    chain = CommandChain((program,))
    for command in commands:
        feeds = f"{command.primary} puts the names of the files it finds into"
        under = _Under("find", feeds if command.gets_names else None)
        inner = _unwrap(command.argv, under, depth - 1)
        chain = _joined(chain, inner)
    return chain


def _shell(argv: tuple[str, ...], depth: int) -> CommandChain:
    program, name = argv[0], program_name(argv[0])
    script = _shell_script(list(argv[1:]))
    if script is None:
        return CommandChain((program,))  # the shell runs a file or its input: it is the program
    if isinstance(script, Unreadable):
        return _opaque(program, f"{name} {script.reason}", argv)
    inner = _simple_script(script)
    if inner is None:
        return _opaque(
            program,
            f"{name} -c runs a script with shell syntax that cannot be looked through",
            (script,),
        )
    return _prefixed(program, _unwrap(tuple(inner), _Under(), depth - 1))


def _prefixed(
    program: str, inner: CommandChain, *, assignments: Sequence[str] = ()
) -> CommandChain:
    """``inner`` run by ``program``, which sets the variables ``assignments``; their
    values join the words a deny list scans (``env GIT_PAGER=rm git log``)."""
    return attrs.evolve(
        inner,
        programs=(program, *inner.programs),
        words=(*_words(assignments), *inner.words),
        changes_environment=inner.changes_environment or bool(assignments),
    )


def _joined(first: CommandChain, second: CommandChain) -> CommandChain:
    """Both chains' programs (``find`` runs each of its commands)."""
    return CommandChain(
        (*first.programs, *second.programs),
        first.opaque if first.opaque is not None else second.opaque,
        (*first.words, *second.words),
        first.changes_environment or second.changes_environment,
    )


def _opaque(
    program: str, reason: str, rest: Sequence[str], *, assigned: bool = False
) -> CommandChain:
    return CommandChain((program,), reason, _words(rest), assigned)


def _words(texts: Sequence[str]) -> tuple[str, ...]:
    return tuple(word for text in texts for word in _WORD.split(text) if word)


def _shell_script(args: list[str]) -> str | Unreadable | None:
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
        return Unreadable("-c has no script in its arguments")
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
    if not words or is_assignment(words[0]) or words[0] in _SHELL_WORDS:
        return None
    return words
