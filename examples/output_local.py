"""A typed answer from the real local model (SmolLM2-135M behind llama.cpp's server).

The server turns the schema into a grammar, so the toy model's answer always parses as
a ``Capital`` (its values may be wrong). Needs the local server: ``make llama-server``
(``make test`` builds it). Run: python examples/output_local.py
"""

from __future__ import annotations

import sys

import anyio
import attrs

import agentloop as al
from agentloop.local import LlamaServer, llama_server_available


@attrs.frozen
class Capital:
    country: str
    city: str


async def main() -> int:
    if not llama_server_available():
        print("llama.cpp's llama-server is not installed; run `make llama-server` first")
        return 1
    async with LlamaServer(startup_timeout=120) as server:
        agent = al.Agent.builder().model(server.model(max_tokens=96)).output(Capital).build()
        result = await al.run(agent, "What is the capital of France?")
    print("typed answer:", result.output)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
