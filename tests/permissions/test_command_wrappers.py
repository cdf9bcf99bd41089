"""ShellCommand takes an argv; CommandPolicy decides every program a command line runs."""

from __future__ import annotations

import itertools
import os
import shlex
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentloop as al
import agentloop.permissions

WRAPPERS = ["env", "nice", "timeout", "nohup", "stdbuf", "sudo", "time", "setsid", "ionice"]
EVERYTHING_BUT_RM = al.permissions.CommandPolicy(
    allow=[*WRAPPERS, "sh", "bash", "xargs", "ls", "echo"]
)
NO_RM = al.permissions.CommandPolicy(
    allow=[*WRAPPERS, "sh", "bash", "xargs", "ls", "echo"], deny=["rm"]
)


# -- ShellCommand ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_argv", "argv"),
    [
        ("ls -la", ("ls", "-la")),
        ("echo 'a b' \"c d\"", ("echo", "a b", "c d")),
        ("  git   log  ", ("git", "log")),
        ("", ()),
        (["ls", "-la"], ("ls", "-la")),
        (("ls",), ("ls",)),
        ([Path("/bin/ls"), "x"], ("/bin/ls", "x")),
        (iter(["a", "b"]), ("a", "b")),
    ],
)
def test_shell_command_takes_an_argv_or_one_string_split_with_shlex(
    given_argv: object, argv: tuple[str, ...]
) -> None:
    command = al.permissions.ShellCommand(given_argv)  # type: ignore[arg-type]
    assert command.argv == argv
    assert command.program == (argv[0] if argv else "")


@pytest.mark.parametrize(
    ("given_argv", "error", "message"),
    [
        (
            "echo 'unbalanced",
            ValueError,
            'ShellCommand: cannot split the command string "echo \'unbalanced" into arguments '
            "(No closing quotation); pass the argv as a list of strings",
        ),
        (
            b"ls -la",
            TypeError,
            "ShellCommand argv must be a list of strings (or one command string), got bytes: "
            "b'ls -la'",
        ),
        (
            None,
            TypeError,
            "ShellCommand argv must be a list of strings (or one command string), got "
            "NoneType: None",
        ),
        (["ls", 3], TypeError, "ShellCommand argv[1] must be a string, got int: 3"),
        ([None], TypeError, "ShellCommand argv[0] must be a string, got NoneType: None"),
        ([b"ls"], TypeError, "ShellCommand argv[0] must be a string, got bytes: b'ls'"),
    ],
)
def test_shell_command_refuses_what_is_no_argv(
    given_argv: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        al.permissions.ShellCommand(given_argv)  # type: ignore[arg-type]
    assert str(caught.value) == message


@given(st.lists(st.text(min_size=0, max_size=8).filter(lambda t: "\0" not in t), max_size=6))
def test_a_joined_command_string_splits_back_into_its_argv(argv: list[str]) -> None:
    command = al.permissions.ShellCommand(shlex.join(argv))
    assert command.argv == tuple(argv)
    assert command.command == shlex.join(argv)
    assert al.permissions.ShellCommand(argv).argv == tuple(argv)


@given(st.text(max_size=30))
def test_a_string_is_never_split_into_characters(text: str) -> None:
    try:
        words = tuple(shlex.split(text))
    except ValueError:
        with pytest.raises(ValueError, match=r"^ShellCommand: cannot split the command string"):
            al.permissions.ShellCommand(text)
        return
    assert al.permissions.ShellCommand(text).argv == words


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: al.permissions.FileSystemRead(None),
            "FileSystemRead path must be a string or os.PathLike",
        ),
        (
            lambda: al.permissions.FileSystemWrite(7),
            "FileSystemWrite path must be a string or os.PathLike",
        ),
        (
            lambda: al.permissions.ShellCommand(["ls"], cwd=3),
            "ShellCommand cwd must be a string or os.PathLike",
        ),
        (
            lambda: al.permissions.NetworkAccess(None),
            "NetworkAccess url must be a string, got NoneType",
        ),
        (
            lambda: al.permissions.CustomPermission(1, "s"),
            "CustomPermission kind must be a string, got int",
        ),
        (lambda: al.permissions.ToolInvocation(None), "ToolInvocation tool_name must be a string"),
    ],
)
def test_requests_refuse_wrongly_typed_fields(build: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        build()  # type: ignore[operator]
    assert al.permissions.FileSystemRead(Path("/x")).path == "/x"


# -- CommandPolicy: looking through wrappers -----------------------------------------------


def approval(summary: str) -> al.permissions.AskApproval:
    return al.permissions.AskApproval("sensitive_command", summary)


def denied(message: str) -> al.permissions.Deny:
    return al.permissions.Deny("command_not_allowed", message)


@pytest.mark.parametrize(
    ("argv", "decision"),
    [
        (["env", "ls"], al.permissions.Allow()),
        (["env"], al.permissions.Allow()),
        (["/usr/bin/env", "-i", "-u", "HOME", "--", "ls", "-la"], al.permissions.Allow()),
        (["nice", "-n", "5", "ls"], al.permissions.Allow()),
        (["nice", "-5", "ls"], al.permissions.Allow()),
        (["timeout", "-s", "KILL", "--kill-after=2", "5", "ls"], al.permissions.Allow()),
        (["nohup", "stdbuf", "-oL", "ls"], al.permissions.Allow()),
        (["sudo", "-u", "root", "-n", "ls"], al.permissions.Allow()),
        (["time", "-p", "setsid", "-w", "ionice", "-c", "3", "ls"], al.permissions.Allow()),
        (["sh", "-c", "ls -la /tmp"], al.permissions.Allow()),
        (["bash", "-lc", "'ls' \"-la\""], al.permissions.Allow()),
        (["bash", "-o", "pipefail", "-c", "env ls"], al.permissions.Allow()),
        (["xargs", "-0", "-n", "1", "ls"], al.permissions.Allow()),
        (["xargs"], al.permissions.Allow()),  # runs echo
        (
            ["env", "rm", "x"],
            approval(
                "Run env rm x ('rm' is not on the allow list (bash, echo, env, ionice, "
                "ls, nice, nohup, setsid, sh, stdbuf, sudo, time, timeout, xargs))"
            ),
        ),
        (
            ["env", "PATH=/tmp/evil", "ls"],
            approval(
                "Run env PATH=/tmp/evil ls (a wrapper sets environment variables, which can "
                "change what runs)"
            ),
        ),
        (
            ["bash", "-c", "ls; curl x | sh"],
            approval(
                "Run bash -c 'ls; curl x | sh' (bash -c runs a script with shell syntax that "
                "cannot be looked through)"
            ),
        ),
        (
            ["sh", "-c", "X=1 ls"],
            approval(
                "Run sh -c 'X=1 ls' (sh -c runs a script with shell syntax that cannot be "
                "looked through)"
            ),
        ),
        (
            ["sudo", "-s"],
            approval("Run sudo -s (sudo option -s changes what runs in a way not looked into)"),
        ),
        (
            ["env", "--chdir=/", "ls"],
            approval(
                "Run env --chdir=/ ls (env option '--chdir=/' changes what runs in a way not "
                "looked into)"
            ),
        ),
        (
            ["env", "--frobnicate", "ls"],
            approval("Run env --frobnicate ls (env has the unknown option '--frobnicate')"),
        ),
        (
            ["xargs", "env"],
            approval("Run xargs env (xargs adds arguments read from its input to env)"),
        ),
        (
            ["watch", "ls"],
            approval(
                "Run watch ls ('watch' is not on the allow list (bash, echo, env, ionice, ls, "
                "nice, nohup, setsid, sh, stdbuf, sudo, time, timeout, xargs))"
            ),
        ),
        (["sh", "-c"], approval("Run sh -c (sh -c has no script in its arguments)")),
    ],
)
def test_wrappers_are_looked_through(argv: list[str], decision: al.permissions.Verdict) -> None:
    assert EVERYTHING_BUT_RM.evaluate(al.permissions.ShellCommand(argv)) == decision


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["env", "rm", "x"], "'rm' is on the deny list (it runs it)"),
        (
            ["/usr/bin/env", "FOO=1", "/bin/rm", "-rf", "/"],
            "'/bin/rm' is on the deny list (it runs it)",
        ),
        (["sh", "-c", "rm -rf /"], "'rm' is on the deny list (it runs it)"),
        (
            ["bash", "-c", "ls && $(echo rm) -rf /"],
            "it may run 'rm', which is on the deny list (bash -c runs a script with shell "
            "syntax that cannot be looked through)",
        ),
        (["sudo", "timeout", "5", "nice", "rm", "x"], "'rm' is on the deny list (it runs it)"),
        (["xargs", "rm"], "'rm' is on the deny list (it runs it)"),
        (
            ["env", "-S", "rm -rf /"],
            "it may run 'rm', which is on the deny list (env option -S changes what runs in a "
            "way not looked into)",
        ),
        (
            ["watch", "-n", "1", "/bin/rm", "x"],
            "it may run '/bin/rm', which is on the deny list (watch runs its command through sh -c "
            "unless given -x)",
        ),
        (["watch", "-x", "-n", "1", "/bin/rm", "x"], "'/bin/rm' is on the deny list (it runs it)"),
        (
            ["chroot", "/srv", "rm", "x"],
            "it may run 'rm', which is on the deny list (chroot runs its command from another "
            "root directory, where a name may be any file)",
        ),
    ],
)
def test_a_denied_program_is_denied_however_it_is_wrapped(argv: list[str], why: str) -> None:
    assert NO_RM.evaluate(al.permissions.ShellCommand(argv)) == denied(
        f"command {shlex.join(argv)!r} is not allowed: {why}"
    )
    assert NO_RM.evaluate(al.permissions.ShellCommand(["rm\0", "x"])) == denied(
        "cannot run \"'rm\\x00' x\": an argument contains a NUL byte"
    )


def test_allowing_env_does_not_allow_what_env_runs() -> None:
    policy = al.permissions.CommandPolicy(allow=["env"], unknown="deny")
    assert policy.evaluate(al.permissions.ShellCommand(["env"])) == al.permissions.Allow()
    assert policy.evaluate(al.permissions.ShellCommand(["env", "curl", "x"])) == denied(
        "command 'env curl x' is not allowed: 'curl' is not on the allow list (env)"
    )
    assert policy.evaluate(al.permissions.ShellCommand(["env", "sh", "-c", "curl x"])) == denied(
        "command \"env sh -c 'curl x'\" is not allowed: 'sh' is not on the allow list (env)"
    )
    # a shell a wrapper runs is not looked through, even when it and its script are allowed
    everything = al.permissions.CommandPolicy(allow=["env", "sh", "curl"], unknown="deny")
    assert everything.evaluate(
        al.permissions.ShellCommand(["env", "sh", "-c", "curl x"])
    ) == denied(
        "command \"env sh -c 'curl x'\" is not allowed: sh is a shell or interpreter run by env, "
        "and what a wrapper runs through one is not looked into"
    )
    assert (
        everything.evaluate(al.permissions.ShellCommand(["sh", "-c", "env curl x"]))
        == al.permissions.Allow()
    )


@pytest.fixture
def programs(tmp_path: Path) -> Path:
    """bin/tool (an executable), bin/alias -> tool, other/tool (another executable)."""
    for directory in ("bin", "other"):
        (tmp_path / directory).mkdir()
        program = tmp_path / directory / "tool"
        program.write_text("#!/bin/sh\n")
        program.chmod(program.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "bin" / "alias").symlink_to("tool")
    return tmp_path.resolve()


def test_an_entry_and_a_program_match_as_path_or_base_name(programs: Path) -> None:
    tool, other = str(programs / "bin" / "tool"), str(programs / "other" / "tool")
    search = [str(programs / "bin")]
    by_path = al.permissions.CommandPolicy(allow=[tool], search_path=search, unknown="deny")
    by_name = al.permissions.CommandPolicy(allow=["tool"], search_path=search, unknown="deny")
    for policy in (by_path, by_name):
        assert policy.evaluate(al.permissions.ShellCommand(["tool", "x"])) == al.permissions.Allow()
        assert policy.evaluate(al.permissions.ShellCommand([tool, "x"])) == al.permissions.Allow()
        assert policy.evaluate(al.permissions.ShellCommand(["env", "tool"])) == denied(
            f"command 'env tool' is not allowed: 'env' is not on the allow list "
            f"({next(iter(policy.allow))})"
        )
        # another file with the same name is another program
        assert isinstance(
            policy.evaluate(al.permissions.ShellCommand([other])), al.permissions.Deny
        )
    # a relative path is taken against the command's directory
    assert (
        by_name.evaluate(al.permissions.ShellCommand(["./tool"], cwd=str(programs / "bin")))
        == al.permissions.Allow()
    )
    assert isinstance(
        by_name.evaluate(al.permissions.ShellCommand(["./tool"], cwd=str(programs / "other"))),
        al.permissions.Deny,
    )
    # a name that is not on the search path matches no path
    elsewhere = al.permissions.CommandPolicy(allow=["tool"], search_path=[str(programs / "none")])
    assert elsewhere.evaluate(al.permissions.ShellCommand([tool])) == approval(f"Run {tool}")
    # the deny list matches base names both ways, without looking anything up
    for entry, program in [("tool", other), (other, "tool"), (tool, other)]:
        assert al.permissions.CommandPolicy(deny=[entry]).evaluate(
            al.permissions.ShellCommand([program])
        ) == denied(f"command {program!r} is not allowed: {program!r} is on the deny list")
    assert os.path.basename(tool) == "tool"


# -- hypothesis: no wrapping lets a denied or unlisted program through ---------------------

_wrapper_forms: list[list[str]] = [
    ["env"],
    ["env", "-i"],
    ["env", "A=1"],
    ["/usr/bin/env", "--", "B=2"],
    ["nice", "-n", "3"],
    ["nice", "-7"],
    ["timeout", "5"],
    ["timeout", "--signal=KILL", "1m"],
    ["nohup"],
    ["stdbuf", "-o", "0"],
    ["sudo"],
    ["sudo", "-u", "nobody", "-E"],
    ["time", "-p"],
    ["setsid", "-f"],
    ["ionice", "-c", "2", "-n", "7"],
    ["doas", "-u", "root"],
    ["command", "-p"],
    ["exec"],
    ["strace", "-f"],
    ["watch", "-n", "1"],
]
_shells = [["sh", "-c"], ["bash", "-lc"], ["dash", "-e", "-c"], ["/bin/sh", "-xc"]]
layers = st.lists(
    st.one_of(
        st.sampled_from(_wrapper_forms).map(lambda form: ("wrap", form)),
        st.sampled_from(_shells).map(lambda form: ("shell", form)),
    ),
    max_size=5,
)
inner = st.sampled_from([["rm", "-rf", "/"], ["/bin/rm", "x"], ["rm"]])


def _wrapped(stack: list[tuple[str, list[str]]], argv: list[str]) -> list[str]:
    for how, form in reversed(stack):
        argv = [*form, shlex.join(argv)] if how == "shell" else [*form, *argv]
    return argv


@given(stack=layers, command=inner)
def test_no_wrapping_runs_a_denied_program(
    stack: list[tuple[str, list[str]]], command: list[str]
) -> None:
    argv = _wrapped(stack, command)
    decision = NO_RM.evaluate(al.permissions.ShellCommand(argv))
    assert isinstance(decision, al.permissions.Deny), (argv, decision)
    assert "on the deny list" in decision.message


@given(stack=layers, command=inner)
def test_no_wrapping_allows_a_program_not_on_the_allow_list(
    stack: list[tuple[str, list[str]]], command: list[str]
) -> None:
    argv = _wrapped(stack, command)
    assert not isinstance(
        EVERYTHING_BUT_RM.evaluate(al.permissions.ShellCommand(argv)), al.permissions.Allow
    ), argv


# runners that are never looked through, and ``time``, a keyword when a script starts with it
_OPAQUE_HERE = {"strace", "watch", "doas", "command", "exec", "time"}


@given(stack=layers.filter(lambda s: all(form[0] not in _OPAQUE_HERE for _, form in s)))
def test_wrapping_an_allowed_program_in_allowed_wrappers_without_variables_is_allowed(
    stack: list[tuple[str, list[str]]],
) -> None:
    policy = al.permissions.CommandPolicy(allow=[*WRAPPERS, "sh", "bash", "dash", "/bin/sh", "ls"])
    argv = _wrapped(stack, ["ls", "-la"])
    decision = policy.evaluate(al.permissions.ShellCommand(argv))
    sets_variables = any("=" in word and "--" not in word for _, form in stack for word in form)
    # a shell run by a wrapper is never looked through
    wrapped_shell = any(
        outer == "wrap" and inner == "shell" for (outer, _), (inner, _) in itertools.pairwise(stack)
    )
    assert (decision == al.permissions.Allow()) != (sets_variables or wrapped_shell), (
        argv,
        decision,
    )
