"""Re-export: the configured converter lives in ``agentloop.loop._serde``.

The policy is layered: ``core._serde`` (``make_converter``), ``model._serde``
and ``loop._serde`` each register their own hooks.
"""

from .loop._serde import converter, structure, unstructure

__all__ = ["converter", "structure", "unstructure"]
