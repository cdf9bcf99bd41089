"""The CLI tests never build or install anything (issue 13, hygiene).

Every in-process test runs with the local servers' installers replaced by one
that fails the test, and with the demo's build command replaced by one that
fails at once; a test that means to exercise the demo's first-run build
replaces it again with its own fake. The pseudo-terminal tests that use the
local model are skipped unless it is installed, so they never build either.
The demo saves its session under ``$AGENTLOOP_CACHE_DIR``: a temporary
directory per test, never the user's cache.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import agentloop.cli._demo
import agentloop.local

_REFUSE_BUILD = "import sys; sys.exit('a test tried to build a local model server; fake it')"


def _refuse(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("a test tried to build a local model server; fake it instead")


@pytest.fixture(autouse=True)
def _no_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agentloop.local, "install_local_server", _refuse)
    monkeypatch.setattr(agentloop.local, "install_llama_server", _refuse)
    monkeypatch.setattr(agentloop.cli._demo, "BUILD_COMMAND", (sys.executable, "-c", _REFUSE_BUILD))


@pytest.fixture(autouse=True)
def demo_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The demo's default store (``$AGENTLOOP_CACHE_DIR/demo.db``) in this test's directory."""
    cache = tmp_path / "agentloop-cache"
    monkeypatch.setenv("AGENTLOOP_CACHE_DIR", str(cache))
    return cache / "demo.db"
