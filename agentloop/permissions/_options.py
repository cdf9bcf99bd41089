"""Reading a wrapper's options the way GNU ``getopt_long`` does.

An :class:`Options` table is written the way the program's source declares
its options: ``short`` is the ``getopt`` option string (``"n:"`` takes a
value, attached or as the next word; ``"d::"`` takes one only when attached:
``-dVALUE``), ``long`` lists the long options (``"name"`` takes no value,
``"name="`` one after ``=`` or as the next word, ``"name=?"`` one only after
``=``; ``":x"`` names the short option it is the same as). Reading stops at
the first word that is no option (every wrapper here asks ``getopt`` for
that, with a leading ``+``), after ``--``, or at ``-`` alone. A long option
may be abbreviated to any prefix that names only one option, as
``getopt_long`` allows. Whatever ``getopt_long`` would refuse (an unknown or
ambiguous option, a missing value, a value given to an option that takes
none) is *unreadable*: the program would refuse it too, but a policy cannot
allow what it did not read.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import attrs

__all__ = ["Options", "Parsed", "Unreadable", "read_options"]

_NONE, _REQUIRED, _OPTIONAL = "none", "required", "optional"


@attrs.frozen
class Options:
    """What a wrapper accepts before the command it runs (see the module docstring)."""

    short: str = ""
    long: str = ""
    opaque: str = ""  # keys (short letters, long names) after which what runs is not read
    positional: int = 0  # arguments before the command (``timeout DURATION``, ``flock FILE``)
    assignments: bool = False  # ``NAME=VALUE`` words before the command (``env``, ``sudo``)
    lone_dash: bool = False  # ``-`` alone is an option (``env -``: the same as ``-i``)
    numeric: bool = False  # ``-5`` style options (``nice -5``)
    default: tuple[str, ...] = ()  # what runs when no command is given (``xargs``: echo)
    feeds: str | None = None  # how it adds words read at run time to what it runs


@attrs.frozen
class Parsed:
    """The options read (``(key, value)``, in order), the words after them, and the
    ``NAME=VALUE`` assignments before the command."""

    options: tuple[tuple[str, str | None], ...]
    rest: tuple[str, ...]
    assignments: tuple[str, ...] = ()

    def has(self, key: str) -> bool:
        """Whether the option ``key`` (a short letter or a long name) was given."""
        return any(found == key for found, _ in self.options)


@attrs.frozen
class Unreadable:
    """Why a command line could not be read (a policy never allows it outright)."""

    reason: str


@functools.cache
def _short_table(short: str) -> dict[str, str]:
    table: dict[str, str] = {}
    letters = short.lstrip("+")
    for index, letter in enumerate(letters):
        if letter == ":":
            continue
        if letters[index + 1 : index + 3] == "::":
            table[letter] = _OPTIONAL
        elif letters[index + 1 : index + 2] == ":":
            table[letter] = _REQUIRED
        else:
            table[letter] = _NONE
    return table


@functools.cache
def _long_table(long: str) -> dict[str, tuple[str, str]]:
    """Long name -> (how it takes a value, the key it is recorded under)."""
    table: dict[str, tuple[str, str]] = {}
    for spec in long.split():
        spec, _, key = spec.partition(":")
        if spec.endswith("=?"):
            name, kind = spec[:-2], _OPTIONAL
        elif spec.endswith("="):
            name, kind = spec[:-1], _REQUIRED
        else:
            name, kind = spec, _NONE
        table[name] = (kind, key or name)
    return table


def _long_match(name: str, table: dict[str, tuple[str, str]]) -> tuple[str, str, str] | str:
    """``(full name, kind, key)`` of the long option ``name`` spells, or why none."""
    if name in table:
        return (name, *table[name])
    candidates = sorted(full for full in table if full.startswith(name))
    if not candidates:
        return f"has the unknown option '--{name}'"
    if len({table[full] for full in candidates}) > 1:
        spelled = ", ".join(f"--{full}" for full in candidates)
        return f"has the ambiguous option '--{name}' (it may be {spelled})"
    return (candidates[0], *table[candidates[0]])


def _read_long(
    args: Sequence[str], index: int, options: Options, found: list[tuple[str, str | None]]
) -> int | Unreadable:
    """Read the long option at ``args[index]``; the index after it."""
    arg = args[index]
    name, equals, value = arg[2:].partition("=")
    match = _long_match(name, _long_table(options.long))
    if isinstance(match, str):
        return Unreadable(match)
    full, kind, key = match
    if key in options.opaque.split():
        return Unreadable(f"option {arg!r} changes what runs in a way not looked into")
    if kind == _NONE:
        if equals:
            return Unreadable(f"has the option '--{full}', which takes no value, in {arg!r}")
        found.append((key, None))
        return index + 1
    if equals or kind == _OPTIONAL:
        found.append((key, value if equals else None))
        return index + 1
    if index + 1 >= len(args):
        return Unreadable(f"has the option {arg!r} without the value it needs")
    found.append((key, args[index + 1]))
    return index + 2


def _read_short(
    args: Sequence[str], index: int, options: Options, found: list[tuple[str, str | None]]
) -> int | Unreadable:
    """Read the ``-abc`` cluster at ``args[index]``; the index after it."""
    arg = args[index]
    table = _short_table(options.short)
    for position, letter in enumerate(arg[1:], start=1):
        kind = table.get(letter)
        if kind is None:
            return Unreadable(f"has the unknown option -{letter}")
        if letter in options.opaque.split():
            return Unreadable(f"option -{letter} changes what runs in a way not looked into")
        attached = arg[position + 1 :]
        if kind == _NONE:
            found.append((letter, None))
            continue
        if attached or kind == _OPTIONAL:
            found.append((letter, attached or None))
            return index + 1
        if index + 1 >= len(args):
            return Unreadable(f"has the option -{letter} without the value it needs")
        found.append((letter, args[index + 1]))
        return index + 2
    return index + 1


def _is_number_option(arg: str) -> bool:
    """``-5``, ``--5``, ``-+5``: how ``nice`` spells an adjustment."""
    digits = arg[2:] if arg[1:2] in ("-", "+") else arg[1:]
    return digits.isdigit()


def read_options(args: Sequence[str], options: Options) -> Parsed | Unreadable:
    """The options a wrapper reads from ``args`` and the command after them."""
    found: list[tuple[str, str | None]] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            index += 1
            break
        if arg == "-" and options.lone_dash:
            index += 1
            continue
        if not arg.startswith("-") or arg == "-":
            break
        if options.numeric and _is_number_option(arg):
            index += 1
            continue
        read = _read_long if arg.startswith("--") else _read_short
        step = read(args, index, options, found)
        if isinstance(step, Unreadable):
            return step
        index = step
    first = index
    if options.assignments:
        while index < len(args) and is_assignment(args[index]):
            index += 1
    assignments = tuple(args[first:index])
    index += options.positional
    return Parsed(tuple(found), tuple(args[index:]), assignments)


def is_assignment(word: str) -> bool:
    """Whether ``word`` is ``NAME=VALUE`` with a valid variable name."""
    name, equals, _ = word.partition("=")
    return bool(equals) and name.isidentifier()
