"""``python -m agentloop.local [--force]``: build the local model server into this environment.

What ``make local-server`` runs. Prints one progress line per step; exits 1
with the end of the build log when the build fails.
"""

from __future__ import annotations

import argparse
import sys

from ._install import LocalServerError, install_local_server


def main(argv: list[str] | None = None) -> int:
    """Build (once) and report; the process exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m agentloop.local",
        description="Build llama-cpp-python[server] and install SmolLM2-135M (once).",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if already built")
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    options = parser.parse_args(argv)
    try:
        install = install_local_server(
            progress=_print, force=options.force, build_jobs=options.jobs
        )
    except LocalServerError as error:
        print(f"[local-server] {error}", file=sys.stderr, flush=True)
        return 1
    _print(f"model: {install.model_path}")
    return 0


def _print(line: str) -> None:
    print(f"[local-server] {line}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
