"""CommandPolicy reads each wrapper's options as the program does (issue 32's cases and more).

``test_wrappers_against_real_programs.py`` checks the same tables against the
real programs; this file pins the exact decisions and their messages.
"""

from __future__ import annotations

import shlex

import pytest

import agentloop as al
import agentloop.permissions

ALLOWED = [
    *["env", "nice", "timeout", "nohup", "stdbuf", "xargs", "find", "git", "flock", "watch"],
    *["sudo", "doas", "time", "setsid", "ionice", "chroot", "ssh"],
    *["ls", "echo", "sh", "python3", "awk"],
]
POLICY = al.permissions.CommandPolicy(allow=ALLOWED, deny=["rm"])
ENVIRONMENT = "a wrapper sets environment variables, which can change what runs"
INTERPRETED = "and what a wrapper runs through one is not looked into"
GIT_SETTING = (
    "sets a configuration value that may run a program (core.pager, alias.*, "
    "core.sshCommand...); only settings known to be harmless are read"
)


def runs_rm(argv: list[str], program: str = "rm") -> al.permissions.Deny:
    return al.permissions.Deny(
        "command_not_allowed",
        f"command {shlex.join(argv)!r} is not allowed: {program!r} is on the deny list "
        "(it runs it)",
    )


def may_run_rm(argv: list[str], why: str) -> al.permissions.Deny:
    return al.permissions.Deny(
        "command_not_allowed",
        f"command {shlex.join(argv)!r} is not allowed: it may run 'rm', which is on the deny list "
        f"({why})",
    )


def asks(argv: list[str], why: str) -> al.permissions.AskApproval:
    return al.permissions.AskApproval("sensitive_command", f"Run {shlex.join(argv)} ({why})")


CASES: list[tuple[list[str], object]] = [
    # xargs: --replace, --max-lines, --eof (and -i, -l, -e) take a value only when attached
    (["xargs", "--replace", "rm", "ls", "-rf", "/home"], "runs rm"),
    (["xargs", "--max-lines", "rm", "ls"], "runs rm"),
    (["xargs", "--eof", "rm", "ls"], "runs rm"),
    (["xargs", "-i", "rm", "ls"], "runs rm"),
    (["xargs", "-l", "rm", "ls"], "runs rm"),
    (["xargs", "-e", "rm", "ls"], "runs rm"),
    (["xargs", "--repl", "rm"], "runs rm"),  # an abbreviation of --replace
    (["xargs", "--replace=rm", "ls", "rm"], al.permissions.Allow()),
    (["xargs", "-irm", "ls"], al.permissions.Allow()),
    (["xargs", "-I", "rm", "ls", "rm"], al.permissions.Allow()),
    (["xargs", "-E", "rm", "-L", "1", "--max-args", "2", "ls"], al.permissions.Allow()),
    (["xargs", "-0n1", "ls"], al.permissions.Allow()),
    (["xargs", "--e", "ls"], "xargs has the ambiguous option '--e' (it may be --eof, --exit)"),
    (
        ["xargs", "--null=x", "ls"],
        "xargs has the option '--null', which takes no value, in '--null=x'",
    ),
    (["xargs", "-n"], "xargs has the option -n without the value it needs"),
    (
        ["xargs", "--show-limits", "ls"],
        "xargs option '--show-limits' changes what runs in a way not looked into",
    ),
    # a shell or interpreter a wrapper runs is opaque
    (
        ["xargs", "-a", "f.txt", "-I", "ls", "sh", "-c", "ls"],
        f"sh is a shell or interpreter run by xargs, {INTERPRETED}",
    ),
    (["xargs", "sh", "-c", "ls"], f"sh is a shell or interpreter run by xargs, {INTERPRETED}"),
    (["xargs", "python3"], f"python3 is a shell or interpreter run by xargs, {INTERPRETED}"),
    (["nice", "sh", "-c", "ls"], f"sh is a shell or interpreter run by nice, {INTERPRETED}"),
    (
        ["timeout", "5", "python3", "x.py"],
        f"python3 is a shell or interpreter run by timeout, {INTERPRETED}",
    ),
    (
        ["env", "awk", 'BEGIN { system("rm x") }'],
        f"may run rm: awk is a shell or interpreter run by env, {INTERPRETED}",
    ),
    (["sh", "-c", "timeout 5 ls"], al.permissions.Allow()),
    (["python3", "x.py"], al.permissions.Allow()),
    (["xargs", "env", "ls"], "xargs adds arguments read from its input to env"),
    (["xargs", "git", "log"], "xargs adds arguments read from its input to git"),
    # find: -exec, -execdir, -ok, -okdir run their command
    (["find", ".", "-exec", "rm", "{}", ";"], "runs rm"),
    (["find", ".", "-execdir", "rm", "{}", "+"], "runs rm"),
    (["find", ".", "-ok", "rm", "{}", ";"], "runs rm"),
    (["find", ".", "-okdir", "/bin/rm", ";"], "runs /bin/rm"),
    (
        ["find", ".", "-name", "*.py", "-exec", "ls", "-l", "{}", "+", "-exec", "echo", ";"],
        al.permissions.Allow(),
    ),
    (
        ["find", ".", "-name", "-exec", "-print"],
        al.permissions.Allow(),
    ),  # -exec is the pattern of -name
    (
        ["find", "-L", "-O2", ".", "-maxdepth", "1", "-newermt", "2020-01-01", "-print0"],
        al.permissions.Allow(),
    ),
    (
        ["find", ".", "-exec", "echo", "+", ";"],
        al.permissions.Allow(),
    ),  # + ends -exec only after {}
    (
        ["find", ".", "-exec", "{}", ";"],
        "find -exec runs the files it finds ('{}' is in the program name)",
    ),
    (["find", ".", "-exec", "ls"], "find -exec has no terminating ';', so find refuses it"),
    (["find", ".", "-frob"], "find has '-frob' in its expression, which is not looked into"),
    (["find", ".", "-name"], "find -name has no argument, so find refuses it"),
    (
        ["find", ".", "-exec", "sh", "-c", "ls", ";"],
        f"sh is a shell or interpreter run by find, {INTERPRETED}",
    ),
    (
        ["find", ".", "-exec", "env", "{}", ";"],
        "find -exec puts the names of the files it finds into env",
    ),
    (["find", ".", "-exec", "env", "ls", ";"], al.permissions.Allow()),
    # git: settings and options that run programs
    (["git", "-c", "core.pager=rm", "log"], f"may run rm: git -c 'core.pager=rm' {GIT_SETTING}"),
    (
        ["git", "-c", "alias.x=!rm -rf /", "x"],
        f"may run rm: git -c 'alias.x=!rm -rf /' {GIT_SETTING}",
    ),
    (
        ["git", "-c", "core.sshCommand=rm", "fetch"],
        f"may run rm: git -c 'core.sshCommand=rm' {GIT_SETTING}",
    ),
    (["git", "-c", "core.editor=vi", "commit"], f"git -c 'core.editor=vi' {GIT_SETTING}"),
    (
        ["git", "--exec-path=/tmp/x", "log"],
        "git option '--exec-path=/tmp/x' chooses where git finds the programs it runs",
    ),
    (
        ["git", "--config-env=core.pager=PAGER", "log"],
        "git '--config-env=core.pager=PAGER' sets configuration from a variable",
    ),
    (
        ["git", "-c", "color.ui=never", "-C", "/repo", "--no-pager", "log", "-n", "3"],
        al.permissions.Allow(),
    ),
    (["git", "--version"], al.permissions.Allow()),
    (["git", "config", "--get", "core.pager"], al.permissions.Allow()),
    (
        ["git", "st"],
        "git 'st' is not one of git's own commands looked into: it runs an alias or the "
        "program git-st",
    ),
    (
        ["git", "rebase", "-x", "rm -rf /", "main"],
        "may run rm: git rebase option '-x' may name a program for git to run",
    ),
    (
        ["git", "rebase", "--exe=rm", "main"],
        "may run rm: git rebase option '--exe=rm' may name a program for git to run",
    ),
    (
        ["git", "bisect", "run", "rm"],
        "may run rm: git bisect run runs the command in its arguments",
    ),
    (
        ["git", "config", "core.pager", "rm"],
        "may run rm: git config may store a setting that runs a program (only --get and "
        "--list are read)",
    ),
    (["git", "log", "--help"], "git log --help runs man or a web browser"),
    (
        ["git", "clone", "-c", "core.sshCommand=rm", "ssh://host/repo"],
        "may run rm: git clone option '-c' may name a program for git to run",
    ),
    (
        ["git", "clone", "--templ=/tmp/hooks", "url"],
        "git clone option '--templ=/tmp/hooks' may name a program for git to run",
    ),
    (
        ["git", "ls-remote", "-u", "rm", "url"],
        "may run rm: git ls-remote option '-u' may name a program for git to run",
    ),
    (["git", "clone", "--depth", "1", "url"], al.permissions.Allow()),
    (
        ["git", "difftool"],
        "git difftool runs the diff tool named in its arguments or configuration",
    ),
    # variables a wrapper sets may name a program (GIT_PAGER, GIT_SSH_COMMAND, EDITOR...)
    (["env", "GIT_PAGER=rm", "git", "log"], "may run rm: " + ENVIRONMENT),
    (["sudo", "GIT_SSH_COMMAND=rm -rf /", "git", "fetch"], "may run rm: " + ENVIRONMENT),
    (["env", "GIT_PAGER=cat", "git", "log"], ENVIRONMENT),
    # the other wrappers' tables
    (["env", "--ignore-signal", "rm", "ls"], "runs rm"),
    (["env", "--unset", "rm", "--default-signal=INT", "ls"], al.permissions.Allow()),
    (
        ["env", "--i", "ls"],
        "env has the ambiguous option '--i' (it may be --ignore-environment, --ignore-signal)",
    ),
    (["nice", "-n", "rm", "ls"], al.permissions.Allow()),
    (["nice", "--adj=5", "-5", "ls"], al.permissions.Allow()),
    (["timeout", "--signal", "rm", "5", "ls"], al.permissions.Allow()),
    (
        ["timeout", "--v", "5", "ls"],
        "timeout has the ambiguous option '--v' (it may be --verbose, --version)",
    ),
    (["stdbuf", "-o", "rm", "--err=0", "ls"], al.permissions.Allow()),
    (["nohup", "-x", "ls"], "nohup has the unknown option -x"),
    (["time", "--output", "rm", "-p", "ls"], al.permissions.Allow()),
    (["flock", "-w", "rm", "lock", "ls"], al.permissions.Allow()),
    (["flock", "lock", "rm"], "runs rm"),
    (["flock", "9"], al.permissions.Allow()),
    (["flock", "lock", "-c", "ls"], "flock -c runs its command through the shell named by $SHELL"),
    (["watch", "-x", "-n", "rm", "ls"], al.permissions.Allow()),
    (["watch", "-d", "ls"], "watch runs its command through sh -c unless given -x"),
    (["sudo", "-u", "rm", "--preserve-env=PATH", "ls"], al.permissions.Allow()),
    (["env", "-", "ls"], al.permissions.Allow()),
    (["sudo", "-", "ls"], "'-' is not on the allow list (" + ", ".join(sorted(ALLOWED)) + ")"),
    (["sudo", "-D", "/", "ls"], "sudo option -D changes what runs in a way not looked into"),
    (["doas", "-L"], "doas option -L changes what runs in a way not looked into"),
    (["ionice", "-p", "1"], "ionice option -p changes what runs in a way not looked into"),
    (
        ["chroot", "/srv", "ls"],
        "chroot runs its command from another root directory, where a name may be any file",
    ),
    (
        ["ssh", "host", "rm", "-rf", "/"],
        "may run rm: ssh runs its command on another host, through that host's shell",
    ),
]


@pytest.mark.parametrize(("argv", "expected"), CASES, ids=[shlex.join(a)[:60] for a, _ in CASES])
def test_each_wrapper_is_read_as_the_program_reads_it(argv: list[str], expected: object) -> None:
    if isinstance(expected, str) and expected.startswith("runs "):
        expected = runs_rm(argv, expected.removeprefix("runs "))
    elif isinstance(expected, str) and expected.startswith("may run rm: "):
        expected = may_run_rm(argv, expected.removeprefix("may run rm: "))
    elif isinstance(expected, str):
        expected = asks(argv, expected)
    assert POLICY.evaluate(al.permissions.ShellCommand(argv)) == expected


def test_a_command_that_cannot_be_read_is_denied_with_unknown_deny() -> None:
    strict = al.permissions.CommandPolicy(allow=ALLOWED, deny=["rm"], unknown="deny")
    argv = ["xargs", "-I", "X", "sh", "-c", "X"]
    assert strict.evaluate(al.permissions.ShellCommand(argv)) == al.permissions.Deny(
        "command_not_allowed",
        f"command {shlex.join(argv)!r} is not allowed: sh is a shell or interpreter run by "
        f"xargs, {INTERPRETED}",
    )
