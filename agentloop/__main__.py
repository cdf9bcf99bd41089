"""``python -m agentloop``: the same as the ``agentloop`` command (needs the ``[cli]`` extra)."""

import sys

from .cli import main

sys.exit(main())
