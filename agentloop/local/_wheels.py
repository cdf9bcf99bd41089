"""The built-wheel cache: llama.cpp wheels built once per machine, reused by every clone.

Building a llama.cpp server from its sdist takes minutes; the result depends only on
the package version, the ``CMAKE_ARGS`` it was built with, the Python tag and
platform, and the CPU features the flags rely on. So the wheel ``pip wheel`` produces
is kept under ``wheel_cache_dir()`` (``$AGENTLOOP_CACHE_DIR/wheels``, else
``${XDG_CACHE_HOME:-~/.cache}/agentloop/wheels``) in a directory named for the
package, its version and a hash of all of the above; a later install with the same
key (another clone, a fresh venv, a CI job on the same runner) installs that wheel
instead of compiling. pip's own cache stays off for these builds (``--no-cache-dir``):
it keys wheels by sdist only and would reuse one built with other flags.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform as platform_info
import sys
import sysconfig
from pathlib import Path

import attrs

__all__ = ["WheelCacheEntry", "cpu_features", "wheel_cache_dir"]

# the CPU features the portable build flags (-DGGML_AVX2=ON ...) rely on (/proc/cpuinfo names)
_BUILD_CPU_FEATURES = ("avx", "avx2", "fma", "f16c", "bmi2")
_KEY_FILE = "key.json"


def wheel_cache_dir() -> Path:
    """Where built wheels are kept: ``$AGENTLOOP_CACHE_DIR/wheels`` or the user's cache."""
    root = os.environ.get("AGENTLOOP_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "wheels"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "agentloop" / "wheels"


def cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, ...]:
    """Which of the CPU features the build flags rely on this machine has (sorted)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            present = set(value.split())
            return tuple(sorted(feature for feature in _BUILD_CPU_FEATURES if feature in present))
    return ()


@attrs.frozen(kw_only=True)
class WheelCacheEntry:
    """One cached build: the package, its version and everything else the wheel depends on."""

    package: str
    version: str
    cmake_args: tuple[str, ...]
    cpu: tuple[str, ...] = attrs.field(factory=cpu_features)
    python: str = attrs.field(factory=lambda: sys.implementation.cache_tag or "")
    platform: str = attrs.field(factory=sysconfig.get_platform)
    machine: str = attrs.field(factory=platform_info.machine)
    root: Path = attrs.field(factory=wheel_cache_dir)

    def key(self) -> dict[str, object]:
        """What the wheel depends on, as stored next to it in ``key.json``."""
        return {
            "package": self.package,
            "version": self.version,
            "cmake_args": list(self.cmake_args),
            "cpu_features": list(self.cpu),
            "python": self.python,
            "platform": self.platform,
            "machine": self.machine,
        }

    @property
    def directory(self) -> Path:
        """``<root>/<package>-<version>-<hash of the key>``."""
        digest = hashlib.sha256(json.dumps(self.key(), sort_keys=True).encode()).hexdigest()
        return self.root / f"{self.package}-{self.version}-{digest[:16]}"

    def wheel(self) -> Path | None:
        """The cached wheel, if a complete one is there (its ``key.json`` matching)."""
        directory = self.directory
        try:
            stored = json.loads((directory / _KEY_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if stored != self.key():
            return None
        wheels = sorted(directory.glob("*.whl"))
        return wheels[0] if len(wheels) == 1 else None

    def store(self, built: Path) -> Path:
        """Move a freshly built wheel into the cache (replacing any older one); its new path."""
        directory = self.directory
        directory.mkdir(parents=True, exist_ok=True)
        (directory / _KEY_FILE).unlink(missing_ok=True)  # no entry until the new one is whole
        for old in directory.glob("*.whl"):
            if old.name != built.name:
                old.unlink()
        target = directory / built.name
        staged = directory / f".{built.name}.{os.getpid()}.part"
        key_staged = directory / f".{_KEY_FILE}.{os.getpid()}.part"
        try:  # the key is written last: an interrupted store leaves no usable entry
            staged.write_bytes(built.read_bytes())
            os.replace(staged, target)
            key_staged.write_text(
                json.dumps(self.key(), indent=2, sort_keys=True), encoding="utf-8"
            )
            os.replace(key_staged, directory / _KEY_FILE)
        finally:
            staged.unlink(missing_ok=True)
            key_staged.unlink(missing_ok=True)
        return target
