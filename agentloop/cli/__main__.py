"""``python -m agentloop.cli``: the same as the ``agentloop`` command."""

import sys

from . import main

sys.exit(main())
