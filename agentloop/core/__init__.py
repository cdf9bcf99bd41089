"""Core data model: ids, items, parts, deltas, usage, cancellation, errors.

Private: its names are exported by :mod:`agentloop` and the packages named for them
(``agentloop.tools``, ``agentloop.transcript``, ...).
"""

__all__: list[str] = []
