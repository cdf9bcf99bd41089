"""Re-export: ``StreamAccumulator`` now lives in ``agentloop.model._accumulator``."""

from ..model._accumulator import StreamAccumulator, _new_call_id, parse_tool_arguments

__all__ = ["StreamAccumulator", "_new_call_id", "parse_tool_arguments"]
