"""A stand-in for every build command (``AGENTLOOP_FAKE_BUILD``): builds and installs nothing.

Run as ``python fake_build.py COMMAND...`` in place of ``COMMAND``. ``pip
wheel`` becomes a "compiler" that never ends: it starts a grandchild in the
build's process group (as pip starts cmake and the compilers), writes both pids
to ``$FAKE_BUILD_MARKER``, prints a ninja step so the build shows progress,
and sleeps until it is stopped; with ``FAKE_BUILD_FAIL`` set it fails at once
instead, as a compiler error would. Every other command (``pip install``, the
import check) succeeds at once without doing anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

command = sys.argv[1:]
if "wheel" in command and os.environ.get("FAKE_BUILD_FAIL"):
    print("ERROR: ggml.c:1: fake compiler error", flush=True)
    sys.exit(1)
if "wheel" in command:
    compiler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    marker = os.environ["FAKE_BUILD_MARKER"]
    with open(marker + ".part", "w", encoding="utf-8") as file:
        json.dump({"pid": os.getpid(), "group": os.getpgrp(), "compiler": compiler.pid}, file)
    os.replace(marker + ".part", marker)
    print("[1/50] Building C object ggml.c.o", flush=True)
    time.sleep(600)
    sys.exit("the fake build was not stopped")
print(f"fake build: skipped {' '.join(command)}", flush=True)
