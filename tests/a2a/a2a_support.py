"""Starting an A2A server script in a child process on a free 127.0.0.1 port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def child_server(
    script: Path,
    arguments: Callable[[int], list[str]],
    logs: Path,
    card_path: str = "",
) -> Iterator[str]:
    """``python SCRIPT *arguments(port)`` until the block ends; its base URL.

    A child that dies before its agent card answers (its port taken meanwhile) is
    started again on another port, at most three times; its stderr is in the failure.
    """
    for attempt in range(3):
        port = free_port()
        log = logs / f"{script.stem}-{port}-{attempt}.log"
        with log.open("wb") as errors:
            child = subprocess.Popen([sys.executable, str(script), *arguments(port)], stderr=errors)
        base = f"http://127.0.0.1:{port}"
        try:
            if _answers(child, f"{base}{card_path}/.well-known/agent-card.json"):
                yield base
                return
            if attempt == 2 or "address already in use" not in log.read_text():
                raise AssertionError(f"{script.name} did not start:\n{log.read_text()}")
        finally:
            child.terminate()
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:  # uvicorn waits for open streams: not here
                child.kill()
                child.wait(20)


def _answers(child: subprocess.Popen[bytes], card: str) -> bool:
    """Whether the child serves ``card`` within 60 s (``False`` once it exited)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(card, timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        if child.poll() is not None:
            return False
        time.sleep(0.05)
    return False
