"""The CLI tests never build or install anything (issue 13, hygiene).

Every in-process test runs with the local servers' installers replaced by one
that fails the test; a test that means to exercise the demo's first-run build
replaces them again with its own fake.
"""

from __future__ import annotations

from typing import Any

import pytest

import agentloop.local


def _refuse(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("a test tried to build a local model server; fake it instead")


@pytest.fixture(autouse=True)
def _no_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agentloop.local, "install_local_server", _refuse)
    monkeypatch.setattr(agentloop.local, "install_llama_server", _refuse)
