"""How ``find`` and ``git`` run other programs: ``find -exec`` commands, ``git -c`` settings.

``find`` reads its expression word by word, each primary taking a known
number of arguments (GNU findutils 4.9), so ``-exec`` is found where find
finds it, not wherever the word appears. ``git`` runs programs named by
configuration (``core.pager``, ``alias.x=!cmd``, ``core.sshCommand``...) and
by some subcommands' arguments (``rebase --exec``, ``bisect run``); those
forms are unreadable, and so is a subcommand that is not git's own (an alias
or a ``git-NAME`` program found on ``PATH``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from ._options import Unreadable

__all__ = ["FindCommand", "read_find", "read_git"]


def _set(words: str) -> frozenset[str]:
    """The space-separated ``words``, as the programs' manuals list them."""
    return frozenset(words.split())


_FIND_OPERATORS = frozenset({"(", ")", "!", ",", "-not", "-a", "-and", "-o", "-or"})
_FIND_NO_ARGUMENT = _set(
    "-daystart -depth -d -follow -help -ignore_readdir_race -mount -noignore_readdir_race "
    "-noleaf -xdev -warn -nowarn -version -empty -executable -false -nogroup -nouser "
    "-readable -writable -true -delete -ls -print -print0 -prune -quit"
)
_FIND_ONE_ARGUMENT = _set(
    "-amin -anewer -atime -cmin -cnewer -context -ctime -fls -fprint -fprint0 -fstype -gid "
    "-group -ilname -iname -inum -ipath -iregex -iwholename -links -lname -maxdepth "
    "-mindepth -mmin -mtime -name -newer -path -perm -printf -regex -regextype -samefile "
    "-size -type -uid -used -user -wholename -xtype -files0-from"
)
_FIND_NEWER = re.compile(r"^-newer[aBcmt][aBcmt]$")
_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


@attrs.frozen
class FindCommand:
    """One command ``find`` runs (``-exec ... ;``) and whether file names are put into it."""

    argv: tuple[str, ...]
    primary: str
    gets_names: bool


def _looks_like_expression(arg: str) -> bool:
    return (arg.startswith("-") and arg != "-") or arg in _FIND_OPERATORS


def _find_expression_start(args: Sequence[str]) -> int | Unreadable:
    """The index of find's expression: after its leading options and starting points."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            index += 1
            break
        if arg in ("-H", "-L", "-P") or (arg.startswith("-O") and len(arg) > 2):
            index += 1
        elif arg == "-D":
            index += 2
        elif arg.startswith("-D"):
            return Unreadable(f"has the option {arg!r}, which find refuses")
        else:
            break
    while index < len(args) and not _looks_like_expression(args[index]):
        index += 1
    return index


def _exec_command(args: Sequence[str], index: int) -> tuple[FindCommand, int] | Unreadable:
    """The command of the ``-exec`` (or ``-ok``...) at ``args[index]``; the index after it."""
    primary = args[index]
    end = index + 1
    while end < len(args):
        word = args[end]
        if word == ";" or (
            word == "+" and primary in ("-exec", "-execdir") and args[end - 1] == "{}"
        ):
            break
        end += 1
    else:
        return Unreadable(f"{primary} has no terminating ';', so find refuses it")
    argv = tuple(args[index + 1 : end])
    if not argv:
        return Unreadable(f"{primary} has no command, so find refuses it")
    if "{}" in argv[0]:
        return Unreadable(f"{primary} runs the files it finds ('{{}}' is in the program name)")
    command = FindCommand(argv, primary, any("{}" in word for word in argv[1:]))
    return command, end + 1


def read_find(args: Sequence[str]) -> list[FindCommand] | Unreadable:
    """Every command ``find ARGS`` may run, read from its expression as find reads it."""
    start = _find_expression_start(args)
    if isinstance(start, Unreadable):
        return start
    commands: list[FindCommand] = []
    index = start
    while index < len(args):
        word = args[index]
        if word in _FIND_RUNS:
            found = _exec_command(args, index)
            if isinstance(found, Unreadable):
                return found
            commands.append(found[0])
            index = found[1]
            continue
        if word in _FIND_OPERATORS or word in _FIND_NO_ARGUMENT:
            taken = 1
        elif word in _FIND_ONE_ARGUMENT or _FIND_NEWER.match(word):
            taken = 2
        elif word == "-fprintf":
            taken = 3
        else:
            return Unreadable(f"has {word!r} in its expression, which is not looked into")
        if index + taken > len(args):
            return Unreadable(f"{word} has no argument, so find refuses it")
        index += taken
    return commands


# -- git ------------------------------------------------------------------------------------

_GIT_FLAGS = _set(
    "-p --paginate -P --no-pager --no-replace-objects --no-lazy-fetch --no-optional-locks "
    "--no-advice --bare --literal-pathspecs --glob-pathspecs --noglob-pathspecs "
    "--icase-pathspecs"
)
_GIT_VALUED = ("--git-dir", "--work-tree", "--namespace", "--attr-source")
_GIT_COMMANDS = _set(
    "add am annotate apply archive bisect blame branch bundle cat-file check-attr "
    "check-ignore check-mailmap check-ref-format checkout checkout-index cherry cherry-pick "
    "clean clone column commit commit-graph commit-tree config count-objects describe diff "
    "diff-files diff-index diff-tree fetch for-each-ref format-patch fsck gc grep "
    "hash-object init log ls-files ls-remote ls-tree merge merge-base merge-file "
    "merge-tree mktag mktree mv name-rev notes pack-refs patch-id prune pull push "
    "range-diff read-tree rebase reflog remote repack replace rerere reset restore rev-list "
    "rev-parse revert rm shortlog show show-branch show-ref sparse-checkout stash status "
    "stripspace submodule switch symbolic-ref tag update-index update-ref var "
    "verify-commit verify-tag version whatchanged worktree write-tree"
)
# options of a subcommand that name a program it runs: (short letters, long names)
_GIT_RUNNING_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "rebase": ("x", ("exec",)),
    "grep": ("O", ("open-files-in-pager",)),
    "fetch": ("", ("upload-pack",)),
    "pull": ("", ("upload-pack",)),
    # clone -c core.sshCommand=... takes effect before the fetch; --template brings hooks
    "clone": ("uc", ("upload-pack", "config", "template")),
    "ls-remote": ("u", ("upload-pack",)),
    "archive": ("", ("exec",)),
    "push": ("", ("receive-pack", "exec")),
}
_GIT_RUNNERS = {
    "help": "runs man or a web browser",
    "difftool": "runs the diff tool named in its arguments or configuration",
    "mergetool": "runs the merge tool named in its arguments or configuration",
    "filter-branch": "runs the shell filters in its arguments",
    "instaweb": "runs a web server and a browser",
}
_GIT_RUNNING_WORDS = {"bisect": "run", "submodule": "foreach"}
_GIT_READ_CONFIG = frozenset({"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list"})
_GIT_SAFE_SETTINGS = re.compile(
    r"^(color\..*|advice\..*|user\.(name|email)|core\.(quotepath|abbrev)|init\.defaultbranch"
    r"|log\.(date|decorate)|column\.ui|diff\.noprefix)$"
)


def _git_setting(setting: str) -> str | None:
    """Why ``-c setting`` makes git unreadable (``None``: it is a known harmless one)."""
    key = setting.partition("=")[0]
    section, _, rest = key.partition(".")
    name = rest.rpartition(".")[2]
    if _GIT_SAFE_SETTINGS.match(f"{section.lower()}.{name.lower()}" if rest else key.lower()):
        return None
    return (
        f"git -c {setting!r} sets a configuration value that may run a program "
        "(core.pager, alias.*, core.sshCommand...); only settings known to be harmless are read"
    )


def _git_subcommand_start(args: Sequence[str]) -> int | str:
    """The index of git's subcommand (after its global options), or why it is unreadable."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in _GIT_FLAGS:
            index += 1
        elif arg in ("-C", "-c", "--config-env", *_GIT_VALUED):
            if index + 1 >= len(args):
                return f"git option {arg!r} has no value"
            if arg == "-c" and (why := _git_setting(args[index + 1])) is not None:
                return why
            if arg == "--config-env":
                return f"git --config-env {args[index + 1]!r} sets configuration from a variable"
            index += 2
        elif arg.startswith("--config-env="):
            return f"git {arg!r} sets configuration from a variable"
        elif arg.split("=")[0] in _GIT_VALUED:
            index += 1
        elif arg.startswith("--exec-path"):
            return f"git option {arg!r} chooses where git finds the programs it runs"
        elif arg in ("--version", "-v", "--help", "-h"):
            return index  # git runs these as its version and help commands
        elif arg.startswith("-"):
            return f"git has the global option {arg!r}, which is not looked into"
        else:
            return index
    return index


def _runs_with_option(arg: str, short: str, long: tuple[str, ...]) -> bool:
    """Whether ``arg`` may be one of the options (any cluster letter, any abbreviation)."""
    if arg.startswith("--"):
        name = arg[2:].partition("=")[0]
        return bool(name) and any(option.startswith(name) for option in long)
    return arg.startswith("-") and any(letter in arg[1:] for letter in short)


def _git_subcommand(command: str, args: Sequence[str]) -> str | None:
    """Why ``git COMMAND ARGS`` is unreadable (``None``: it runs no program it is given)."""
    if command in _GIT_RUNNERS or "--help" in args:
        shown = "help" if command in ("--help", "-h") else command
        suffix = " --help" if shown != "help" and shown in _GIT_COMMANDS else ""
        why = _GIT_RUNNERS.get(shown, _GIT_RUNNERS["help"])
        return f"git {shown}{suffix} {why}"
    if command not in _GIT_COMMANDS:
        return (
            f"git {command!r} is not one of git's own commands looked into: it runs an alias "
            f"or the program git-{command}"
        )
    if command in _GIT_RUNNING_WORDS and _GIT_RUNNING_WORDS[command] in args:
        return f"git {command} {_GIT_RUNNING_WORDS[command]} runs the command in its arguments"
    if command in _GIT_RUNNING_OPTIONS:
        short, long = _GIT_RUNNING_OPTIONS[command]
        for arg in args:
            if arg == "--":
                break
            if _runs_with_option(arg, short, long):
                return f"git {command} option {arg!r} may name a program for git to run"
    if command == "config" and not any(arg in _GIT_READ_CONFIG or arg == "-l" for arg in args):
        return "git config may store a setting that runs a program (only --get and --list are read)"
    return None


def read_git(args: Sequence[str]) -> str | None:
    """Why ``git ARGS`` is unreadable: it may run a program (``None``: it runs only git)."""
    start = _git_subcommand_start(args)
    if isinstance(start, str):
        return start
    if start >= len(args):
        return None
    command = args[start]
    if command in ("--version", "-v"):
        command = "version"
    return _git_subcommand(command, args[start + 1 :])
