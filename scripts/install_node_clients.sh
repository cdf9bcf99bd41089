#!/bin/sh
# The JavaScript clients the tests run with node (tests never install anything):
# tests/ui/node/ holds the official AG-UI TypeScript client (@ag-ui/client) and the
# reference MCP test server (@modelcontextprotocol/server-everything, run by
# tests/mcp/test_mcp_everything.py), pinned by its package-lock.json. `make test` runs this first; a no-op when the installed tree
# matches the lock file. Needs node and npm (Debian: apt-get install -y nodejs npm).
set -eu
cd "$(dirname "$0")/../tests/ui/node"
if ! command -v npm >/dev/null 2>&1; then
    echo "install_node_clients.sh: npm is missing; install node and npm (apt-get install -y nodejs npm)" >&2
    exit 1
fi
stamp=node_modules/.agentloop-lock
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then
    exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
cp package-lock.json "$stamp"
