"""CommandPolicy against the real wrappers: what it reads is what GNU xargs, find, env... run.

A directory of shims comes first on ``PATH``: the target programs (``rm``,
``ls``, ``echo``, ``cat``) only append their name and argv to a log, and the
wrappers (``env``, ``xargs``, ``find``, ``sh``...) append theirs and then
exec the real program. Each generated command line is run for real (with
``rm`` fed to it on standard input and as a file name, so a misread option
or an injected script shows up as ``rm`` in the log), then:

- when the policy allows the command, every program that ran is allowed;
- when the policy read the command to its end, every program that ran is one
  the policy said it runs.

Wrappers that are not installed are left out (a test per wrapper says which
and why); ``scripts/install_test_programs.sh`` installs them on Debian.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.permissions
from agentloop.permissions._wrapper_table import WRAPPERS
from agentloop.permissions._wrappers import unwrap

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the wrappers are GNU/Linux's")

TIMEOUT = 5  # seconds a command may run
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TARGETS = ("rm", "ls", "echo", "cat")
# wrapper -> Debian package that ships it
PACKAGES = {
    "env": "coreutils",
    "nice": "coreutils",
    "timeout": "coreutils",
    "nohup": "coreutils",
    "stdbuf": "coreutils",
    "chroot": "coreutils",
    "xargs": "findutils",
    "find": "findutils",
    "flock": "util-linux",
    "setsid": "util-linux",
    "ionice": "util-linux",
    "time": "time",
    "git": "git",
    "sh": "dash",
    "dash": "dash",
    "bash": "bash",
    "sudo": "sudo",
    "doas": "doas",
    "watch": "procps",
}
REAL = {name: shutil.which(name, path=SYSTEM_PATH) for name in PACKAGES}
# installed, but what they run cannot be observed through shims on PATH
UNOBSERVABLE = {
    "sudo": "sudo resets PATH to its secure_path, so the shims never see what it runs",
    "doas": "doas needs an /etc/doas.conf rule and resets PATH, so the shims never see it",
    "watch": "watch needs a terminal and runs its command forever",
}
ALLOWED = frozenset({*PACKAGES, "ls", "echo", "cat"} - {"chroot"})
POLICY = al.permissions.CommandPolicy(allow=ALLOWED, deny=["rm"])
RECORD = '{ printf \'%s\\037\' "$(basename "$0")" "$@"; printf \'\\036\'; } >> '


def _usable(name: str) -> bool:
    if REAL[name] is None or name in UNOBSERVABLE:
        return False
    return name != "chroot" or os.geteuid() == 0  # chroot needs root


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """shims/ (first on PATH), work/ (the cwd: d/rm, a shim too; input.txt; a git repo), log."""
    root = tmp_path_factory.mktemp("sec32_real")
    shims, work, log = root / "shims", root / "work", root / "log"
    shims.mkdir()
    (work / "d").mkdir(parents=True)
    (work / "input.txt").write_text("rm\n")
    for path in [*(shims / name for name in TARGETS), work / "d" / "rm"]:
        _shim(path, f"{RECORD}{shlex.quote(str(log))}\nexit 0\n")
    for name, real in REAL.items():
        if real is not None and _usable(name):
            _shim(shims / name, f'{RECORD}{shlex.quote(str(log))}\nexec {shlex.quote(real)} "$@"\n')
    if REAL["git"] is not None:
        subprocess.run([REAL["git"], "init", "-q", str(work / "repo")], check=True, timeout=30)
    return root


def _shim(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def run(sandbox: Path, argv: list[str]) -> tuple[int, list[str]]:
    """Run ``argv`` with the shims first on PATH: its exit status and every program that ran."""
    log = sandbox / "log"
    log.write_bytes(b"")
    environment = {
        "PATH": f"{sandbox / 'shims'}:{SYSTEM_PATH}",
        "HOME": str(sandbox),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    process = subprocess.Popen(
        argv,
        cwd=sandbox / "work",
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        process.communicate(b"rm\n", timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{argv} still ran after {TIMEOUT} s")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # and whatever it left behind
        process.wait()
    records = log.read_bytes().decode().split("\036")
    return process.returncode, [record.split("\037")[0] for record in records if record]


def check(sandbox: Path, argv: list[str]) -> tuple[al.permissions.PolicyVerdict, list[str]]:
    """Run ``argv`` and check the policy against what really ran."""
    decision = POLICY.evaluate(al.permissions.ShellCommand(argv))
    status, ran = run(sandbox, argv)
    if decision == al.permissions.Allow():
        assert set(ran) <= ALLOWED, (argv, ran)
    chain = unwrap(argv)
    if chain.opaque is None:
        said = {os.path.basename(program) for program in chain.programs}
        assert set(ran) <= said, (argv, ran, chain.programs)
        # and, when it succeeds, all of them (find -ok asks first, xargs -r may run nothing,
        # and a shell runs echo itself)
        builtin = {"echo"} if said & {"sh", "bash", "dash"} else set()
        if status == 0 and not {"-ok", "-r", "--no-run"} & set(argv):
            assert set(ran) >= said - builtin, (argv, ran, chain.programs)
    return decision, ran


# -- the cases, run for real ------------------------------------------------------

needs = {
    name: pytest.mark.skipif(not _usable(name), reason=f"{name} is not usable") for name in REAL
}


def denied(message: str) -> al.permissions.Deny:
    return al.permissions.Deny("command_not_allowed", message)


@needs["xargs"]
@pytest.mark.parametrize("option", ["--replace", "--max-lines", "--eof", "-i", "-l", "-e"])
def test_xargs_options_with_an_optional_value_run_the_next_word(sandbox: Path, option: str) -> None:
    argv = ["xargs", option, "rm", "ls", "-rf", "/home"]
    decision, ran = check(sandbox, argv)
    assert ran == ["xargs", "rm"]  # xargs ran rm ls -rf /home (a shim: nothing is removed)
    assert decision == denied(
        f"command {shlex.join(argv)!r} is not allowed: 'rm' is on the deny list (it runs it)"
    )


@needs["xargs"]
def test_xargs_replace_feeds_its_input_to_a_shell_that_is_never_allowed(sandbox: Path) -> None:
    argv = ["xargs", "-a", "input.txt", "-I", "ls", "sh", "-c", "ls"]
    decision, ran = check(sandbox, argv)
    assert ran == ["xargs", "sh", "rm"]  # each line of input.txt became the script
    assert decision == al.permissions.AskApproval(
        "sensitive_command",
        f"Run {shlex.join(argv)} (sh is a shell or interpreter run by xargs, and what a wrapper "
        "runs through one is not looked into)",
    )


@needs["find"]
@pytest.mark.parametrize("primary", ["-exec", "-execdir"])
def test_find_exec_runs_its_command(sandbox: Path, primary: str) -> None:
    argv = ["find", "d", "-type", "f", primary, "rm", "{}", ";"]
    decision, ran = check(sandbox, argv)
    assert ran == ["find", "rm"]
    assert decision == denied(
        f"command {shlex.join(argv)!r} is not allowed: 'rm' is on the deny list (it runs it)"
    )


@needs["git"]
def test_git_runs_an_alias_set_with_c(sandbox: Path) -> None:
    argv = ["git", "-C", "repo", "-c", "alias.x=!rm -rf /home", "x"]
    decision, ran = check(sandbox, argv)
    assert ran == ["git", "rm"]
    assert decision == denied(
        f"command {shlex.join(argv)!r} is not allowed: it may run 'rm', which is on the deny "
        "list (git -c 'alias.x=!rm -rf /home' sets a configuration value that may run a program "
        "(core.pager, alias.*, core.sshCommand...); only settings known to be harmless are read)"
    )


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_each_wrapper_is_run_for_real(name: str) -> None:
    if REAL[name] is None:
        pytest.skip(f"{name} is not installed (Debian package {PACKAGES[name]})")
    if name in UNOBSERVABLE:
        pytest.skip(f"{name} is left out of the real runs: {UNOBSERVABLE[name]}")
    if name == "chroot" and os.geteuid() != 0:
        pytest.skip("chroot is left out of the real runs: it needs root")
    assert _usable(name)


# options the programs accept but their --help does not list
UNDOCUMENTED = {"flock": {"-e", "--nonblocking", "--wait"}}


@pytest.mark.parametrize("name", sorted(set(WRAPPERS) & set(PACKAGES)))
def test_each_option_table_names_only_options_the_program_has(name: str) -> None:
    """A typo in a table would read an option the program refuses (or another one)."""
    if REAL[name] is None:
        pytest.skip(f"{name} is not installed (Debian package {PACKAGES[name]})")
    shown = subprocess.run(
        [REAL[name], "--help"], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    text = shown.stdout + shown.stderr
    documented = {f"-{letter}" for letter in re.findall(r"(?<![\w-])-([A-Za-z0-9])\b", text)}
    documented |= {f"--{long}" for long in re.findall(r"--([a-z][a-z0-9-]*)", text)}
    for cluster in re.findall(r"\[-([A-Za-z0-9]+)\]", text):  # usage: doas [-Lns]
        documented |= {f"-{letter}" for letter in cluster}
    options = WRAPPERS[name]
    ours = {f"-{letter}" for letter in options.short.lstrip("+") if letter != ":"}
    ours |= {"--" + spec.partition(":")[0].rstrip("=?") for spec in options.long.split()}
    assert ours - documented - UNDOCUMENTED.get(name, set()) == set()


# -- hypothesis: generated wrapper chains and option spellings ---------------------------

PREFIX_FORMS: dict[str, list[list[str]]] = {
    "env": [
        ["env"],
        ["env", "--"],
        ["env", "-u", "rm"],
        ["env", "-urm"],
        ["env", "--unset=X"],
        ["env", "--uns", "X"],
        ["env", "-v"],
        ["env", "-0"],
        ["env", "A=1"],
        ["env", "--ignore-signal"],
        ["env", "--default-signal=INT"],
        ["env", "--block-sig"],
        ["env", "-C", "d"],
        ["env", "-S", "rm ls"],
    ],
    "nice": [
        ["nice"],
        ["nice", "-n", "1"],
        ["nice", "-n1"],
        ["nice", "-3"],
        ["nice", "--adj", "2"],
    ],
    "timeout": [
        ["timeout", "9"],
        ["timeout", "-s", "TERM", "9"],
        ["timeout", "-sKILL", "9"],
        ["timeout", "--sig", "TERM", "9"],
        ["timeout", "--kill-after=1", "9"],
        ["timeout", "-k", "1", "--foreground", "9"],
        ["timeout", "--v", "9"],
    ],
    "nohup": [["nohup"], ["nohup", "--"]],
    "stdbuf": [
        ["stdbuf", "-oL"],
        ["stdbuf", "-o", "L"],
        ["stdbuf", "--out", "0"],
        ["stdbuf", "-i0"],
    ],
    "xargs": [
        ["xargs"],
        ["xargs", "-n", "1"],
        ["xargs", "-n1"],
        ["xargs", "--max-args=1"],
        ["xargs", "-L", "1"],
        ["xargs", "-l"],
        ["xargs", "-l1"],
        ["xargs", "--max-lines"],
        ["xargs", "-i"],
        ["xargs", "-I", "ls"],
        ["xargs", "--replace"],
        ["xargs", "--replace=ls"],
        ["xargs", "--repl"],
        ["xargs", "-E", "x"],
        ["xargs", "-e"],
        ["xargs", "--eof"],
        ["xargs", "--eof=x"],
        ["xargs", "-r"],
        ["xargs", "--no-run"],
        ["xargs", "-a", "input.txt"],
        ["xargs", "--arg", "input.txt"],
        ["xargs", "-0", "-d", "\n"],
        ["xargs", "--e"],
    ],
    # shared locks, so that a flock under another flock does not wait for it
    "flock": [
        ["flock", "-s", "lock"],
        ["flock", "-sn", "lock"],
        ["flock", "--sh", "-w", "5", "lock"],
    ],
    "setsid": [["setsid", "-w"], ["setsid", "--wait"], ["setsid", "-f", "-w"]],
    "ionice": [["ionice", "-c", "3"], ["ionice", "-c3"], ["ionice", "-t", "--class", "2"]],
    "time": [["time", "-p"], ["time", "-f", "%e"], ["time", "--output=/dev/null"], ["time", "-q"]],
    "chroot": [["chroot", "/"]],
}
SCRIPT_FORMS: dict[str, list[list[str]]] = {
    "sh": [["sh", "-c"], ["sh", "-ec"]],
    "bash": [["bash", "-c"], ["bash", "-o", "pipefail", "-c"]],
    "dash": [["dash", "-c"]],
    "flock": [["flock", "--shared", "lock", "-c"]],
}
FIND_FORMS = [
    ["find", "d", "-exec"],
    ["find", "d", "-type", "f", "-execdir"],
    ["find", "-L", "d", "-name", "-exec", "-o", "-exec"],
    ["find", "d", "-name", "rm", "-ok"],
]
FIND_ENDS = [[";"], ["{}", ";"], ["{}", "+"], ["+", ";"]]
GIT_COMMANDS = [
    ["git", "--version"],
    ["git", "-C", "repo", "status", "--short"],
    ["git", "-C", "repo", "-c", "color.ui=never", "log", "-n", "1"],
    ["git", "-C", "repo", "-c", "alias.x=!rm", "x"],
    ["git", "-C", "repo", "-c", "alias.x=!ls", "x"],
    ["git", "--exec-path"],
]

_layers: list[st.SearchStrategy[tuple[object, ...]]] = [
    st.sampled_from(
        [("prefix", f) for name, fs in PREFIX_FORMS.items() if _usable(name) for f in fs]
    ),
    st.sampled_from(
        [("script", f) for name, fs in SCRIPT_FORMS.items() if _usable(name) for f in fs]
    ),
]
if _usable("find"):
    _layers.append(
        st.tuples(st.just("find"), st.sampled_from(FIND_FORMS), st.sampled_from(FIND_ENDS))
    )
layer = st.one_of(*_layers)
target = st.tuples(
    st.sampled_from(TARGETS), st.lists(st.sampled_from(["rm", "ls", "-l", "x"]), max_size=2)
).map(lambda pair: [pair[0], *pair[1]])
innermost = st.one_of(target, st.sampled_from(GIT_COMMANDS)) if _usable("git") else target


def wrapped(layers: list[tuple[object, ...]], argv: list[str]) -> list[str]:
    for built in reversed(layers):
        how, form = built[0], list(built[1])  # type: ignore[call-overload]
        if how == "prefix":
            argv = [*form, *argv]
        elif how == "script":
            argv = [*form, shlex.join(argv)]
        else:
            argv = [*form, *argv, *built[2]]  # type: ignore[misc]
    return argv


@needs["env"]
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(layers=st.lists(layer, min_size=1, max_size=3), command=innermost)
def test_what_the_policy_allows_runs_only_allowed_programs(
    sandbox: Path, layers: list[tuple[object, ...]], command: list[str]
) -> None:
    decision, ran = check(sandbox, wrapped(layers, command))
    event(f"policy: {type(decision).__name__}; ran rm: {'rm' in ran}")


FEEDING_FORMS = [
    ["xargs"],
    ["xargs", "-I", "ls"],
    ["xargs", "-i"],
    ["xargs", "--replace"],
    ["xargs", "-a", "input.txt", "-Ils"],
    ["xargs", "-n", "1"],
    ["find", "d", "-type", "f", "-exec"],
    ["find", "d", "-execdir"],
]
RUN_BY_FEEDER = [["sh", "-c"], ["bash", "-c"], ["sh"], ["env"], ["nice"], ["env", "sh", "-c"]]
SCRIPTS = [["ls"], ["{}"], ["ls", "{}"], ["echo", "ls"], []]


@needs["xargs"]
@needs["find"]
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    feeder=st.sampled_from(FEEDING_FORMS),
    runner=st.sampled_from(RUN_BY_FEEDER),
    script=st.sampled_from(SCRIPTS),
)
def test_a_shell_or_wrapper_that_xargs_or_find_feeds_is_never_allowed(
    sandbox: Path, feeder: list[str], runner: list[str], script: list[str]
) -> None:
    """xargs and find put words read at run time (``rm``) into what they run: a shell or
    wrapper they feed, or a shell any wrapper runs, is never allowed."""
    words = [shlex.join(script)] if runner[-1] == "-c" and script else script
    argv = [*feeder, *runner, *words]
    if feeder[0] == "find":
        argv.append(";")
    decision, ran = check(sandbox, argv)
    event(f"policy: {type(decision).__name__}; ran rm: {'rm' in ran}")
    fed = feeder[0] == "xargs" or any("{}" in word for word in words)
    if fed or "sh" in runner or "bash" in runner:  # find adds nothing without {}
        assert decision != al.permissions.Allow(), argv
