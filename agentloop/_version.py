"""``agentloop.__version__``: the installed distribution's version, from its metadata.

The distribution is ``agentloop-runtime`` (the import name is ``agentloop``).
"""

from importlib.metadata import PackageNotFoundError, version

from ._extras import DISTRIBUTION

__all__ = ["__version__"]

try:
    __version__: str = version(DISTRIBUTION)
except PackageNotFoundError:  # pragma: no cover - imported from a source tree, not installed
    __version__ = "0+unknown"
