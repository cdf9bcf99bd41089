"""``ManagedServer``: an OpenAI-compatible server as a child process on 127.0.0.1.

What :class:`~agentloop.local.LocalServer` and :class:`~agentloop.local.LlamaServer`
share: an ephemeral port, a per-run random API key, a readiness poll until
the server answers (bounded by ``startup_timeout``), its own session (so a
Ctrl-C typed in the host's terminal never reaches it), and a guaranteed stop:
terminate, then kill after a grace period, shielded from cancellation and
bounded in time. A subclass says only how to start its server and how to
tell that it is ready.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import IO, Any, ClassVar, Self

import anyio
import anyio.abc
import httpx

from .._log import get_logger
from ..core._errors import InvalidInputError
from ..providers import OpenAIChatModel
from ._find import LocalServerError

__all__ = ["LOCAL_MODEL_ALIAS", "ManagedServer", "new_api_key"]

log = get_logger()

LOCAL_MODEL_ALIAS = "smollm2"
"""The model name the local servers answer to."""

_POLL_SECONDS = 0.1
_PROBE_TIMEOUT = httpx.Timeout(2.0)
_LOG_TAIL_BYTES = 2000


def new_api_key() -> str:
    """A random per-run API key for a child server.

    Prefixed, so it never starts with ``-``: the servers parse their command
    line with argparse, which would take such a key for an option (and the
    start would fail about once in 64 runs).
    """
    return "al-" + secrets.token_urlsafe(24)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ManagedServer:
    """Start, probe and stop one server child process; subclasses give the command.

    A subclass sets ``label`` (the name errors start with) and implements
    :meth:`_command`, :meth:`_probe_url` and :meth:`_is_ready`.
    """

    label: ClassVar[str] = "server"
    model_class: ClassVar[type[OpenAIChatModel]] = OpenAIChatModel
    """The adapter class :meth:`model` makes (the server's dialect of the OpenAI API)."""

    def __init__(
        self,
        *,
        port: int | None = None,
        context_size: int = 4096,
        threads: int = 2,
        startup_timeout: float = 60.0,
        stop_grace: float = 5.0,
        extra_args: Sequence[str] = (),
    ) -> None:
        owner = type(self).__name__
        if port is not None and not 0 < port < 65536:
            raise InvalidInputError(f"{owner}: port must be in 1..65535, got {port}")
        for name, value in (("context_size", context_size), ("threads", threads)):
            if value < 1:
                raise InvalidInputError(f"{owner}: {name} must be at least 1, got {value}")
        for name, seconds in (("startup_timeout", startup_timeout), ("stop_grace", stop_grace)):
            if not seconds > 0:
                raise InvalidInputError(f"{owner}: {name} must be positive, got {seconds}")
        self.port = port or _free_port()
        self.context_size = context_size
        self.threads = threads
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.extra_args = tuple(extra_args)
        self._api_key = new_api_key()
        self._log: IO[bytes] | None = None
        self._popen: subprocess.Popen[bytes] | None = None
        self._process: anyio.abc.Process | None = None
        self._locate()

    def _locate(self) -> None:
        """Find the installed server; raise ``LocalServerNotInstalledError`` if it is missing."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, running={self.running})"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the OpenAI-compatible API root."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        if self._popen is not None:
            return self._popen.poll() is None
        return self._process is not None and self._process.returncode is None

    @property
    def command(self) -> list[str]:
        """The command line that starts the server (the API key shown as ``***``)."""
        return [arg if arg != self._api_key else "***" for arg in self._command()]

    def model(self, **options: Any) -> OpenAIChatModel:
        """An adapter for this server; ``options`` go to ``OpenAIChatModel``.

        Defaults: ``temperature=0.0`` (repeatable answers) and ``max_tokens=128``.
        """
        options.setdefault("temperature", 0.0)
        options.setdefault("max_tokens", 128)
        return self.model_class(
            LOCAL_MODEL_ALIAS, base_url=self.base_url, api_key=self._api_key, **options
        )

    # -- sync ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the process and wait until it answers; raises ``LocalServerError``."""
        self._check_not_started()
        self._log = _new_log()
        self._popen = subprocess.Popen(
            self._command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            start_new_session=True,  # the terminal's Ctrl-C is the host's to handle, not ours
        )
        log.info("local_server.starting", server=self.label, port=self.port, pid=self._popen.pid)
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=_PROBE_TIMEOUT) as client:
            while not self._probe(client.get):
                self._check_alive_before(deadline)
                time.sleep(_POLL_SECONDS)
        log.info("local_server.ready", server=self.label, port=self.port)

    def stop(self) -> None:
        """Stop the process (terminate, then kill after ``stop_grace``); idempotent."""
        popen, self._popen = self._popen, None
        if popen is not None:
            if popen.poll() is None:
                popen.terminate()
                try:
                    popen.wait(self.stop_grace)
                except subprocess.TimeoutExpired:
                    popen.kill()
                    popen.wait(self.stop_grace)
            log.info(
                "local_server.stopped",
                server=self.label,
                port=self.port,
                returncode=popen.returncode,
            )
        self._close_log()

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- async -----------------------------------------------------------------------------

    async def astart(self) -> None:
        """:meth:`start` for async code (asyncio or trio); cancellable while it waits."""
        self._check_not_started()
        self._log = _new_log()
        self._process = await anyio.open_process(
            self._command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            start_new_session=True,  # the terminal's Ctrl-C is the host's to handle, not ours
        )
        log.info("local_server.starting", server=self.label, port=self.port, pid=self._process.pid)
        deadline = time.monotonic() + self.startup_timeout
        async with httpx.AsyncClient(timeout=_PROBE_TIMEOUT) as client:
            while not await self._aprobe(client):
                self._check_alive_before(deadline)
                await anyio.sleep(_POLL_SECONDS)
        log.info("local_server.ready", server=self.label, port=self.port)

    async def astop(self) -> None:
        """:meth:`stop` for async code; shielded from cancellation and bounded in time."""
        process, self._process = self._process, None
        if process is not None:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    process.terminate()
                    with anyio.move_on_after(self.stop_grace):
                        await process.wait()
                if process.returncode is None:
                    process.kill()
                    with anyio.move_on_after(self.stop_grace):
                        await process.wait()
                with anyio.move_on_after(self.stop_grace):
                    await process.aclose()
            log.info(
                "local_server.stopped",
                server=self.label,
                port=self.port,
                returncode=process.returncode,
            )
        self._close_log()

    async def __aenter__(self) -> Self:
        try:
            await self.astart()
        except BaseException:
            await self.astop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.astop()

    # -- what a subclass provides ----------------------------------------------------------

    def _command(self) -> list[str]:
        """The command line, API key included."""
        raise NotImplementedError

    def _probe_url(self) -> str:
        """The URL polled until :meth:`_is_ready` accepts its response."""
        raise NotImplementedError

    def _is_ready(self, response: httpx.Response) -> bool:
        """Whether a probe response means the server takes requests."""
        raise NotImplementedError

    # -- internals -------------------------------------------------------------------------

    def _check_not_started(self) -> None:
        if self._popen is not None or self._process is not None:
            raise LocalServerError(
                f"{type(self).__name__}: cannot start the server on port {self.port}: it is "
                f"already running; stop() it first or use another {type(self).__name__}"
            )

    def _probe(self, get: Callable[..., httpx.Response]) -> bool:
        try:
            return self._is_ready(get(self._probe_url(), headers=self._auth_headers()))
        except httpx.TransportError:
            return False

    async def _aprobe(self, client: httpx.AsyncClient) -> bool:
        try:
            return self._is_ready(await client.get(self._probe_url(), headers=self._auth_headers()))
        except httpx.TransportError:
            return False

    def _auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"}

    def _check_alive_before(self, deadline: float) -> None:
        code = self._popen.poll() if self._popen is not None else None
        if self._process is not None:
            code = self._process.returncode
        if code is not None:
            raise LocalServerError(
                f"{self.label}: the process exited with code {code} before it answered "
                f"on {self.base_url}; its last output:\n{self._log_tail()}"
            )
        if time.monotonic() > deadline:
            raise LocalServerError(
                f"{self.label}: no answer from GET {self._probe_url()} within "
                f"{self.startup_timeout:g} s; raise startup_timeout if the machine is busy; "
                f"its last output:\n{self._log_tail()}"
            )

    def _log_tail(self) -> str:
        if self._log is None:
            return "(no output captured)"
        size = os.fstat(self._log.fileno()).st_size
        start = max(0, size - _LOG_TAIL_BYTES)
        tail = os.pread(self._log.fileno(), size - start, start)
        return tail.decode("utf-8", errors="replace").strip() or "(no output)"

    def _close_log(self) -> None:
        log_file, self._log = self._log, None
        if log_file is not None:
            log_file.close()


def _new_log() -> IO[bytes]:
    # an anonymous file for the child's output, closed by stop()/astop()
    return tempfile.TemporaryFile(prefix="agentloop-local-server-")
