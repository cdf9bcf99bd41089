"""Tools for testing agents: a scripted fake model and reply builders."""

from ._scripted import Reply, ScriptedModel, call, fail, hang, reasoning, stream, text, tool_calls

__all__ = [
    "Reply",
    "ScriptedModel",
    "call",
    "fail",
    "hang",
    "reasoning",
    "stream",
    "text",
    "tool_calls",
]
